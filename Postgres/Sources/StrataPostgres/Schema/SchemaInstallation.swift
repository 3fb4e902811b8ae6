import Foundation
@_spi(StoreImplementation) import Strata
import PostgresNIO

/// What opening a store in a database found there.
struct InstalledSchema: Equatable {
    /// The store's identity, made when its tables were.
    var storeIdentifier: UUID
    /// Whether this open made the tables (the database had none of them).
    var created: Bool
    /// Whether this open migrated them from another model's (``SchemaMigration``).
    var migrated: Bool
}

/// Opening a store in a PostgreSQL database: makes the schema where there
/// is none, migrates it from the model it was made for by inference
/// (``SchemaMigration``), or checks the one there against the model.
///
/// All of it is one transaction, so a failure leaves the database as it was
/// (PostgreSQL's DDL is transactional). Processes that open one empty
/// database at once wait for each other on an advisory lock: one makes the
/// tables, the others then find them.
enum SchemaInstallation {
    /// The layout of Strata's tables this code writes and reads. A store
    /// of an earlier format is brought to it when opened
    /// (``FormatUpgrade``); one of a later format is refused.
    static let format = "4"
    /// The advisory lock's key (`pg_advisory_xact_lock`): "strata" in ASCII.
    static let lockKey: Int64 = 0x73_74_72_61_74_61

