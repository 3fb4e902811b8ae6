import CSQLite
import Dispatch
import Foundation

/// `lookup`'s SQLite baseline: the same recipes in the same table as
/// `stall`'s import (``SQLiteImport``), queried as Strata is.
enum SQLiteLookup {
    static func build(objects: Int, path: String) throws {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        _ = try SQLiteImport.run(objects: objects, saveEvery: 20_000, ingredients: 0, path: path)
    }

    /// Seconds for `SELECT … WHERE name = ?` (no index: a full scan), and
    /// for opening the database and reading the row `id` by primary key.
    static func query(name: String, id: Int64, path: String) throws -> (scan: Double, openAndFirstQuery: Double) {
        var db: OpaquePointer?
        var found = ""
        let openAndFirstQuery = try seconds {
            guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK, db != nil else {
                throw SQLiteImport.Failure(description: "sqlite3_open \(path) failed")
            }
            found = try rows(db!, "SELECT name FROM recipe WHERE id = ?", bind: { sqlite3_bind_int64($0, 1, id) }).first ?? ""
        }
        defer { sqlite3_close(db) }
        guard found == name else { throw SQLiteImport.Failure(description: "row \(id) is \(found), not \(name)") }
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        var matched: [String] = []
        let scan = try seconds {
            matched = try rows(db!, "SELECT name, servings, rating, created FROM recipe WHERE name = ?",
                               bind: { sqlite3_bind_text($0, 1, name, -1, transient) })
        }
        guard matched.count == 1 else { throw SQLiteImport.Failure(description: "\(matched.count) rows called \(name)") }
        return (scan, openAndFirstQuery)
    }

    /// Milliseconds for `SELECT … WHERE name = ?` once `name` is indexed
    /// (the index is made first, if missing), the database already open.
    static func indexedQuery(name: String, path: String) throws -> Double {
        var db: OpaquePointer?
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK, let db else {
            throw SQLiteImport.Failure(description: "sqlite3_open \(path) failed")
        }
        defer { sqlite3_close(db) }
        _ = try rows(db, "CREATE INDEX IF NOT EXISTS recipe_name ON recipe(name)", bind: { _ in })
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        var matched: [String] = []
        let seconds = try seconds {
            matched = try rows(db, "SELECT name, servings, rating, created FROM recipe WHERE name = ?",
                               bind: { sqlite3_bind_text($0, 1, name, -1, transient) })
        }
        guard matched.count == 1 else { throw SQLiteImport.Failure(description: "\(matched.count) rows called \(name)") }
        return seconds * 1000
    }

    /// The first column of every row `sql` returns.
    private static func rows(_ db: OpaquePointer, _ sql: String, bind: (OpaquePointer) -> Void) throws -> [String] {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw SQLiteImport.Failure(description: "\(sql): \(String(cString: sqlite3_errmsg(db)))")
        }
        defer { sqlite3_finalize(statement) }
        bind(statement)
        var result: [String] = []
        while true {
            let step = sqlite3_step(statement)
            if step == SQLITE_DONE { break }
            guard step == SQLITE_ROW else { throw SQLiteImport.Failure(description: "\(sql): \(String(cString: sqlite3_errmsg(db)))") }
            result.append(String(cString: sqlite3_column_text(statement, 0)))
        }
        return result
    }
}
