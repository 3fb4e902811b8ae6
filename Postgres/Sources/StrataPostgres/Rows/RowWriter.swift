import Foundation
@_spi(StoreImplementation) import Strata
import PostgresNIO

/// Writes a save's rows in the caller's transaction, a few statements per
/// entity whatever the number of objects: its deletes and its updates each
/// as one statement over a `VALUES` list (split only past
/// ``maximumParameters``), its inserts as one over an array per column,
/// then the join-table rows of its to-manys kept in join tables.
///
/// An update or a delete names the version it read (`… AND strata_version
/// = v.expected`): a row another writer changed or deleted since is not
/// touched, and comes back among the conflicts, for the caller to roll back
/// and decide again (optimistic concurrency, as the coordinator's merge
/// policies expect). Entities go in name order and rows in key order, so
/// two writers that meet lock rows in one order. A relationship's other
/// side (a to-many read from its inverse's column) is not written: Strata
/// keeps both sides in step, and the side that keeps the column holds it.
enum RowWriter {
    /// The most bind parameters one statement takes (PostgreSQL's limit is
    /// 65,535).
    static let maximumParameters = 32_767

    /// Inserts to be written by a later statement of the save's (its
    /// history's), as parts of its `WITH`: one statement, and one round
    /// trip, fewer. Each part is an `INSERT`, its parameters numbered in
    /// `bindings`, which the later statement's own follow.
    struct FoldedInserts {
        var bindings = PostgresBindings()
        var parts: [String] = []
    }

    /// Writes `changes`; returns the updated and deleted objects whose row
    /// did not hold the version expected (nothing was written for those).
    /// With `folded`, the inserts are left there for a later statement to
    /// make (the save's others are sent, or run, here).
    static func write(
        _ changes: StoreChanges, schema: StoreSchema, on session: PostgresSession, folding folded: inout FoldedInserts?
    ) throws(StrataError) -> [ObjectID] {
        var groups: [String: EntityChanges] = [:]
        for (id, values) in changes.inserted { groups[id.entity.name, default: EntityChanges(id.entity)].inserted.append((id, values)) }
        for update in changes.updated { groups[update.id.entity.name, default: EntityChanges(update.id.entity)].updated.append(update) }
        for delete in changes.deleted { groups[delete.id.entity.name, default: EntityChanges(delete.id.entity)].deleted.append(delete) }
        var conflicts: [ObjectID] = []
        for name in groups.keys.sorted() {
            let group = groups[name]!
            guard let layout = schema.layouts[name], let table = schema.tables.first(where: { $0.name == layout.table }) else {
                throw StrataError(code: .invalidArgument, message: "\(name) is not an entity of the store's model")
            }
            let writer = EntityWriter(entity: group.entity, layout: layout, table: table, session: session)
            conflicts += try writer.delete(group.deleted.sorted { $0.id.storedPrimaryKey < $1.id.storedPrimaryKey })
            let updated = group.updated.sorted { $0.id.storedPrimaryKey < $1.id.storedPrimaryKey }
            let written = try writer.update(updated)
            conflicts += updated.map(\.id).filter { !written.contains($0) }
            let inserted = group.inserted.sorted { $0.id.storedPrimaryKey < $1.id.storedPrimaryKey }
            try writer.insert(inserted, folding: &folded)
            try writer.writeJoinTables(
                replacing: updated.filter { written.contains($0.id) }.map { ($0.id, $0.values) }, adding: inserted)
        }
        return conflicts
    }

    /// One entity's part of a save.
    private struct EntityChanges {
        let entity: EntityDescription
        var inserted: [(id: ObjectID, values: [PropertyValue])] = []
        var updated: [StoreChanges.Update] = []
        var deleted: [StoreChanges.Delete] = []
        init(_ entity: EntityDescription) { self.entity = entity }
    }

    /// The statements of one entity's part of a save.
    private struct EntityWriter {
        let entity: EntityDescription
        let layout: StoreSchema.EntityLayout
        let table: StoreSchema.Table
        let session: PostgresSession

        /// The entity's own columns: each property kept in one, its name and SQL type.
        var columns: [(index: Int, name: String, type: String)] {
            layout.properties.enumerated().compactMap { index, property in
                guard case .column(let name) = property, let column = table.columns.first(where: { $0.name == name }) else { return nil }
                return (index, name, column.type)
            }
        }

        let q = SQLIdentifier.quoted
        var id: String { q(StoreSchema.idColumn) }
        var version: String { q(StoreSchema.versionColumn) }