    /// Makes `schema` (of `model`) in the database `session` is connected
    /// to, migrates the one there from an earlier model, or checks it.
    /// Throws ``Strata/StrataError/Code/modelMismatch`` when the database
    /// holds a store of a model this one cannot be inferred from, of another
    /// format, or whose tables were changed outside Strata; nothing is
    /// changed then.
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
            guard let identifier = meta["store.identifier"].flatMap(UUID.init(uuidString:)) else {
                throw StrataError(code: .corruptRecord, message: "\(place): strata_meta has no store identifier")
            }
            do throws(StrataError) {
                switch meta["format"] {
                case format?: try makeRecording(on: session)
                case FormatUpgrade.formatThree?: try FormatUpgrade.fromFormatThree(on: session)
                case FormatUpgrade.formatTwo?: try FormatUpgrade.fromFormatTwo(on: session)
                case FormatUpgrade.formatOne?: try FormatUpgrade.fromFormatOne(on: session)
                case let other:
                    throw StrataError(code: .modelMismatch, message: """
                        \(place) holds a Strata store of format \(other ?? "unknown"), which this version does not read \
                        (it reads formats \(FormatUpgrade.formatOne) to \(format)): open it with the later version of Strata that wrote it
                        """)
                }
            } catch where (error.cause as? PostgresServerError)?.sqlState == "42501" {
                // A role that may save but does not own the tables.
                throw StrataError(code: .storage, message: """
                    \(place) needs Strata's own tables, functions or trigger brought to what this version makes \
                    (the store is of format \(meta["format"] ?? "unknown")), which only the role that owns them may do, \
                    and \(session.configuration.username) does not: open the store once as that role, then as \
                    \(session.configuration.username)
                    """, cause: error)
            }
            if let recorded = meta[schemaKey] {
                guard let bytes = Data(base64Encoded: recorded) else {
                    throw StrataError(code: .corruptRecord, message: "\(place): strata_meta's model schema is not base64")
                }
                if Array(bytes) != model.encodedSchema {
                    let storedModel = try ManagedObjectModel.decoding(encodedSchema: Array(bytes))
                    // A process still running an earlier version of the app
                    // must not migrate the tables back (dropping what the
                    // later model added, and its data).
                    let earlier = meta[earlierVersionsKey]?.split(separator: ",").map(String.init) ?? []
                    guard !earlier.contains(model.versionHash) || model.versionHash == storedModel.versionHash else {
                        throw StrataError(code: .modelMismatch, message: """
                            \(place) was migrated from this model (\(model.versionHash)) to a later one (\(storedModel.versionHash)): \
                            open it with the later model; a store is never migrated back
                            """)
                    }
                    try SchemaMigration.migrate(from: storedModel, to: model, schema: schema, on: session, place: place)
                    try record(model, on: session, earlierVersions: earlier + [storedModel.versionHash])
                    return InstalledSchema(storeIdentifier: identifier, created: false, migrated: true)
                }
            } else {
                // A store made before Strata kept its model beside it.
                guard meta["model.versionHash"] == model.versionHash else {
                    throw StrataError(code: .modelMismatch, message: """
                        \(place) holds a store of another model (its version hash \(meta["model.versionHash"] ?? "unknown"), \
                        this model's \(model.versionHash)), and does not record that model, which a migration needs: open it \
                        once with the model that made it (which records it), then with this one
                        """)
                }
            }
            let differences = try differences(from: schema, on: session)
            guard differences.isEmpty else {
                throw StrataError(code: .modelMismatch, message: """
                    the tables in \(place) differ from what the model makes, changed outside Strata: \
                    \(differences.prefix(5).joined(separator: "; "))\(differences.count > 5 ? "; and \(differences.count - 5) more" : ""). \
                    Put them back as the model has them
                    """)
            }
            if meta[schemaKey] == nil { try record(model, on: session) }
            return InstalledSchema(storeIdentifier: identifier, created: false, migrated: false)
        }
    }

    /// The key under which `strata_meta` holds the model's whole schema
    /// (``Strata/ManagedObjectModel/encodedSchema``, in base64), which a
    /// later model's migration is inferred from.
    static let schemaKey = "model.schema"
    /// The key under which `strata_meta` holds the version hashes of the
    /// models the store was migrated from, comma-separated: an open with one
    /// of them is refused rather than migrated back.
    static let earlierVersionsKey = "model.earlierVersions"

    /// Records `model` as the store's: its version and its schema, and the
    /// versions it was migrated from.
    private static func record(_ model: ManagedObjectModel, on session: PostgresSession, earlierVersions: [String]? = nil) throws(StrataError) {
        let meta = SQLIdentifier.quoted(StoreSchema.metaTable)
        var entries = [("model.versionHash", model.versionHash), (schemaKey, Data(model.encodedSchema).base64EncodedString())]
        if let earlierVersions { entries.append((earlierVersionsKey, earlierVersions.filter { $0 != model.versionHash }.joined(separator: ","))) }
        for (key, value) in entries {
            try session.query("""
                INSERT INTO \(unescaped: meta) (key, value) VALUES (\(key), \(value)) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value
                """, "recording the store's model")
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
            (schemaKey, Data(model.encodedSchema).base64EncodedString()),
            // The next commit's history number (``PostgresHistory``), and the
            // last one pruned (``PostgresStoreHistory``).
            ("history.next", "1"), ("history.pruned", "0"),
        ]
        for (key, value) in entries {
            try session.query(
                "INSERT INTO \(unescaped: SQLIdentifier.quoted(meta)) (key, value) VALUES (\(key), \(value))", "recording the store's model")
        }
        return InstalledSchema(storeIdentifier: identifier, created: true, migrated: false)
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

    /// Makes the functions and the trigger that record a save's
    /// transaction (``StoreSchema/recordingCreation``) where the store
    /// lacks one of them, or has one that is not as this version makes it
    /// (made before it changed, or the trigger disabled: saves would then
    /// go unnumbered, unseen by other processes). Looked up first: a role
    /// that may only read and write the tables still opens a store whose
    /// recording is this version's.
    private static func makeRecording(on session: PostgresSession) throws(StrataError) {
        let action = "making the functions that record a save's transaction"
        // In the schema the tables are made in, not anywhere on the search path.
        let rows = try session.query("""
            SELECT r.prosrc, r.proconfig, n.prosrc, n.proconfig, \
            EXISTS (SELECT FROM pg_trigger AS t WHERE t.tgname = \(StoreSchema.numberingTrigger) AND t.tgfoid = n.oid \
            AND t.tgrelid = to_regclass(quote_ident(current_schema()) || '.' || \(StoreSchema.historyTable)) \
            AND t.tgdeferrable AND t.tginitdeferred AND t.tgenabled = 'O' \
            AND t.tgtype = \(Int16(StoreSchema.numberingTriggerType)) \
            AND position(\(StoreSchema.numberingTriggerCondition) in pg_get_triggerdef(t.oid)) > 0 \
            AND t.tgargs = convert_to(\(StoreSchema.changesChannel), 'UTF8') || '\\x00'::bytea) \
            FROM (SELECT) AS one \
            LEFT JOIN pg_proc AS r ON r.oid = to_regprocedure(quote_ident(current_schema()) || '.' || \(StoreSchema.recordTransactionSignature)) \
            LEFT JOIN pg_proc AS n ON n.oid = to_regprocedure(quote_ident(current_schema()) || '.' || \(StoreSchema.numberTransactionSignature))
            """, action)
        guard let row = rows.first else { throw StrataError(code: .storage, message: "\(action): PostgreSQL returned no row") }
        let (recording, recordingSettings, numbering, numberingSettings, triggered) = try decode(
            row, as: (String?, [String]?, String?, [String]?, Bool).self, action)
        let settings = StoreSchema.recordTransactionSettings
        guard recording != StoreSchema.recordTransactionBody || recordingSettings != settings
            || numbering != StoreSchema.numberTransactionBody || numberingSettings != settings || !triggered else { return }
        for statement in StoreSchema.recordingCreation { try session.execute(statement, action) }
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
