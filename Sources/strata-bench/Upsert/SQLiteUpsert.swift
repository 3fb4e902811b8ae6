import CSQLite
import Dispatch
import Foundation

/// `upsert`'s SQLite baseline: the recipes of `stall`'s import with
/// `name UNIQUE`, looked up and upserted through prepared statements, as
/// an app on GRDB or plain SQLite would (WAL, `synchronous=FULL`).
enum SQLiteUpsert {
    struct Record: Sendable {
        var name: String
        var servings: Int
        var rating: Double
        var created: Double
    }

    static func build(objects: Int, path: String) throws {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        _ = try SQLiteImport.run(objects: objects, saveEvery: 20_000, ingredients: 0, path: path)
        try withDatabase(path) { db in
            try exec(db, "CREATE UNIQUE INDEX recipe_name ON recipe(name)")
            try exec(db, "CREATE INDEX recipe_servings ON recipe(servings)")
            try exec(db, "CREATE INDEX recipe_created ON recipe(created)")
        }
    }

    /// Microseconds per lookup of each name through one prepared statement.
    static func lookups(_ names: [String], path: String) throws -> [Double] {
        try withDatabase(path) { db in
            let select = try prepare(db, "SELECT id, name, servings, rating, created FROM recipe WHERE name = ?")
            defer { sqlite3_finalize(select) }
            var samples: [Double] = []
            samples.reserveCapacity(names.count)
            for name in names {
                let started = DispatchTime.now().uptimeNanoseconds
                sqlite3_bind_text(select, 1, name, -1, transient)
                var rows = 0
                while sqlite3_step(select) == SQLITE_ROW {
                    rows += 1
                    _ = String(cString: sqlite3_column_text(select, 1))
                }
                sqlite3_reset(select)
                samples.append(Double(DispatchTime.now().uptimeNanoseconds - started) / 1_000)
                guard rows == 1 else { throw SQLiteImport.Failure(description: "\(rows) rows called \(name)") }
            }
            return samples
        }
    }

    /// Milliseconds for `SELECT … WHERE name IN (?, …)` with every name bound,
    /// and for the names looked up one by one through one prepared
    /// statement; five of each in turn, medians. Both check the rows found.
    static func inFetch(_ names: [String], path: String) throws -> (Double, Double) {
        try withDatabase(path) { db in
            let columns = "SELECT id, name, servings, rating, created FROM recipe WHERE name "
            let single = try prepare(db, columns + "= ?")
            defer { sqlite3_finalize(single) }
            let distinct = Set(names).count
            var inFetches: [Double] = []
            var singles: [Double] = []
            for _ in 0..<5 {
                inFetches.append(try seconds {
                    let statement = try prepare(db, columns + "IN (" + Array(repeating: "?", count: names.count).joined(separator: ",") + ")")
                    defer { sqlite3_finalize(statement) }
                    for (i, name) in names.enumerated() { sqlite3_bind_text(statement, Int32(i + 1), name, -1, transient) }
                    var rows = 0
                    while sqlite3_step(statement) == SQLITE_ROW {
                        _ = String(cString: sqlite3_column_text(statement, 1))
                        rows += 1
                    }
                    guard rows == distinct else { throw SQLiteImport.Failure(description: "IN: \(rows) rows of \(distinct)") }
                } * 1000)
                singles.append(try seconds {
                    for name in names {
                        sqlite3_bind_text(single, 1, name, -1, transient)
                        var rows = 0
                        while sqlite3_step(single) == SQLITE_ROW {
                            _ = String(cString: sqlite3_column_text(single, 1))
                            rows += 1
                        }
                        sqlite3_reset(single)
                        guard rows == 1 else { throw SQLiteImport.Failure(description: "\(rows) rows called \(name)") }
                    }
                } * 1000)
            }
            return (median(inFetches), median(singles))
        }
    }

    /// Milliseconds per query of ``IndexedQuery/all`` (median of 5, after
    /// one unmeasured run), through prepared statements.
    static func queries(objects: Int, path: String) throws -> [String: Double] {
        try withDatabase(path) { db in
            var results: [String: Double] = [:]
            for query in IndexedQuery.all {
                let statement = try prepare(db, query.sql)
                defer { sqlite3_finalize(statement) }
                var samples: [Double] = []
                for round in 0..<6 {
                    let elapsed = try seconds {
                        let start = IndexedQuery.base + IndexedQuery.windowStart(objects: objects)
                        sqlite3_bind_double(statement, 1, start)
                        sqlite3_bind_double(statement, 2, start + IndexedQuery.window)
                        var rows = 0
                        while sqlite3_step(statement) == SQLITE_ROW {
                            rows += 1
                            _ = sqlite3_column_int64(statement, 0)
                        }
                        sqlite3_reset(statement)
                        guard rows > 0 else { throw SQLiteImport.Failure(description: "\(query.sql): no rows") }
                    }
                    if round > 0 { samples.append(elapsed * 1000) }
                }
                results[query.title] = median(samples)
            }
            return results
        }
    }

    /// Seconds to upsert every record, one transaction per `saveEvery`.
    static func upsert(_ records: [Record], saveEvery: Int, path: String) throws -> Double {
        try withDatabase(path) { db in
            try exec(db, "PRAGMA journal_mode=WAL")
            try exec(db, "PRAGMA synchronous=FULL")
            let upsert = try prepare(db, """
                INSERT INTO recipe (name, servings, rating, created) VALUES (?, ?, ?, ?)
                ON CONFLICT(name) DO UPDATE SET servings = excluded.servings, rating = excluded.rating, created = excluded.created
                """)
            defer { sqlite3_finalize(upsert) }
            return try seconds {
                for start in stride(from: 0, to: records.count, by: saveEvery) {
                    try exec(db, "BEGIN")
                    for record in records[start..<min(start + saveEvery, records.count)] {
                        sqlite3_bind_text(upsert, 1, record.name, -1, transient)
                        sqlite3_bind_int64(upsert, 2, Int64(record.servings))
                        sqlite3_bind_double(upsert, 3, record.rating)
                        sqlite3_bind_double(upsert, 4, record.created)
                        guard sqlite3_step(upsert) == SQLITE_DONE else { throw SQLiteImport.Failure(description: String(cString: sqlite3_errmsg(db))) }
                        sqlite3_reset(upsert)
                    }
                    try exec(db, "COMMIT")
                }
            }
        }
    }

    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    private static func withDatabase<T>(_ path: String, _ body: (OpaquePointer) throws -> T) throws -> T {
        var db: OpaquePointer?
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK, let db else {
            throw SQLiteImport.Failure(description: "sqlite3_open \(path) failed")
        }
        defer { sqlite3_close(db) }
        return try body(db)
    }

    private static func exec(_ db: OpaquePointer, _ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
            throw SQLiteImport.Failure(description: "\(sql): \(String(cString: sqlite3_errmsg(db)))")
        }
    }

    private static func prepare(_ db: OpaquePointer, _ sql: String) throws -> OpaquePointer {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw SQLiteImport.Failure(description: "\(sql): \(String(cString: sqlite3_errmsg(db)))")
        }
        return statement
    }
}
