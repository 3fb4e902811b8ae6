import Foundation

extension ManagedObjectContext {
    // MARK: Inspecting changes

    /// Whether the context holds unsaved inserts, updates or deletes.
    public var hasChanges: Bool {
        checkQueue()
        return !inserted.isEmpty || !updated.isEmpty || !deleted.isEmpty || heldSaveCount > 0
    }
    /// The objects inserted since the last save and not deleted since.
    public var insertedObjects: Set<ManagedObject> { checkQueue(); takeHeldChildSaves(); return Set(inserted.values) }
    /// The objects whose values changed since the last save, other than the inserted and the
    /// deleted ones.
    public var updatedObjects: Set<ManagedObject> { checkQueue(); return Set(updated.values) }
    /// The objects deleted since the last save. An object inserted since is not among them:
    /// deleting it just discards it.
    public var deletedObjects: Set<ManagedObject> { checkQueue(); return Set(deleted.values) }
    /// Every object the context holds now: fetched, faulted, inserted, changed or deleted (see
    /// ``retainsRegisteredObjects`` for when it lets go of one).
    public var registeredObjects: Set<ManagedObject> { checkQueue(); takeHeldChildSaves(); return Set(registry.values) }

    /// The object registered under `id`, if any (never loads anything).
    public func registeredObject(for id: ObjectID) -> ManagedObject? {
        checkQueue()
        if registry[id] == nil { takeHeldChildSaves() }
        return registry[id]
    }

    // MARK: Inserting and deleting

    /// Inserts `object` (created with `insertInto: nil`), giving it a
    /// temporary ID. Objects created with ``ManagedObject/init(context:)`` are
    /// inserted already.
    public func insert(_ object: ManagedObject) {
        checkQueue()
        if object.link === link {
            if object.flags.contains(.deleted) {
                undo?.willChange(object, exists: false)
                undelete(object)
            }
            return
        }
        precondition(object.link?.unmanaged == nil, "Strata: \(object) belongs to another context")
        precondition(model.contains(object.entity),
                     "Strata: \(object.entity.name) is not an entity of this context's model")
        undo?.willInsert(object)
        object.primaryKey = allocatePrimaryKey(for: object.entity)
        object.isTemporary = true
        registerInserted(object)
    }

    /// Registers `object` as inserted here, under the ID it has.
    func registerInserted(_ object: ManagedObject) {
        object.link = link
        object.committed = nil
        object.version = 0
        object.exposedVersion = nextVersion()
        object.flags = [.inserted, .dirty, .exposedVersionFresh]
        let id = object.objectID
        registry[id] = object
        inserted[id] = object
        carriedAuthors.noteOwnChange()
        noteChange(object)
    }

    /// Deletes `object`, applying each relationship's delete rule: nullify
    /// removes it from the other side, cascade deletes the objects it holds,
    /// deny is checked when saving, no action does nothing.
    public func delete(_ object: ManagedObject) {
        checkQueue()
        precondition(object.context === self, "Strata: \(object) is not registered in \(name)")
        guard !object.flags.contains(.deleted) else { return }
        object.fulfill()
        // Found deleted at the source as it was filled (or before): gone
        // already, and out of this context (``invalidate(_:)``).
        guard !object.flags.contains(.invalidated) else { return }
        undo?.willChange(object, exists: true)
        markDeleted(object)
        let id = object.objectID
        let inverses = object.entity.inverses
        for (i, property) in object.entity.properties.enumerated() {
            guard case .relationship(let relationship) = property else { continue }
            let targets = object.values[i].objectIDs
            guard !targets.isEmpty else { continue }
            switch relationship.deleteRule {
            case .nullify, .cascade:
                for targetID in targets {
                    guard let target = liveObject(for: targetID) else { continue }
                    if let inverse = inverses[i] { unlink(id, from: target, at: inverse) }
                    if relationship.deleteRule == .cascade { delete(target) }
                }
            case .deny, .noAction:
                break
            }
        }
        if object.flags.contains(.inserted) { object.context = nil }
    }

    /// Marks `object` deleted here (its delete rules aside): an insert is
    /// discarded, a stored object listed as deleted.
    func markDeleted(_ object: ManagedObject) {
        carriedAuthors.noteOwnChange()
        let id = object.objectID
        object.flags.insert(.deleted)
        if object.flags.contains(.inserted) {
            inserted[id] = nil
            registry[id] = nil
            discardedInserts.insert(id)
        } else {
            updated[id] = nil
            deleted[id] = object
        }
        noteChange(object)
    }

    func undelete(_ object: ManagedObject) {
        object.flags.remove(.deleted)
        deleted[object.objectID] = nil
        if object.flags.contains(.dirty) { updated[object.objectID] = object }
        noteChange(object)
    }

    // MARK: Relationship upkeep

