import Foundation
internal import StrataStore

extension PersistentStoreCoordinator {
    /// The stored objects holding each of `keys` (unique-index entries
    /// without their primary key; distinct and ascending), read at one read
    /// view of the store.
    func storedUniqueHolders(_ keys: [UniqueKey]) throws(StrataError) -> [UniqueKey: [ObjectID]] {
        var holders: [UniqueKey: [ObjectID]] = [:]
        try forEachStoredUniqueHolder(of: keys) { (k, id) throws(StrataError) in holders[keys[k], default: []].append(id) }
        return holders
    }

    /// The first stored holder of each of `keys` (distinct and ascending),
    /// by position: ``storedUniqueHolders(_:)`` for a batch, with no
    /// dictionary made.
    func firstStoredUniqueHolders(ofSorted keys: [UniqueKey]) throws(StrataError) -> [ObjectID?] {
        var holders = [ObjectID?](repeating: nil, count: keys.count)
        try forEachStoredUniqueHolder(of: keys) { (k, id) throws(StrataError) in
            if holders[k] == nil { holders[k] = id }
        }
        return holders
    }

    /// Calls `body` with each stored object holding one of `keys`
    /// (distinct and ascending) and that key's position, in key order,
    /// at one read view of the store. Each value encodes self-delimited,
    /// so an entry holds exactly the values of the key it starts with: the
    /// range of a key is its prefix, and as the walk meets entries in key
    /// order, each belongs to the first key, at or after the last one
    /// matched, that it starts with — no key is copied to find it.
    private func forEachStoredUniqueHolder(
        of keys: [UniqueKey], _ body: (Int, ObjectID) throws(StrataError) -> Void
    ) throws(StrataError) {
        guard !keys.isEmpty else { return }
        let store = try currentStore()
        var ranges = KeyRanges()
        for key in keys { ranges.appendPrefix { $0 += key.bytes } }
        var k = 0
        try store.forEachKey(in: ranges) { entry, _ throws(StrataError) in
            let id = try holder(ofEntry: entry)  // (checks the entry's length first)
            let key = UnsafeRawBufferPointer(rebasing: entry[..<(entry.count - 8)])
            while k < keys.count, !keys[k].bytes.withUnsafeBytes({ $0.count == key.count && memcmp($0.baseAddress!, key.baseAddress!, key.count) == 0 }) {
                k += 1
            }
            guard k < keys.count else { throw StrataError(.corruptRecord, "a unique index entry is out of order") }
            try body(k, id)
            return true
        }
    }

    /// The object a unique index entry names.
    private func holder(ofEntry entry: UnsafeRawBufferPointer) throws(StrataError) -> ObjectID {
        guard let primaryKey = IndexKeyCoding.primaryKey(ofEntry: entry),
              let entity = model.entity(at: UInt16(entry[1]) << 8 | UInt16(entry[2])) else {
            throw StrataError(.corruptRecord, "a unique index entry is malformed")
        }
        return ObjectID(entity: entity, primaryKey: primaryKey, isTemporary: false)
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
