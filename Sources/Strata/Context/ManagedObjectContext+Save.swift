import Foundation
internal import StrataStore

extension ManagedObjectContext {
    /// Saves the context's changes one level up (contract C9, C11, C12):
    /// into the parent context, in memory; or, for a context attached to the
    /// coordinator, to the store as ONE atomic batch, after which the saved
    /// objects' IDs are permanent (contract C14).
    ///
    /// ```swift
    /// try context.performAndWait { try context.save() }
    /// ```
    ///
    /// The save validates every changed object first and throws
    /// ``StrataError/Code/validationFailed`` listing every failure; it throws
    /// ``StrataError/Code/mergeConflict`` when another save changed the same
    /// objects first and ``mergePolicy`` is ``MergePolicy/error``. A failed save
    /// changes nothing anywhere: the context keeps its changes, the destination
    /// and the store are as they were. Posts will-save and did-save.
    ///
    /// Uniqueness constraints are checked against the destination's whole
    /// view: its pending changes, its ancestors' and the store. Under
    /// ``MergePolicy/error`` a conflict throws ``StrataError/Code/constraintConflict``;
    /// under the other policies a new object whose values an existing one
    /// holds is merged into it (an upsert; see ``MergePolicy``) and the save
    /// goes on.
    public func save() throws(StrataError) {
        try saveReportingChanges()
    }

    /// ``save()``, returning its did-save payload (nil when there was
    /// nothing to save). `parentEnteredNext`: the caller enters the parent
    /// right after (see ``deferChildSave(_:from:enteredNext:)``).
    @discardableResult
    func saveReportingChanges(parentEnteredNext: Bool = false) throws(StrataError) -> ObjectChanges? {
        checkQueue()
        dropUnchangedUpdates()
        processPendingChangesInWindow()
        guard hasChanges else { return nil }
        NotificationCenter.default.post(name: Self.willSave, object: self)
        // Held child saves go on as they came, unless this save must
        // validate or store their objects (see ``holdChildSave(_:from:)``).
        if !forwardsHeldSaves { takeHeldChildSaves() }
        var upsertRounds = 0
        while true {
            let saved: ObjectChanges
            let pending: ObjectChanges?
            do throws(StrataError) {
                (saved, pending) = try openToDeferredSavesWhileStoring { () throws(StrataError) -> (ObjectChanges, ObjectChanges?) in
                    var changes = try buildChangeSet()
                    let forwarded = appendHeldSaves(to: &changes)
                    let generation = changeGeneration
                    let authorsMark = carriedAuthors.mark
                    let outcome = try send(changes, parentEnteredNext: parentEnteredNext)
                    carriedAuthors.saved(since: authorsMark)
                    // The destination shows them to children now.
                    if let forwarded { letGoOfForwardedSaves(forwarded) }
                    // A merge policy's resolution changes objects children
                    // may have checked against: take what they recorded in
                    // first, then resolve (as for a guest's changes).
                    if outcome.changesObjectsHere { closeToDeferredSaves() }
                    let (saved, registeredInserts) = apply(outcome, of: changes, since: generation, forwarded: forwarded)
                    // (Until the window's close publishes, a producer counts
                    // them as waiting: it waits a moment longer, no more.)
                    objectsBeingStored.store(0, ordering: .relaxed)
                    if !retainsRegistered { releaseUnreferencedObjects(saved, registeredInserts: registeredInserts) }
                    return (saved, collectPendingChanges())
                }
            } catch where error.code == .constraintConflict && upsertRounds < Self.upsertRoundLimit {
                // Nothing was saved anywhere: merge the new objects into the
                // ones holding their values here, and save that instead.
                guard let objectWins = mergePolicy.upsertObjectWins else { throw error }
                upsertRounds += 1
                try mergeConflictingInserts(error, objectWins: objectWins)
                // Every new object merged into one that already held its
                // values (a re-import of unchanged data): nothing is left to write.
                guard hasChanges else { return nil }
                continue
            }
            postObjectsDidChange(pending)
            processPendingChanges()  // what the window's close took in
            keepUpWithStoreChanges()
            NotificationCenter.default.post(name: Self.didSave, object: self, userInfo: [ObjectChanges.userInfoKey: saved])
            return saved
        }
    }