    /// Sets relationship `index` of `object` and keeps the inverse in step on
    /// the objects added and removed.
    func setRelationship(of object: ManagedObject, at index: Int, to value: PropertyValue) {
        let old = object.values[index]
        objectWillChange(object, at: index)
        object.changingValue(at: index) { object.values[index] = value }
        guard let inverse = object.entity.inverses[index] else { return }
        let id = object.objectID
        // Unlinks first, then links, as the old and new values differ;
        // walked in place rather than gathered into arrays, which cost a
        // to-one set (an ingredient's recipe) two allocations.
        if case .objects(let before) = old, case .objects(let after) = value {
            for targetID in before where !after.contains(targetID) { unlink(id, fromTargetOf: targetID, at: inverse) }
            for targetID in after where !before.contains(targetID) { link(id, to: targetID, at: inverse, relationship: index) }
        } else {
            old.forEachObjectID { unlink(id, fromTargetOf: $0, at: inverse) }
            value.forEachObjectID { link(id, to: $0, at: inverse, relationship: index) }
        }
    }

    /// Adds `id` to, or removes it from, to-many relationship `index` of
    /// `object` (which does not hold it, or does), editing its set in place,
    /// and keeps the inverse in step. The change is announced (undo's
    /// record of the set as it was, Observation's will-set) before the set
    /// is touched.
    func changeMembership(of object: ManagedObject, at index: Int, id: ObjectID, adding: Bool) {
        objectWillChange(object, at: index)
        object.changingValue(at: index) {
            object.editMembers(at: index) { ids in
                if adding { ids.insert(id) } else { ids.remove(id) }
            }
        }
        guard let inverse = object.entity.inverses[index] else { return }
        if adding {
            link(object.objectID, to: id, at: inverse, relationship: index)
        } else {
            unlink(object.objectID, fromTargetOf: id, at: inverse)
        }
    }

    /// Removes `id` from the inverse relationship `inverse` of the object
    /// `targetID` names, if it is alive here.
    private func unlink(_ id: ObjectID, fromTargetOf targetID: ObjectID, at inverse: Int) {
        if let target = liveObject(for: targetID) { unlink(id, from: target, at: inverse) }
    }

    /// Adds `id` to the inverse relationship `inverse` of the object
    /// `targetID` names (one that held another object in a to-one inverse
    /// gives it up: that object's relationship `index` loses the target).
    private func link(_ id: ObjectID, to targetID: ObjectID, at inverse: Int, relationship index: Int) {
        guard let target = liveObject(for: targetID) else { return }
        switch RelationshipHolding(target.values[inverse], of: id) {
        case .inSet, .theOne:
            return
        case .notInSet:
            objectWillChange(target, at: inverse)
            target.changingValue(at: inverse) {
                target.editMembers(at: inverse) { ids in
                    // Room for a few at once: a to-many inverse filled one link
                    // at a time (a recipe's ingredients) would otherwise grow
                    // its set at the first, second and fourth.
                    if ids.isEmpty { ids = Set(minimumCapacity: 4) }
                    ids.insert(id)
                }
            }
        case .another(let previous):
            objectWillChange(target, at: inverse)
            target.changingValue(at: inverse) { target.values[inverse] = .object(id) }
            // The target belonged to another object: take it from there.
            if let other = liveObject(for: previous) { unlink(targetID, from: other, at: index) }
        case .nothing:
            objectWillChange(target, at: inverse)
            target.changingValue(at: inverse) { target.values[inverse] = .object(id) }
        }
    }

    /// Removes `id` from relationship `index` of `target` (one side only).
    func unlink(_ id: ObjectID, from target: ManagedObject, at index: Int) {
        switch RelationshipHolding(target.values[index], of: id) {
        case .inSet:
            objectWillChange(target, at: index)
            target.changingValue(at: index) { target.editMembers(at: index) { $0.remove(id) } }
        case .theOne:
            objectWillChange(target, at: index)
            target.changingValue(at: index) { target.values[index] = .null }
        case .notInSet, .another, .nothing:
            break
        }
    }

    /// The registered object (or a new fault) for `id`, filled, unless it no longer exists.
    private func liveObject(for id: ObjectID) -> ManagedObject? {
        let object = registeredOrFault(for: id)
        object.fulfill()
        return object.flags.contains(.invalidated) ? nil : object
    }

    // MARK: Change tracking

    /// Called before every change to `object`'s values; `property`, when
    /// the change is to that one property alone.
    func objectWillChange(_ object: ManagedObject, at property: Int? = nil) {
        // Found deleted at the source, the object left this context
        // (``invalidate(_:)``): an inverse kept in step on it is its own
        // value, never a change to save.
        guard !object.flags.contains(.invalidated) else { return }
        // (A child save taken in comes through here too: see ``CarriedAuthors/endTakingIn(_:)``.)
        undo?.willChange(object, exists: !object.flags.contains(.deleted))
        carriedAuthors.noteOwnChange()
        object.flags.remove(.validatedByChild)
        // An object changed already is keyed by what it holds (or listed
        // to be): another change says which property moves.
        var only: Int?
        if !object.flags.contains(.dirty) {
            object.flags.insert(.dirty)
            if !object.flags.contains(.inserted) && !object.flags.contains(.deleted) {
                updated[object.objectID] = object
            }
        } else {
            only = property
        }
        if !object.flags.contains(.exposedVersionFresh) {
            object.exposedVersion = nextVersion()
            object.flags.insert(.exposedVersionFresh)
        }
        noteChange(object, only: only)
    }

