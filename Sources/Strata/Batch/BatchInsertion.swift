/// One batch of a batch insert's rows as objects: each row's values over
/// the entity's initial values, and rows that share the values of a
/// uniqueness constraint made one object (the later row's properties over
/// the earlier one's).
struct BatchInsertion {
    let entity: EntityDescription
    /// Each object's values.
    private var values: [[PropertyValue]] = []
    /// Each object's properties that its rows gave (only where the entity
    /// has uniqueness constraints: an update of a stored object writes
    /// those and keeps the others).
    private var given: [[Int]] = []
    /// The object claiming each key of a unique index.
    private var claims: [UniqueKey: Int] = [:]

    init(entity: EntityDescription, rows: ArraySlice<[String: PropertyValue]>) {
        self.entity = entity
        values.reserveCapacity(rows.count)
        for row in rows { add(row) }
    }

    private var isUpsert: Bool { !entity.uniqueIndexNumbers.isEmpty }

    /// The keys `values` holds in the entity's unique indexes, in the
    /// order of the indexes.
    private func uniqueKeys(_ values: [PropertyValue]) -> [UniqueKey] {
        entity.uniqueIndexNumbers.compactMap { index in IndexKeyCoding.uniqueKey(values, of: entity, index: index).map(UniqueKey.init) }
    }

    /// A row checked by ``BatchValues/checkInsert(_:of:)``.
    private mutating func add(_ row: [String: PropertyValue]) {
        var objectValues = entity.initialValues
        var rowGives: [Int] = []
        for (name, value) in row {
            let index = entity.indexOfProperty(name)!
            objectValues[index] = value
            if isUpsert { rowGives.append(index) }
        }
        guard isUpsert else {
            values.append(objectValues)
            return
        }
        let keys = uniqueKeys(objectValues)
        if let earlier = keys.first(where: { claims[$0] != nil }).flatMap({ claims[$0] }) {
            for index in rowGives { values[earlier][index] = objectValues[index] }
            given[earlier] = Array(Set(given[earlier] + rowGives)).sorted()
            for key in uniqueKeys(values[earlier]) where claims[key] == nil { claims[key] = earlier }
        } else {
            for key in keys { claims[key] = values.count }
            values.append(objectValues)
            given.append(rowGives.sorted())
        }
    }

    /// The batch as changes for the coordinator, under its save lock: an
    /// object whose key a stored object holds updates it (the first such
    /// holder, by the order of the unique indexes); the others are inserted
    /// with primary keys reserved now.
    func changes(at coordinator: PersistentStoreCoordinator, authors: TransactionAuthors) throws(StrataError) -> ChangeSet {
        var changes = ChangeSet()
        changes.authors = authors
        var holders: [UniqueKey: [ObjectID]] = [:]
        if !claims.isEmpty { holders = try coordinator.storedUniqueHolders(claims.keys.sorted()) }
        var holder: [ObjectID?] = Array(repeating: nil, count: values.count)
        if !holders.isEmpty {
            for j in values.indices { holder[j] = uniqueKeys(values[j]).lazy.compactMap { holders[$0]?.first }.first }
        }
        let newCount = holder.lazy.filter { $0 == nil }.count
        var nextKey = coordinator.reservePrimaryKeys(for: entity, count: UInt64(newCount)).lowerBound
        changes.inserted.reserveCapacity(newCount)
        changes.insertedValues.reserveCapacity(newCount)
        // Stored objects met, in the order first met: their stored state and
        // the values the batch gives them.
        var updates: [ObjectID: Int] = [:]
        var updated: [(id: ObjectID, stored: Snapshot, values: [PropertyValue])] = []
        for j in values.indices {
            guard let id = holder[j] else {
                changes.inserted.append(ObjectID(entity: entity, primaryKey: nextKey, isTemporary: false))
                changes.insertedValues.append(values[j])
                nextKey += 1
                continue
            }
            let u: Int
            if let known = updates[id] {
                u = known
            } else {
                guard let stored = try coordinator.snapshot(for: id) else {
                    throw StrataError(.corruptRecord, "\(entity.name)'s unique index names \(id), which is not stored")
                }
                u = updated.count
                updates[id] = u
                updated.append((id, stored, stored.values))
            }
            for index in given[j] { updated[u].values[index] = values[j][index] }
        }
        for (id, stored, values) in updated where values != stored.values { changes.update(id, from: stored, to: values) }
        return changes
    }
}