        /// Deletes the rows still at their expected versions; returns the others.
        func delete(_ deletes: [StoreChanges.Delete]) throws(StrataError) -> [ObjectID] {
            var gone: Set<ObjectID> = []
            for chunk in chunks(deletes, parametersEach: 2) {
                var bindings = PostgresBindings()
                var rows: [String] = []
                for delete in chunk {
                    bindings.append(Int64(bitPattern: delete.id.storedPrimaryKey))
                    bindings.append(Int64(bitPattern: delete.expectedVersion))
                    rows.append("($\(bindings.count - 1)::bigint, $\(bindings.count)::bigint)")
                }
                let deleted = try session.query(PostgresQuery(unsafeSQL: """
                    DELETE FROM \(q(layout.table)) AS t USING (VALUES \(rows.joined(separator: ", "))) AS v(k, expected) \
                    WHERE t.\(id) = v.k AND t.\(version) = v.expected RETURNING t.\(id)
                    """, binds: bindings), "deleting \(entity.name) objects")
                gone.formUnion(try keys(deleted, "deleting \(entity.name) objects"))
            }
            return deletes.map(\.id).filter { !gone.contains($0) }
        }

        /// Updates the rows still at their expected versions; returns those it updated.
        func update(_ updates: [StoreChanges.Update]) throws(StrataError) -> Set<ObjectID> {
            let columns = columns
            var written: Set<ObjectID> = []
            for chunk in chunks(updates, parametersEach: 2 + columns.count) {
                var bindings = PostgresBindings()
                var rows: [String] = []
                for update in chunk {
                    bindings.append(Int64(bitPattern: update.id.storedPrimaryKey))
                    bindings.append(Int64(bitPattern: update.expectedVersion))
                    var row = ["$\(bindings.count - 1)::bigint", "$\(bindings.count)::bigint"]
                    for column in columns {
                        try RowCoding.bind(update.values[column.index], of: entity.properties[column.index], for: update.id, to: &bindings)
                        row.append("$\(bindings.count)::\(column.type)")
                    }
                    rows.append("(" + row.joined(separator: ", ") + ")")
                }
                let aliases = ["k", "expected"] + columns.indices.map { "v\($0)" }
                let sets = ["\(version) = t.\(version) + 1"] + columns.enumerated().map { "\(q($1.name)) = v.v\($0)" }
                let updated = try session.query(PostgresQuery(unsafeSQL: """
                    UPDATE \(q(layout.table)) AS t SET \(sets.joined(separator: ", ")) \
                    FROM (VALUES \(rows.joined(separator: ", "))) AS v(\(aliases.joined(separator: ", "))) \
                    WHERE t.\(id) = v.k AND t.\(version) = v.expected RETURNING t.\(id)
                    """, binds: bindings), "updating \(entity.name) objects")
                written.formUnion(try keys(updated, "updating \(entity.name) objects"))
            }
            return written
        }

        /// Inserts the rows, at version 1: left in `folded` when there is
        /// one, or sent.
        func insert(_ inserts: [(id: ObjectID, values: [PropertyValue])], folding folded: inout FoldedInserts?) throws(StrataError) {
            guard !inserts.isEmpty else { return }
            let columns = columns
            let names = ([StoreSchema.idColumn, StoreSchema.versionColumn] + columns.map(\.name)).map(q).joined(separator: ", ")
            // Taken out while it grows, so that its buffers are not copied.
            if var into = folded.take() {
                into.parts.append(try columnarInsert(inserts, names: names, into: &into.bindings))
                folded = into
                return
            }
            var bindings = PostgresBindings()
            let sql = try columnarInsert(inserts, names: names, into: &bindings)
            // Sent, not waited for: the save's next wait (its commit)
            // throws this one's failure.
            session.send(PostgresQuery(unsafeSQL: sql, binds: bindings), "inserting \(entity.name) objects")
        }

