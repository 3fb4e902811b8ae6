/// Folds a dictionary fetch's matches into its results, one match at a
/// time: a row per match, or per group a count and each aggregate's running
/// state. Holds O(results), never the matches' objects.
///
/// A class: the fetch's scan adds to it from inside closures, where a
/// struct's arrays were copied on every match.
final class DictionaryResultBuilder {
    let plan: DictionaryPlan
    /// Per-object rows: each column's value.
    private var rows: [[PropertyValue]] = []
    /// Group key → position in `groupKeys` and `groupStates`.
    private var groups: [[PropertyValue]: Int] = [:]
    private var groupKeys: [[PropertyValue]] = []
    private var groupStates: [[Aggregate]] = []
    /// Reused for each match's group key, so a lookup of a known group allocates nothing.
    private var scratchKey: [PropertyValue]

    init(_ plan: DictionaryPlan) {
        self.plan = plan
        scratchKey = Array(repeating: .null, count: plan.groupProperties.count)
        if plan.isGrouped && plan.groupProperties.isEmpty {
            // Aggregates over every match: one result, even for no match.
            _ = group(for: [])
        }
    }

    /// The running state of one column of one group.
    private struct Aggregate {
        var objects = 0
        var values = 0
        var integerSum: Int64 = 0
        var doubleSum: Double = 0
        var extreme: PropertyValue = .null
    }

    /// Adds a match.
    func add<Match: MatchValues>(_ match: Match) throws(StrataError) {
        guard plan.isGrouped else {
            var row: [PropertyValue] = []
            row.reserveCapacity(plan.columns.count)
            for column in plan.columns {
                switch column.function {
                case .relationshipCount: row.append(.integer(Int64(try match.relationshipCount(column.property!))))
                case .objectID: row.append(.object(match.id))
                default: row.append(try match.value(column.property!))
                }
            }
            rows.append(row)
            return
        }
        for (i, property) in plan.groupProperties.enumerated() { scratchKey[i] = try match.value(property) }
        let g = group(for: scratchKey)
        for (c, column) in plan.columns.enumerated() {
            switch column.function {
            case .value, .relationshipCount, .objectID:
                continue
            case .count:
                groupStates[g][c].objects += 1
            case .sum, .average, .minimum, .maximum:
                try accumulate(try match.value(column.property!), into: &groupStates[g][c], column)
            }
        }
    }

    /// Adds `count` matches in the group `key` (values of the grouped
    /// properties), when every column is a grouped value or a count.
    func add(count: Int, toGroup key: [PropertyValue]) {
        let g = group(for: key)
        for c in plan.columns.indices where plan.columns[c].function == .count { groupStates[g][c].objects += count }
    }

    /// What a store computes for this plan's columns: each aggregate's
    /// column (a grouped value's is the group's values), in the columns'
    /// order, for ``add(_:toGroup:)``.
    var storeColumns: [StoreAggregate] { plan.columns.compactMap(Self.storeColumn) }

    /// What a store computes for `column`; nil for a column it does not
    /// (a grouped value; the per-object columns, which a grouped fetch has not).
    private static func storeColumn(_ column: DictionaryPlan.Column) -> StoreAggregate? {
        switch column.function {
        case .count: .count
        case .sum, .average: .sum(property: column.property!)
        case .minimum: .minimum(property: column.property!)
        case .maximum: .maximum(property: column.property!)
        case .value, .relationshipCount, .objectID: nil
        }
    }

    /// Adds a store's results for the group `key`, one per
    /// ``storeColumns``: merged into the group's state as the matches they
    /// were computed over would have been, one by one.
    func add(_ results: [StoreGroup.Result], toGroup key: [PropertyValue]) throws(StrataError) {
        let g = group(for: key)
        var next = results.makeIterator()
        for (c, column) in plan.columns.enumerated() {
            guard Self.storeColumn(column) != nil, let result = next.next() else { continue }
            if column.function == .count {
                groupStates[g][c].objects += result.values
            } else {
                try accumulate(result.value, over: result.values, into: &groupStates[g][c], column)
            }
        }
    }

    private func group(for key: [PropertyValue]) -> Int {
        if let g = groups[key] { return g }
        let g = groupKeys.count
        groups[key] = g
        groupKeys.append(key)
        groupStates.append(Array(repeating: Aggregate(), count: plan.columns.count))
        return g
    }

