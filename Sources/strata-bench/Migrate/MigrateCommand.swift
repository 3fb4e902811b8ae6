import ArgumentParser
import CSQLite
import Dispatch
import Foundation
import Strata
import StrataStore
import Synchronization

/// `strata-bench migrate`: opening an imported store with the next version
/// of its model — an attribute added, an attribute renamed, an index added —
/// beside a plain open of the same store, the first full fetch after each,
/// and the same changes made through SQLite the way GRDB's migrator makes
/// them. The index build's peak resident memory is reported too: it is
/// streamed, so it should not grow with the store.
struct MigrateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Open after adding or renaming an attribute or adding an index vs a plain open, the fetch after, and SQLite."
    )

    @Option(help: "Objects imported first (recipes plus their ingredients).") var objects = 1_000_000
    @Option(help: "Rounds, each on fresh copies of the store; the table shows medians.") var repeats = 3
    @Option(help: "Keep the stores in this directory (default: a temporary one, removed after).") var store: String?
    @Option(help: "Write every figure to this JSON file.") var json: String?

    enum Change: String, CaseIterable, Codable {
        case none, addAttribute, renameAttribute, addIndex, customStage
    }

    struct Round: Codable {
        var openMilliseconds: [String: Double] = [:]
        /// Resident memory above what it was before the open, at its highest during it.
        var openPeakGrowthMB: [String: Double] = [:]
        var fetchMilliseconds: [String: Double] = [:]
        var sqliteMilliseconds: [String: Double] = [:]
    }

    struct Report: Codable {
        var date: String
        var objects: Int
        var fetched = 0
        var rounds: [Round] = []
    }

    /// The bench model, changed: Recipe gains `calories` (required, default
    /// 0), its `name` becomes `title`, Ingredient's `grams` gets an index, or
    /// (for the custom stage) Recipe's `rating` becomes a string.
    static func model(_ change: Change) throws -> ManagedObjectModel {
        let name: PropertyDescription = change == .renameAttribute
            ? .attribute("title", .string, renamedFrom: "name") : .attribute("name", .string)
        let extra: [PropertyDescription] = change == .addAttribute ? [.attribute("calories", .integer64, defaultValue: .integer(0))] : []
        // BenchRecipe declares `name` and a Double `rating`: a model that
        // renames or retypes them names no classes (the model checks each
        // class against its entity), and is fetched by entity name.
        let classes = change != .renameAttribute && change != .customStage
        return try ManagedObjectModel(entities: [
            EntityDescription(name: "Recipe", managedObjectClass: classes ? BenchRecipe.self : ManagedObject.self, properties: [
                name,
                .attribute("servings", .integer64),
                .attribute("rating", change == .customStage ? .string : .double),
                .attribute("created", .date),
                .toMany("ingredients", "Ingredient", inverse: "recipe", deleteRule: .cascade),
            ] + extra),
            EntityDescription(name: "Ingredient", managedObjectClass: classes ? BenchIngredient.self : ManagedObject.self, properties: [
                .attribute("name", .string),
                .attribute("grams", .integer64),
                .toOne("recipe", "Recipe", inverse: "ingredients"),
            ], indexes: change == .addIndex ? [IndexDescription("grams")] : []),
        ])
    }

    func run() throws {
        let work = try WorkDirectory(store, scenario: "migrate")
        defer { work.cleanUp() }
        let base = work.path + "/base", sqliteBase = work.path + "/base.sqlite"
        progress("migrate: importing \(objects) objects into Strata and into SQLite ...")
        try importStore(objects: objects, at: base, model: try Self.model(.none))
        _ = try SQLiteImport.run(objects: objects, saveEvery: 2_000, ingredients: 3, path: sqliteBase)
        var report = Report(date: ISO8601DateFormatter().string(from: Date()), objects: objects)
        let files = FileManager.default
        for round in 0..<max(1, repeats) {
            progress("migrate: round \(round + 1)/\(repeats)")
            var figures = Round()
            // Interleaved: each change on a fresh copy, in the same round.
            for change in Change.allCases {
                let path = work.path + "/\(change.rawValue)-\(round)"
                try files.copyItem(atPath: base, toPath: path)
                let model = try Self.model(change)
                let coordinator = PersistentStoreCoordinator(model: model)
                let plan = change == .customStage ? try Self.customPlan(to: model) : nil
                let reportsProgress = change == .addIndex && round == 0
                var opened = 0.0
                figures.openPeakGrowthMB[change.rawValue] = try Self.peakResidentGrowth {
                    opened = try seconds {
                        try coordinator.addPersistentStore(.log, directory: path, migrationPlan: plan, migrationProgress: { step in
                            if reportsProgress && (step.done % 200_000 < 16_384 || step.done == step.total) {
                                progress("migrate: \(step.step) \(step.done)/\(step.total)")
                            }
                        })
                    }
                }
                figures.openMilliseconds[change.rawValue] = opened * 1000
                let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
                var fetched = 0
                figures.fetchMilliseconds[change.rawValue] = try seconds {
                    fetched = try context.performAndWait {
                        try context.fetch(FetchRequest<ManagedObject>(entityName: "Recipe")).count
                            + context.fetch(FetchRequest<ManagedObject>(entityName: "Ingredient")).count
                    }
                } * 1000
                guard fetched == objects else { throw ValidationError("fetched \(fetched) objects after \(change), not \(objects)") }
                report.fetched = fetched
                try coordinator.close()
                try files.removeItem(atPath: path)
                if change != .none && change != .customStage {
                    let copy = work.path + "/\(change.rawValue)-\(round).sqlite"
                    for suffix in ["", "-wal", "-shm"] where files.fileExists(atPath: sqliteBase + suffix) {
                        try files.copyItem(atPath: sqliteBase + suffix, toPath: copy + suffix)
                    }
                    figures.sqliteMilliseconds[change.rawValue] = try SQLiteMigration.run(change, path: copy) * 1000
                    for suffix in ["", "-wal", "-shm"] { try? files.removeItem(atPath: copy + suffix) }
                }
            }
            report.rounds.append(figures)
        }
        func med(_ figure: KeyPath<Round, [String: Double]>, _ change: Change) -> Double {
            median(report.rounds.compactMap { $0[keyPath: figure][change.rawValue] })
        }
        let plainOpen = med(\.openMilliseconds, .none), plainFetch = med(\.fetchMilliseconds, .none)
        print("Opening \(thousands(Double(objects))) stored objects with a changed model, median of \(repeats) rounds, \(report.date)")
        var table = Table(
            "Change", "Strata open", "× plain open", "peak memory growth", "fetch all after", "× plain fetch", "SQLite (GRDB-style migration)")
        table.add("none (plain open)", fixed(plainOpen, 1) + " ms", "1.00", fixed(med(\.openPeakGrowthMB, .none), 0) + " MB",
                  fixed(plainFetch, 0) + " ms", "1.00", "-")
        let names: [Change: String] = [.addAttribute: "add an attribute", .renameAttribute: "rename an attribute", .addIndex: "index Ingredient.grams"]
        for change in [Change.addAttribute, .renameAttribute, .addIndex] {
            let open = med(\.openMilliseconds, change), fetch = med(\.fetchMilliseconds, change)
            table.add(names[change]!, fixed(open, 1) + " ms", fixed(open / plainOpen, 2), fixed(med(\.openPeakGrowthMB, change), 0) + " MB",
                      fixed(fetch, 0) + " ms", fixed(fetch / plainFetch, 2), fixed(med(\.sqliteMilliseconds, change), 1) + " ms")
        }
        print(table.render())
        let custom = med(\.openMilliseconds, .customStage)
        print("custom stage rewriting every recipe's rating (double → string) and carrying the ingredients over, "
              + "in batches of 10,000 under new numbers, one switch: \(fixed(custom, 0)) ms, "
              + "\(thousands(Double(objects) / custom * 1000)) objects/s, peak memory growth \(fixed(med(\.openPeakGrowthMB, .customStage), 0)) MB")
        if let json { try writeJSON(report, to: json) }
    }

    /// Runs `body`, sampling resident memory every 2 ms on a thread of its
    /// own; returns the highest sample above the one taken before — after
    /// handing freed memory back to the system, or what the import and the
    /// fetches before freed would hide what `body` allocates.
    static func peakResidentGrowth(_ body: () throws -> Void) throws -> Double {
        let before = ResidentMemory.trimmedMegabytes()
        let peak = Mutex(before)
        let running = Atomic(true)
        let stopped = DispatchSemaphore(value: 0)
        Thread {
            while running.load(ordering: .acquiring) {
                let now = ResidentMemory.megabytes()
                peak.withLock { $0 = max($0, now) }
                usleep(2_000)
            }
            stopped.signal()
        }.start()
        defer {
            running.store(false, ordering: .releasing)
            stopped.wait()
        }
        try body()
        let now = ResidentMemory.megabytes()
        return peak.withLock { max($0, now) } - before
    }

    /// Version 1 → 2 with a custom stage: each recipe's rating becomes text.
    static func customPlan(to target: ManagedObjectModel) throws -> MigrationPlan {
        try MigrationPlan(versions: [ModelVersion("1", model: try model(.none)), ModelVersion("2", model: target)], stages: [
            .custom(from: "1", to: "2", batchSize: 10_000, progress: { done, total in
                if done % 200_000 < 10_000 || done == total { progress("migrate: custom stage \(done)/\(total)") }
            }) { objects in
                for object in objects where object.entity.name == "Recipe" {
                    guard case .double(let rating)? = object.oldValue(forKey: "rating") else { continue }
                    try object.setValue(.string(String(format: "%.1f", rating)), forKey: "rating")
                }
            },
        ])
    }
}

