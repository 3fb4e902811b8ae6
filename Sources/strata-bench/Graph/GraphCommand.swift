import ArgumentParser
import Dispatch
import Foundation
import Strata
import StrataStore

/// `strata-bench graph`: the object graph's figures — bulk insert and save to
/// disk, a child's save into a main-queue parent, fetching by predicate,
/// saves into an in-memory store as it grows.
struct GraphCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "graph",
        abstract: "Object-graph figures: insert+save to disk, child→main save, fetch by predicate, in-memory saves as the store grows."
    )

    @Option(help: "Objects inserted, saved and fetched.") var objects = 100_000
    @Option(help: "Changed objects in the child→main save.") var childObjects = 10_000
    @Option(help: "Runs per measurement; the table shows the median.") var repeats = 3
    @Option(help: "Directory for the stores (default: a fresh temporary one, removed after).") var store: String?
    @Option(help: "Run only one part (insert, or one of insert-flat, insert-indexed, insert-graph, insert-stack; child; fetch; memory), e.g. under a profiler.")
    var only: String?
    @OptionGroup var backgroundScheduling: BackgroundSchedulingOption

    func run() throws {
        backgroundScheduling.apply()
        let work = try WorkDirectory(store, scenario: "graph-bench")
        defer { work.cleanUp() }
        let root = work.path
        let bench = GraphBenchmark(root: root, objects: objects, childObjects: childObjects, repeats: max(1, repeats), only: only)
        // The child→main figures need the main queue drained by the main
        // thread, so the benchmark runs on a worker while this thread spins
        // the main run loop.
        let outcome = MainThreadDriver.run { try bench.run() }
        print(try outcome.get().render(bench))
    }
}

struct GraphBenchmark: Sendable {
    let root: String
    let objects: Int
    let childObjects: Int
    let repeats: Int
    let only: String?

    struct Results: Sendable {
        var insertSaveFlat: [Double] = []       // objects/s, attributes only
        var insertSaveIndexed: [Double] = []    // objects/s, attributes only, 2 indexes
        var insertSaveGraph: [Double] = []      // objects/s, recipes + 4 ingredients each
        var insertSaveStack: [Double] = []      // objects/s, private child → private writer → disk
        var childInsertWall: [Double] = []      // seconds
        var childInsertStall: [Double] = []     // seconds: longest main-queue timer lateness
        var childUpdateWall: [Double] = []
        var childUpdateStall: [Double] = []
        var fetchCold: [Double] = []            // objects scanned/s
        var fetchWarm: [Double] = []
        var fetchMatches = 0
        var bytesPerObject = 0.0
        var inMemory: [GrowthRates] = []        // saves of 100 into an in-memory store
        var sqliteInMemory: [GrowthRates] = []  // the same into SQLite's :memory:
    }

    func run() throws -> Results {
        var r = Results()
        for run in 0..<repeats {
            progress("graph run \(run + 1)/\(repeats)")
            // `insert` runs the four insert figures; `insert-flat`,
            // `insert-indexed`, `insert-graph` and `insert-stack` one each
            // (instruction counts per object, see the README).
            if only == nil || only == "insert" || only == "insert-flat" {
                r.insertSaveFlat.append(Double(objects) / (try insertAndSave(ingredients: 0, stack: false, name: "flat-\(run)", results: &r)))
            }
            if only == nil || only == "insert" || only == "insert-indexed" {
                r.insertSaveIndexed.append(Double(objects) / (try insertAndSave(ingredients: 0, stack: false, indexed: true,
                                                                                name: "indexed-\(run)", results: &r)))
            }
            if only == nil || only == "insert" || only == "insert-graph" {
                r.insertSaveGraph.append(Double(objects) / (try insertAndSave(ingredients: 4, stack: false, name: "graph-\(run)", results: &r)))
            }
            if only == nil || only == "insert" || only == "insert-stack" {
                r.insertSaveStack.append(Double(objects) / (try insertAndSave(ingredients: 4, stack: true, name: "stack-\(run)", results: &r)))
            }
            if only == nil || only == "child" { try childIntoMain(run: run, results: &r) }
            if only == nil || only == "fetch" { try fetch(run: run, results: &r) }
            if only == nil || only == "memory" {
                r.inMemory.append(try inMemoryGrowth())
                r.sqliteInMemory.append(try sqliteInMemoryGrowth())
            }
        }
        return r
    }

