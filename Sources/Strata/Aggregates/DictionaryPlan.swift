/// A ``DictionaryFetchRequest`` checked against its entity: what each
/// column reads, and whether results are per object or per group.
struct DictionaryPlan {
    struct Column {
        let key: String
        let function: FetchedProperty.Function
        /// The property read; nil for a count of objects and for the object's ID.
        let property: Int?
        /// For a grouped value: its position in the group key.
        let groupPosition: Int?
    }

    let entity: EntityDescription
    let columns: [Column]
    /// The properties whose values form a group, in the request's order.
    let groupProperties: [Int]
    /// One result per group (grouping, or aggregates over every match), or per match.
    let isGrouped: Bool
    /// Every property a match's values are read for.
    let propertiesRead: [Int]

    init<Root>(_ request: DictionaryFetchRequest<Root>, entity: EntityDescription) throws(StrataError) {
        self.entity = entity
        func invalid(_ message: String) -> StrataError {
            StrataError(.invalidArgument, "\(entity.name): \(message)")
        }
        func property(_ name: String) throws(StrataError) -> Int {
            guard let index = entity.propertyIndex[name] else { throw invalid("no property \(name)") }
            return index
        }
        func isToMany(_ index: Int) -> Bool { entity.toManyFlags[index] }

        var groupProperties: [Int] = []
        for name in request.propertiesToGroupBy {
            let index = try property(name)
            guard !isToMany(index) else { throw invalid("cannot group by the to-many relationship \(name)") }
            guard !groupProperties.contains(index) else { throw invalid("\(name) is grouped by twice") }
            groupProperties.append(index)
        }
        var fetched = request.propertiesToFetch
        if fetched.isEmpty {
            guard !groupProperties.isEmpty else { throw invalid("a dictionary fetch needs properties to fetch") }
            fetched = request.propertiesToGroupBy.map(FetchedProperty.attribute)
        }
        let hasAggregates = fetched.contains { $0.isAggregate }
        isGrouped = hasAggregates || !groupProperties.isEmpty

        var columns: [Column] = []
        var keys: Set<String> = []
        for column in fetched {
            guard keys.insert(column.key).inserted else { throw invalid("two columns have the key \(column.key)") }
            var index: Int?
            if let name = column.property { index = try property(name) }
            let type = index.flatMap { entity.attributeTypes[$0] }
            switch column.function {
            case .value:
                guard !isToMany(index!) else {
                    throw invalid("\(column.key) is a to-many relationship: fetch count(of: \"\(column.key)\")")
                }
                if isGrouped && !groupProperties.contains(index!) {
                    throw invalid("\(column.key) is fetched but neither grouped by nor aggregated")
                }
            case .count:
                break
            case .sum, .average:
                guard let type, [.integer16, .integer32, .integer64, .double].contains(type) else {
                    throw invalid("\(column.function) needs an integer or double attribute, not \(column.property!)")
                }
            case .minimum, .maximum:
                guard let type, [.integer16, .integer32, .integer64, .double, .string, .date].contains(type) else {
                    throw invalid("\(column.function) needs an integer, double, string or date attribute, not \(column.property!)")
                }
            case .objectID:
                guard !isGrouped else { throw invalid("\(column.key) (an object's ID) is per object: not with grouping or aggregates") }
            case .relationshipCount:
                guard isToMany(index!) else { throw invalid("count(of:) needs a to-many relationship, not \(column.property!)") }
                guard !isGrouped else { throw invalid("count(of: \(column.property!)) is per object: not with grouping or aggregates") }
            }
            let groupPosition = column.function == .value ? groupProperties.firstIndex(of: index!) : nil
            columns.append(Column(key: column.key, function: column.function, property: index, groupPosition: groupPosition))
        }
        for order in request.sortBy where !keys.contains(order.key) {
            throw invalid("the results have no key \(order.key) to sort by")
        }
        self.columns = columns
        self.groupProperties = groupProperties
        propertiesRead = Array(Set(groupProperties + columns.compactMap(\.property))).sorted()
    }

    /// Whether every column is a grouped value or a count of objects: what
    /// an index over the grouped attributes answers from its entries alone.
    var countsGroupsOnly: Bool {
        isGrouped && !groupProperties.isEmpty
            && groupProperties.allSatisfy { entity.attributeTypes[$0] != nil }
            && columns.allSatisfy { $0.function == .count || $0.groupPosition != nil }
    }
}