    /// Takes in `value`: one match's, or what a store computed over
    /// `count` values (their sum, or their extreme).
    private func accumulate(_ value: PropertyValue, over count: Int = 1, into state: inout Aggregate, _ column: DictionaryPlan.Column) throws(StrataError) {
        switch (column.function, value) {
        case (_, .null):
            return
        case (.sum, .integer(let x)), (.average, .integer(let x)):
            let (sum, overflow) = state.integerSum.addingReportingOverflow(x)
            if overflow && column.function == .sum {
                throw StrataError(.invalidArgument, "the sum of \(column.key) does not fit in 64 bits")
            }
            state.integerSum = overflow ? state.integerSum : sum
            state.doubleSum += Double(x)
        case (.sum, .double(let x)), (.average, .double(let x)):
            // A store's sum of an integer attribute past 64 bits comes as a double.
            if column.function == .sum && plan.entity.attributeTypes[column.property!] != .double {
                throw StrataError(.invalidArgument, "the sum of \(column.key) does not fit in 64 bits")
            }
            state.doubleSum += x
        case (.minimum, _):
            if state.values == 0 || PropertyValue.precedes(value, state.extreme) { state.extreme = value }
        case (.maximum, _):
            if state.values == 0 || PropertyValue.precedes(state.extreme, value) { state.extreme = value }
        default:
            return
        }
        state.values += count
    }

    /// The results, ordered and paged as `request` says.
    func results<Root>(_ request: DictionaryFetchRequest<Root>) -> [DictionaryResult] {
        var table: [[PropertyValue]]
        if plan.isGrouped {
            var order = Array(groupKeys.indices)
            order.sort { a, b in Self.precedes(groupKeys[a], groupKeys[b]) }
            table = order.map { g in plan.columns.indices.map { c in value(of: c, group: g) } }
        } else {
            table = rows
        }
        if request.returnsDistinctResults {
            var seen: Set<[PropertyValue]> = []
            table = table.filter { seen.insert($0).inserted }
        }
        if !request.sortBy.isEmpty {
            let orders = request.sortBy.map { order in (plan.columns.firstIndex { $0.key == order.key }!, order.ascending) }
            // Stable, so equal results keep the group order.
            table = table.enumerated().sorted { x, y in
                for (c, ascending) in orders where x.element[c] != y.element[c] {
                    return ascending ? PropertyValue.precedes(x.element[c], y.element[c]) : PropertyValue.precedes(y.element[c], x.element[c])
                }
                return x.offset < y.offset
            }.map(\.element)
        }
        var page = table[...]
        if request.fetchOffset > 0 { page = page.dropFirst(request.fetchOffset) }
        if request.fetchLimit > 0 { page = page.prefix(request.fetchLimit) }
        let columns = DictionaryResult.Columns(plan.columns.map(\.key))
        return page.map { row in DictionaryResult(columns: columns, row: row) }
    }

    private func value(of c: Int, group g: Int) -> PropertyValue {
        let column = plan.columns[c]
        let state = groupStates[g][c]
        switch column.function {
        case .value, .relationshipCount, .objectID:
            return groupKeys[g][column.groupPosition!]
        case .count:
            return .integer(Int64(state.objects))
        case .sum:
            return plan.entity.attributeTypes[column.property!] == .double ? .double(state.doubleSum) : .integer(state.integerSum)
        case .average:
            return state.values == 0 ? .null : .double(state.doubleSum / Double(state.values))
        case .minimum, .maximum:
            return state.extreme
        }
    }

    private static func precedes(_ a: [PropertyValue], _ b: [PropertyValue]) -> Bool {
        for (x, y) in zip(a, b) where x != y { return PropertyValue.precedes(x, y) }
        return false
    }
}

/// A match's values, wherever they lie.
protocol MatchValues {
    /// The matched object's ID.
    var id: ObjectID { get }
    func value(_ property: Int) throws(StrataError) -> PropertyValue
    /// How many objects to-many relationship `property` holds.
    func relationshipCount(_ property: Int) throws(StrataError) -> Int
}

/// The values of an object held in a context, or of a snapshot.
struct DecodedValues: MatchValues {
    let id: ObjectID
    let values: [PropertyValue]

    func value(_ property: Int) -> PropertyValue { values[property] }

    func relationshipCount(_ property: Int) -> Int {
        if case .objects(let ids) = values[property] { ids.count } else { 0 }
    }
}

/// The values of a stored record as a scan lends it, read where they lie:
/// only the properties asked for are decoded, and a to-many count reads
/// the relationship's length, not its IDs.
struct EncodedValues: MatchValues {
    let raw: UnsafeRawBufferPointer
    /// Located up to the highest property read.
    let fields: RecordCoding.FieldOffsets
    let id: ObjectID

    func value(_ property: Int) throws(StrataError) -> PropertyValue {
        guard let value = RecordCoding.value(at: fields[property], in: raw, property: property, of: id.entity) else { throw corrupt() }
        return value
    }

    func relationshipCount(_ property: Int) throws(StrataError) -> Int {
        guard let count = RecordCoding.relationshipCount(at: fields[property], in: raw) else { throw corrupt() }
        return count
    }

    private func corrupt() -> StrataError { RecordCoding.undecodable(id, format: raw.first) }
}
