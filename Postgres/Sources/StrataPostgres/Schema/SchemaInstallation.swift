import Foundation
@_spi(StoreImplementation) import Strata
import PostgresNIO

/// What opening a store in a database found there.
struct InstalledSchema: Equatable {
    /// The store's identity, made when its tables were.
    var storeIdentifier: UUID
    /// Whether this open made the tables (the database had none of them).
    var created: Bool
}

/// Opening a store in a PostgreSQL database: makes the schema where there
/// is none, or checks the one there against the model.
///
/// All of it is one transaction, so a failure leaves the database as it was
/// (PostgreSQL's DDL is transactional). Processes that open one empty
/// database at once wait for each other on an advisory lock: one makes the
/// tables, the others then find them.
enum SchemaInstallation {
    /// The layout of Strata's tables this code writes and reads.
    static let format = "1"
    /// The advisory lock's key (`pg_advisory_xact_lock`): "strata" in ASCII.
    static let lockKey: Int64 = 0x73_74_72_61_74_61

    /// Makes `schema` (of `model`) in the database `session` is connected
    /// to, or checks the one there. Throws
    /// ``Strata/StrataError/Code/modelMismatch`` when the database holds a
    /// store of another model, of another format, or whose tables were
    /// changed outside Strata; nothing is changed then.
    static func prepare(
        _ schema: StoreSchema, of model: ManagedObjectModel, on session: PostgresSession
    ) throws(StrataError) -> InstalledSchema {
        try session.transaction("opening the store") { () throws(StrataError) -> InstalledSchema in
            try session.query("SELECT pg_advisory_xact_lock(\(lockKey))", "waiting for another process opening the store")
            let exists = try session.query(
                "SELECT to_regclass(\(SQLIdentifier.quoted(StoreSchema.metaTable))) IS NOT NULL", "looking for Strata's tables")
            guard try decode(exists.first, as: Bool.self, "looking for Strata's tables") else {
                return try create(schema, of: model, on: session)
            }
            let meta = try readMeta(on: session)
            let place = "the database at \(session.configuration.endpoint) (\(session.configuration.database ?? session.configuration.username))"
            guard meta["format"] == format else {
                throw StrataError(code: .modelMismatch, message: """
                    \(place) holds a Strata store of format \(meta["format"] ?? "unknown"); this version reads format \(format) only
                    """)
            }
            guard meta["model.versionHash"] == model.versionHash else {
                throw StrataError(code: .modelMismatch, message: """
                    \(place) holds a store of another model (its version hash \(meta["model.versionHash"] ?? "unknown"), \
                    this model's \(model.versionHash)): open it with the model that made it (migrating a PostgreSQL store \
                    is not built yet)
                    """)
            }
            guard let identifier = meta["store.identifier"].flatMap(UUID.init(uuidString:)) else {
                throw StrataError(code: .corruptRecord, message: "\(place): strata_meta has no store identifier")
            }
            let differences = try differences(from: schema, on: session)
            guard differences.isEmpty else {
                throw StrataError(code: .modelMismatch, message: """
                    the tables in \(place) differ from what the model makes, changed outside Strata: \
                    \(differences.prefix(5).joined(separator: "; "))\(differences.count > 5 ? "; and \(differences.count - 5) more" : ""). \
                    Put them back as the model has them
                    """)
            }
            return InstalledSchema(storeIdentifier: identifier, created: false)
        }
    }

    private static func create(
        _ schema: StoreSchema, of model: ManagedObjectModel, on session: PostgresSession
    ) throws(StrataError) -> InstalledSchema {
        for statement in schema.creationStatements {
            try session.execute(statement, "creating the store's tables")
        }
        let identifier = UUID()
        let meta = StoreSchema.metaTable
        let entries = [
            ("format", format), ("model.versionHash", model.versionHash), ("store.identifier", identifier.uuidString),
            // The next save's history number (``PostgresHistory``).
            ("history.next", "1"),
        ]
        for (key, value) in entries {
            try session.query(
                "INSERT INTO \(unescaped: SQLIdentifier.quoted(meta)) (key, value) VALUES (\(key), \(value))", "recording the store's model")
        }
        return InstalledSchema(storeIdentifier: identifier, created: true)
    }

    private static func readMeta(on session: PostgresSession) throws(StrataError) -> [String: String] {
        let rows = try session.query(
            "SELECT key, value FROM \(unescaped: SQLIdentifier.quoted(StoreSchema.metaTable))", "reading Strata's own table")
        var meta: [String: String] = [:]
        for row in rows {
            let (key, value) = try decode(row, as: (String, String).self, "reading Strata's own table")
            meta[key] = value
        }
        return meta
    }

    /// How the tables in the database differ from `schema`'s, in words: a
    /// table or column missing, a column of another type, nullability or
    /// collation. Columns the schema does not have are let be (another
    /// service's, with defaults of their own).
    static func differences(from schema: StoreSchema, on session: PostgresSession) throws(StrataError) -> [String] {
        let action = "comparing the tables with the model"
        let rows = try session.query("""
            SELECT table_name::text, column_name::text, data_type::text, is_nullable::text, collation_name::text
            FROM information_schema.columns
            WHERE table_schema = current_schema() AND table_name = ANY(\(schema.tables.map(\.name)))
            """, action)
        var found: [String: [String: (type: String, nullable: Bool, collation: String?)]] = [:]
        for row in rows {
            let (table, column, type, nullable, collation) = try decode(row, as: (String, String, String, String, String?).self, action)
            found[table, default: [:]][column] = (type, nullable == "YES", collation)
        }
        var differences: [String] = []
        for table in schema.tables {
            guard let columns = found[table.name] else {
                differences.append("table \(table.name) is missing")
                continue
            }
            for column in table.columns {
                guard let actual = columns[column.name] else {
                    differences.append("\(table.name) has no column \(column.name) (\(column.type))")
                    continue
                }
                if actual.type != column.type {
                    differences.append("\(table.name).\(column.name) is \(actual.type), the model makes \(column.type)")
                } else if actual.nullable != column.isNullable {
                    differences.append("\(table.name).\(column.name) is \(actual.nullable ? "" : "NOT ")NULL, the model makes it \(column.isNullable ? "" : "NOT ")NULL")
                } else if column.isText, actual.collation != "C" {
                    differences.append("\(table.name).\(column.name) is collated \(actual.collation ?? "by default"), Strata needs \"C\" (Swift's order)")
                }
            }
        }
        return differences
    }

    /// `row` decoded as `type`, or the typed error for `action`.
    static func decode<T: PostgresDecodable>(_ row: PostgresRow?, as type: T.Type, _ action: String) throws(StrataError) -> T {
        guard let row else { throw StrataError(code: .storage, message: "\(action): PostgreSQL returned no row") }
        do {
            return try row.decode(T.self)
        } catch {
            throw StrataError(code: .storage, message: "\(action): a row PostgreSQL returned is not as Strata wrote it (\(error))")
        }
    }

    /// `row`'s columns decoded as the tuple `types`, or the typed error for `action`.
    static func decode<each T: PostgresDecodable>(_ row: PostgresRow, as types: (repeat each T).Type, _ action: String) throws(StrataError) -> (repeat each T) {
        do {
            return try row.decode(types)
        } catch {
            throw StrataError(code: .storage, message: "\(action): a row PostgreSQL returned is not as Strata wrote it (\(error))")
        }
    }
}
