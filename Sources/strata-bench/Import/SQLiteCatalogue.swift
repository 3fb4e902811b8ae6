import CSQLite
import Foundation

/// `import`'s SQLite baseline: the same catalogue as an app on GRDB or
/// plain SQLite keeps it — a product table with `sku UNIQUE`, a category
/// table with `name UNIQUE`, a join table — written through prepared
/// statements with `INSERT … ON CONFLICT DO UPDATE`, one transaction per
/// batch (WAL, `synchronous=FULL`: each batch durable, as Strata's are).
final class SQLiteCatalogue {
    private var db: OpaquePointer?
    private let upsertProduct: OpaquePointer
    private let insertCategory: OpaquePointer
    private let selectCategory: OpaquePointer
    private let insertEdge: OpaquePointer
    private let updateStock: OpaquePointer
    private let selectBySKU: OpaquePointer

    init(path: String) throws {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK, let db else {
            throw CatalogueFailure("sqlite3_open \(path) failed")
        }
        for sql in [
            "PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL",
            "CREATE TABLE product (id INTEGER PRIMARY KEY, sku TEXT NOT NULL UNIQUE, title TEXT NOT NULL, price REAL NOT NULL, stock INTEGER NOT NULL)",
            "CREATE TABLE category (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)",
            "CREATE TABLE product_category (product INTEGER NOT NULL, category INTEGER NOT NULL, PRIMARY KEY (product, category)) WITHOUT ROWID",
            "CREATE INDEX category_products ON product_category(category)",
        ] { try Self.exec(db, sql) }
        upsertProduct = try Self.prepare(db, """
            INSERT INTO product (sku, title, price, stock) VALUES (?, ?, ?, ?)
            ON CONFLICT(sku) DO UPDATE SET title = excluded.title, price = excluded.price, stock = excluded.stock
            RETURNING id
            """)
        insertCategory = try Self.prepare(db, "INSERT OR IGNORE INTO category (name) VALUES (?)")
        selectCategory = try Self.prepare(db, "SELECT id FROM category WHERE name = ?")
        insertEdge = try Self.prepare(db, "INSERT OR IGNORE INTO product_category (product, category) VALUES (?, ?)")
        updateStock = try Self.prepare(db, "UPDATE product SET stock = stock + 1 WHERE sku = ?")
        selectBySKU = try Self.prepare(db, "SELECT id, sku, title, price, stock FROM product WHERE sku = ?")
    }

    deinit {
        for statement in [upsertProduct, insertCategory, selectCategory, insertEdge, updateStock, selectBySKU] { sqlite3_finalize(statement) }
        sqlite3_close(db)
    }

    /// Upserts `records`, a transaction per batch.
    func run(_ records: [CatalogueRecord], batchSize: Int) throws {
        for start in stride(from: 0, to: records.count, by: batchSize) {
            try Self.exec(db!, "BEGIN")
            for record in records[start..<min(start + batchSize, records.count)] {
                bind(upsertProduct, 1, record.sku)
                bind(upsertProduct, 2, record.title)
                sqlite3_bind_double(upsertProduct, 3, record.price)
                sqlite3_bind_int64(upsertProduct, 4, Int64(record.stock))
                guard sqlite3_step(upsertProduct) == SQLITE_ROW else { throw failure() }
                let product = sqlite3_column_int64(upsertProduct, 0)
                sqlite3_reset(upsertProduct)
                for name in record.categories {
                    bind(insertCategory, 1, name)
                    guard sqlite3_step(insertCategory) == SQLITE_DONE else { throw failure() }
                    sqlite3_reset(insertCategory)
                    bind(selectCategory, 1, name)
                    guard sqlite3_step(selectCategory) == SQLITE_ROW else { throw failure() }
                    let category = sqlite3_column_int64(selectCategory, 0)
                    sqlite3_reset(selectCategory)
                    sqlite3_bind_int64(insertEdge, 1, product)
                    sqlite3_bind_int64(insertEdge, 2, category)
                    guard sqlite3_step(insertEdge) == SQLITE_DONE else { throw failure() }
                    sqlite3_reset(insertEdge)
                }
            }
            try Self.exec(db!, "COMMIT")
        }
    }

    /// `UPDATE … WHERE sku = ?` per key, a transaction per batch.
    func updateStock(_ skus: [String], batchSize: Int) throws {
        for start in stride(from: 0, to: skus.count, by: batchSize) {
            try Self.exec(db!, "BEGIN")
            for sku in skus[start..<min(start + batchSize, skus.count)] {
                bind(updateStock, 1, sku)
                guard sqlite3_step(updateStock) == SQLITE_DONE, sqlite3_changes(db) == 1 else { throw failure() }
                sqlite3_reset(updateStock)
            }
            try Self.exec(db!, "COMMIT")
        }
    }

    /// Rows of `SELECT … WHERE sku IN (?, ?, …)` with every key bound.
    func fetchIn(_ skus: [String]) throws -> Int {
        let statement = try Self.prepare(db!, "SELECT id, sku, title, price, stock FROM product WHERE sku IN (" +
                                         Array(repeating: "?", count: skus.count).joined(separator: ",") + ")")
        defer { sqlite3_finalize(statement) }
        for (i, sku) in skus.enumerated() { bind(statement, Int32(i + 1), sku) }
        var rows = 0
        while sqlite3_step(statement) == SQLITE_ROW {
            _ = sqlite3_column_text(statement, 2)
            rows += 1
        }
        return rows
    }

    /// The sku → id map of every product (`SELECT id, sku FROM product`).
    func idMap() throws -> [String: Int64] {
        let statement = try Self.prepare(db!, "SELECT id, sku FROM product")
        defer { sqlite3_finalize(statement) }
        var map: [String: Int64] = [:]
        while sqlite3_step(statement) == SQLITE_ROW {
            map[String(cString: sqlite3_column_text(statement, 1))] = sqlite3_column_int64(statement, 0)
        }
        return map
    }

    /// One lookup by key through a prepared statement; whether it found a row.
    func lookUp(_ sku: String) -> Bool {
        bind(selectBySKU, 1, sku)
        defer { sqlite3_reset(selectBySKU) }
        guard sqlite3_step(selectBySKU) == SQLITE_ROW else { return false }
        _ = sqlite3_column_text(selectBySKU, 2)
        return true
    }

    func counts() throws -> (products: Int, categories: Int, edges: Int) {
        func count(_ table: String) throws -> Int {
            let statement = try Self.prepare(db!, "SELECT count(*) FROM \(table)")
            defer { sqlite3_finalize(statement) }
            guard sqlite3_step(statement) == SQLITE_ROW else { throw failure() }
            return Int(sqlite3_column_int64(statement, 0))
        }
        return (try count("product"), try count("category"), try count("product_category"))
    }

    private func bind(_ statement: OpaquePointer, _ index: Int32, _ text: String) {
        sqlite3_bind_text(statement, index, text, -1, Self.transient)
    }

    private func failure() -> CatalogueFailure { CatalogueFailure(String(cString: sqlite3_errmsg(db))) }

    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    static func exec(_ db: OpaquePointer, _ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { throw CatalogueFailure("\(sql): \(String(cString: sqlite3_errmsg(db)))") }
    }

    static func prepare(_ db: OpaquePointer, _ sql: String) throws -> OpaquePointer {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw CatalogueFailure("\(sql.prefix(80)): \(String(cString: sqlite3_errmsg(db)))")
        }
        return statement
    }
}