    /// A save to the store — building the change set, the write, applying
    /// the outcome, letting go of what it saved — is Strata's own work:
    /// children's saves are recorded meanwhile instead of waiting for it
    /// (Rule 10). The window closes before anything a user's code sees
    /// (notifications) runs.
    private func openToDeferredSavesWhileStoring<T>(_ body: () throws(StrataError) -> T) throws(StrataError) -> T {
        guard parent == nil else { return try body() }
        parking.condition.withLock { parking.storing = true }
        defer {
            objectsBeingStored.store(0, ordering: .relaxed)
            parking.condition.withLock {
                parking.storing = false
                if parking.roomWaiters > 0 { parking.condition.broadcast() }
            }
        }
        return try openToDeferredSaves { () throws(StrataError) -> T in
            // The window's opening published them: what this save writes.
            objectsBeingStored.store(publishedPendingCount.load(ordering: .relaxed), ordering: .relaxed)
            return try body()
        }
    }

    /// Hands `changes` one level down: to the parent, or to the store.
    private func send(_ changes: ChangeSet, parentEnteredNext: Bool) throws(StrataError) -> SaveOutcome {
        guard let parent else {
            // While the batch is written and synced, children (the main
            // context) get in as guests instead of waiting (contract C17).
            return try parked { () throws(StrataError) -> SaveOutcome in
                try persistentStoreCoordinator.save(changes, from: self)
            }
        }
        if let check = UniquenessCheck(changes) {
            // Against the whole source, on this queue; the parent then
            // checks only what it changed itself since (``acceptChildSave``).
            try check.enforce(holders: SourceView(of: self).uniqueHolders(check.keysToLookUp))
        } else if let deferred = try parent.deferChildSave(changes, from: self, enteredNext: parentEnteredNext) {
            // Into a private parent that is idle, writing to the store or
            // running Strata's own work, checked clean against what it
            // holds: the parent takes the save in later, in order, and this
            // (main) queue does not wait for it (Rule 10; a main-queue
            // context's held saves handed on: Rule 13). (Not with a
            // uniqueness constraint: that needs the parent's check.)
            parent.unsavedObjectCount.add(changes.inserted.count + changes.updated.count + changes.deleted.count, ordering: .relaxed)
            return deferred
        }
        // A save into a main-queue parent — held there, or taken in when it
        // has a uniqueness constraint to check — is paced here, on this
        // thread, by the writer it is handed on to (Rule 13). One it will
        // take in finds the held saves taken in ahead of it, each in a
        // main-queue block of its own.
        parent.takeHeldSavesAhead(of: changes)
        parent.waitForRoomToHandOn(changes)
        return try parent.childAccess { () throws(StrataError) -> SaveOutcome in
            let outcome = try parent.acceptChildSave(changes, from: self)
            // Published before this context lets go of them below,
            // also when the parent runs this inline, inside a block
            // of its own that has not ended (Rule 12).
            parent.publishPendingChanges()
            parent.recordUnsavedCount()
            return outcome
        }
    }

    /// Makes the IDs of `objects` permanent now, before they are saved (each
    /// already has the primary key it will be stored under).
    public func obtainPermanentIDs(for objects: [ManagedObject]) throws(StrataError) {
        checkQueue()
        for object in objects {
            guard object.context === self else {
                throw StrataError(.invalidArgument, "\(object) is not registered in \(name)")
            }
            object.isTemporary = false
        }
    }

    // MARK: Building the change set

