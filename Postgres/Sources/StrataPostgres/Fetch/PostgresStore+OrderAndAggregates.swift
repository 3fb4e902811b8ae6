@_spi(StoreImplementation) import Strata
import PostgresNIO

/// A fetch's page in its sort order, and groups and aggregates (a count
/// among them), as PostgreSQL answers them: `ORDER BY … LIMIT`, `GROUP BY` —
/// so the twenty most visited of a million rows are twenty rows read, not
/// a million read and sorted in Swift, and a count reads no row.
extension PostgresStore {
    /// Calls `body` with the stored objects of `entity` that may pass
    /// `predicate`, in `order` (Swift's order of each key's values — nil
    /// first, NaN last, strings by their canonical composition's scalars —
    /// reversed for a descending key, ties by primary key), until it
    /// returns false. The first page, of `expecting` objects, is one
    /// statement; where the caller wants more, the pages are read again
    /// from the start in one `REPEATABLE READ` transaction, so every
    /// object comes from one state of the database. Nil where a key's
    /// attribute has no order PostgreSQL gives as Swift's.
    func forEachStored(
        of entity: EntityDescription, matching predicate: StorePredicate?, orderedBy order: [StoreSortKey], expecting: Int,
        _ body: (ObjectID, StoredSnapshot) throws(StrataError) -> Bool
    ) throws(StrataError) -> Bool? {
        guard let (query, isExact, layout) = try orderedQuery(entity, matching: predicate, orderedBy: order) else { return nil }
        let action = "reading \(entity.name) objects in order"
        let readPage = { (session: PostgresSession, offset: Int, limit: Int) throws(StrataError) -> [(ObjectID, StoredSnapshot)] in
            var parameters = query.parameters
            parameters.append(Int64(limit))
            parameters.append(Int64(offset))
            let rows = try session.read(query.sql, parameters, action)
            self.scannedRows.add(rows.count, ordering: .relaxed)
            return try StoredRows.decode(rows, of: entity, layout: layout, in: self.model, action)
        }
        let firstSize = max(1, min(expecting, scanPageSize))
        let first = try pool.withSession { (session) throws(StrataError) in try readPage(session, 0, firstSize) }
        for (id, row) in first {
            guard try body(id, row) else { return isExact }
        }
        guard first.count == firstSize else { return isExact }
        // More wanted than the first page held: all of it again, at one state.
        try reading(action) { (session) throws(StrataError) in
            var offset = 0, size = firstSize, skip = first.count
            while true {
                let rows = try readPage(session, offset, size)
                for (id, row) in rows.dropFirst(skip) {
                    guard try body(id, row) else { return }
                }
                guard rows.count == size else { return }
                (offset, skip, size) = (offset + size, 0, scanPageSize)
            }
        }
        return isExact
    }

    /// The stored objects of `entity` that pass `predicate`, but for
    /// `excluding`, grouped by their values of `properties`, with `columns`
    /// computed per group: one `GROUP BY` (none without properties: one
    /// row even for no object). Text is grouped and ordered in NFC, as
    /// Swift groups and orders strings; an integer sum comes back as text
    /// (PostgreSQL's `numeric`), an `Int64` or, past 64 bits, a double. Nil
    /// where the predicate does not translate exactly, or a property is
    /// not one PostgreSQL groups, sums or orders as Swift does: a double
    /// grouped (one group of every NaN there), a Boolean, UUID or bytes
    /// summed or ordered.
    func aggregates(
        of entity: EntityDescription, matching predicate: StorePredicate?, groupedBy properties: [Int],
        computing columns: [StoreAggregate], excluding: [ObjectID]
    ) throws(StrataError) -> [StoreGroup]? {
        let layout = try self.layout(of: entity)
        func attribute(_ property: Int) -> (column: String, attribute: AttributeDescription)? {
            guard case .column(let name) = layout.properties[property], case .attribute(let attribute) = entity.properties[property] else { return nil }
            return ("t." + SQLIdentifier.quoted(name), attribute)
        }
        var grouped: [(expression: String, attribute: AttributeDescription)] = []
        for property in properties {
            guard let (column, attribute) = attribute(property) else { return nil }
            switch attribute.type {
            case .string: grouped.append(("normalize(\(column), NFC)", attribute))
            case .integer16, .integer32, .integer64, .bool, .date, .uuid: grouped.append((column, attribute))
            case .double, .binaryData: return nil
            }
        }
        // Per column, what is selected — the value, then how many values it
        // is over — and how the value reads back.
        enum Reading { case count, integerSum, doubleSum, extreme(AttributeDescription) }
        var selected: [String] = []
        var readings: [Reading] = []
        for column in columns {
            switch column {
            case .count:
                selected.append("count(*)::bigint, count(*)::bigint")
                readings.append(.count)
            case .sum(let property):
                guard let (expression, attribute) = attribute(property) else { return nil }
                switch attribute.type {
                case .integer16, .integer32, .integer64:
                    selected.append("sum(\(expression))::text, count(\(expression))::bigint")
                    readings.append(.integerSum)
                case .double:
                    selected.append("sum(\(expression)), count(\(expression))::bigint")
                    readings.append(.doubleSum)
                default: return nil
                }
            case .minimum(let property), .maximum(let property):
                guard let (expression, attribute) = attribute(property) else { return nil }
                let function = if case .minimum = column { "min" } else { "max" }
                switch attribute.type {
                case .string: selected.append("\(function)(normalize(\(expression), NFC)), count(\(expression))::bigint")
                case .integer16, .integer32, .integer64, .double, .date: selected.append("\(function)(\(expression)), count(\(expression))::bigint")
                default: return nil
                }
                readings.append(.extreme(attribute))
            }
        }
        var parameters = StatementParameters()
        let clause = SQLPredicate.clause(predicate, of: entity, layout: layout, into: &parameters)
        guard clause.isExact else { return nil }
        var sql = "SELECT \((grouped.map(\.expression) + selected).joined(separator: ", ")) FROM \(SQLIdentifier.quoted(layout.table)) t WHERE \(clause.sql)"
        if !excluding.isEmpty {
            parameters.append(excluding.map { Int64(bitPattern: $0.storedPrimaryKey) })
            sql += " AND NOT (t.\(SQLIdentifier.quoted(StoreSchema.idColumn)) = ANY($\(parameters.count)::bigint[]))"
        }
        if !grouped.isEmpty { sql += " GROUP BY " + (1...grouped.count).map(String.init).joined(separator: ", ") }
        let action = "computing \(entity.name) aggregates"
        let rows = try pool.withSession { (session) throws(StrataError) in
            try session.query(PostgresQuery(unsafeSQL: sql, binds: parameters.bindings), action)
        }
        return try rows.map { (row) throws(StrataError) -> StoreGroup in
            let cells = row.makeRandomAccess()
            let values = try grouped.indices.map { (i) throws(StrataError) -> PropertyValue in
                try RowCoding.attributeValue(cells[i], grouped[i].attribute, of: "a group of \(entity.name)")
            }
            var results: [StoreGroup.Result] = []
            for (i, reading) in readings.enumerated() {
                let (cell, count) = (cells[grouped.count + 2 * i], Int(try Self.integer(cells[grouped.count + 2 * i + 1])))
                let value: PropertyValue
                switch reading {
                case .count:
                    value = .integer(Int64(count))
                case .integerSum:
                    // numeric, as text: an Int64, or past 64 bits a double (a sum then throws; an average takes it).
                    value = try Self.aggregate(cell, as: String.self).map { Int64($0).map(PropertyValue.integer) ?? .double(Double($0) ?? .nan) } ?? .null
                case .doubleSum:
                    value = try Self.aggregate(cell, as: Double.self).map(PropertyValue.double) ?? .null
                case .extreme(let attribute):
                    value = try RowCoding.attributeValue(cell, attribute, of: "a group of \(entity.name)")
                }
                results.append(StoreGroup.Result(value: value, values: count))
            }
            return StoreGroup(values: values, results: results)
        }
    }

