@_spi(StoreImplementation) import Strata
import PostgresNIO

/// Objects as one statement reads them: the entity's row, with each
/// relationship kept elsewhere (``StoreSchema/PropertyLayout``) as an array
/// of keys from a subquery — so a read is one statement, at one state of
/// the database, whatever the number of objects and relationships.
enum StoredRows {
    /// The select list and `FROM` of the objects of the entity kept as
    /// `layout` says (the table named `t`), to which a caller adds its
    /// `WHERE`; what ``decode(_:of:layout:in:_:)`` reads back. A store
    /// makes it once per entity (``PostgresStore/selects``).
    static func select(_ layout: StoreSchema.EntityLayout) -> String {
        let q = SQLIdentifier.quoted
        let id = "t." + q(StoreSchema.idColumn)
        var items = [id, "t." + q(StoreSchema.versionColumn)]
        for property in layout.properties {
            switch property {
            case .column(let name):
                items.append("t." + q(name))
            case .joinTable(let table):
                items.append("ARRAY(SELECT j.target_id FROM \(q(table)) j WHERE j.source_id = \(id))")
            case .inverseJoinTable(let table):
                items.append("ARRAY(SELECT j.source_id FROM \(q(table)) j WHERE j.target_id = \(id))")
            case .inverseColumn(let table, let column):
                items.append("ARRAY(SELECT j.\(q(StoreSchema.idColumn)) FROM \(q(table)) j WHERE j.\(q(column)) = \(id))")
            }
        }
        return "SELECT \(items.joined(separator: ", ")) FROM \(q(layout.table)) t"
    }

    /// The objects in `rows`, read by a statement ``select(_:)`` began, in their order.
    static func decode(
        _ rows: [PostgresRow], of entity: EntityDescription, layout: StoreSchema.EntityLayout, in model: ManagedObjectModel, _ action: String
    ) throws(StrataError) -> [(ObjectID, StoredSnapshot)] {
        var destinations: [EntityDescription?] = []
        for property in entity.properties {
            if case .relationship(let relationship) = property {
                destinations.append(try destination(of: relationship, in: model))
            } else {
                destinations.append(nil)
            }
        }
        var found: [(ObjectID, StoredSnapshot)] = []
        found.reserveCapacity(rows.count)
        for row in rows {
            let cells = row.makeRandomAccess()
            let id = ObjectID(entity: entity, storedPrimaryKey: try key(binary(cells[0]), action))
            let version = try key(binary(cells[1]), action)
            var values: [PropertyValue] = []
            values.reserveCapacity(layout.properties.count)
            for (index, property) in layout.properties.enumerated() {
                let cell = binary(cells[index + 2])
                switch (entity.properties[index], property) {
                case (.attribute(let attribute), _):
                    values.append(try RowCoding.attributeValue(cell, attribute, of: id))
                case (.relationship, .column):
                    values.append(try RowCoding.target(cell, in: destinations[index]!))
                case (.relationship(let relationship), _):
                    let keys: [Int64]
                    do { keys = try cell.decode([Int64].self) } catch {
                        throw StrataError(code: .corruptRecord, message: "\(action): \(relationship.name) of \(id) is not a list of keys (\(error))")
                    }
                    let destination = destinations[index]!
                    if relationship.isToMany {
                        values.append(.objects(Set(keys.map { ObjectID(entity: destination, storedPrimaryKey: UInt64(bitPattern: $0)) })))
                    } else {
                        values.append(keys.first.map { .object(ObjectID(entity: destination, storedPrimaryKey: UInt64(bitPattern: $0))) } ?? .null)
                    }
                }
            }
            found.append((id, StoredSnapshot(values: values, version: version)))
        }
        return found
    }

    /// The stored rows of `ids`, all objects of `entity`, in one statement;
    /// an object not stored has none. `select`: the entity's
    /// ``select(_:)``, when the caller keeps it made.
    static func read(
        _ ids: [ObjectID], of entity: EntityDescription, in model: ManagedObjectModel, schema: StoreSchema,
        select: String? = nil, on session: PostgresSession
    ) throws(StrataError) -> [ObjectID: StoredSnapshot] {
        guard !ids.isEmpty else { return [:] }
        guard let layout = schema.layouts[entity.name] else {
            throw StrataError(code: .invalidArgument, message: "\(entity.name) is not an entity of the store's model")
        }
        let action = "reading \(entity.name) objects"
        var parameters = StatementParameters()
        parameters.append(ids.map { Int64(bitPattern: $0.storedPrimaryKey) })
        let sql = (select ?? Self.select(layout)) + " WHERE t.\(SQLIdentifier.quoted(StoreSchema.idColumn)) = ANY($1::bigint[])"
        let rows = try session.read(sql, parameters, action)
        return Dictionary(try decode(rows, of: entity, layout: layout, in: model, action)) { $1 }
    }

    /// The destination entity of `relationship`.
    static func destination(of relationship: RelationshipDescription, in model: ManagedObjectModel) throws(StrataError) -> EntityDescription {
        guard let destination = model.entity(named: relationship.destinationEntityName) else {
            throw StrataError(code: .invalidModel, message: "\(relationship.name) leads to \(relationship.destinationEntityName), which the model does not have")
        }
        return destination
    }

    /// `cell` as it came: in binary. postgres-nio asks for every column of
    /// every statement in binary, but labels a prepared statement's
    /// (``PreparedStatements``) as text — its bug #303, fixed after 1.33.2.
    static func binary(_ cell: PostgresCell) -> PostgresCell {
        guard cell.format != .binary else { return cell }
        return PostgresCell(bytes: cell.bytes, dataType: cell.dataType, format: .binary, columnName: cell.columnName, columnIndex: cell.columnIndex)
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
