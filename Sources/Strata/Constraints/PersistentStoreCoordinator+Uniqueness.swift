import Foundation
internal import StrataStore

extension PersistentStoreCoordinator {
    /// The stored objects holding each of `keys` (unique-index entries
    /// without their primary key; distinct and ascending), read at one read
    /// view of the store.
    func storedUniqueHolders(_ keys: [UniqueKey]) throws(StrataError) -> [UniqueKey: [ObjectID]] {
        var holders: [UniqueKey: [ObjectID]] = [:]
        uniqueKeysLookedUp.add(keys.count, ordering: .relaxed)
        try currentStore().forEachUniqueHolder(of: keys) { (k, id) throws(StrataError) in holders[keys[k], default: []].append(id) }
        return holders
    }

    /// The first stored holder of each of `keys` (distinct and ascending),
    /// by position: ``storedUniqueHolders(_:)`` for a batch, with no
    /// dictionary made.
    func firstStoredUniqueHolders(ofSorted keys: [UniqueKey]) throws(StrataError) -> [ObjectID?] {
        var holders = [ObjectID?](repeating: nil, count: keys.count)
        uniqueKeysLookedUp.add(keys.count, ordering: .relaxed)
        try currentStore().forEachUniqueHolder(of: keys) { (k, id) throws(StrataError) in
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
