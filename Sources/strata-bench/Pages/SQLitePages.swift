import CSQLite
import Foundation

/// `pages`' SQLite baseline: the same lines in one table, `text` and `uses`
/// indexed, each page a prepared statement as GRDB or a careful SQL user
/// writes it (a prefix as a range of the index, which `LIKE` is not).
final class SQLitePages {
    private let db: OpaquePointer
    private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    /// Imports `corpus` into a new database at `path`, in transactions of `saveEvery`.
    static func build(_ corpus: SourceLineCorpus, path: String, saveEvery: Int) throws -> SQLitePages {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        let pages = try SQLitePages(path: path)
        try pages.exec("PRAGMA journal_mode=WAL")
        try pages.exec("PRAGMA synchronous=FULL")
        try pages.exec("CREATE TABLE line (id INTEGER PRIMARY KEY, text TEXT NOT NULL, uses INTEGER NOT NULL, repository TEXT NOT NULL)")
        try pages.exec("CREATE INDEX line_text ON line(text)")
        try pages.exec("CREATE INDEX line_uses ON line(uses)")
        let insert = try pages.prepare("INSERT INTO line (text, uses, repository) VALUES (?, ?, ?)")
        defer { sqlite3_finalize(insert) }
        try pages.exec("BEGIN")
        for (n, line) in corpus.lines.enumerated() {
            sqlite3_bind_text(insert, 1, line.text, -1, pages.transient)
            sqlite3_bind_int64(insert, 2, Int64(line.uses))
            sqlite3_bind_text(insert, 3, line.repository, -1, pages.transient)
            guard sqlite3_step(insert) == SQLITE_DONE else { throw SQLiteImport.Failure(description: pages.message) }
            sqlite3_reset(insert)
            if n % saveEvery == saveEvery - 1 {
                try pages.exec("COMMIT")
                try pages.exec("BEGIN")
            }
        }
        try pages.exec("COMMIT")
        return pages
    }

    private init(path: String) throws {
        var db: OpaquePointer?
        guard sqlite3_open(path, &db) == SQLITE_OK, let db else { throw SQLiteImport.Failure(description: "sqlite3_open \(path) failed") }
        self.db = db
    }

    deinit { sqlite3_close(db) }

    private var message: String { String(cString: sqlite3_errmsg(db)) }

    private func exec(_ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { throw SQLiteImport.Failure(description: "\(sql): \(message)") }
    }

    private func prepare(_ sql: String) throws -> OpaquePointer {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw SQLiteImport.Failure(description: "\(sql): \(message)")
        }
        return statement
    }

    /// A query prepared once and run many times, each run reading every
    /// column of the rows it returns.
    final class Query {
        let statement: OpaquePointer
        let pages: SQLitePages
        let sql: String

        init(_ sql: String, in pages: SQLitePages) throws {
            self.sql = sql
            self.pages = pages
            statement = try pages.prepare(sql)
        }

        deinit { sqlite3_finalize(statement) }

        /// The rows' text and uses, for `arguments` (texts, bound in order).
        func run(_ arguments: [String]) throws -> [(text: String, uses: Int)] {
            defer { sqlite3_reset(statement) }
            for (i, argument) in arguments.enumerated() { sqlite3_bind_text(statement, Int32(i + 1), argument, -1, pages.transient) }
            var rows: [(String, Int)] = []
            while true {
                let step = sqlite3_step(statement)
                if step == SQLITE_DONE { break }
                guard step == SQLITE_ROW else { throw SQLiteImport.Failure(description: "\(sql): \(pages.message)") }
                let text = String(cString: sqlite3_column_text(statement, 0))
                let uses = Int(sqlite3_column_int64(statement, 1))
                _ = sqlite3_column_text(statement, 2)
                rows.append((text, uses))
            }
            return rows
        }
    }

    func query(_ sql: String) throws -> Query { try Query(sql, in: self) }

    /// What SQLite says it does for `sql`.
    func plan(_ sql: String) throws -> String {
        let statement = try prepare("EXPLAIN QUERY PLAN " + sql)
        defer { sqlite3_finalize(statement) }
        var details: [String] = []
        while sqlite3_step(statement) == SQLITE_ROW { details.append(String(cString: sqlite3_column_text(statement, 3))) }
        return details.joined(separator: "; ")
    }
}