    /// Makes clean again every updated object whose values are all as last
    /// saved or fetched (set back, or set to what they held, or merged
    /// into with what they had): it is no change, so a save writes nothing
    /// for it and does not check it for conflicts, as Core Data writes
    /// nothing for an object without changed values. O(the updates).
    func dropUnchangedUpdates() {
        var unchanged: [ObjectID] = []
        for (id, object) in updated {
            if let committed = object.committed, !object.flags.contains(.fault), object.values == committed { unchanged.append(id) }
        }
        for id in unchanged {
            guard let object = updated.removeValue(forKey: id) else { continue }
            object.flags.remove(.dirty)
            markUnpublished(id)
        }
        // A child may hold what this context showed it before it changed
        // these objects back: older than the source now, and no level above
        // says so any more (the change was what did). As for a save's store
        // changes, every context checks them again at its next fetch.
        if !unchanged.isEmpty && publishes.load(ordering: .relaxed) { persistentStoreCoordinator.changeLog.record(unchanged) }
    }

    func buildChangeSet() throws(StrataError) -> ChangeSet {
        var failures: [ValidationFailure] = []
        var changes = ChangeSet()
        changes.mergePolicy = mergePolicy
        changes.authors = carriedAuthors.authors.labelled(by: transactionAuthor)
        changes.inserted.reserveCapacity(inserted.count)
        changes.insertedValues.reserveCapacity(inserted.count)
        var yields = YieldPoints()
        // Relationship targets need checking only against deletions here.
        let checkTargets = !deleted.isEmpty || !discardedInserts.isEmpty
        let showsStoredState = parent == nil
        if showsStoredState { changes.insertedExposedVersions.reserveCapacity(inserted.count) }
        KeyOrder.forEach(in: inserted) { id, object in
            yields.pass()
            validate(object, checkingTargets: checkTargets, into: &failures)
            changes.inserted.append(id)
            changes.insertedValues.append(object.values)
            // As for updates below.
            if showsStoredState {
                changes.insertedExposedVersions.append(object.exposedVersion)
                object.flags.remove(.exposedVersionFresh)
            }
        }
        KeyOrder.forEach(in: updated) { id, object in
            yields.pass()
            validate(object, checkingTargets: checkTargets, into: &failures)
            changes.updated.append(id)
            changes.updatedValues.append(object.values)
            changes.updatedBase.append(object.committed ?? object.values)
            changes.updatedVersions.append(object.version)
            changes.updatedExposedVersions.append(object.exposedVersion)
            // The store will record these values as the ones shown as this
            // version (``StoreChangeLog/ExposedState``): a later change
            // here must show another.
            if showsStoredState { object.flags.remove(.exposedVersionFresh) }
        }
        for (id, object) in deleted {
            validateDelete(object, into: &failures)
            changes.deleted.append(id)
            changes.deletedVersions.append(object.version)
            changes.deletedBase.append(object.committed ?? object.values)
        }
        if !failures.isEmpty {
            var error = StrataError(.validationFailed, "\(failures.count) validation failure(s); nothing was saved")
            error.validationFailures = failures
            throw error
        }
        return changes
    }

    /// Checks `object`'s required values and relationship targets;
    /// `checkTargets`: whether this context deleted anything a target could be.
    private func validate(_ object: ManagedObject, checkingTargets checkTargets: Bool, into failures: inout [ValidationFailure]) {
        // What a child validated needs checking only against deletions here.
        if object.flags.contains(.validatedByChild) && !checkTargets { return }
        let entity = object.entity
        for i in entity.requiredIndices {
            guard case .null = object.values[i] else { continue }
            failures.append(ValidationFailure(objectID: object.objectID, property: entity.properties[i].name, reason: .missingValue))
        }
        for i in entity.relationshipIndices {
            let destination = entity.destinations[i]
            switch object.values[i] {
            case .object(let target):
                checkTarget(target, of: object, at: i, destination: destination, deletions: checkTargets, into: &failures)
            case .objects(let targets):
                for target in targets {
                    checkTarget(target, of: object, at: i, destination: destination, deletions: checkTargets, into: &failures)
                }
            default:
                break
            }
        }
    }

