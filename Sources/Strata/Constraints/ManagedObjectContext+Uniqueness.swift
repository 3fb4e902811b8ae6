extension MergePolicy {
    /// What a save does with a new object whose values in a uniqueness
    /// constraint an existing object holds: nil to fail the save
    /// (``error``); otherwise merge the new object into the existing one —
    /// Core Data's upsert — with the new object's values winning (true) or
    /// the existing object's (false).
    var upsertObjectWins: Bool? {
        switch self {
        case .error: nil
        case .mergeByPropertyObjectTrump, .overwrite: true
        case .mergeByPropertyStoreTrump, .rollback: false
        }
    }
}

extension ManagedObjectContext {
    /// At most this many rounds of merging new objects into the objects
    /// holding their values, should other saves keep claiming them meanwhile.
    static let upsertRoundLimit = 8

    /// The objects of this context's own pending inserts and updates that
    /// hold each of `keys` (what a child's save is checked against here: the
    /// child checked the rest of its source itself).
    ///
    /// O(this context's pending changes of entities with a uniqueness
    /// constraint).
    func pendingUniqueHolders(_ keys: [UniqueKey]) -> [UniqueKey: [ObjectID]] {
        guard !keys.isEmpty else { return [:] }
        let wanted = Set(keys)
        var holders: [UniqueKey: [ObjectID]] = [:]
        func add(_ object: ManagedObject) {
            let entity = object.entity
            guard !entity.uniqueIndexNumbers.isEmpty, !object.flags.contains(.deleted) else { return }
            for index in entity.uniqueIndexNumbers {
                guard let bytes = IndexKeyCoding.uniqueKey(object.values, of: entity, index: index), case let key = UniqueKey(bytes: bytes), wanted.contains(key) else { continue }
                holders[key, default: []].append(object.objectID)
            }
        }
        for object in inserted.values { add(object) }
        for object in updated.values { add(object) }
        return holders
    }

    /// Merges each new object a save's constraint conflicts name into the
    /// one object holding its values (the upsert of ``MergePolicy/upsertObjectWins``),
    /// then forgets it: its ID resolves to that object's from now on, in
    /// every context of the coordinator. Rethrows `error` when a conflict
    /// cannot be merged: an updated object's.
    ///
    /// A key can have several holders in this context's source: a level
    /// above the store holds a new object with it that the store's own
    /// holder will conflict with when that level saves (another context
    /// saved it first). The new object is merged into the nearest holder
    /// (the first: the levels above the store are listed first); the level's
    /// own save then merges that one into the stored object, and the aliases
    /// follow each other.
    ///
    /// Attributes: under an object-trump policy the new object's values
    /// win, except those it left as a new object has them; under a
    /// store-trump policy the existing object's win, except where it holds
    /// nil. To-many relationships take the union (each moved object's
    /// inverse follows); a to-one relationship follows the attribute rule.
    func mergeConflictingInserts(_ error: StrataError, objectWins: Bool) throws(StrataError) {
        // Held objects may point at one merged away here: made first, so
        // the references are redirected and the next round validates them.
        takeHeldChildSaves()
        // The stored objects merged into, read in one go (a re-import meets
        // hundreds a save).
        prefetch(error.constraintConflicts.compactMap { conflict in
            conflict.conflictingObjectIDs.first.flatMap { inserted[$0] == nil ? $0 : nil }
        }[...])
        var merged: [ObjectID: ObjectID] = [:]
        for conflict in error.constraintConflicts {
            guard merged[conflict.objectID] == nil else { continue }
            guard let object = inserted[conflict.objectID], var target = conflict.conflictingObjectIDs.first else { throw error }
            while let next = merged[target] { target = next }
            guard target != object.objectID else { continue }
            let existing: ManagedObject
            do throws(StrataError) {
                existing = try existingObject(with: target)
            } catch {
                throw error
            }
            merge(object, into: existing, objectWins: objectWins)
            merged[object.objectID] = existing.objectID
            delete(object)
        }
        redirectOneWayReferences(merged)
        persistentStoreCoordinator.recordAliases(merged)
        // A merge that gave an object back what it held changed nothing.
        dropUnchangedUpdates()
        processPendingChanges()
    }

    private func merge(_ object: ManagedObject, into existing: ManagedObject, objectWins: Bool) {
        let entity = object.entity
        for i in entity.properties.indices {
            let mine = object.values[i]
            if entity.destinations[i] == nil {
                let wins = objectWins ? mine != entity.initialValues[i] : existing.values[i] == .null
                if wins { existing.setStoredValue(mine, at: i) }
            } else if case .objects(let added) = mine {
                guard !added.isEmpty, case .objects(let held) = existing.values[i] else { continue }
                existing.setStoredValue(.objects(held.union(added)), at: i)
            } else if mine != .null, objectWins || existing.values[i] == .null {
                existing.setStoredValue(mine, at: i)
            }
        }
        // What it still points at stays where it is: its delete must take
        // nothing with it (cascade) nor be refused (deny).
        for i in entity.relationshipIndices {
            object.setStoredValue(entity.toManyFlags[i] ? .objects([]) : .null, at: i)
        }
    }

    /// Relationships without an inverse keep no upkeep on their targets:
    /// this context's pending objects that point at a merged object are
    /// pointed at the one it was merged into.
    private func redirectOneWayReferences(_ merged: [ObjectID: ObjectID]) {
        guard !merged.isEmpty else { return }
        for object in Array(inserted.values) + Array(updated.values) {
            let entity = object.entity
            for i in entity.relationshipIndices where entity.inverses[i] == nil {
                switch object.values[i] {
                case .object(let id):
                    if let to = merged[id] { object.setStoredValue(.object(to), at: i) }
                case .objects(let ids) where ids.contains(where: { merged[$0] != nil }):
                    object.setStoredValue(.objects(Set(ids.map { merged[$0] ?? $0 })), at: i)
                default:
                    break
                }
            }
        }
    }
}