    /// Notes a change to `object`; `property`, when the object was changed
    /// here already and this change moves that one property alone.
    func noteChange(_ object: ManagedObject, only property: Int? = nil) {
        keyLookups.pending.noteChanged(object.objectID, only: property)
        changeGeneration &+= 1
        object.changeStamp = changeGeneration
        guard !object.flags.contains(.pendingNotification) else {
            // Published in the middle of this block, and changed again since.
            if pendingChangesPublished > 0 { unpublished.append(object.objectID) }
            return
        }
        object.flags.insert(.pendingNotification)
        pendingChanges.append(object)
        // Only the first pending change can need a processing block: with
        // more, one is scheduled already or the running block processes them.
        if pendingChanges.count == 1 { scheduleProcessingIfUsedDirectly() }
    }

    /// A `.mainQueue` context changed or read outside any block (direct use
    /// on the main queue) gets its notification, and lets go of what it
    /// read, from one main-queue block, as Core Data posts it at the end of
    /// the run-loop turn.
    func scheduleProcessingIfUsedDirectly() {
        guard concurrencyType == .mainQueue, !processingScheduled, !isInsideBlock else { return }
        processingScheduled = true
        DispatchQueue.main.async {
            self.processPendingChanges()
            self.releaseUnreferencedFetched()
        }
    }

    /// Posts one objects-did-change notification for everything changed since
    /// the last one (contract C8). Blocks run through `perform` and
    /// `performAndWait` call it when they end; a `.confinement` context calls
    /// it when saving or fetching, or when you do.
    public func processPendingChanges() {
        checkQueue()
        postObjectsDidChange(collectPendingChanges())
    }

    /// Publishes this context's pending changes and gathers the
    /// objects-did-change payload for them, without posting it: nothing
    /// here runs a user's code (see ``openToDeferredSaves(_:)``).
    func collectPendingChanges() -> ObjectChanges? {
        processingScheduled = false
        publishPendingChanges()
        recordUnsavedCount()
        let changes = pendingObjectChanges()
        observation.gather(changes)
        return changes
    }

    /// The objects-did-change payload for what changed since the last one.
    private func pendingObjectChanges() -> ObjectChanges? {
        guard !pendingChanges.isEmpty || !pendingRefreshed.isEmpty || !pendingInvalidated.isEmpty
                || !heldInsertsToAnnounce.isEmpty else { return nil }
        var changes = ObjectChanges()
        if !heldInsertsToAnnounce.isEmpty {
            changes.inserted = heldInsertsToAnnounce.count == 1 ? heldInsertsToAnnounce[0].ids : heldInsertsToAnnounce.flatMap(\.ids)
            heldInsertsToAnnounce = []
        }
        for object in pendingChanges {
            object.flags.remove(.pendingNotification)
            if object.flags.contains(.inserted) {
                if !object.flags.contains(.deleted) {
                    changes.inserted.append(object.objectID)
                } else if observation.isObserved {
                    changes.discarded.append(object.objectID)
                }
            } else if object.flags.contains(.deleted) {
                changes.deleted.append(object.objectID)
            } else if object.flags.contains(.dirty) {
                changes.updated.append(object.objectID)
            }
        }
        changes.refreshed = pendingRefreshed
        changes.invalidated = pendingInvalidated
        pendingChanges.removeAll(keepingCapacity: true)
        pendingChangesPublished = 0
        pendingRefreshed.removeAll()
        pendingInvalidated.removeAll()
        return changes.isEmpty && changes.discarded.isEmpty ? nil : changes
    }

    /// What ``unsavedObjectCount`` says, from this context's tables (on its queue).
    func recordUnsavedCount() {
        unsavedObjectCount.store(inserted.count + updated.count + deleted.count + heldSaveCount, ordering: .relaxed)
    }

    func postObjectsDidChange(_ changes: ObjectChanges?) {
        // Outside a block (a main-queue context used directly, a
        // confinement context's save or fetch): the end of an undo group.
        // Inside one, its end is (``endBlock()``): a save in a block
        // splits nothing.
        if let undo, !isInsideBlock { undo.blockEnded() }
        deliverObservedChanges()
        guard let changes, !changes.isEmpty else { return }
        NotificationCenter.default.post(
            name: ManagedObjectContext.objectsDidChange, object: self, userInfo: [ObjectChanges.userInfoKey: changes])
    }
}

/// What a relationship's value holds of one object — asked before the
/// value is changed, and holding none of it: a set still held by a match
/// on the value (`case .objects(let held)`) while it is edited has two
/// owners, and the edit copies it whole, every time.
private enum RelationshipHolding {
    /// A to-many relationship that holds the object, or does not.
    case inSet, notInSet
    /// A to-one relationship that holds the object, or another.
    case theOne, another(ObjectID)
    /// An empty to-one relationship.
    case nothing

    init(_ value: PropertyValue, of id: ObjectID) {
        switch value {
        case .objects(let ids): self = ids.contains(id) ? .inSet : .notInSet
        case .object(let current): self = current == id ? .theOne : .another(current)
        default: self = .nothing
        }
    }
}
