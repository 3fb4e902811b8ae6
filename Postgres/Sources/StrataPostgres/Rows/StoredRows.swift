@_spi(StoreImplementation) import Strata
import PostgresNIO

/// Objects read by ID: the entity's row, then each relationship from where
/// it is kept (``StoreSchema/PropertyLayout``) — one statement per table,
/// whatever the number of objects. Several statements read one state only
/// inside one transaction of `REPEATABLE READ` isolation; the caller opens it.
enum StoredRows {
    /// The stored rows of `ids`, all objects of `entity`; an object not
    /// stored has none.
    static func read(
        _ ids: [ObjectID], of entity: EntityDescription, in model: ManagedObjectModel, schema: StoreSchema,
        on session: PostgresSession
    ) throws(StrataError) -> [ObjectID: StoredSnapshot] {
        guard !ids.isEmpty else { return [:] }
        guard let layout = schema.layouts[entity.name] else {
            throw StrataError(code: .invalidArgument, message: "\(entity.name) is not an entity of the store's model")
        }
        let q = SQLIdentifier.quoted
        let keys = ids.map { Int64(bitPattern: $0.storedPrimaryKey) }
        let action = "reading \(entity.name) objects"
        // The entity's own columns, in property order.
        var columns: [(index: Int, name: String)] = []
        for (index, property) in layout.properties.enumerated() {
            if case .column(let name) = property { columns.append((index, name)) }
        }
        let select = ([StoreSchema.idColumn, StoreSchema.versionColumn] + columns.map(\.name)).map(q).joined(separator: ", ")
        var bindings = PostgresBindings()
        bindings.append(keys)
        let rows = try session.query(
            PostgresQuery(unsafeSQL: "SELECT \(select) FROM \(q(layout.table)) WHERE \(q(StoreSchema.idColumn)) = ANY($1)", binds: bindings),
            action)
        var found: [ObjectID: StoredSnapshot] = [:]
        found.reserveCapacity(rows.count)
        let initial = entity.properties.map { property -> PropertyValue in
            if case .relationship(let relationship) = property, relationship.isToMany { return .objects([]) }
            return .null
        }
        for row in rows {
            let cells = row.makeRandomAccess()
            let id = ObjectID(entity: entity, storedPrimaryKey: try key(cells[0], action))
            let version = try key(cells[1], action)
            var values = initial
            for (position, column) in columns.enumerated() {
                let cell = cells[position + 2]
                switch entity.properties[column.index] {
                case .attribute(let attribute):
                    values[column.index] = try RowCoding.attributeValue(cell, attribute, of: id)
                case .relationship(let relationship):
                    values[column.index] = try RowCoding.target(cell, in: try destination(of: relationship, in: model))
                }
            }
            found[id] = StoredSnapshot(values: values, version: version)
        }
        guard !found.isEmpty else { return [:] }
        // Each relationship kept elsewhere: the pairs (object, target) of the objects found.
        let foundKeys = found.keys.map { Int64(bitPattern: $0.storedPrimaryKey) }
        for (index, property) in layout.properties.enumerated() {
            let sql: String
            switch property {
            case .column: continue
            case .joinTable(let table):
                sql = "SELECT source_id, target_id FROM \(q(table)) WHERE source_id = ANY($1)"
            case .inverseJoinTable(let table):
                sql = "SELECT target_id, source_id FROM \(q(table)) WHERE target_id = ANY($1)"
            case .inverseColumn(let table, let column):
                sql = "SELECT \(q(column)), \(q(StoreSchema.idColumn)) FROM \(q(table)) WHERE \(q(column)) = ANY($1)"
            }
            guard case .relationship(let relationship) = entity.properties[index] else { continue }
            let destination = try destination(of: relationship, in: model)
            var bindings = PostgresBindings()
            bindings.append(foundKeys)
            for pair in try session.query(PostgresQuery(unsafeSQL: sql, binds: bindings), action) {
                let cells = pair.makeRandomAccess()
                let owner = ObjectID(entity: entity, storedPrimaryKey: try key(cells[0], action))
                let target = ObjectID(entity: destination, storedPrimaryKey: try key(cells[1], action))
                if relationship.isToMany {
                    if case .objects(var targets) = found[owner]?.values[index] {
                        found[owner]?.values[index] = .null  // one reference to the set while it grows
                        targets.insert(target)
                        found[owner]?.values[index] = .objects(targets)
                    }
                } else {
                    found[owner]?.values[index] = .object(target)
                }
            }
        }
        return found
    }

    /// The destination entity of `relationship`.
    static func destination(of relationship: RelationshipDescription, in model: ManagedObjectModel) throws(StrataError) -> EntityDescription {
        guard let destination = model.entity(named: relationship.destinationEntityName) else {
            throw StrataError(code: .invalidModel, message: "\(relationship.name) leads to \(relationship.destinationEntityName), which the model does not have")
        }
        return destination
    }

    /// A `bigint` key or version in `cell`.
    private static func key(_ cell: PostgresCell, _ action: String) throws(StrataError) -> UInt64 {
        do {
            return UInt64(bitPattern: try cell.decode(Int64.self))
        } catch {
            throw StrataError(code: .corruptRecord, message: "\(action): a key column holds no key (\(error))")
        }
    }
}
