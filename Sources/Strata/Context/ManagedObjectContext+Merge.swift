public import Foundation

extension ManagedObjectContext {
    /// Applies another context's did-save to this one (contract C19):
    /// registered objects it updated take the saved values (keeping this
    /// context's own unsaved changes on top), objects it deleted leave this
    /// context. Posts objects-did-change with the refreshed and invalidated IDs.
    ///
    /// ```swift
    /// main.perform { main.mergeChanges(fromContextDidSave: notification) }
    /// ```
    public func mergeChanges(fromContextDidSave notification: Notification) {
        guard let changes = ObjectChanges(notification) else { return }
        mergeChanges(fromContextDidSave: changes)
    }

    /// Applies the payload of another context's did-save; see ``mergeChanges(fromContextDidSave:)-(Notification)``.
    public func mergeChanges(fromContextDidSave changes: ObjectChanges) {
        checkQueue()
        guard changes.sourceSerial != serial else { return }
        defer { keepUpWithStoreChanges() }
        observation.noteMerged(changes)
        for (i, id) in changes.updated.enumerated() {
            guard let object = registry[id], !object.flags.contains(.fault) else { continue }
            if let snapshots = changes.updatedSnapshots, i < snapshots.count {
                // A merge can arrive after this context saved the same object
                // into the same destination again (the notification was
                // posted first, the merge queued behind the save): its
                // snapshot is then older than what this context has, and
                // taking it would undo that save here.
                if snapshots[i].isOlder(than: object.version) { continue }
                if parent != nil && !snapshots[i].isComparable(with: object.version) {
                    // This copy was read from below the parent (a child reads
                    // what its parent has not changed from the store): it
                    // cannot be ordered against the parent's snapshot, so
                    // take the source's present state, which the parent
                    // published before it sent this merge.
                    refresh(object, mergeChanges: true)
                } else {
                    refresh(object, with: snapshots[i], keepingChanges: true)
                }
            } else {
                refresh(object, mergeChanges: true)
            }
            pendingRefreshed.append(id)
        }
        for id in changes.deleted {
            guard let object = registry[id] else { continue }
            invalidate(object)
            pendingInvalidated.append(id)
        }
        scheduleProcessingIfUsedDirectly()
        if !isInsideBlock && concurrencyType != .mainQueue { processPendingChanges() }
    }

    /// Refreshes `object` from this context's source. With `mergeChanges`
    /// false its unsaved changes are discarded and it becomes a fault (one
    /// whose properties something observes takes the source's values
    /// instead: see ``tracksObservation``); with true it takes the source's
    /// present values and keeps its own changes on top (an object gone from
    /// the source becomes inaccessible).
    public func refresh(_ object: ManagedObject, mergeChanges: Bool) {
        checkQueue()
        // An object found deleted at the source has left the context: made a
        // fault again it would live outside the registry.
        guard object.context === self, object.flags.isDisjoint(with: [.inserted, .fault, .invalidated]) else { return }
        if !mergeChanges {
            let id = object.objectID
            if !object.flags.isDisjoint(with: [.dirty, .deleted]) {
                markUnpublished(id)
                noteChangesDroppedUnsaved()
            }
            updated[id] = nil
            deleted[id] = nil
            guard object.observation != nil else {
                object.values = []
                object.committed = nil
                // Keep its place in the pending notification (it is listed once).
                object.flags = object.flags.intersection(.pendingNotification).union(.fault)
                return
            }
            // Observed: filled with the source's values rather than made a
            // fault, so that its observers hear of exactly what changed.
            object.flags.remove([.dirty, .deleted])
        }
        do {
            if let snapshot = try sourceSnapshot(for: object.objectID) {
                refresh(object, with: snapshot, keepingChanges: mergeChanges)
                return
            }
        } catch {
            FileHandleStandardError.write("Strata: could not refresh \(object.objectID) in \(name): \(error)\n")
            return
        }
        invalidate(object)
    }