    @inline(__always)
    private func checkTarget(
        _ target: ObjectID, of object: ManagedObject, at index: Int, destination: EntityDescription?,
        deletions: Bool, into failures: inout [ValidationFailure]
    ) {
        if target.entity !== destination {
            failures.append(ValidationFailure(objectID: object.objectID, property: object.entity.properties[index].name, reason: .wrongEntity))
        } else if deletions && isDeletedHere(target) {
            failures.append(ValidationFailure(objectID: object.objectID, property: object.entity.properties[index].name, reason: .targetDeleted))
        }
    }

    private func validateDelete(_ object: ManagedObject, into failures: inout [ValidationFailure]) {
        let entity = object.entity
        for i in entity.denyIndices
        where object.values[i].objectIDs.contains(where: { !isDeletedHere($0) && refersBack($0, to: object, at: i) }) {
            failures.append(ValidationFailure(objectID: object.objectID, property: entity.properties[i].name, reason: .deleteDenied))
        }
        // noAction leaves the other side pointing at the deleted object. A
        // target this context changed is checked by `validate`; any other
        // that still points back would keep a dangling reference.
        for i in entity.relationshipIndices {
            guard case .relationship(let relationship) = entity.properties[i], relationship.deleteRule == .noAction,
                  let inverseName = relationship.inverseName else { continue }
            for target in object.values[i].objectIDs
            where !isDeletedHere(target) && inserted[target] == nil && updated[target] == nil && refersBack(target, to: object, at: i) {
                failures.append(ValidationFailure(objectID: target, property: inverseName, reason: .targetDeleted))
            }
        }
    }

    /// Whether `target` still holds `object` in the inverse of relationship
    /// `index`. A target loaded here is checked (a parent's copy of an object
    /// its child deleted keeps the values it had, so its own relationship
    /// values may be stale); one not loaded is as the source has it, which
    /// points back.
    private func refersBack(_ target: ObjectID, to object: ManagedObject, at index: Int) -> Bool {
        guard let inverse = object.entity.inverses[index], let loaded = registry[target],
              !loaded.flags.contains(.fault) else { return true }
        switch loaded.values[inverse] {
        case .object(let id): return id == object.objectID
        case .objects(let ids): return ids.contains(object.objectID)
        default: return false
        }
    }

    /// Deleted in this context (pending), or inserted and deleted again.
    private func isDeletedHere(_ id: ObjectID) -> Bool {
        deleted[id] != nil || discardedInserts.contains(id)
    }

    // MARK: Applying the outcome

