import CSQLite
import Dispatch
import Foundation

/// The same import into SQLite through libsqlite3, as a baseline: WAL mode,
/// `synchronous=FULL` (each commit is durable, as each Strata save is),
/// prepared statements, one transaction per save.
struct SQLiteImport {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static func run(objects: Int, saveEvery: Int, ingredients: Int, path: String) throws -> (seconds: Double, bytes: UInt64) {
        var db: OpaquePointer?
        guard sqlite3_open(path, &db) == SQLITE_OK, let db else {
            throw Failure(description: "sqlite3_open \(path) failed")
        }
        defer { sqlite3_close(db) }
        func exec(_ sql: String) throws {
            guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
                throw Failure(description: "\(sql): \(String(cString: sqlite3_errmsg(db)))")
            }
        }
        func prepare(_ sql: String) throws -> OpaquePointer {
            var statement: OpaquePointer?
            guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
                throw Failure(description: "\(sql): \(String(cString: sqlite3_errmsg(db)))")
            }
            return statement
        }
        try exec("PRAGMA journal_mode=WAL")
        try exec("PRAGMA synchronous=FULL")
        try exec("CREATE TABLE recipe (id INTEGER PRIMARY KEY, name TEXT NOT NULL, servings INTEGER NOT NULL, rating REAL NOT NULL, created REAL NOT NULL)")
        try exec("CREATE TABLE ingredient (id INTEGER PRIMARY KEY, name TEXT NOT NULL, grams INTEGER NOT NULL, recipe_id INTEGER REFERENCES recipe(id))")
        try exec("CREATE INDEX ingredient_recipe ON ingredient(recipe_id)")
        let insertRecipe = try prepare("INSERT INTO recipe (id, name, servings, rating, created) VALUES (?, ?, ?, ?, ?)")
        let insertIngredient = try prepare("INSERT INTO ingredient (id, name, grams, recipe_id) VALUES (?, ?, ?, ?)")
        defer { sqlite3_finalize(insertRecipe); sqlite3_finalize(insertIngredient) }
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

        let started = DispatchTime.now().uptimeNanoseconds
        var made = 0, n = 0, ingredientID = 0, inTransaction = 0
        try exec("BEGIN")
        while made < objects {
            let recipeID = n + 1
            sqlite3_bind_int64(insertRecipe, 1, Int64(recipeID))
            sqlite3_bind_text(insertRecipe, 2, "Recipe \(n)", -1, transient)
            sqlite3_bind_int64(insertRecipe, 3, Int64(n % 6 + 1))
            sqlite3_bind_double(insertRecipe, 4, Double(n % 50) / 10)
            sqlite3_bind_double(insertRecipe, 5, 700_000_000 + Double(n))
            guard sqlite3_step(insertRecipe) == SQLITE_DONE else { throw Failure(description: String(cString: sqlite3_errmsg(db))) }
            sqlite3_reset(insertRecipe)
            made += 1; inTransaction += 1
            for j in 0..<ingredients where made < objects {
                ingredientID += 1
                sqlite3_bind_int64(insertIngredient, 1, Int64(ingredientID))
                sqlite3_bind_text(insertIngredient, 2, "Ingredient \(j) of \(n)", -1, transient)
                sqlite3_bind_int64(insertIngredient, 3, Int64(10 * (j + 1)))
                sqlite3_bind_int64(insertIngredient, 4, Int64(recipeID))
                guard sqlite3_step(insertIngredient) == SQLITE_DONE else { throw Failure(description: String(cString: sqlite3_errmsg(db))) }
                sqlite3_reset(insertIngredient)
                made += 1; inTransaction += 1
            }
            if inTransaction >= saveEvery {
                try exec("COMMIT")
                try exec("BEGIN")
                inTransaction = 0
            }
            n += 1
        }
        try exec("COMMIT")
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        let bytes = ["", "-wal", "-shm"].reduce(UInt64(0)) { total, suffix in
            total + ((try? FileManager.default.attributesOfItem(atPath: path + suffix)[.size] as? NSNumber)?.uint64Value ?? 0)
        }
        return (seconds, bytes)
    }
}
