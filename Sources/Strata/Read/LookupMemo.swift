/// One state of one store as reads see it (``PersistentStoreCoordinator/storeReadVersion()``):
/// two reads at equal versions see the same keys.
struct StoreReadVersion: Equatable {
    /// Which store: moves on whenever the coordinator's store is added or closed.
    var generation: UInt64
    /// Which state of it: moves on with every write a read can see.
    var sequence: UInt64
}

/// The first index entry a context's point lookup met for a key, kept while
/// the store stays at one read version: the same key looked up again before
/// any write a read can see — a find-or-create loop that meets one
/// category, tag or author record after record — goes to that object
/// without walking the index again.
///
/// Only the store's answer is kept, never a verdict: the object is judged
/// again at every lookup by this context's state, as the walk would judge
/// it (``ManagedObjectContext/pointLookup(of:_:test:source:)``),
/// and whatever the walk would have to read or skip sends the lookup to
/// the walk. Each lookup pays one version check for it.
///
/// Guarded by the owning context's queue, as the context's other tables.
struct LookupMemo {
    /// A key of one index of one entity, hashed as one run of bytes.
    private struct Key: Hashable {
        let entity: UInt16
        let index: Int
        let bytes: [UInt8]

        func hash(into hasher: inout Hasher) {
            hasher.combine(entity)
            hasher.combine(index)
            bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
        }
    }

    /// Most keys kept; past it the memo starts again. An import's related records — categories, tags, authors —
    /// mostly number fewer.
    static let capacity = 4_096

    /// Each key's first entry, and the version it was read at. An entry
    /// read at another version is stale: never answered, replaced by the
    /// next walk of its key — so a write costs nothing here, where emptying
    /// the table at each new version cost a pass over its room.
    private var entries: [Key: (id: ObjectID, version: StoreReadVersion)] = [:]

    /// The object whose entry came first for `key` in index `index` of
    /// `entity`, if the store is still at the version it was read at.
    func firstEntry(of entity: EntityDescription, index: Int, key: [UInt8], at version: StoreReadVersion) -> ObjectID? {
        guard let entry = entries[Key(entity: entity.index, index: index, bytes: key)], entry.version == version else { return nil }
        return entry.id
    }

    /// Keeps `id` as the first entry for `key`, read at `version` (read
    /// before the walk that found it: a write since makes it stale early,
    /// never late).
    mutating func remember(_ id: ObjectID, firstFor key: [UInt8], index: Int, of entity: EntityDescription, at version: StoreReadVersion) {
        let key = Key(entity: entity.index, index: index, bytes: key)
        // Full of keys (most of them stale, when the store moves on): started again.
        if entries.count >= Self.capacity && entries[key] == nil { entries.removeAll(keepingCapacity: true) }
        entries[key] = (id, version)
    }

    /// Lets go of every entry and its room (a context's reset).
    mutating func removeAll() {
        entries.removeAll()
    }
}
