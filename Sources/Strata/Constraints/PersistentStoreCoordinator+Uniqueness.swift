import Foundation
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
            let key = UniqueKey(bytes: Array(entry[..<(entry.count - 8)]))
            holders[key, default: []].append(try holder(ofEntry: entry))
            return true
        }
        return holders
    }

    /// The first stored holder of each of `keys` (ascending, distinct),
    /// by position: ``storedUniqueHolders(_:)`` for a batch, with no
    /// dictionary made and no key copied. The walk meets entries in key
    /// order, so each belongs to the first key, at or after the last one
    /// matched, that it holds.
    func firstStoredUniqueHolders(ofSorted keys: [UniqueKey]) throws(StrataError) -> [ObjectID?] {
        guard !keys.isEmpty else { return [] }
        let store = try currentStore()
        var holders = [ObjectID?](repeating: nil, count: keys.count)
        var ranges = KeyRanges()
        for key in keys { ranges.appendPrefix { $0 += key.bytes } }
        var k = 0
        try store.forEachKey(in: ranges) { entry, _ throws(StrataError) in
            let key = UnsafeRawBufferPointer(rebasing: entry[..<(entry.count - 8)])
            while k < keys.count, !keys[k].bytes.withUnsafeBytes({ $0.count == key.count && memcmp($0.baseAddress!, key.baseAddress!, key.count) == 0 }) {
                k += 1
            }
            guard k < keys.count else { throw StrataError(.corruptRecord, "a unique index entry is out of order") }
            if holders[k] == nil { holders[k] = try holder(ofEntry: entry) }
            return true
        }
        return holders
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