        /// The rows as one array per column, unnested: a statement whose
        /// text, and so the server's parse and plan, do not grow with the
        /// rows (a `VALUES` list has a parameter per cell for the server to
        /// parse, analyze and plan at every save). A null goes
        /// as a placeholder in its column's array and a flag in an array of
        /// the column's nulls (postgres-nio binds no array holding a null).
        /// Its parameters are appended to `bindings`, and numbered after
        /// those there already.
        func columnarInsert(
            _ rows: [(id: ObjectID, values: [PropertyValue])], names: String, into bindings: inout PostgresBindings
        ) throws(StrataError) -> String {
            bindings.append(rows.map { Int64(bitPattern: $0.id.storedPrimaryKey) })
            var unnested = ["$\(bindings.count)::bigint[]"], aliases = ["k"], selected = ["u.k", "1"]
            for (n, column) in columns.enumerated() {
                let property = entity.properties[column.index]
                var nulls: [Bool] = []
                nulls.reserveCapacity(rows.count)
                func array<T: PostgresArrayEncodable & PostgresNonThrowingEncodable>(
                    _ placeholder: T, _ convert: (PropertyValue) -> T?
                ) throws(StrataError) -> [T] {
                    var values: [T] = []
                    values.reserveCapacity(rows.count)
                    for (id, row) in rows {
                        let cell = row[column.index]
                        if case .null = cell {
                            values.append(placeholder)
                            nulls.append(true)
                            continue
                        }
                        try RowCoding.check(cell, of: property, for: id)
                        guard let value = convert(cell) else { throw RowCoding.unsupported(cell, of: property, for: id) }
                        values.append(value)
                        nulls.append(false)
                    }
                    return values
                }
                switch column.type {
                case "text": bindings.append(try array("") { if case .string(let s) = $0 { s } else { nil } })
                case "bigint":
                    bindings.append(try array(Int64(0)) { cell in
                        switch cell {
                        case .integer(let i): Int64(i)
                        case .object(let target): Int64(bitPattern: target.storedPrimaryKey)
                        default: nil
                        }
                    })
                case "integer": bindings.append(try array(Int32(0)) { if case .integer(let i) = $0 { Int32(truncatingIfNeeded: i) } else { nil } })
                case "smallint": bindings.append(try array(Int16(0)) { if case .integer(let i) = $0 { Int16(truncatingIfNeeded: i) } else { nil } })
                case "double precision": bindings.append(try array(0.0) { if case .double(let d) = $0 { d } else { nil } })
                case "boolean": bindings.append(try array(false) { if case .bool(let b) = $0 { b } else { nil } })
                case "timestamp with time zone": bindings.append(try array(Date(timeIntervalSince1970: 0)) { if case .date(let d) = $0 { d } else { nil } })
                case "uuid": bindings.append(try array(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))) { if case .uuid(let u) = $0 { u } else { nil } })
                case "bytea": bindings.append(try array(ByteBuffer()) { if case .data(let d) = $0 { ByteBuffer(bytes: d) } else { nil } })
                default:
                    throw StrataError(code: .invalidArgument, message: "\(entity.name).\(property.name): Strata writes no column of type \(column.type)")
                }
                unnested.append("$\(bindings.count)::\(column.type)[]")
                aliases.append("v\(n)")
                if nulls.contains(true) {
                    bindings.append(nulls)
                    unnested.append("$\(bindings.count)::boolean[]")
                    aliases.append("n\(n)")
                    selected.append("CASE WHEN u.n\(n) THEN NULL ELSE u.v\(n) END")
                } else {
                    selected.append("u.v\(n)")
                }
            }
            return """
                INSERT INTO \(q(layout.table)) (\(names)) SELECT \(selected.joined(separator: ", ")) \
                FROM unnest(\(unnested.joined(separator: ", "))) AS u(\(aliases.joined(separator: ", ")))
                """
        }

        /// The join-table rows of the to-manys kept in join tables: the
        /// targets the objects hold now, the updated ones' old rows removed first.
        func writeJoinTables(
            replacing updated: [(id: ObjectID, values: [PropertyValue])], adding inserted: [(id: ObjectID, values: [PropertyValue])]
        ) throws(StrataError) {
            for (index, property) in layout.properties.enumerated() {
                guard case .joinTable(let joinTable) = property else { continue }
                let action = "writing \(entity.name).\(entity.properties[index].name)"
                if !updated.isEmpty {
                    let keys = updated.map { Int64(bitPattern: $0.id.storedPrimaryKey) }
                    session.send("DELETE FROM \(unescaped: q(joinTable)) WHERE source_id = ANY(\(keys)::bigint[])", action)
                }
                var sources: [Int64] = [], targets: [Int64] = []
                for (id, values) in updated + inserted {
                    guard case .objects(let held) = values[index] else { continue }
                    for target in held.map(\.storedPrimaryKey).sorted() {
                        sources.append(Int64(bitPattern: id.storedPrimaryKey))
                        targets.append(Int64(bitPattern: target))
                    }
                }
                guard !sources.isEmpty else { continue }
                session.send("""
                    INSERT INTO \(unescaped: q(joinTable)) (source_id, target_id) SELECT * FROM unnest(\(sources)::bigint[], \(targets)::bigint[])
                    """, action)
            }
        }

        /// `items` in runs whose parameters stay within one statement's limit.
        private func chunks<T>(_ items: [T], parametersEach: Int) -> [ArraySlice<T>] {
            let size = max(1, RowWriter.maximumParameters / max(1, parametersEach))
            return stride(from: 0, to: items.count, by: size).map { items[$0..<min($0 + size, items.count)] }
        }

        /// The objects whose keys `rows` return.
        private func keys(_ rows: [PostgresRow], _ action: String) throws(StrataError) -> [ObjectID] {
            try rows.map { (row) throws(StrataError) -> ObjectID in
                ObjectID(entity: entity, storedPrimaryKey: UInt64(bitPattern: try SchemaInstallation.decode(row, as: Int64.self, action)))
            }
        }
    }
}
