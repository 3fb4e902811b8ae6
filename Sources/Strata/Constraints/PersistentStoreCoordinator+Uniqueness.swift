import Foundation
internal import StrataStore

extension PersistentStoreCoordinator {
    /// The stored objects holding each of `keys` (unique-index entries
    /// without their primary key; distinct and ascending), read at one read
    /// view of the store.
    func storedUniqueHolders(_ keys: [UniqueKey]) throws(StrataError) -> [UniqueKey: [ObjectID]] {
        var holders: [UniqueKey: [ObjectID]] = [:]
        uniqueKeysLookedUp.add(keys.count, ordering: .relaxed)
        try forEachUniqueHolder(of: keys) { (k, id) throws(StrataError) in holders[keys[k], default: []].append(id) }
        return holders
    }

    /// Calls `body` with the position of each of `keys` and each stored
    /// object holding it: the log store reads its unique indexes; another
    /// store is asked for the values the keys hold, an index at a time.
    private func forEachUniqueHolder(of keys: [UniqueKey], _ body: (Int, ObjectID) throws(StrataError) -> Void) throws(StrataError) {
        guard let external = externalStore else {
            try currentStore().forEachUniqueHolder(of: keys, body)
            return
        }
        // By entity and index: (entity, index) -> (positions among `keys`, their values).
        var groups: [[UInt8]: (entity: EntityDescription, index: Int, positions: [Int], values: [[PropertyValue]])] = [:]
        for (k, key) in keys.enumerated() {
            guard let (entity, index, values) = decodedUniqueKey(key) else {
                throw StrataError(.corruptRecord, "a unique key Strata made does not decode")
            }
            let group = Array(key.bytes.prefix(IndexKeyCoding.prefixLength))
            groups[group, default: (entity, index, [], [])].positions.append(k)
            groups[group]!.values.append(values)
        }
        for group in groups.values {
            let names = group.entity.indexes[group.index].attributeNames
            let holders = try external.store.holders(of: group.values, constraint: names, of: group.entity)
            for (position, ids) in zip(group.positions, holders) {
                for id in ids { try body(position, id) }
            }
        }
    }

    /// The entity, index number and values of a unique key.
    private func decodedUniqueKey(_ key: UniqueKey) -> (EntityDescription, Int, [PropertyValue])? {
        key.bytes.withUnsafeBytes { (entry) -> (EntityDescription, Int, [PropertyValue])? in
            guard entry.count >= IndexKeyCoding.prefixLength, entry[0] == IndexKeyCoding.indexTag else { return nil }
            let entityNumber = Int(entry[1]) << 8 | Int(entry[2])
            let index = Int(entry[3])
            guard entityNumber < model.entities.count else { return nil }
            let entity = model.entities[entityNumber]
            guard index < entity.indexes.count else { return nil }
            var offset = IndexKeyCoding.prefixLength
            var values: [PropertyValue] = []
            for property in entity.indexedProperties[index] {
                guard case .attribute(let attribute) = entity.properties[property],
                      let (value, end) = IndexKeyCoding.value(at: offset, in: entry, type: attribute.type) else { return nil }
                values.append(value)
                offset = end
            }
            return (entity, index, values)
        }
    }

    /// The first stored holder of each of `keys` (distinct and ascending),
    /// by position: ``storedUniqueHolders(_:)`` for a batch, with no
    /// dictionary made.
    func firstStoredUniqueHolders(ofSorted keys: [UniqueKey]) throws(StrataError) -> [ObjectID?] {
        var holders = [ObjectID?](repeating: nil, count: keys.count)
        uniqueKeysLookedUp.add(keys.count, ordering: .relaxed)
        try forEachUniqueHolder(of: keys) { (k, id) throws(StrataError) in
            if holders[k] == nil { holders[k] = id }
        }
        return holders
    }

    // MARK: Aliases

    /// Records that each inserted object of `merged` was merged into an
    /// existing one by an upsert: from now on its ID resolves to that one's.
    func recordAliases(_ merged: [ObjectID: ObjectID]) {
        guard !merged.isEmpty else { return }
        aliasLock.withLock {
            // An ID merged earlier into one merged now is followed on when
            // it is resolved, not rewritten here: that walked every alias
            // ever recorded at every upsert.
            for (from, to) in merged { aliases[from] = to }
            aliasCount.store(aliases.count, ordering: .releasing)
        }
    }

    /// The ID `id` resolves to: the object an upsert merged it into (and
    /// on, through the one that was merged into later), or itself.
    func resolvingAlias(_ id: ObjectID) -> ObjectID {
        guard aliasCount.load(ordering: .acquiring) > 0 else { return id }
        return aliasLock.withLock {
            var resolved = id
            // An object is merged away once, into one that exists: a chain
            // is no longer than the aliases (the bound only guards the loop).
            for _ in 0..<aliases.count {
                guard let next = aliases[resolved] else { break }
                resolved = next
            }
            return resolved
        }
    }
}