    /// Updates this context after its destination accepted `changes`; returns
    /// the did-save payload, and how many of its inserted IDs (from the
    /// front) may be registered here. Nothing here can fail. Objects changed
    /// after `generation` (by a child's guest call during a store write)
    /// take the saved state as their committed state but stay dirty.
    /// `forwarded`: the held saves `changes` carried, which have no objects
    /// here unless a guest call took them in meanwhile.
    func apply(
        _ outcome: SaveOutcome, of changes: ChangeSet, since generation: UInt64, forwarded: ForwardedSaves?
    ) -> (ObjectChanges, registeredInserts: Int) {
        var saved = ObjectChanges()
        saved.sourceSerial = serial
        let registeredInserts = forwarded.map { tookInWhileForwarding($0) ? changes.inserted.count : $0.ownInserts }
            ?? changes.inserted.count
        // What children read of this context changes with all of it.
        if publishes.load(ordering: .relaxed) {
            unpublished.append(contentsOf: changes.inserted[..<registeredInserts])
            unpublished.append(contentsOf: changes.updated)
            unpublished.append(contentsOf: changes.deleted)
            unpublished.append(contentsOf: discardedInserts)
        }
        if registeredInserts == 0 {
            saved.inserted = changes.inserted  // all forwarded: the same array
        } else {
            saved.inserted.reserveCapacity(changes.inserted.count)
        }
        for i in 0..<registeredInserts {
            let id = changes.inserted[i]
            guard let object = inserted.removeValue(forKey: id) else {
                if discardedInserts.remove(id) != nil {
                    // A guest deleted it while it was being saved (a store
                    // save parks; a hand-on may wait in a cycle, Rule 9):
                    // the destination has it now, so delete it again.
                    rememberDeletion(of: id, stored: Snapshot(values: changes.insertedValues[i], version: outcome.insertedVersions[i]),
                                     inStore: outcome.reachedStore)
                    saved.inserted.append(id)
                } else {
                    // Forwarded and not taken in, or dropped here by a
                    // guest's reset or rollback while the save ran (a store
                    // save parks; a hand-on may wait in a cycle): the
                    // destination has it either way.
                    saved.inserted.append(id)
                }
                continue
            }
            if object.changeStamp > generation {
                object.flags.remove(.inserted)
                object.committed = changes.insertedValues[i]
                if !object.flags.contains(.deleted) { updated[id] = object }
            } else {
                object.flags.remove([.inserted, .dirty])
                object.committed = object.values
            }
            object.version = outcome.insertedVersions[i]
            if outcome.reachedStore { object.isTemporary = false }
            saved.inserted.append(object.objectID)
        }
        if registeredInserts > 0 && registeredInserts < changes.inserted.count {
            saved.inserted.append(contentsOf: changes.inserted[registeredInserts...])
        }
        var snapshots: [Snapshot] = []
        snapshots.reserveCapacity(changes.updated.count)
        for (i, id) in changes.updated.enumerated() {
            guard let object = updated.removeValue(forKey: id) ?? deleted[id] else {
                // A guest's reset or rollback dropped the change while it
                // was being saved: the destination has it all the same.
                guard !outcome.droppedUpdates.contains(i) else { continue }
                let stored = Snapshot(values: outcome.resolvedValues[i] ?? changes.updatedValues[i], version: outcome.updatedVersions[i])
                if let object = registry[id], object.flags.isDisjoint(with: [.fault, .dirty, .deleted, .invalidated]) {
                    refresh(object, with: stored, keepingChanges: false)  // rolled back to what it was before
                    if outcome.reachedStore { object.isTemporary = false }
                    if !pendingRefreshed.contains(id) { pendingRefreshed.append(id) }  // (a rare path)
                }
                saved.updated.append(id)
                snapshots.append(stored)
                continue
            }
            if object.changeStamp > generation {
                // Changed again (or deleted) by a guest while being written.
                if !object.flags.contains(.deleted) { updated[id] = object }
                object.committed = outcome.resolvedValues[i] ?? changes.updatedValues[i]
                object.version = outcome.updatedVersions[i]
                if outcome.reachedStore { object.isTemporary = false }
                saved.updated.append(id)
                snapshots.append(Snapshot(values: object.committed!, version: object.version))
                continue
            }
            if outcome.droppedUpdates.contains(i) {
                invalidate(object)
                pendingInvalidated.append(id)
                continue
            }
            if let values = outcome.resolvedValues[i] {
                object.replaceValues(with: values)
                object.exposedVersion = nextVersion()
                object.flags.insert(.exposedVersionFresh)
                pendingRefreshed.append(id)
            }
            object.flags.remove(.dirty)
            object.committed = object.values
            object.version = outcome.updatedVersions[i]
            if outcome.reachedStore { object.isTemporary = false }
            saved.updated.append(object.objectID)
            snapshots.append(Snapshot(values: object.values, version: object.version))
        }
        saved.updatedSnapshots = snapshots
        for (i, id) in changes.deleted.enumerated() {
            guard let object = deleted[id] else {
                // Dropped by a guest's reset or rollback while being saved:
                // deleted at the destination all the same, unless kept.
                guard outcome.keptDeletes[i] == nil else { continue }
                if let object = registry[id], object.flags.isDisjoint(with: [.dirty, .inserted]) {
                    registry[id] = nil  // rolled back: the copy of a deleted object
                    object.context = nil
                    object.flags = []
                }
                saved.deleted.append(id)
                continue
            }
            if let kept = outcome.keptDeletes[i] {
                deleted[id] = nil
                object.flags.remove([.deleted, .dirty])
                fill(object, kept)
                object.exposedVersion = nextVersion()
                object.flags.insert(.exposedVersionFresh)
                pendingRefreshed.append(id)
                continue
            }
            deleted[id] = nil
            registry[id] = nil
            object.context = nil
            object.flags = []
            saved.deleted.append(id)
        }
        // Only what was saved leaves the tables: a guest may have added more.
        discardedInserts.removeAll()
        return (saved, registeredInserts)
    }