    /// `indexed`: recipes' `name` and `servings` are indexed.
    private func coordinator(_ name: String, indexed: Bool = false) throws -> PersistentStoreCoordinator {
        let indexes = indexed ? [IndexDescription("name"), IndexDescription("servings")] : []
        let coordinator = PersistentStoreCoordinator(model: try makeBenchModel(recipeIndexes: indexes))
        try coordinator.addPersistentStore(.log, directory: root + "/" + name)
        return coordinator
    }

    /// Seconds from the first insert to the save being durable on disk.
    private func insertAndSave(ingredients: Int, stack: Bool, indexed: Bool = false, name: String, results: inout Results) throws -> Double {
        let coordinator = try coordinator(name, indexed: indexed)
        defer { try? coordinator.close() }
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let importer = stack ? ManagedObjectContext(.privateQueue, parent: writer) : writer
        var insertSeconds = 0.0, saveSeconds = 0.0, writerSeconds = 0.0
        let elapsed = try seconds {
            try importer.performAndWait {
                insertSeconds = seconds { insertObjects(objects, ingredientsPerRecipe: ingredients, into: importer) }
                saveSeconds = try seconds { try importer.save() }
            }
            if stack { writerSeconds = try seconds { try writer.performAndWait { try writer.save() } } }
        }
        progress("  \(name): insert \(fixed(insertSeconds * 1000, 1)) ms, save \(fixed(saveSeconds * 1000, 1)) ms, writer save \(fixed(writerSeconds * 1000, 1)) ms")
        if ingredients == 0 && !stack && !indexed {
            results.bytesPerObject = Double(directorySize(root + "/" + name)) / Double(objects)
        }
        return elapsed
    }

    /// A private child saves `childObjects` inserted, then updated, objects
    /// into a `.mainQueue` parent; a main-queue timer measures how late it
    /// fires meanwhile (the main queue's share of the save).
    private func childIntoMain(run: Int, results: inout Results) throws {
        let coordinator = try coordinator("child-\(run)")
        defer { try? coordinator.close() }
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let main = ManagedObjectContext(.mainQueue, parent: writer)
        let child = ManagedObjectContext(.privateQueue, parent: main)
        // The benchmark holds the objects, as an app editing them would (a
        // context lets go of saved objects nothing else references).
        let held = child.performAndWait { () -> ObjectHolder in
            insertObjects(childObjects, ingredientsPerRecipe: 0, into: child)
            return ObjectHolder(child.registeredObjects.compactMap { $0 as? BenchRecipe })
        }
        var (wall, stall) = try measureStall { try child.performAndWait { try child.save() } }
        results.childInsertWall.append(wall)
        results.childInsertStall.append(stall)
        child.performAndWait {
            for recipe in held.recipes { recipe.servings += 1 }
        }
        (wall, stall) = try measureStall { try child.performAndWait { try child.save() } }
        results.childUpdateWall.append(wall)
        results.childUpdateStall.append(stall)
    }

