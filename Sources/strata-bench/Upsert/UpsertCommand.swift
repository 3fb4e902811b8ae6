import ArgumentParser
import Dispatch
import Foundation
import Strata
import StrataStore

/// `strata-bench upsert`: what an import that deduplicates costs. Over a store
/// of recipes whose names are unique (a uniqueness constraint): find-or-create
/// lookups by name from a child of the view context, one `IN` fetch of the
/// same names against looking each up alone, an upsert import through
/// the recommended stack (every other record names a stored recipe, which it
/// updates), each with the main-queue probe; what each index costs the insert
/// path; and the same on SQLite with a UNIQUE index
/// (`INSERT … ON CONFLICT(name) DO UPDATE`), side by side in one run.
struct UpsertCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upsert",
        abstract: "Find-or-create lookups, an IN fetch of the same keys, and an upsert import over a store with a uniqueness constraint, with the main-queue probe; the cost of indexes on inserts; beside SQLite."
    )

    @Option(help: "Recipes in the store before the upserts.") var objects = 1_000_000
    @Option(help: "Records per upsert import (every other one names a stored recipe).") var upserts = 200_000
    @Option(help: "Records per save.") var saveEvery = 1_000
    @Option(help: "Find-or-create lookups per round.") var lookups = 10_000
    @Option(help: "Recipes per insert run with 0, 1 and 3 indexes.") var fill = 200_000
    @Option(help: "Rounds; the tables show medians.") var repeats = 3
    @Option(help: "Keep the stores in this directory (default: a temporary one, removed after).") var store: String?
    @Option(help: "Write every figure to this JSON file.") var json: String?
    @Flag(name: .customLong("no-sqlite"), help: "Skip the SQLite baseline.") var noSQLite = false
    @OptionGroup var backgroundScheduling: BackgroundSchedulingOption

    struct Round: Codable, Sendable {
        var lookupMicroseconds: LatencyFigures
        var lookupStall: StallFigures
        var lookupFloor: StallFigures
        var viewChildStack: UpsertRun
        var privateContext: UpsertRun
        var sqliteLookupMicroseconds: LatencyFigures?
        var sqliteUpsertsPerSecond: Double?
        /// Objects per second inserting into a fresh store, by index count.
        var fillPerSecond: [String: Double]
        /// Milliseconds per query of ``IndexedQuery``, by its title; SQLite's beside.
        var queryMs: [String: Double] = [:]
        var sqliteQueryMs: [String: Double] = [:]
        /// Milliseconds for one `IN` fetch of the lookups' names, and for the
        /// same names looked up one by one (each a median of 5, interleaved).
        var inFetchMs: Double?
        var singleLookupsMs: Double?
        var sqliteInFetchMs: Double?
        var sqliteSingleLookupsMs: Double?
    }

    struct UpsertRun: Codable, Sendable {
        var seconds: Double
        var recordsPerSecond: Double
        var stall: StallFigures
        var mainThreadCPUms: Double
    }

    struct LatencyFigures: Codable, Sendable {
        var median: Double
        var p99: Double

        init(_ samples: [Double]) {
            let sorted = samples.sorted()
            median = sorted.isEmpty ? .nan : sorted[sorted.count / 2]
            p99 = sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, sorted.count * 99 / 100)]
        }
    }

    struct Report: Codable, Sendable {
        var date: String
        var objects: Int
        var upserts: Int
        var saveEvery: Int
        var lookups: Int
        var fill: Int
        var cores: Int
        var backgroundScheduling = ""
        var lookupPlan = ""
        var rounds: [Round] = []
    }

    static let indexLayouts: [(name: String, indexes: [IndexDescription])] = [
        ("0 indexes", []),
        ("1 index (name)", [IndexDescription("name")]),
        ("3 indexes (name, servings, created)", [IndexDescription("name"), IndexDescription("servings"), IndexDescription("created")]),
    ]

    func run() throws {
        let work = try WorkDirectory(store, scenario: "upsert")
        defer { work.cleanUp() }
        let (objects, upserts, saveEvery, lookups, fill, rounds, noSQLite) =
            (objects, upserts, max(1, saveEvery), lookups, fill, max(1, repeats), noSQLite)
        backgroundScheduling.apply()
        let model = try makeBenchModel(recipeIndexes: [IndexDescription("servings"), IndexDescription("created")], recipeUniqueness: [["name"]])
        let path = work.path + "/store"
        let sqlitePath = work.path + "/upsert.sqlite"
        progress("upsert: \(objects) recipes with unique names ...")
        try importStore(objects: objects, ingredientsPerRecipe: 0, saveEvery: 20_000, at: path, model: model)
        if !noSQLite {
            progress("upsert: the same recipes into SQLite, name UNIQUE ...")
            try SQLiteUpsert.build(objects: objects, path: sqlitePath)
        }
        let report = try MainThreadDriver.run { () throws -> Report in
            var report = Report(date: ISO8601DateFormatter().string(from: Date()), objects: objects, upserts: upserts, saveEvery: saveEvery,
                                lookups: lookups, fill: fill, cores: ProcessInfo.processInfo.activeProcessorCount)
            for round in 0..<rounds {
                progress("upsert: round \(round + 1)/\(rounds) ...")
                let names = Self.lookupNames(lookups, objects: objects, round: round)
                let container = try PersistentContainer(name: "Upsert", model: model, directory: path)
                let (lookup, stall, plan) = try Self.findOrCreate(names, perBlock: saveEvery, in: container)
                report.lookupPlan = plan
                let floor = StallProbe.alone(for: max(0.2, lookup.reduce(0, +) / 1e6))
                let (inFetch, singles) = try Self.inFetch(names, in: container)
                let queries = try IndexedQuery.measure(objects: objects, in: container)
                let viewChildRun = try Self.upsertImport(Self.upsertRecords(upserts, objects: objects, round: round, pass: 0), saveEvery: saveEvery,
                                                         viewChildStack: true, container: container)
                let privateRun = try Self.upsertImport(Self.upsertRecords(upserts, objects: objects, round: round, pass: 1), saveEvery: saveEvery,
                                                       viewChildStack: false, container: container)
                try container.close()
                var sqliteLookup: LatencyFigures?
                var sqliteUpserts: Double?
                var sqliteQueries: [String: Double] = [:]
                var sqliteIn: (Double, Double)?
                if !noSQLite {
                    sqliteQueries = try SQLiteUpsert.queries(objects: objects, path: sqlitePath)
                    sqliteIn = try SQLiteUpsert.inFetch(names, path: sqlitePath)
                    sqliteLookup = LatencyFigures(try SQLiteUpsert.lookups(names, path: sqlitePath))
                    let records = Self.upsertRecords(upserts, objects: objects, round: round, pass: 0)
                    sqliteUpserts = Double(upserts) / (try SQLiteUpsert.upsert(records, saveEvery: saveEvery, path: sqlitePath))
                }
                var fillRates: [String: Double] = [:]
                for layout in Self.indexLayouts {
                    let fillPath = work.path + "/fill"
                    try? FileManager.default.removeItem(atPath: fillPath)
                    let elapsed = try seconds {
                        try importStore(objects: fill, ingredientsPerRecipe: 0, saveEvery: saveEvery, at: fillPath,
                                        model: try makeBenchModel(recipeIndexes: layout.indexes))
                    }
                    fillRates[layout.name] = Double(fill) / elapsed
                    try? FileManager.default.removeItem(atPath: fillPath)
                }
                report.rounds.append(Round(
                    lookupMicroseconds: LatencyFigures(lookup), lookupStall: stall, lookupFloor: floor, viewChildStack: viewChildRun, privateContext: privateRun,
                    sqliteLookupMicroseconds: sqliteLookup, sqliteUpsertsPerSecond: sqliteUpserts, fillPerSecond: fillRates,
                    queryMs: queries, sqliteQueryMs: sqliteQueries,
                    inFetchMs: inFetch, singleLookupsMs: singles, sqliteInFetchMs: sqliteIn?.0, sqliteSingleLookupsMs: sqliteIn?.1))
            }
            report.backgroundScheduling = BackgroundScheduling.state
            return report
        }.get()
        print(Self.render(report))
        if let json { try writeJSON(report, to: json) }
    }

    /// Stored names spread over the store, a different set each round.
    static func lookupNames(_ count: Int, objects: Int, round: Int) -> [String] {
        (0..<count).map { "Recipe \(($0 &* 7_919 &+ round &* 104_729) % objects)" }
    }

    /// One upsert import's records: every other one names a stored recipe
    /// (new servings and rating), the others are new (`pass` and `round`
    /// keep each import's new names apart).
    static func upsertRecords(_ count: Int, objects: Int, round: Int, pass: Int) -> [SQLiteUpsert.Record] {
        (0..<count).map { i in
            let name = i % 2 == 0 ? "Recipe \((i &* 4_999 &+ round &* 7 &+ pass &* 13) % objects)" : "New \(round)-\(pass)-\(i)"
            return SQLiteUpsert.Record(name: name, servings: i % 9 + 1, rating: Double(i % 40) / 8, created: 800_000_000 + Double(i))
        }
    }

    /// Microseconds per `findOrCreate` of each name from a child of the view
    /// context (each finds its stored recipe through the unique index), in
    /// blocks of `perBlock` as an import's batches run them, and the
    /// main-queue probe meanwhile.
    static func findOrCreate(_ names: [String], perBlock: Int, in container: PersistentContainer) throws -> ([Double], StallFigures, String) {
        let context = container.newBackgroundContext(childOfWriter: false)
        var samples: [Double] = []
        samples.reserveCapacity(names.count)
        let probe = StallProbe()
        probe.startProbing()
        for start in stride(from: 0, to: names.count, by: perBlock) {
            try context.performAndWait { () throws in
                for name in names[start..<min(start + perBlock, names.count)] {
                    let started = DispatchTime.now().uptimeNanoseconds
                    let recipe = try BenchRecipe.findOrCreate(where: #Predicate { $0.name == name }, in: context) { recipe in
                        recipe.name = name
                    }
                    samples.append(Double(DispatchTime.now().uptimeNanoseconds - started) / 1_000)
                    guard !recipe.isInserted else { throw ValidationError("findOrCreate created \(name), which is stored") }
                }
            }
        }
        let stall = probe.stopProbing()
        let name = names[0]
        let plan = try context.performAndWait { try context.explain(FetchRequest<BenchRecipe>(predicate: #Predicate { $0.name == name })).description }
        return (samples, stall, plan)
    }

    /// Milliseconds for one fetch of every name by `IN` through the unique
    /// index, and for the same names looked up one by one with
    /// `first(in:where:)`, from children of the view context.
    static func inFetch(_ names: [String], in container: PersistentContainer) throws -> (Double, Double) {
        try inFetchAgainstSingleLookups(in: container, childOfWriter: false, expected: Set(names).count) { context in
            try context.fetch(FetchRequest<BenchRecipe>(predicate: #Predicate { names.contains($0.name) })).count
        } singleLookups: { context in
            for name in names where try BenchRecipe.first(in: context, where: #Predicate { $0.name == name }) == nil {
                throw ValidationError("lookup: \(name) not found")
            }
        }
    }

    /// Inserts every record blindly into an import context under an upsert
    /// policy, saving every `saveEvery`: through the recommended stack (a child
    /// of the view context; the view context saved into the writer after each
    /// save, the writer saving to disk in the background), or from a private
    /// context on the coordinator. Checks afterwards that each name is stored once.
    static func upsertImport(_ records: [SQLiteUpsert.Record], saveEvery: Int, viewChildStack: Bool, container: PersistentContainer) throws -> UpsertRun {
        let view = container.viewContext
        let importer = viewChildStack ? container.newBackgroundContext(childOfWriter: false)
            : ManagedObjectContext(.privateQueue, coordinator: container.coordinator, name: "upsert")
        importer.mergePolicy = .mergeByPropertyObjectTrump
        if viewChildStack { view.performAndWait { view.mergePolicy = .mergeByPropertyObjectTrump } }
        let writer = container.writerContext
        writer.performAndWait { writer.mergePolicy = .mergeByPropertyObjectTrump }
        let failure = FailureBox()
        let probe = StallProbe()
        probe.startProbing()
        let cpuBefore = MainThreadDriver.mainThreadCPUMilliseconds() ?? 0
        let elapsed = try seconds {
            for start in stride(from: 0, to: records.count, by: saveEvery) {
                try importer.performAndWait {
                    for record in records[start..<min(start + saveEvery, records.count)] {
                        let recipe = BenchRecipe(context: importer)
                        recipe.name = record.name
                        recipe.servings = record.servings
                        recipe.rating = record.rating
                        recipe.created = Date(timeIntervalSinceReferenceDate: record.created)
                    }
                    try importer.save()
                    importer.reset()
                }
                if viewChildStack {
                    try view.performAndWait { try view.save() }
                    writer.perform { do { try writer.save() } catch { failure.set(error) } }
                }
            }
            try writer.performAndWait { try writer.save() }
            try failure.check()
        }
        let cpu = (MainThreadDriver.mainThreadCPUMilliseconds() ?? 0) - cpuBefore
        let stall = probe.stopProbing()
        // Every name once, with the import's values.
        let check = ManagedObjectContext(.privateQueue, coordinator: container.coordinator, name: "check")
        try check.performAndWait {
            for record in [records[0], records[1], records[records.count - 1]] {
                let name = record.name
                let found = try check.fetch(FetchRequest<BenchRecipe>(predicate: #Predicate { $0.name == name }))
                guard found.count == 1, found[0].servings == record.servings else {
                    throw ValidationError("after the upserts \(found.count) recipes are called \(name)")
                }
            }
        }
        return UpsertRun(seconds: elapsed, recordsPerSecond: Double(records.count) / elapsed, stall: stall, mainThreadCPUms: cpu)
    }

    static func render(_ report: Report) -> String {
        let rounds = report.rounds
        func medianOf(_ values: [Double]) -> String { fixed(median(values), 2) }
        var lookups = Table("\(thousands(Double(report.lookups))) find-or-create lookups by a unique name among \(thousands(Double(report.objects))) recipes, \(report.saveEvery) per block: \(report.lookupPlan)",
                            "median µs", "p99 µs", "max late ms", "p99 late ms")
        lookups.add("Strata: findOrCreate in a child of the view context",
                    medianOf(rounds.map(\.lookupMicroseconds.median)), medianOf(rounds.map(\.lookupMicroseconds.p99)),
                    medianOf(rounds.map(\.lookupStall.max)), medianOf(rounds.map(\.lookupStall.p99)))
        lookups.add("(0) the probe alone", "-", "-", medianOf(rounds.map(\.lookupFloor.max)), medianOf(rounds.map(\.lookupFloor.p99)))
        let sqliteLookups = rounds.compactMap(\.sqliteLookupMicroseconds)
        if !sqliteLookups.isEmpty {
            lookups.add("SQLite: prepared SELECT … WHERE name = ? (UNIQUE index)", medianOf(sqliteLookups.map(\.median)), medianOf(sqliteLookups.map(\.p99)), "-", "-")
        }
        var imports = Table("Upsert import of \(thousands(Double(report.upserts))) records (half update a stored recipe, half are new), a save every \(report.saveEvery)",
                            "records/s", "vs SQLite", "max late ms", "p99 late ms", "main CPU ms")
        let sqlite = median(rounds.compactMap(\.sqliteUpsertsPerSecond))
        for (title, runs) in [("Strata: import child -> view -> writer -> disk (object trump)", rounds.map(\.viewChildStack)),
                              ("Strata: private context on the coordinator (object trump)", rounds.map(\.privateContext))] {
            let rate = median(runs.map(\.recordsPerSecond))
            imports.add(title, thousands(rate), sqlite.isFinite ? fixed(rate / sqlite, 2) + "×" : "-",
                        medianOf(runs.map(\.stall.max)), medianOf(runs.map(\.stall.p99)), fixed(median(runs.map(\.mainThreadCPUms)), 1))
        }
        if sqlite.isFinite {
            imports.add("SQLite: INSERT … ON CONFLICT(name) DO UPDATE, one transaction per save", thousands(sqlite), "1.00×", "-", "-", "-")
        }
        var queries = Table("Queries through an index among \(thousands(Double(report.objects))) recipes, from a child of the view context (ms)", "Strata", "SQLite")
        for query in IndexedQuery.all {
            let sqlite = median(rounds.compactMap { $0.sqliteQueryMs[query.title] })
            queries.add(query.title, fixed(median(rounds.compactMap { $0.queryMs[query.title] }), 3), sqlite.isFinite ? fixed(sqlite, 3) : "-")
        }
        var inTable = Table("One IN fetch of the \(thousands(Double(report.lookups))) names against looking each up alone, among \(thousands(Double(report.objects))) recipes (ms; fresh contexts)",
                            "Strata", "SQLite")
        let inFetch = median(rounds.compactMap(\.inFetchMs)), singles = median(rounds.compactMap(\.singleLookupsMs))
        let sqliteIn = median(rounds.compactMap(\.sqliteInFetchMs)), sqliteSingles = median(rounds.compactMap(\.sqliteSingleLookupsMs))
        func ms(_ value: Double) -> String { value.isFinite ? fixed(value, 2) : "-" }
        inTable.add("IN fetch of every name", ms(inFetch), ms(sqliteIn))
        inTable.add("each name alone (first(in:where:); a prepared SELECT)", ms(singles), ms(sqliteSingles))
        inTable.add("IN fetch / a tenth of the single lookups", ms(inFetch / (singles / 10)), ms(sqliteIn / (sqliteSingles / 10)))
        var fills = Table("Inserting \(thousands(Double(report.fill))) recipes into a fresh store (private context on the coordinator, a save every \(report.saveEvery))",
                          "objects/s", "time vs 0 indexes")
        let base = median(rounds.compactMap { $0.fillPerSecond[indexLayouts[0].name] })
        for layout in indexLayouts {
            let rate = median(rounds.compactMap { $0.fillPerSecond[layout.name] })
            fills.add(layout.name, thousands(rate), fixed(base / rate, 2) + "×")
        }
        return "\(report.date), \(report.cores) cores, background scheduling \(report.backgroundScheduling); medians of \(rounds.count) rounds; "
            + "a 1 ms timer on the main thread during the lookups and the imports\n\n"
            + lookups.render() + "\n\n" + inTable.render() + "\n\n" + queries.render() + "\n\n" + imports.render() + "\n\n" + fills.render()
    }
}