    /// Refreshes every registered object: changed ones keep their changes on
    /// top of the source's present values, unchanged ones become faults.
    public func refreshAllObjects() {
        checkQueue()
        for object in Array(registry.values) where !object.flags.contains(.fault) && !object.flags.contains(.inserted) {
            refresh(object, mergeChanges: object.flags.contains(.dirty) || object.flags.contains(.deleted))
        }
    }

    /// Forgets every registered object and every unsaved change; objects
    /// held from before leave the context.
    public func reset() {
        checkQueue()
        undo?.removeAllActions()
        takeHeldChildSaves()
        if hasChanges { noteChangesDroppedUnsaved() }
        carriedAuthors.forget()
        // Objects held from before stay readable (a fault reads as defaults)
        // but leave the context, as Core Data invalidates them.
        for object in registry.values {
            if object.flags.contains(.fault) { object.values = object.entity.initialValues }
            object.context = nil
            object.flags = [.invalidated]
        }
        registry.removeAll()
        inserted.removeAll()
        updated.removeAll()
        deleted.removeAll()
        discardedInserts.removeAll()
        keyLookups.reset()
        recentlyFetched.removeAll()
        heldFetched.removeAll()
        fetchedSinceHeldChecked = 0
        publishedAll = false
        for object in pendingChanges { object.flags.remove(.pendingNotification) }
        pendingChanges.removeAll()
        pendingChangesPublished = 0
        pendingRefreshed.removeAll()
        pendingInvalidated.removeAll()
    }

    /// Discards every unsaved change: inserted objects leave, updated and
    /// deleted ones return to their last saved values.
    public func rollback() {
        checkQueue()
        undo?.removeAllActions()
        takeHeldChildSaves()
        if hasChanges { noteChangesDroppedUnsaved() }
        carriedAuthors.forget()
        for (id, object) in inserted {
            registry[id] = nil
            object.context = nil
            object.flags = []
        }
        for object in Array(updated.values) + Array(deleted.values) {
            guard let committed = object.committed else { continue }
            object.replaceValues(with: committed)
            object.flags.remove([.dirty, .deleted])
            object.exposedVersion = nextVersion()
            object.flags.insert(.exposedVersionFresh)
            pendingRefreshed.append(object.objectID)
        }
        inserted.removeAll()
        updated.removeAll()
        deleted.removeAll()
        discardedInserts.removeAll()
        recentlyFetched.removeAll()
        heldFetched.removeAll()
        fetchedSinceHeldChecked = 0
        publishedAll = false
        scheduleProcessingIfUsedDirectly()
    }

    /// Takes `snapshot` as the source's state of `object`, re-applying the
    /// object's unsaved changes on top when `keepingChanges`.
    func refresh(_ object: ManagedObject, with snapshot: Snapshot, keepingChanges: Bool) {
        object.flags.remove(.validatedByChild)
        if object.flags.contains(.dirty) { markUnpublished(object.objectID) }
        if keepingChanges && object.flags.contains(.dirty) {
            let base = object.committed ?? snapshot.values
            var merged = snapshot.values
            for i in merged.indices where object.values[i] != base[i] { merged[i] = object.values[i] }
            object.replaceValues(with: merged)
        } else {
            object.replaceValues(with: snapshot.values)
            if object.flags.contains(.dirty) {
                object.flags.remove(.dirty)
                updated[object.objectID] = nil
            }
        }
        object.committed = snapshot.values
        object.version = snapshot.version
        object.exposedVersion = nextVersion()
        object.flags.insert(.exposedVersionFresh)
    }
}

extension ManagedObjectContext {
    /// Unsaved changes are dropped: a descendant may have loaded them, and
    /// now holds values its source no longer has (``StoreChangeLog``).
    func noteChangesDroppedUnsaved() {
        if publishes.load(ordering: .relaxed) { persistentStoreCoordinator.changeLog.recordUnknownChange(below: serial) }
    }
}
