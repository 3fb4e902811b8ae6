import CSQLite
import Foundation
import Strata

/// Saves of 100 recipes, their names unique and their servings indexed,
/// into an in-memory store until it holds `objects` — a cache or a test's
/// store filled as an app fills it, each save looking up the holders of
/// its names — and the same rows into SQLite's `:memory:` database with a
/// unique index and an index, a transaction a save: the rate over the first tenth of the
/// objects and over the last. A save costs what it writes when the two are
/// alike; a rate that falls as the store grows is a save that costs in
/// proportion to the store.
extension GraphBenchmark {
    static let inMemorySave = 100

    /// Objects a second over the first and the last tenth of the saves.
    struct GrowthRates: Sendable {
        var first: Double
        var last: Double
        /// The objects saved in all (`objects`, or ten saves at least).
        var saved: Int
    }

    func inMemoryGrowth() throws -> GrowthRates {
        let coordinator = PersistentStoreCoordinator(
            model: try makeBenchModel(recipeIndexes: [IndexDescription("servings")], recipeUniqueness: [["name"]]))
        try coordinator.addPersistentStore(.inMemory)
        defer { try? coordinator.close() }
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        return try Self.growthRates(objects: objects) { (saved) throws in
            try context.performAndWait { () throws(StrataError) in
                insertObjects(Self.inMemorySave, ingredientsPerRecipe: 0, into: context, offset: saved)
                try context.save()
            }
        }
    }

    func sqliteInMemoryGrowth() throws -> GrowthRates {
        var db: OpaquePointer?
        guard sqlite3_open(":memory:", &db) == SQLITE_OK, let db else { throw SQLiteImport.Failure(description: "sqlite3_open :memory: failed") }
        defer { sqlite3_close(db) }
        func exec(_ sql: String) throws {
            guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
                throw SQLiteImport.Failure(description: "\(sql): \(String(cString: sqlite3_errmsg(db)))")
            }
        }
        try exec("CREATE TABLE recipe (id INTEGER PRIMARY KEY, name TEXT NOT NULL, servings INTEGER NOT NULL, rating REAL NOT NULL, created REAL NOT NULL)")
        try exec("CREATE UNIQUE INDEX recipe_name ON recipe(name)")
        try exec("CREATE INDEX recipe_servings ON recipe(servings)")
        var insert: OpaquePointer?
        guard sqlite3_prepare_v2(db, "INSERT INTO recipe (id, name, servings, rating, created) VALUES (?, ?, ?, ?, ?)", -1, &insert, nil)
            == SQLITE_OK, let insert
        else { throw SQLiteImport.Failure(description: String(cString: sqlite3_errmsg(db))) }
        defer { sqlite3_finalize(insert) }
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        return try Self.growthRates(objects: objects) { (saved) throws in
            try exec("BEGIN")
            for n in saved ..< saved + Self.inMemorySave {
                sqlite3_bind_int64(insert, 1, Int64(n + 1))
                sqlite3_bind_text(insert, 2, "Recipe \(n)", -1, transient)
                sqlite3_bind_int64(insert, 3, Int64(n % 6 + 1))
                sqlite3_bind_double(insert, 4, Double(n % 50) / 10)
                sqlite3_bind_double(insert, 5, 700_000_000 + Double(n))
                guard sqlite3_step(insert) == SQLITE_DONE else { throw SQLiteImport.Failure(description: String(cString: sqlite3_errmsg(db))) }
                sqlite3_reset(insert)
            }
            try exec("COMMIT")
        }
    }

    /// Runs `save(objectsSavedBefore)` until `objects` are saved, timing the
    /// first and the last tenth of the saves.
    private static func growthRates(objects: Int, _ save: (Int) throws -> Void) throws -> GrowthRates {
        let saves = max(10, objects / inMemorySave)
        let tenth = saves / 10
        var first = 0.0, last = 0.0
        for i in 0..<saves {
            let elapsed = try seconds { try save(i * inMemorySave) }
            if i < tenth { first += elapsed } else if i >= saves - tenth { last += elapsed }
        }
        let timed = Double(tenth * inMemorySave)
        return GrowthRates(first: timed / first, last: timed / last, saved: saves * inMemorySave)
    }
}