    /// Fetches every recipe with a predicate on an attribute: cold (a freshly
    /// opened store, empty row cache) and warm (a new context, cache filled).
    private func fetch(run: Int, results: inout Results) throws {
        let name = "fetch-\(run)"
        do {
            let coordinator = try coordinator(name)
            let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
            try writer.performAndWait {
                insertObjects(objects, ingredientsPerRecipe: 0, into: writer)
                try writer.save()
            }
            try coordinator.close()
        }
        let coordinator = try coordinator(name)
        defer { try? coordinator.close() }
        var request = FetchRequest<BenchRecipe>(predicate: #Predicate { $0.servings > 3 })
        // Objects with their values, as before faults were the default: the figure stays comparable.
        request.returnsObjectsAsFaults = false
        for warm in [false, true] {
            let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
            var matches = 0
            let elapsed = try seconds { matches = try context.performAndWait { try context.fetch(request).count } }
            results.fetchMatches = matches
            if warm { results.fetchWarm.append(Double(objects) / elapsed) } else { results.fetchCold.append(Double(objects) / elapsed) }
        }
    }
}

/// Keeps a context's objects alive across its blocks.
///
/// `@unchecked Sendable`: the objects are only touched inside blocks of the
/// context they belong to.
final class ObjectHolder: @unchecked Sendable {
    let recipes: [BenchRecipe]
    init(_ recipes: [BenchRecipe]) { self.recipes = recipes }
}

/// Bytes of the regular files directly inside `path`.
func directorySize(_ path: String) -> UInt64 {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
    return names.reduce(0) { total, name in
        let size = (try? FileManager.default.attributesOfItem(atPath: path + "/" + name)[.size] as? NSNumber)?.uint64Value ?? 0
        return total + size
    }
}

/// Seconds `body` takes, and the longest the main queue stalled meanwhile
/// (seconds), as a ``StallProbe`` sees it.
func measureStall(_ body: () throws -> Void) throws -> (wall: Double, stall: Double) {
    let probe = StallProbe()
    probe.startProbing()
    let wall = try seconds(body)
    return (wall, probe.stopProbing().max / 1000)
}

extension GraphBenchmark.Results {
    func render(_ bench: GraphBenchmark) -> String {
        var table = Table("Object graph (median of \(bench.repeats))", "Figure", "Target")
        let n = thousands(Double(bench.objects))
        table.add("insert+save \(n) objects to disk (attributes only)", thousands(median(insertSaveFlat)) + " obj/s", ">= 500,000 obj/s")
        table.add("  same with 2 indexes (name, servings)", thousands(median(insertSaveIndexed)) + " obj/s", "")
        table.add("insert+save \(n) objects (recipes + 4 ingredients)", thousands(median(insertSaveGraph)) + " obj/s", ">= 500,000 obj/s")
        table.add("  same through private child -> writer -> disk", thousands(median(insertSaveStack)) + " obj/s", "")
        let c = thousands(Double(bench.childObjects))
        table.add("child saves \(c) inserted objects into main: wall", fixed(median(childInsertWall) * 1000, 2) + " ms", "")
        table.add("  longest main-queue stall meanwhile", fixed(median(childInsertStall) * 1000, 2) + " ms", "<= 10 ms")
        table.add("child saves \(c) updated objects into main: wall", fixed(median(childUpdateWall) * 1000, 2) + " ms", "")
        table.add("  longest main-queue stall meanwhile", fixed(median(childUpdateStall) * 1000, 2) + " ms", "<= 10 ms")
        table.add("fetch \(n) recipes by predicate, cold store", thousands(median(fetchCold)) + " obj/s", "report")
        table.add("  same, warm row cache", thousands(median(fetchWarm)) + " obj/s", "report")
        table.add("  objects matched", thousands(Double(fetchMatches)), "")
        table.add("store bytes per object on disk (attributes only)", fixed(bytesPerObject, 1), "")
        if let saved = inMemory.first?.saved {
            table.add("in-memory store, saves of 100 (unique name, index) up to \(thousands(Double(saved))): first tenth", thousands(median(inMemory.map(\.first))) + " obj/s", "")
            table.add("  last tenth", thousands(median(inMemory.map(\.last))) + " obj/s", "")
            table.add("  last ÷ first (a save's cost not growing with the store)", fixed(median(inMemory.map { $0.last / $0.first }), 2),
                      ">= 0.8")
            table.add("  SQLite :memory:, the same saves: first tenth", thousands(median(sqliteInMemory.map(\.first))) + " obj/s", "")
            table.add("  SQLite :memory:: last tenth", thousands(median(sqliteInMemory.map(\.last))) + " obj/s", "")
            table.add("  last tenth, Strata ÷ SQLite", fixed(median(zip(inMemory, sqliteInMemory).map { $0.last / $1.last }), 2), "report")
        }
        return table.render()
    }
}