    /// An object written by a save and deleted by a guest meanwhile: put a
    /// stand-in in the deleted table, so that the next save removes it from
    /// the destination (`inStore`: the store, where its ID became
    /// permanent; else a parent context), and announce the deletion (its
    /// insertion went out before; the guest's deletion of a new object
    /// announced nothing).
    private func rememberDeletion(of id: ObjectID, stored: Snapshot, inStore: Bool) {
        let ghost = id.entity.managedObjectClass.init(entity: id.entity, insertInto: nil)
        ghost.primaryKey = id.primaryKey
        ghost.isTemporary = inStore ? false : id.isTemporaryID
        ghost.context = self
        ghost.values = stored.values
        ghost.committed = stored.values
        ghost.version = stored.version
        ghost.flags = [.deleted]
        registry[id] = ghost
        deleted[id] = ghost
        noteChange(ghost)
    }

    // MARK: Receiving a child's save

    /// Runs on this context's queue: takes a child's changes as this
    /// context's own unsaved changes (contract C9). Checks every
    /// updated and deleted object against what the child saw first, and
    /// changes nothing if the save fails.
    func acceptChildSave(_ changes: ChangeSet, from child: ManagedObjectContext) throws(StrataError) -> SaveOutcome {
        if let held = holdChildSave(changes, from: child) { return held }
        let unnamed = carriedAuthors.whenTakenIn(changes.authors)
        defer { carriedAuthors.endTakingIn(unnamed) }
        // What it changes may be among the held saves' objects.
        takeHeldChildSaves()
        let (updates, deletes) = try ConflictResolution.decide(changes) { id, seen, base throws(StrataError) in
            try currentSnapshot(of: id, childSaw: seen, base: base)
        }
        if let check = UniquenessCheck(changes, updates: updates) {
            try check.enforce(holders: pendingUniqueHolders(check.keysToLookUp))
        }

        // Nothing below throws.
        var outcome = SaveOutcome()
        let firstVersion = reserveVersions(changes.inserted.count)
        takeInserts(of: changes, firstVersion: firstVersion)
        outcome.numberInserts(from: firstVersion, count: changes.inserted.count)
        outcome.updatedVersions.reserveCapacity(changes.updated.count)
        for (i, id) in changes.updated.enumerated() {
            switch updates[i] {
            case .write(let values, _):
                let object = registry[id]!  // registered by currentSnapshot(of:)
                objectWillChange(object)
                object.replaceValues(with: values)
                object.exposedVersion = nextVersion()
                object.flags.remove(.exposedVersionFresh)
                outcome.updatedVersions.append(object.exposedVersion)
                if values != changes.updatedValues[i] {
                    outcome.resolvedValues[i] = values  // a property-level merge: validated when saved on
                } else {
                    object.flags.insert(.validatedByChild)
                }
            case .keep(let current):
                outcome.keep(current, forUpdate: i)
            case .drop:
                outcome.drop(update: i)
            }
        }
        for (i, id) in changes.deleted.enumerated() {
            switch deletes[i] {
            case .delete:
                guard let object = registry[id] else { continue }
                takeChildDelete(of: object)
            case .alreadyGone:
                break
            case .keep(let current):
                outcome.keptDeletes[i] = current
            }
        }
        notifyMergingChildren(of: changes, outcome: outcome, excluding: child)
        return outcome
    }

