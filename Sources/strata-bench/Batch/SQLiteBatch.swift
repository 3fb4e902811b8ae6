import CSQLite
import Foundation

/// `batch`'s SQLite baseline, as an app on GRDB or plain SQLite writes it:
/// the catalogue's product table (`sku UNIQUE`) filled by a prepared
/// `INSERT` (or `INSERT … ON CONFLICT DO UPDATE` for a re-import), one
/// transaction per batch; one `UPDATE` and one `DELETE` statement; and
/// invoices whose lines reference them `ON DELETE CASCADE` (foreign keys
/// on, an index on the reference). WAL, `synchronous=FULL`: each
/// transaction durable, as each of Strata's batches is.
final class SQLiteBatch {
    private var db: OpaquePointer
    private let path: String

    init(path: String) throws {
        self.path = path
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        var handle: OpaquePointer?
        guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK, let handle else {
            throw CatalogueFailure("sqlite3_open \(path) failed")
        }
        db = handle
        for sql in [
            "PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON",
            "CREATE TABLE product (id INTEGER PRIMARY KEY, sku TEXT NOT NULL UNIQUE, title TEXT NOT NULL, price REAL NOT NULL, stock INTEGER NOT NULL)",
            "CREATE TABLE barcoded (id INTEGER PRIMARY KEY, sku TEXT NOT NULL UNIQUE, barcode TEXT NOT NULL UNIQUE, title TEXT NOT NULL, price REAL NOT NULL, stock INTEGER NOT NULL)",
            "CREATE TABLE invoice (id INTEGER PRIMARY KEY, number INTEGER NOT NULL, total REAL NOT NULL)",
            "CREATE TABLE line (id INTEGER PRIMARY KEY, invoice INTEGER REFERENCES invoice(id) ON DELETE CASCADE, amount REAL NOT NULL)",
            "CREATE INDEX line_invoice ON line(invoice)",
        ] { try SQLiteCatalogue.exec(db, sql) }
    }

    deinit { sqlite3_close(db) }

    /// Writes `records` as products, `batch` per transaction; `upsert`:
    /// a record whose SKU is stored updates that product.
    func insert(_ records: [CatalogueRecord], batch: Int, upsert: Bool) throws {
        let sql = upsert
            ? "INSERT INTO product (sku, title, price, stock) VALUES (?, ?, ?, ?) ON CONFLICT(sku) DO UPDATE SET title = excluded.title, price = excluded.price, stock = excluded.stock"
            : "INSERT INTO product (sku, title, price, stock) VALUES (?, ?, ?, ?)"
        try insert(records, sql: sql, batch: batch) { statement, record in bind(record, to: statement) }
    }

    /// Writes `records` as products with a barcode (`barcoded`, both columns
    /// unique), `batch` per transaction; `upsert`: a record whose SKU is
    /// stored updates that product.
    func insert(_ records: [BarcodedRecord], batch: Int, upsert: Bool) throws {
        let sql = upsert
            ? "INSERT INTO barcoded (sku, title, price, stock, barcode) VALUES (?, ?, ?, ?, ?) ON CONFLICT(sku) DO UPDATE SET title = excluded.title, price = excluded.price, stock = excluded.stock, barcode = excluded.barcode"
            : "INSERT INTO barcoded (sku, title, price, stock, barcode) VALUES (?, ?, ?, ?, ?)"
        try insert(records, sql: sql, batch: batch) { statement, record in
            bind(record.record, to: statement)
            sqlite3_bind_text(statement, 5, record.barcode, -1, sqliteTransient)
        }
    }

    private func bind(_ record: CatalogueRecord, to statement: OpaquePointer) {
        sqlite3_bind_text(statement, 1, record.sku, -1, sqliteTransient)
        sqlite3_bind_text(statement, 2, record.title, -1, sqliteTransient)
        sqlite3_bind_double(statement, 3, record.price)
        sqlite3_bind_int64(statement, 4, Int64(record.stock))
    }

    private func insert<Record>(_ records: [Record], sql: String, batch: Int, bind: (OpaquePointer, Record) -> Void) throws {
        let statement = try SQLiteCatalogue.prepare(db, sql)
        defer { sqlite3_finalize(statement) }
        for start in stride(from: 0, to: records.count, by: batch) {
            try SQLiteCatalogue.exec(db, "BEGIN")
            for record in records[start..<min(start + batch, records.count)] {
                bind(statement, record)
                guard sqlite3_step(statement) == SQLITE_DONE else { throw failure() }
                sqlite3_reset(statement)
            }
            try SQLiteCatalogue.exec(db, "COMMIT")
        }
    }

    /// `invoices` invoices of `linesEach` lines, `batch` invoices per transaction.
    func insertInvoices(_ invoices: Int, linesEach: Int, batch: Int) throws {
        let invoice = try SQLiteCatalogue.prepare(db, "INSERT INTO invoice (id, number, total) VALUES (?, ?, ?)")
        let line = try SQLiteCatalogue.prepare(db, "INSERT INTO line (invoice, amount) VALUES (?, ?)")
        defer { sqlite3_finalize(invoice); sqlite3_finalize(line) }
        for start in stride(from: 0, to: invoices, by: batch) {
            try SQLiteCatalogue.exec(db, "BEGIN")
            for n in start..<min(start + batch, invoices) {
                sqlite3_bind_int64(invoice, 1, Int64(n + 1))
                sqlite3_bind_int64(invoice, 2, Int64(n))
                sqlite3_bind_double(invoice, 3, Double(n % 1_000))
                guard sqlite3_step(invoice) == SQLITE_DONE else { throw failure() }
                sqlite3_reset(invoice)
                for l in 0..<linesEach {
                    sqlite3_bind_int64(line, 1, Int64(n + 1))
                    sqlite3_bind_double(line, 2, Double(l))
                    guard sqlite3_step(line) == SQLITE_DONE else { throw failure() }
                    sqlite3_reset(line)
                }
            }
            try SQLiteCatalogue.exec(db, "COMMIT")
        }
    }

    /// Runs one statement and returns the rows it changed.
    func run(_ sql: String) throws -> Int {
        try SQLiteCatalogue.exec(db, sql)
        return Int(sqlite3_total_changes(db))
    }

    func count(_ table: String) throws -> Int {
        let statement = try SQLiteCatalogue.prepare(db, "SELECT count(*) FROM \(table)")
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW else { throw failure() }
        return Int(sqlite3_column_int64(statement, 0))
    }

    private func failure() -> CatalogueFailure {
        CatalogueFailure("sqlite: \(String(cString: sqlite3_errmsg(db)))")
    }
}

/// SQLite's `SQLITE_TRANSIENT`: copy the bound bytes now.
private let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