/// The two changes made through SQLite as GRDB's `DatabaseMigrator` makes
/// them: open, one immediate transaction holding the `ALTER TABLE` and the
/// row recording the migration, commit (WAL, `synchronous=FULL`).
enum SQLiteMigration {
    static func run(_ change: MigrateCommand.Change, path: String) throws -> Double {
        try seconds {
            var db: OpaquePointer?
            guard sqlite3_open(path, &db) == SQLITE_OK, let db else { throw SQLiteImport.Failure(description: "sqlite3_open \(path) failed") }
            defer { sqlite3_close(db) }
            let alter = switch change {
            case .addAttribute: "ALTER TABLE recipe ADD COLUMN calories INTEGER NOT NULL DEFAULT 0"
            case .renameAttribute: "ALTER TABLE recipe RENAME COLUMN name TO title"
            default: "CREATE INDEX ingredient_grams ON ingredient(grams)"
            }
            for sql in [
                "PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "BEGIN IMMEDIATE",
                "CREATE TABLE IF NOT EXISTS grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY)",
                alter, "INSERT INTO grdb_migrations VALUES ('v2')", "COMMIT",
            ] {
                guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
                    throw SQLiteImport.Failure(description: "\(sql): \(String(cString: sqlite3_errmsg(db)))")
                }
            }
        }
    }
}
