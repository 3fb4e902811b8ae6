import ArgumentParser
import Dispatch
import Foundation
import Strata
import StrataStore

/// `strata-bench lookup`: what a reading user feels. Over a store of one
/// entity, a find-by-attribute fetch (no index: every record is read) runs from
/// a background context — a child of the view context (the recommended stack),
/// then a child of the writer — while the 1 ms main-queue probe runs, as in
/// `stall`; with memory before and after, the probe alone as the floor, the
/// engine's own scan of the same records, a cold open followed by the first
/// query by ID, and the same queries on SQLite.
struct LookupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lookup",
        abstract: "A fetch by attribute over a large store from background contexts, with the main-queue probe; cold open and first query; beside SQLite."
    )

    @Option(help: "Recipes in the store (one entity).") var objects = 1_000_000
    @Option(help: "Rounds; the table shows medians.") var repeats = 3
    @Option(help: "Keep the stores in this directory (default: a temporary one, removed after).") var store: String?
    @Flag(help: "With --store: query the stores a run before left there instead of importing again (same --objects).") var reuse = false
    @Option(help: "Write every figure to this JSON file.") var json: String?
    @Flag(name: .customLong("no-sqlite"), help: "Skip the SQLite baseline.") var noSQLite = false
    @OptionGroup var backgroundScheduling: BackgroundSchedulingOption

    /// One fetch, from one kind of context.
    struct FetchRun: Codable, Sendable {
        var layout: String
        var round: Int
        var milliseconds: Double
        var matched: Int
        var stall: StallFigures
        var rssGrowthMB: Double
        var rowCacheMB: Double
        var mainThreadCPUms: Double
    }

    struct Report: Codable, Sendable {
        var date: String
        var objects: Int
        var cores: Int
        var backgroundScheduling = ""
        var runs: [FetchRun] = []
        var floor: [StallFigures] = []
        var openAndFirstQueryMs: [Double] = []
        var engineScanRecordsPerSecond: [Double] = []
        var engineDecodingScanRecordsPerSecond: [Double] = []
        var rssAfterOpenMB: [Double] = []
        var sqliteScanMs: [Double] = []
        var sqliteOpenAndFirstQueryMs: [Double] = []
        /// The same fetch by name, with `name` indexed: per layout, per round.
        var indexed: [IndexedRun] = []
        var indexedPlan = ""
        var sqliteIndexedMs: [Double] = []
        var memory: MemoryFigures?
        /// A query process of its own over the indexed store.
        var queryProcess: QueryMemoryCommand.Figures?
    }

    /// A fetch by name through an index.
    struct IndexedRun: Codable, Sendable {
        var layout: String
        var milliseconds: Double
        var matched: Int
    }

    /// What fetching a whole entity costs in resident memory (the allocator
    /// trimmed before each reading, so freed memory counts as freed).
    struct MemoryFigures: Codable, Sendable {
        /// What the result itself holds: its ID array, by its capacity.
        var idsHeldBytesPerObject: Double
        var idsOnlyBytesPerObject: Double
        var faultsBytesPerObject: Double
        var filledBytesPerObject: Double
        /// After touching every object and letting go of them all.
        var afterReleaseMB: Double
        /// After a block that fetched every object filled and kept none:
        /// what the context still registers, and resident memory then.
        var registeredAfterBlock: Int = 0
        var afterBlockMB: Double = 0
        var rowCacheMB: Double
        var rowCacheBudgetMB: Double
    }

    /// A fresh container: everything fetched as IDs (``FetchedResults``),
    /// then as faults, then every object filled; then all let go. Above a
    /// baseline taken once every record has been read (the block cache warm).
    static func measureMemory(model: ManagedObjectModel, path: String, objects: Int) throws -> MemoryFigures {
        let container = try PersistentContainer(name: "Memory", model: model, directory: path)
        defer { try? container.close() }
        let context = container.newBackgroundContext(childOfWriter: true)
        var figures = try context.performAndWait { () throws -> MemoryFigures in
            // Read every record once first, so that the engine's block cache
            // (its own budget, StoreOptions.blockCacheCapacity) is in the
            // baseline: what follows is the object graph's.
            guard try context.count(for: FetchRequest<BenchRecipe>()) == objects else { throw ValidationError("count is off") }
            let baseline = ResidentMemory.trimmedMegabytes()
            var ids: FetchedResults<BenchRecipe>? = try context.fetchResults(FetchRequest<BenchRecipe>())
            let withIDs = ResidentMemory.trimmedMegabytes()
            guard let held = ids?.objectIDs, held.count == objects else { throw ValidationError("fetchResults found \(ids?.count ?? 0) recipes") }
            let heldBytes = Double(held.capacity * MemoryLayout<ObjectID>.stride) / Double(objects)
            ids = nil
            var faults: [BenchRecipe]? = try context.fetch(FetchRequest<BenchRecipe>())
            let withFaults = ResidentMemory.trimmedMegabytes()
            var names = 0
            for recipe in faults ?? [] { names &+= recipe.name.utf8.count }
            let filled = ResidentMemory.trimmedMegabytes()
            faults = nil
            context.reset()
            let released = ResidentMemory.trimmedMegabytes()
            let cache = container.coordinator.rowCacheStatistics
            guard names > 0 else { throw ValidationError("no names read") }
            let perObject = 1_048_576 / Double(objects)
            return MemoryFigures(
                idsHeldBytesPerObject: heldBytes, idsOnlyBytesPerObject: (withIDs - baseline) * perObject, faultsBytesPerObject: (withFaults - baseline) * perObject,
                filledBytesPerObject: (filled - baseline) * perObject, afterReleaseMB: released - baseline,
                rowCacheMB: Double(cache.bytes) / 1_048_576, rowCacheBudgetMB: Double(cache.budget) / 1_048_576)
        }
        // No reset: the block's end lets go of what nobody holds.
        let baseline = ResidentMemory.trimmedMegabytes() - figures.afterReleaseMB
        var request = FetchRequest<BenchRecipe>()
        request.returnsObjectsAsFaults = false
        let servings = try context.performAndWait { try context.fetch(request).reduce(0) { $0 &+ $1.servings } }
        guard servings >= 0 else { throw ValidationError("servings are off") }
        figures.registeredAfterBlock = context.performAndWait { context.registeredObjects.count }
        figures.afterBlockMB = ResidentMemory.trimmedMegabytes() - baseline
        return figures
    }

    enum Layout: String, CaseIterable {
        case viewChildStack = "child of the view context (recommended stack)"
        case writerChild = "child of the writer"
    }

    func run() throws {
        let work = try WorkDirectory(store, scenario: "lookup", reusing: reuse)
        defer { work.cleanUp() }
        let path = work.path + "/store"
        let sqlitePath = work.path + "/lookup.sqlite"
        let (objects, rounds, noSQLite) = (objects, max(1, repeats), noSQLite)
        backgroundScheduling.apply()
        if work.reused {
            progress("lookup: reusing the recipes in \(work.path)")
        } else {
            progress("lookup: importing \(objects) recipes ...")
            try importStore(objects: objects, ingredientsPerRecipe: 0, saveEvery: 20_000, at: path)
        }
        if !noSQLite && !(work.reused && FileManager.default.fileExists(atPath: sqlitePath)) {
            progress("lookup: the same recipes into SQLite ...")
            try SQLiteLookup.build(objects: objects, path: sqlitePath)
        }
        // Near the end of the key order: a scan finds it last.
        let target = "Recipe \(objects - objects / 10)"
        let model = try makeBenchModel()
        let targetID = try Self.objectID(named: target, model: model, path: path)

        let report = try MainThreadDriver.run { () throws -> Report in
            var report = Report(date: ISO8601DateFormatter().string(from: Date()), objects: objects, cores: ProcessInfo.processInfo.activeProcessorCount)
            for round in 0..<rounds {
                progress("lookup: round \(round + 1)/\(rounds) ...")
                var container: PersistentContainer!
                var name = ""
                let open = try seconds {
                    container = try PersistentContainer(name: "Lookup", model: model, directory: path)
                    let context = container.newBackgroundContext(childOfWriter: true)
                    name = try context.performAndWait { try (context.existingObject(with: targetID) as! BenchRecipe).name }
                }
                guard name == target else { throw ValidationError("the first query found \(name), not \(target)") }
                report.openAndFirstQueryMs.append(open * 1000)
                report.rssAfterOpenMB.append(ResidentMemory.megabytes())
                for layout in Layout.allCases {
                    let context = container.newBackgroundContext(childOfWriter: layout == .writerChild)
                    let request = FetchRequest<BenchRecipe>(predicate: #Predicate { $0.name == target })
                    let rssBefore = ResidentMemory.megabytes()
                    let cpuBefore = MainThreadDriver.mainThreadCPUMilliseconds() ?? 0
                    let probe = StallProbe()
                    probe.startProbing()
                    var matched = 0
                    let elapsed = try seconds { matched = try context.performAndWait { try context.fetch(request).count } }
                    let stall = probe.stopProbing()
                    let cpu = (MainThreadDriver.mainThreadCPUMilliseconds() ?? 0) - cpuBefore
                    report.runs.append(FetchRun(layout: layout.rawValue, round: round, milliseconds: elapsed * 1000, matched: matched, stall: stall,
                                                rssGrowthMB: ResidentMemory.megabytes() - rssBefore,
                                                rowCacheMB: Double(container.coordinator.rowCacheStatistics.bytes) / 1_048_576, mainThreadCPUms: cpu))
                }
                let fetchSeconds = median(report.runs.filter { $0.round == round }.map(\.milliseconds)) / 1000
                try container.close()
                container = nil
                report.floor.append(StallProbe.alone(for: max(fetchSeconds, 0.2)))
                let scan = try Self.engineScan(path: path, model: model, expected: objects)
                report.engineScanRecordsPerSecond.append(scan.raw)
                report.engineDecodingScanRecordsPerSecond.append(scan.decoded)
                if !noSQLite {
                    let (scan, openAndQuery) = try SQLiteLookup.query(name: target, id: Int64(objects - objects / 10 + 1), path: sqlitePath)
                    report.sqliteScanMs.append(scan * 1000)
                    report.sqliteOpenAndFirstQueryMs.append(openAndQuery * 1000)
                }
            }
            try Self.measureIndexed(objects: objects, rounds: rounds, target: target, path: work.path + "/indexed",
                                    reused: work.reused, report: &report)
            if !noSQLite {
                for _ in 0..<rounds { report.sqliteIndexedMs.append(try SQLiteLookup.indexedQuery(name: target, path: sqlitePath)) }
            }
            progress("lookup: a query process's memory ...")
            report.queryProcess = try QueryMemoryCommand.inChildProcess(store: work.path + "/indexed", objects: objects)
            progress("lookup: memory of a whole-entity fetch ...")
            report.memory = try Self.measureMemory(model: model, path: path, objects: objects)
            report.backgroundScheduling = BackgroundScheduling.state
            return report
        }.get()
        print(Self.render(report))
        if let json { try writeJSON(report, to: json) }
    }

    /// The fetch by name again, over a store of the same recipes whose
    /// model indexes `name` (imported first, unless reused).
    static func measureIndexed(objects: Int, rounds: Int, target: String, path: String, reused: Bool, report: inout Report) throws {
        let model = try makeBenchModel(recipeIndexes: [IndexDescription("name")])
        if !(reused && FileManager.default.fileExists(atPath: path)) {
            progress("lookup: the same recipes into a store that indexes their names ...")
            try? FileManager.default.removeItem(atPath: path)
            try importStore(objects: objects, ingredientsPerRecipe: 0, saveEvery: 20_000, at: path, model: model)
        }
        let container = try PersistentContainer(name: "Indexed", model: model, directory: path)
        defer { try? container.close() }
        let request = FetchRequest<BenchRecipe>(predicate: #Predicate { $0.name == target })
        for _ in 0..<rounds {
            for layout in Layout.allCases {
                let context = container.newBackgroundContext(childOfWriter: layout == .writerChild)
                var matched = 0
                let elapsed = try seconds { matched = try context.performAndWait { try context.fetch(request).count } }
                guard matched == 1 else { throw ValidationError("the indexed fetch found \(matched) recipes called \(target)") }
                report.indexed.append(IndexedRun(layout: layout.rawValue, milliseconds: elapsed * 1000, matched: matched))
                report.indexedPlan = try context.performAndWait { try context.explain(request).description }
            }
        }
    }

    /// The ID of the recipe called `name` (found once, before measuring).
    static func objectID(named name: String, model: ManagedObjectModel, path: String) throws -> ObjectID {
        let coordinator = PersistentStoreCoordinator(model: model)
        try coordinator.addPersistentStore(.log, directory: path)
        defer { try? coordinator.close() }
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let ids = try context.performAndWait { try context.fetchObjectIDs(FetchRequest<BenchRecipe>(predicate: #Predicate { $0.name == name })) }
        guard ids.count == 1 else { throw ValidationError("found \(ids.count) recipes called \(name)") }
        return ids[0]
    }

    /// Records per second of the engine reading every record of the store
    /// at one read view, with the fastest scan it has (bytes lent, nothing
    /// copied): first with nothing decoded, then decoding every object
    /// record whole (``RecordCoding``) — the plain scan a fetch without an
    /// index is measured against.
    static func engineScan(path: String, model: ManagedObjectModel, expected: Int) throws -> (raw: Double, decoded: Double) {
        var options = StoreOptions()
        options.readOnly = true
        let store = try StrataStore(directory: path, options: options)
        defer { try? store.close() }
        guard let entity = model.entity(named: "Recipe") else { throw ValidationError("the bench model has no recipes") }
        let prefix = RecordCoding.prefix(of: entity)
        var records = 0
        var bytes = 0
        let raw = try seconds {
            try store.readView().forEachBorrowed(from: prefix, to: ReadView.end(ofPrefix: prefix)) { key, value in
                records += 1
                bytes &+= key.count &+ value.count
                return true
            }
        }
        guard records == expected else { throw ValidationError("the engine scanned \(records) recipes, expected \(expected)") }
        var decoded = 0
        let decoding = try seconds {
            try store.readView().forEachBorrowed(from: prefix, to: ReadView.end(ofPrefix: prefix)) { _, value in
                guard let snapshot = RecordCoding.decode(value, entity: entity) else { throw ValidationError("a recipe does not decode") }
                decoded &+= snapshot.values.count
                return true
            }
        }
        guard decoded > 0 else { throw ValidationError("nothing decoded") }
        return (Double(records) / raw, Double(records) / decoding)
    }

    static func render(_ report: Report) -> String {
        var table = Table("Fetch by name (no index) among \(thousands(Double(report.objects))) recipes, from a background context",
                          "fetch ms", "records/s", "matched", "max late ms", "worst max", "p99 ms", "main CPU ms", "RSS growth MB", "row cache MB")
        for layout in Layout.allCases {
            let runs = report.runs.filter { $0.layout == layout.rawValue }
            guard !runs.isEmpty else { continue }
            let stall = StallMedians(runs.map(\.stall))
            let ms = median(runs.map(\.milliseconds))
            table.add(layout.rawValue, fixed(ms, 1), thousands(Double(report.objects) / ms * 1000), thousands(Double(runs[0].matched)),
                      fixed(stall.max, 2), fixed(stall.worstMax, 2), fixed(stall.p99, 2), fixed(median(runs.map(\.mainThreadCPUms)), 1),
                      fixed(median(runs.map(\.rssGrowthMB)), 1), fixed(median(runs.map(\.rowCacheMB)), 2))
        }
        if !report.floor.isEmpty {
            let floor = StallMedians(report.floor)
            table.add("(0) the probe alone", "-", "-", "-", fixed(floor.max, 2), fixed(floor.worstMax, 2), fixed(floor.p99, 2), "-", "-", "-")
        }
        if !report.sqliteScanMs.isEmpty {
            let ms = median(report.sqliteScanMs)
            table.add("SQLite: SELECT … WHERE name = ? (no index)", fixed(ms, 1), thousands(Double(report.objects) / ms * 1000), "1", "-", "-", "-", "-", "-", "-")
        }
        var indexedText = ""
        if !report.indexed.isEmpty {
            var indexed = Table("The same fetch with `name` indexed: \(report.indexedPlan)", "fetch ms", "matched")
            for layout in Layout.allCases {
                let runs = report.indexed.filter { $0.layout == layout.rawValue }
                guard !runs.isEmpty else { continue }
                indexed.add(layout.rawValue, fixed(median(runs.map(\.milliseconds)), 3), thousands(Double(runs[0].matched)))
            }
            if !report.sqliteIndexedMs.isEmpty {
                indexed.add("SQLite: SELECT … WHERE name = ? (CREATE INDEX on name)", fixed(median(report.sqliteIndexedMs), 3), "1")
            }
            indexedText = "\n\n" + indexed.render()
        }
        var figures = Table("Around it, medians of \(report.floor.count)", "Figure")
        figures.add("the engine's scan of the same records (bytes lent, nothing decoded)", thousands(median(report.engineScanRecordsPerSecond)) + " records/s")
        figures.add("  the same scan decoding every record whole", thousands(median(report.engineDecodingScanRecordsPerSecond)) + " records/s")
        figures.add("cold open of the store + first query by ID (PersistentContainer)", fixed(median(report.openAndFirstQueryMs), 1) + " ms")
        figures.add("  resident memory after it", fixed(median(report.rssAfterOpenMB), 1) + " MB")
        if !report.sqliteOpenAndFirstQueryMs.isEmpty {
            figures.add("SQLite: open + first query by primary key", fixed(median(report.sqliteOpenAndFirstQueryMs), 2) + " ms")
        }
        if let m = report.memory {
            figures.add("fetch all, IDs only (fetchResults): held by the result per object", fixed(m.idsHeldBytesPerObject, 1) + " B")
            figures.add("  resident memory per object (RSS, allocator-dependent)", fixed(m.idsOnlyBytesPerObject, 1) + " B")
            figures.add("fetch all as faults (fetch): resident memory per object", fixed(m.faultsBytesPerObject, 1) + " B")
            figures.add("  every fault filled", fixed(m.filledBytesPerObject, 1) + " B")
            figures.add("  all let go: resident memory above the baseline", fixed(m.afterReleaseMB, 1) + " MB")
            figures.add("  row cache then (budget)", fixed(m.rowCacheMB, 1) + " MB (" + fixed(m.rowCacheBudgetMB, 0) + " MB)")
            figures.add("a block fetching every object filled, keeping none: registered after it", thousands(Double(m.registeredAfterBlock)))
            figures.add("  resident memory above the baseline then (no reset)", fixed(m.afterBlockMB, 1) + " MB")
        }
        if let q = report.queryProcess {
            figures.add("a query process after a mixed run (\(q.queries) queries, \(fixed(q.seconds, 1)) s): RSS", fixed(q.residentMB, 1) + " MB")
            figures.add("  RSS with freed memory handed back (malloc_trim)", fixed(q.residentTrimmedMB, 1) + " MB")
            figures.add("  row cache budget + block cache budget + index", fixed(q.rowCacheBudgetMB, 0) + " + " + fixed(q.blockCacheBudgetMB, 0) + " + "
                        + fixed(q.indexMB, 1) + " MB (row cache holds " + fixed(q.rowCacheMB, 1) + ")")
            figures.add("  RSS against twice that (the bound)", fixed(q.residentMB / q.boundMB, 2) + "x of " + fixed(q.boundMB, 0) + " MB")
        }
        return "\(report.date), \(report.cores) cores, background scheduling \(report.backgroundScheduling); "
            + "a 1 ms timer on the main thread during each fetch\n\n" + table.render() + indexedText + "\n\n" + figures.render()
    }
}

/// The process's resident memory, from /proc/self/statm (0 where there is none).
enum ResidentMemory {
    /// After handing freed memory back to the system (glibc's `malloc_trim`;
    /// elsewhere as it is).
    static func trimmedMegabytes() -> Double {
        if let trim = mallocTrim { _ = trim(0) }
        return megabytes()
    }

    /// glibc's `malloc_trim`, looked up at run time (Swift's Glibc module
    /// does not import `malloc.h`); nil on other C libraries.
    private static let mallocTrim: (@convention(c) (Int) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
    }()

    static func megabytes() -> Double {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Double(fields[1]) else { return 0 }
        return pages * Double(sysconf(Int32(_SC_PAGESIZE))) / 1_048_576
    }
}