    /// Takes a child's delete of `object` (registered here) as this
    /// context's own: a pending insert here is discarded, anything else
    /// is deleted.
    func takeChildDelete(of object: ManagedObject) {
        let id = object.objectID
        noteChange(object)
        if object.flags.contains(.inserted) {
            registry[id] = nil
            inserted[id] = nil
            // Its row may be in the store already (a guest of a save in
            // flight): never to be loaded from there again.
            discardedInserts.insert(id)
            object.flags.insert(.deleted)
            object.context = nil
        } else {
            object.flags.insert(.deleted)
            updated[id] = nil
            deleted[id] = object
        }
    }

    /// Takes a child's inserted objects as this context's own inserts, the
    /// i-th under version `firstVersion + i` (reserved by the caller, so that
    /// the child knows them before this runs; see ``deferChildSave(_:from:enteredNext:)``).
    /// `announced`: objects-did-change carried them already (a held save,
    /// ``holdChildSave(_:from:)``), so they are only published.
    func takeInserts(of changes: ChangeSet, firstVersion: UInt64, announced: Bool = false) {
        let unnamed = carriedAuthors.add(changes.authors)
        defer { carriedAuthors.endTakingIn(unnamed) }
        // Grown up front, each table is rehashed at most once, here, rather
        // than doubling midway: a rehash of a large table is one long call
        // that no yield point can split.
        registry.reserveCapacity(registry.count + changes.inserted.count)
        inserted.reserveCapacity(inserted.count + changes.inserted.count)
        var yields = YieldPoints()
        for (i, id) in changes.inserted.enumerated() {
            yields.pass()
            let object: ManagedObject
            if let existing = registry[id], existing.flags.contains(.fault) {
                // A fault registered for the ID before the object came
                // (`object(with:)`): it is the new object.
                object = existing
                undo?.willInsert(object)
                object.values = changes.insertedValues[i]
                object.committed = nil
                object.version = 0
                object.flags = [.inserted, .dirty]
                inserted[id] = object
                if announced { markUnpublished(id) } else { noteChange(object) }
            } else if let existing = registry[id] {
                object = existing
                objectWillChange(object)
                object.replaceValues(with: changes.insertedValues[i])
            } else {
                object = id.entity.managedObjectClass.init(entity: id.entity, insertInto: nil)
                object.primaryKey = id.primaryKey
                object.isTemporary = id.isTemporaryID
                object.link = link
                undo?.willInsert(object)
                object.values = changes.insertedValues[i]
                object.flags = [.inserted, .dirty]
                registry[id] = object
                inserted[id] = object
                if announced { markUnpublished(id) } else { noteChange(object) }
            }
            object.exposedVersion = firstVersion + UInt64(i)
            object.flags.remove(.exposedVersionFresh)  // the child holds this version
            object.flags.insert(.validatedByChild)
        }
    }

