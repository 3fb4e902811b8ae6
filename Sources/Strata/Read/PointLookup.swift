/// A lookup by one attribute's value through an index (``PointTerm``) in a
/// context whose ancestors hold no change: the first match the general
/// walk (``ManagedObjectContext/forEachMatch(of:includesPending:evaluation:rows:stopAfter:_:)``)
/// would deliver, found by the same steps for one key — the context's own
/// changes under the key, the index's entries for it, then the objects
/// held here whose own values may match where the store's do not — but
/// without a plan to weigh, a compiled predicate, a walk's sets or the
/// closures that carry a scan's rows. Every find-or-create of an import
/// runs it once or more per record: its fixed cost is the import's.
///
/// Where the levels above hold changes, the general walk answers (it lays
/// them over the store).
extension ManagedObjectContext {
    /// The outcome of a point lookup: the general walk must answer, or
    /// this did (with the match, or none).
    enum PointLookupOutcome {
        case notTaken
        case found(ManagedObject?)
    }

    func pointLookup(of entity: EntityDescription, _ term: PointTerm, test: ValueTest, cacheEpoch: UInt64) throws(StrataError) -> PointLookupOutcome {
        let source = try SourceView(of: self)
        guard source.layers.isEmpty else { return .notTaken }
        var judged = 0
        defer { judgedObjects &+= judged }
        // Objects held here that the test is judged on, by their own values.
        func passes(_ object: ManagedObject) -> Bool {
            judged &+= 1
            return test.evaluate(object.values)
        }
        let checksRegistry = !registry.isEmpty || !discardedInserts.isEmpty
        // This context's inserts and updates keyed as the constant: an
        // insert that passes is the answer; an update, if it still exists
        // in the store (as a scan would have met it).
        let pending = checksRegistry ? pendingKeys.changedObjects(of: entity, term.leading, in: self) : []
        for object in pending {
            if object.flags.contains(.inserted) {
                if passes(object) { return .found(object) }
            } else if object.flags.isDisjoint(with: [.fault, .deleted, .invalidated]), passes(object),
                      try source.snapshot(for: object.objectID) != nil {
                return .found(object)
            }
        }
        // The index's entries for the key, at one read view. An object held
        // here is judged by its own values (a fault is filled with the
        // record the entry names, and matches by it); one not held is a
        // match by its entry, and comes back as a fault, its row offered to
        // the row cache (and read only if the cache would take it: a fault
        // filled later reads it anyway).
        var visited: Set<ObjectID> = []
        var found: ManagedObject?
        // One not held is registered after the walk, outside the store's read.
        var foundStored: ObjectID?
        let coordinator = persistentStoreCoordinator
        try coordinator.forEachStored(
            of: entity, in: term.ranges(of: entity), index: entity.indexes[term.indexNumber],
            reading: { id in registry[id].map { $0.flags.contains(.fault) } ?? coordinator.rowCacheWants(id) }
        ) { (id, record) throws(StrataError) -> Bool in
            guard checksRegistry else {
                try offer(id, record, cacheEpoch: cacheEpoch)
                foundStored = id
                return false
            }
            if let object = registry[id] {
                visited.insert(id)
                // An insert whose store save is in flight is in the store
                // already: it was met (or not) with the pending ones.
                if object.flags.contains(.inserted) { return true }
                if object.flags.contains(.fault), let record {
                    fill(object, try record.snapshot())
                    if object.flags.isDisjoint(with: [.invalidated, .deleted]) {
                        found = object
                        return false
                    }
                }
                if object.flags.isDisjoint(with: [.invalidated, .deleted]), passes(object) {
                    found = object
                    return false
                }
                return true
            }
            if discardedInserts.contains(id) { return true }
            try offer(id, record, cacheEpoch: cacheEpoch)
            foundStored = id
            return false
        }
        if let foundStored { found = registeredOrFault(for: foundStored, fetched: true) }
        if let found { return .found(found) }
        guard checksRegistry else { return .found(nil) }
        // An object held here may match on its own values (a change, or a
        // snapshot older than the store's, contract C10) where the index,
        // which holds the store's, did not select it.
        let candidates = possiblyStaleObjects(of: entity, source: source, updatedAmong: pending)
            ?? Set(registry.keys.lazy.filter { $0.entity === entity })
        for id in candidates where !visited.contains(id) {
            guard let object = registry[id], object.flags.isDisjoint(with: [.fault, .inserted, .deleted, .invalidated]) else { continue }
            if passes(object), try source.snapshot(for: id) != nil { return .found(object) }
        }
        return .found(nil)
    }

    /// Offers the row cache the record of a stored object this context
    /// does not hold, which an index entry selected (it comes back as a
    /// fault), when it was read.
    private func offer(_ id: ObjectID, _ record: BorrowedRecord?, cacheEpoch: UInt64) throws(StrataError) {
        if let record { try persistentStoreCoordinator.offerFetched(id, epoch: cacheEpoch, record.snapshot) }
    }
}
