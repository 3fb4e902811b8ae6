internal import StrataStore

extension PersistentStoreCoordinator {
    /// The stored objects holding each of `keys` (unique-index entries
    /// without their primary key; distinct and ascending), read at one read
    /// view of the store.
    func storedUniqueHolders(_ keys: [UniqueKey]) throws(StrataError) -> [UniqueKey: [ObjectID]] {
        guard !keys.isEmpty else { return [:] }
        let store = try currentStore()
        var holders: [UniqueKey: [ObjectID]] = [:]
        // Each value encodes self-delimited, so an entry holds exactly the
        // values of the key it starts with: the range of a key is its prefix.
        var ranges = KeyRanges()
        for key in keys { ranges.appendPrefix { $0 += key.bytes } }
        try store.forEachKey(in: ranges) { entry, _ throws(StrataError) in
            guard let primaryKey = IndexKeyCoding.primaryKey(ofEntry: entry),
                  let entity = model.entity(at: UInt16(entry[1]) << 8 | UInt16(entry[2])) else {
                throw StrataError(.corruptRecord, "a unique index entry is malformed")
            }
            let key = UniqueKey(bytes: Array(entry[..<(entry.count - 8)]))
            holders[key, default: []].append(ObjectID(entity: entity, primaryKey: primaryKey, isTemporary: false))
            return true
        }
        return holders
    }

    // MARK: Aliases

    /// Records that each inserted object of `merged` was merged into an
    /// existing one by an upsert: from now on its ID resolves to that one's.
    func recordAliases(_ merged: [ObjectID: ObjectID]) {
        guard !merged.isEmpty else { return }
        aliasLock.withLock {
            for (from, to) in merged { aliases[from] = aliases[to] ?? to }
            // An ID merged earlier into one merged now follows it on.
            for (from, to) in aliases where merged[to] != nil { aliases[from] = aliases[merged[to]!] ?? merged[to]! }
            aliasCount.store(aliases.count, ordering: .releasing)
        }
    }

    /// The ID `id` resolves to: the object an upsert merged it into, or itself.
    func resolvingAlias(_ id: ObjectID) -> ObjectID {
        guard aliasCount.load(ordering: .acquiring) > 0 else { return id }
        return aliasLock.withLock { aliases[id] } ?? id
    }
}
