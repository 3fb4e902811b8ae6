/// One state of one store as reads see it (``PersistentStoreCoordinator/storeReadVersion()``):
/// two reads at equal versions see the same keys.
struct StoreReadVersion: Equatable {
    /// Which store: moves on whenever the coordinator's store is added or closed.
    var generation: UInt64
    /// Which state of it: moves on with every write a read can see.
    var sequence: UInt64
}

/// The first index entry a context's point lookup met for a key, kept with
/// the store's read version it was met at: the same key looked up again —
/// a find-or-create loop that meets one category, tag or author record
/// after record — goes to that object without walking the index again,
/// at that version or, for an index of one attribute, at any later one no
/// write of that key's entries came before (``IndexKeyWrites``: an import
/// that saves batch after batch meets its categories again in each).
///
/// Only the store's answer is kept, never a verdict: the object is judged
/// again at every lookup by this context's state, as the walk would judge
/// it (``ManagedObjectContext/pointLookup(of:_:source:)``),
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

    /// Most keys kept (see ``entries``).
    static let capacity = 4_096

    /// Each key's first entry, the version it was known at, and whether it
    /// answered a lookup since it was kept or last made room. An entry of
    /// another version is answered only once `stillFirst` says no write
    /// touched its key since; otherwise it is replaced by the next walk of
    /// its key — so a write costs nothing here, where emptying the table at
    /// each new version cost a pass over its room.
    ///
    /// Full, the memo keeps the entries that answered again and lets go of
    /// the rest: an import looks each of its own keys up once and its
    /// categories again and again, and a memo that started again when full
    /// let the first push the second out every 4,096 records.
    private var entries: [Key: Entry] = [:]

    private struct Entry {
        var id: ObjectID
        var version: StoreReadVersion
        var answeredAgain = false
    }

    /// The object whose entry came first for `key` in index `index` of
    /// `entity`, if the store is at the version it was read at, or
    /// `stillFirst(thatVersion)` — asked only then — says nothing changed
    /// the key's entries since (the entry is then kept as of `version`).
    mutating func firstEntry(
        of entity: EntityDescription, index: Int, key: [UInt8], at version: StoreReadVersion,
        stillFirst: (StoreReadVersion) -> Bool
    ) -> ObjectID? {
        // One hash of the key: the entry is read and updated where it lies.
        guard let i = entries.index(forKey: Key(entity: entity.index, index: index, bytes: key)) else { return nil }
        let entry = entries.values[i]
        if entry.version != version {
            guard stillFirst(entry.version) else { return nil }
            entries.values[i].version = version
        }
        if !entry.answeredAgain { entries.values[i].answeredAgain = true }
        return entry.id
    }

    /// Keeps `id` as the first entry for `key`, read at `version` (read
    /// before the walk that found it: a write since makes it stale early,
    /// never late).
    mutating func remember(_ id: ObjectID, firstFor key: [UInt8], index: Int, of entity: EntityDescription, at version: StoreReadVersion) {
        let key = Key(entity: entity.index, index: index, bytes: key)
        if entries.count >= Self.capacity && entries[key] == nil { makeRoom() }
        entries[key] = Entry(id: id, version: version)
    }

    /// Keeps the entries that answered again since the last time (each
    /// must do so again to stay the next time), at most half the room;
    /// lets go of the others.
    private mutating func makeRoom() {
        var kept: [Key: Entry] = [:]
        kept.reserveCapacity(Self.capacity)
        for (key, entry) in entries where entry.answeredAgain {
            guard kept.count < Self.capacity / 2 else { break }
            kept[key] = Entry(id: entry.id, version: entry.version)
        }
        entries = kept
    }

    /// Lets go of every entry and its room (a context's reset).
    mutating func removeAll() {
        entries.removeAll()
    }
}