    /// A `bigint` PostgreSQL computed.
    private static func integer(_ cell: PostgresCell) throws(StrataError) -> Int64 {
        guard let value = try aggregate(cell, as: Int64.self) else {
            throw StrataError(code: .storage, message: "PostgreSQL answered an aggregate with no number")
        }
        return value
    }

    /// An aggregate PostgreSQL computed, as `type` (nil: SQL's null, a sum of no value).
    private static func aggregate<T: PostgresDecodable>(_ cell: PostgresCell, as type: T.Type) throws(StrataError) -> T? where T._DecodableType == T {
        do {
            return try cell.decode(T?.self)
        } catch {
            throw StrataError(code: .storage, message: "PostgreSQL answered an aggregate that is not a \(T.self): \(error)")
        }
    }

    /// The statement a fetch in `order` sends for each page (its limit and
    /// offset the last two parameters), as `explain` shows it; nil where
    /// the order is not one PostgreSQL gives.
    func explain(_ entity: EntityDescription, matching predicate: StorePredicate?, orderedBy order: [StoreSortKey]) throws(StrataError) -> String? {
        guard let (query, isExact, _) = try orderedQuery(entity, matching: predicate, orderedBy: order) else { return nil }
        return query.sql + (isExact ? "" : " -- then judged in Swift")
    }

    private func orderedQuery(
        _ entity: EntityDescription, matching predicate: StorePredicate?, orderedBy order: [StoreSortKey]
    ) throws(StrataError) -> (query: (sql: String, parameters: StatementParameters), isExact: Bool, layout: StoreSchema.EntityLayout)? {
        let layout = try self.layout(of: entity)
        var keys: [String] = []
        for key in order {
            guard case .column(let name) = layout.properties[key.property],
                  case .attribute(let attribute) = entity.properties[key.property] else { return nil }
            let column = "t." + SQLIdentifier.quoted(name)
            let value: String
            switch attribute.type {
            // Integers and dates in their order; a double's NaN above every number, as Swift's order puts it last.
            case .integer16, .integer32, .integer64, .double, .date: value = column
            // Text columns are `COLLATE "C"`: the UTF-8 bytes of the canonical composition, the order of its scalars.
            case .string: value = "normalize(\(column), NFC)"
            default: return nil
            }
            // Swift puts nil first, PostgreSQL's default last: said where a
            // column may hold one (a column that cannot reads its index either way).
            let nulls = attribute.isOptional ? (key.descending ? " NULLS LAST" : " NULLS FIRST") : ""
            keys.append(value + (key.descending ? " DESC" : " ASC") + nulls)
        }
        var parameters = StatementParameters()
        let clause = SQLPredicate.clause(predicate, of: entity, layout: layout, into: &parameters)
        keys.append("t." + SQLIdentifier.quoted(StoreSchema.idColumn) + " ASC")
        let sql = """
            \(selects[entity.name] ?? StoredRows.select(layout)) WHERE \(clause.sql) \
            ORDER BY \(keys.joined(separator: ", ")) LIMIT $\(parameters.count + 1) OFFSET $\(parameters.count + 2)
            """
        return ((sql, parameters), clause.isExact, layout)
    }
}