    /// This context's present view of `id` for a conflict check; nil when it
    /// is deleted here or gone from the source.
    ///
    /// A child reads what this context has not changed from the levels
    /// below (``SourceView``), not from this context. So an unchanged copy
    /// registered here, whose version is not the one the child saw, may be
    /// older than what the child saw: it takes the source's present state
    /// first (losing nothing — it is unchanged), or the child's save would
    /// conflict with a state the child never had to know about. (That
    /// refresh stays should the save then fail: it only brought an
    /// unchanged copy up to date.)
    ///
    /// A context on the coordinator asked about a state the store still
    /// holds and this context holds no other state of — the child read it
    /// from the store (`seen` is a store version), or this context showed
    /// it to the child and then saved it (``StoreChangeLog/ExposedState``)
    /// — takes the child's `base` as that state: no record decoded, no
    /// values compared (an object with a large to-many relationship, saved
    /// batch after batch through a context that lets go of it between
    /// saves, cost both in full at every save).
    private func currentSnapshot(of id: ObjectID, childSaw seen: UInt64, base: [PropertyValue]) throws(StrataError) -> Snapshot? {
        if parent == nil {
            let stored: UInt64? = if Snapshot.isStoreVersion(seen) {
                seen
            } else if let state = persistentStoreCoordinator.changeLog.exposedState(of: id), state.origin == serial, state.exposed == seen {
                state.stored
            } else {
                nil
            }
            if let stored, let current = try storeState(of: id, at: stored, childSaw: seen, base: base) { return current }
        }
        if let object = registry[id], !object.flags.contains(.fault) {
            guard object.flags.isDisjoint(with: [.deleted, .invalidated]) else { return nil }
            if object.exposedVersion != seen && object.flags.isDisjoint(with: [.dirty, .inserted]) {
                guard let source = try sourceSnapshot(for: id) else {
                    invalidate(object)
                    pendingInvalidated.append(id)
                    return nil
                }
                if source.version != object.version || source.values != object.values {
                    refresh(object, with: source, keepingChanges: false)
                    pendingRefreshed.append(id)
                }
            }
            // A kept conflict hands this version to the child: the next change here must move it on.
            object.flags.remove(.exposedVersionFresh)
            return Snapshot(values: object.values, version: object.exposedVersion)
        }
        return try snapshotForChild(id)
    }

    /// ``currentSnapshot(of:childSaw:base:)``'s shortcut, where the child's
    /// `base` is the store's state at version `stored`: when `id` is
    /// registered here as a fault, unchanged at that version, or not at
    /// all, and the store still holds that version, this context takes
    /// that state and answers with the version the child saw; nil otherwise.
    private func storeState(of id: ObjectID, at stored: UInt64, childSaw seen: UInt64, base: [PropertyValue]) throws(StrataError) -> Snapshot? {
        let registered = registry[id]
        if let registered {
            guard registered.flags.isDisjoint(with: [.deleted, .invalidated]) else { return nil }
            if !registered.flags.contains(.fault) {
                guard registered.version == stored, registered.flags.isDisjoint(with: [.dirty, .inserted]) else { return nil }
            }
        }
        guard try persistentStoreCoordinator.storedVersion(of: id) == stored else { return nil }
        let object: ManagedObject
        if let registered {
            object = registered
            if object.flags.contains(.fault) { fill(object, Snapshot(values: base, version: stored)) }
        } else {
            object = materialize(id, Snapshot(values: base, version: stored))
        }
        object.flags.remove(.exposedVersionFresh)  // a child now holds this state
        return Snapshot(values: object.values, version: seen)
    }

    /// Hands the children that merge automatically (contract C20)
    /// what a sibling's save changed here, with this context's new snapshots,
    /// on their own queues.
    func notifyMergingChildren(of changes: ChangeSet, outcome: SaveOutcome, excluding child: ManagedObjectContext) {
        let children = mergingChildren(excluding: child)
        guard !children.isEmpty else { return }
        // Deletes the policy kept (outcome.keptDeletes) did not happen here.
        let removed = changes.deleted.indices.filter { outcome.keptDeletes[$0] == nil }.map { changes.deleted[$0] }
        var payload = ObjectChanges(inserted: changes.inserted, deleted: removed)
        var snapshots: [Snapshot] = []
        for id in changes.updated {
            guard let object = registry[id], object.flags.isDisjoint(with: [.deleted, .invalidated]) else { continue }
            payload.updated.append(id)
            snapshots.append(Snapshot(values: object.values, version: object.exposedVersion))
        }
        payload.updatedSnapshots = snapshots
        var yields = YieldPoints()
        for id in changes.inserted {
            yields.pass()
            registry[id]?.flags.remove(.exposedVersionFresh)
        }
        // Sent once this state is published (``publishPendingChanges()``):
        // a child that reads its source while merging then finds it there.
        for child in children { mergesToSend.append((child, payload)) }
    }
}
