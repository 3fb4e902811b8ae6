@_spi(StoreImplementation) import Strata
import PostgresNIO

/// What one save writes, as rows: objects inserted (at version 1), objects
/// updated and deleted with the version the save read, which the row must
/// still hold.
struct RowChanges {
    struct Update {
        var id: ObjectID
        var values: [PropertyValue]
        var expectedVersion: UInt64
    }

    struct Delete {
        var id: ObjectID
        var expectedVersion: UInt64
    }

    var inserted: [(id: ObjectID, values: [PropertyValue])] = []
    var updated: [Update] = []
    var deleted: [Delete] = []
}

/// Writes a save's rows in the caller's transaction: each object's row in
/// its entity's table, and the relationships kept in join tables.
///
/// An update or a delete names the version it read (`… WHERE strata_version
/// = $n`): a row another writer changed or deleted since is not touched, and
/// comes back among the conflicts, for the caller to roll back and decide
/// again (optimistic concurrency, as the coordinator's merge policies
/// expect). Rows are written in (entity, key) order, so two writers that
/// meet lock them in one order and never deadlock. A relationship's other
/// side (a to-many read from its inverse's column) is not written: Strata
/// keeps both sides in step, and the side that keeps the column holds it.
enum RowWriter {
    /// Writes `changes`; returns the updated and deleted objects whose row
    /// did not hold the version expected (nothing was written for those).
    static func write(
        _ changes: RowChanges, schema: StoreSchema, on session: PostgresSession
    ) throws(StrataError) -> [ObjectID] {
        var conflicts: [ObjectID] = []
        let q = SQLIdentifier.quoted
        for delete in changes.deleted.sorted(by: { order($0.id, $1.id) }) {
            let layout = try layout(of: delete.id, in: schema)
            var bindings = PostgresBindings()
            bindings.append(Int64(bitPattern: delete.id.storedPrimaryKey))
            bindings.append(Int64(bitPattern: delete.expectedVersion))
            let deleted = try session.query(PostgresQuery(unsafeSQL: """
                DELETE FROM \(q(layout.table)) WHERE \(q(StoreSchema.idColumn)) = $1 AND \(q(StoreSchema.versionColumn)) = $2 \
                RETURNING \(q(StoreSchema.idColumn))
                """, binds: bindings), "deleting \(delete.id)")
            if deleted.isEmpty { conflicts.append(delete.id) }
        }
        for update in changes.updated.sorted(by: { order($0.id, $1.id) }) {
            let layout = try layout(of: update.id, in: schema)
            var bindings = PostgresBindings()
            bindings.append(Int64(bitPattern: update.id.storedPrimaryKey))
            bindings.append(Int64(bitPattern: update.expectedVersion))
            var sets = ["\(q(StoreSchema.versionColumn)) = \(q(StoreSchema.versionColumn)) + 1"]
            for (index, property) in layout.properties.enumerated() {
                guard case .column(let name) = property else { continue }
                try RowCoding.bind(update.values[index], of: update.id.entity.properties[index], for: update.id, to: &bindings)
                sets.append("\(q(name)) = $\(bindings.count)")
            }
            let updated = try session.query(PostgresQuery(unsafeSQL: """
                UPDATE \(q(layout.table)) SET \(sets.joined(separator: ", ")) \
                WHERE \(q(StoreSchema.idColumn)) = $1 AND \(q(StoreSchema.versionColumn)) = $2 RETURNING \(q(StoreSchema.idColumn))
                """, binds: bindings), "updating \(update.id)")
            guard !updated.isEmpty else {
                conflicts.append(update.id)
                continue
            }
            try writeJoinTables(of: update.id, update.values, layout, replacing: true, on: session)
        }
        for (id, values) in changes.inserted.sorted(by: { order($0.id, $1.id) }) {
            let layout = try layout(of: id, in: schema)
            var bindings = PostgresBindings()
            bindings.append(Int64(bitPattern: id.storedPrimaryKey))
            var names = [StoreSchema.idColumn, StoreSchema.versionColumn]
            var placeholders = ["$1", "1"]
            for (index, property) in layout.properties.enumerated() {
                guard case .column(let name) = property else { continue }
                try RowCoding.bind(values[index], of: id.entity.properties[index], for: id, to: &bindings)
                names.append(name)
                placeholders.append("$\(bindings.count)")
            }
            try session.query(PostgresQuery(unsafeSQL: """
                INSERT INTO \(q(layout.table)) (\(names.map(q).joined(separator: ", "))) VALUES (\(placeholders.joined(separator: ", ")))
                """, binds: bindings), "inserting \(id)")
            try writeJoinTables(of: id, values, layout, replacing: false, on: session)
        }
        return conflicts
    }

    /// The join-table rows of `id`'s to-manys kept in join tables: its
    /// targets now (the old rows first removed, for an update).
    private static func writeJoinTables(
        of id: ObjectID, _ values: [PropertyValue], _ layout: StoreSchema.EntityLayout, replacing: Bool, on session: PostgresSession
    ) throws(StrataError) {
        let q = SQLIdentifier.quoted
        let key = Int64(bitPattern: id.storedPrimaryKey)
        for (index, property) in layout.properties.enumerated() {
            guard case .joinTable(let table) = property else { continue }
            if replacing {
                try session.query("DELETE FROM \(unescaped: q(table)) WHERE source_id = \(key)", "updating \(id)'s \(table)")
            }
            guard case .objects(let targets) = values[index], !targets.isEmpty else { continue }
            let keys = targets.map { Int64(bitPattern: $0.storedPrimaryKey) }.sorted()
            try session.query("""
                INSERT INTO \(unescaped: q(table)) (source_id, target_id) SELECT \(key), unnest(\(keys)::bigint[])
                """, "writing \(id)'s \(table)")
        }
    }

    private static func layout(of id: ObjectID, in schema: StoreSchema) throws(StrataError) -> StoreSchema.EntityLayout {
        guard let layout = schema.layouts[id.entity.name] else {
            throw StrataError(code: .invalidArgument, message: "\(id.entity.name) is not an entity of the store's model")
        }
        return layout
    }

    /// (entity, key) order: the order rows are locked in.
    private static func order(_ a: ObjectID, _ b: ObjectID) -> Bool {
        (a.entity.name, a.storedPrimaryKey) < (b.entity.name, b.storedPrimaryKey)
    }
}
