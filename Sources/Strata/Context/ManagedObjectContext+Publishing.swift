internal import StrataStore

extension ManagedObjectContext {
    /// Brings the copy of this context's pending changes that its children
    /// read (``PendingChangesPublication``) up to date with what changed
    /// since the last call: the objects awaiting the next objects-did-change
    /// notification and those in ``unpublished``. Runs as this context —
    /// whenever it processes pending changes (so when each block ends), after
    /// a guest call, after taking in deferred child saves — and costs
    /// nothing when nothing changed.
    func publishPendingChanges() {
        guard concurrencyType != .confinement else { return }
        defer { sendMerges() }
        guard !publishedAll || pendingChanges.count > pendingChangesPublished || !unpublished.isEmpty
                || publishedTakenInThrough != deferredTakenInThrough else { return }
        let hasChanges = !inserted.isEmpty || !updated.isEmpty || !deleted.isEmpty || !discardedInserts.isEmpty
        let takenInThrough = deferredTakenInThrough
        let changed = pendingChanges.count - pendingChangesPublished + unpublished.count
        let pending = inserted.count + updated.count + deleted.count + discardedInserts.count
        publishedPendingCount.store(pending, ordering: .relaxed)
        var update: [(ObjectID, PendingState?)] = []
        // From scratch when the copy is incomplete, and after a save (most
        // of what changed left: what is pending now is the shorter list).
        let replacing = !publishedAll || !hasChanges || changed > pending
        let read = publication.isRead
        var yields = YieldPoints()
        if replacing && read {
            update.reserveCapacity(pending)
            for id in inserted.keys { yields.pass(); update.append((id, publishedState(of: id))) }
            for id in updated.keys { yields.pass(); update.append((id, publishedState(of: id))) }
            for id in deleted.keys { update.append((id, .removed)) }
            for id in discardedInserts { update.append((id, .removed)) }
        } else if read {
            update.reserveCapacity(changed)
            for object in pendingChanges[pendingChangesPublished...] {
                yields.pass()
                update.append((object.objectID, publishedState(of: object)))
            }
            for id in unpublished { yields.pass(); update.append((id, publishedState(of: id))) }
        }
        publishedAll = publication.update(update, replacing: replacing, hasPending: hasChanges, takenInThrough: takenInThrough)
        unpublished.removeAll(keepingCapacity: true)
        pendingChangesPublished = pendingChanges.count
        publishedTakenInThrough = takenInThrough
    }

    /// Publishes each ancestor this thread holds now (the caller runs inside
    /// its block, or on the main queue for a main-queue ancestor): a block
    /// this context runs later then sees what they changed before it was
    /// enqueued, as it would have by entering them.
    func publishAncestorsHeldHere() {
        var ancestor = parent
        while let level = ancestor {
            if level.isCurrent { level.publishPendingChanges() }
            ancestor = level.parent
        }
    }

    /// Hands each child that merges automatically what a sibling's save
    /// changed here (contract C20), on the child's queue.
    private func sendMerges() {
        guard !mergesToSend.isEmpty else { return }
        let merges = mergesToSend
        mergesToSend.removeAll()
        for (child, payload) in merges {
            child.perform { child.mergeChanges(fromContextDidSave: payload) }
        }
    }

    /// Marks objects whose published state may have changed without going
    /// through ``noteChange(_:only:)`` (a save's outcome, a refresh, a merge).
    @inline(__always)
    func markUnpublished(_ id: ObjectID) {
        keyLookups.pending.noteChanged(id)
        if publishes.load(ordering: .relaxed) { unpublished.append(id) }
    }

    /// What a child should see of `id` here: nil when this context holds no
    /// pending change of it (the levels below decide). Handing out a
    /// version means the next change here must move it on (the child may
    /// save against it), hence `exposedVersionFresh` is cleared.
    private func publishedState(of id: ObjectID) -> PendingState? {
        if discardedInserts.contains(id) { return .removed }
        guard let object = registry[id] else { return nil }
        return publishedState(of: object)
    }

    /// ``publishedState(of:)-(ObjectID)`` for an object at hand (one of
    /// ``pendingChanges``): no table lookup unless it left the context.
    private func publishedState(of object: ManagedObject) -> PendingState? {
        // Not registered here (any more): an insert deleted again, or gone.
        guard object.link === link else { return discardedInserts.contains(object.objectID) ? .removed : nil }
        if object.flags.contains(.invalidated) { return nil }
        if object.flags.contains(.deleted) { return .removed }
        guard !object.flags.isDisjoint(with: [.inserted, .dirty]) else { return nil }
        object.flags.remove(.exposedVersionFresh)
        let snapshot = Snapshot(values: object.values, version: object.exposedVersion)
        return object.flags.contains(.inserted) ? .inserted(snapshot) : .updated(snapshot)
    }

    /// Called on a child's thread: this context's published changes and the
    /// child saves it has yet to take in, for the child to lay over the
    /// levels below. Never waits for this context's queue, except once for
    /// a private context that got its first child while holding unpublished
    /// changes (see ``PendingChangesPublication``). Nil when it holds no
    /// change for them (most reads: nothing copied, no lock taken).
    func layerForChildren() throws(StrataError) -> SourceView.Layer? {
        // This thread holds the context (the child runs inside one of its
        // blocks, or on the main queue for a main-queue context): its live
        // state is the one to see.
        if isCurrent { publishPendingChanges() }
        // Deferred saves first: the context publishes what it took in before
        // it drops them from the list, so reading in this order misses nothing.
        // Nothing either way (most reads): no lock taken, nothing copied.
        // Each is stored under its lock, after the state it says, so an
        // empty list seen means its last save taken in is published.
        if deferredChildSaves.isEmpty && publication.isEmptyAndComplete { return nil }
        let deferred = deferredChildSaves.all
        if let published = publication.read() { return SourceView.Layer(published: published, deferred: deferred) }
        try childAccess { () throws(StrataError) in publishPendingChanges() }
        // Complete now: with a child, every update completes the copy.
        return SourceView.Layer(published: publication.read() ?? PublishedChanges(), deferred: deferredChildSaves.all)
    }
}
