/// A lookup by one attribute's value through an index (``PointTerm``) in a
/// context whose ancestors hold no change: the first match the general
/// walk (``ManagedObjectContext/forEachMatch(of:includesPending:evaluation:rows:stopAfter:source:_:)``)
/// would deliver, found by the same steps for one key — the context's own
/// changes under the key, the index's entries for it (or the first of
/// them, remembered from a lookup of the key at the store's present
/// version, or at an earlier one no write of the key's entries followed:
/// ``LookupMemo``), then the objects
/// held here whose own values may match where the store's do not — but
/// without a plan to weigh, a compiled predicate, a walk's sets or the
/// closures that carry a scan's rows. Every find-or-create of an import
/// runs it once or more per record: its fixed cost is the import's.
///
/// Where the levels above hold changes, the general walk answers (it lays
/// them over the store).
extension ManagedObjectContext {
    /// The first match of `term`'s equality as `source` — which holds no
    /// level above the store — and this context see it; nil when none
    /// matches.
    func pointLookup(of entity: EntityDescription, _ term: PointTerm, source: SourceView) throws(StrataError) -> ManagedObject? {
        // Objects held here that the test is judged on, by their own values
        // (counted on the context: a local the nested function captured
        // would be boxed, an allocation per lookup).
        func passes(_ object: ManagedObject) -> Bool {
            judgedObjects &+= 1
            return term.passes(object.values)
        }
        let checksRegistry = !registry.isEmpty || !discardedInserts.isEmpty
        // This context's inserts and updates keyed as the constant: an
        // insert that passes is the answer; an update, if it still exists
        // in the store (as a scan would have met it).
        let pending = checksRegistry ? keyLookups.pending.changedObjects(of: entity, term.leading, in: self) : []
        for object in pending {
            if object.flags.contains(.inserted) {
                if passes(object) { return object }
            } else if object.flags.isDisjoint(with: [.fault, .deleted, .invalidated]), passes(object),
                      try source.snapshot(for: object.objectID) != nil {
                return object
            }
        }
        let coordinator = persistentStoreCoordinator
        // The entry the walk met first for the key at this version of the
        // store, judged as the walk judges its first entry: an object held
        // here and filled, by its own values; one not held, as a match (a
        // fault, its row left for the row cache to give when it is used).
        // Anything else — a record to read, an entry to skip — is left to
        // the walk.
        let version = try coordinator.storeReadVersion()
        // At a later version, for an index of one attribute (whose entries'
        // keys are the term's key alone), if no write touched the key since.
        let oneAttribute = entity.indexedProperties[term.indexNumber].count == 1
        if let id = keyLookups.memo.firstEntry(of: entity, index: term.indexNumber, key: term.key, at: version, stillFirst: { known in
            oneAttribute && coordinator.indexKey(term.key, of: entity, index: term.indexNumber, unwrittenSince: known, now: version)
        }) {
            if let object = registry[id] {
                // A fault is filled with the store's values, here from the
                // row cache where the walk would decode its record.
                if object.flags.contains(.fault) { object.fulfill() }
                if object.flags.isDisjoint(with: [.inserted, .fault, .invalidated, .deleted]), passes(object) { return object }
            } else if !discardedInserts.contains(id) {
                return registeredOrFault(for: id, fetched: true)
            }
        }
        // The index's entries for the key, at one read view. An object held
        // here is judged by its own values (a fault — never deleted, and
        // registered only while it exists — is filled with the record the
        // entry names, and matches by it); one not held is a match by its
        // entry, and comes back as a fault, its row offered to the row cache
        // (and read only if the cache would take it: a fault filled later
        // reads it anyway) and the object registered after the store's read.
        // Objects held here that the index's entries named: most lookups
        // meet one (a unique key), kept without a set's allocation.
        keyLookups.walks &+= 1
        // Read before the records are: a row the walk offers is cached only
        // if no write since may have changed it.
        let cacheEpoch = coordinator.rowCacheEpoch
        var firstEntry: ObjectID?
        var firstVisited: ObjectID?
        var moreVisited: Set<ObjectID> = []
        var found: ManagedObject?
        var foundStored: ObjectID?
        try coordinator.forEachStored(
            of: entity, in: term.ranges(of: entity), index: entity.indexes[term.indexNumber],
            reading: { id in registry[id].map { $0.flags.contains(.fault) } ?? coordinator.rowCacheWants(id) }
        ) { (id, record) throws(StrataError) -> Bool in
            if firstEntry == nil { firstEntry = id }
            if checksRegistry {
                if let object = registry[id] {
                    if firstVisited == nil { firstVisited = id } else { moreVisited.insert(id) }
                    // An insert whose store save is in flight is in the store
                    // already: it was met (or not) with the pending ones.
                    if object.flags.contains(.inserted) { return true }
                    if object.flags.contains(.fault), let record {
                        fill(object, try record.snapshot())
                        found = object
                        return false
                    }
                    guard object.flags.isDisjoint(with: [.invalidated, .deleted]), passes(object) else { return true }
                    found = object
                    return false
                }
                if discardedInserts.contains(id) { return true }
            }
            if let record { try coordinator.offerFetched(id, epoch: cacheEpoch, record.snapshot) }
            foundStored = id
            return false
        }
        if let answer = foundStored ?? found?.objectID, answer == firstEntry {
            keyLookups.memo.remember(answer, firstFor: term.key, index: term.indexNumber, of: entity, at: version)
        }
        if let foundStored { return registeredOrFault(for: foundStored, fetched: true) }
        if let found { return found }
        guard checksRegistry else { return nil }
        // An object held here may match on its own values (a change, or a
        // snapshot older than the store's, contract C10) where the index,
        // which holds the store's, did not select it.
        let candidates = possiblyStaleObjects(of: entity, source: source, updatedAmong: pending)
        for id in candidates where id != firstVisited && !moreVisited.contains(id) {
            guard let object = registry[id], object.flags.isDisjoint(with: [.fault, .inserted, .deleted, .invalidated]) else { continue }
            if passes(object), try source.snapshot(for: id) != nil { return object }
        }
        return nil
    }
}
