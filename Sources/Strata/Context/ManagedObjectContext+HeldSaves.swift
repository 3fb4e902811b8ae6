/// Held child saves: how a `.mainQueue` context takes a child's save of new
/// objects in without per-object work on the main queue (Rule 13 in
/// <doc:ConcurrencyRules>; contract C17).
///
/// A save that only inserts conflicts with nothing, so taking it in is
/// bookkeeping the main queue can put off: the context keeps the child's
/// change set as it came — an entry of ``deferredChildSaves``, the list a
/// private context records Rule 10's saves in — instead of making an object
/// of each new row. What the context promises holds meanwhile:
///
/// - its children see the held saves: a child lays the list over the
///   context's publication, as for a private parent's recorded saves
///   (``SourceView/Layer``);
/// - ``hasChanges`` is true, and objects-did-change carries the new IDs at
///   the end of the block that took the save, as before;
/// - its save hands the held change sets on as part of ONE change set,
///   after its own changes, without making their objects
///   (``appendHeldSaves(to:)``): an import through the recommended stack
///   costs the main queue O(1) per child save plus a copy of the IDs per
///   save of its own, not an object per row;
/// - anything that reads or changes the context's objects — a fetch, an
///   object by ID, a fault, a child's save that updates or deletes, an
///   upsert, rollback, reset, listing its objects — first takes every held
///   save in (``takeHeldChildSaves()``), in order, as the synchronous path
///   would have at the child's save. The main queue pays for the objects
///   when it asks for them, never for an import it does not look at.
///
/// State: ``heldSaveCount`` and ``heldInsertsToAnnounce`` are guarded by
/// the context's queue (the main queue); the entries by the list's lock.
extension ManagedObjectContext {
    /// Holds `changes`, a child's save, to be taken in when something asks
    /// for its objects; returns the outcome the child applies, or nil when
    /// the save must be taken in now (it updates or deletes, or has a
    /// uniqueness constraint to check). Runs as this context, on the main
    /// queue.
    func holdChildSave(_ changes: ChangeSet, from child: ManagedObjectContext) -> SaveOutcome? {
        guard holds(changes) else { return nil }
        // The list is full (an import saving into a context that does not
        // save): the oldest save is taken in to make room — one save's
        // work, as the synchronous path would have done for this one —
        // never the whole list at once.
        if heldSaveCount >= DeferredChildSaves.entryLimit { takeHeldChildSavesNow(upTo: 1) }
        let count = changes.inserted.count
        let index = ChangedObjectIndex(changes, hashed: false)  // (on the main queue)
        let entry = deferredChildSaves.append(objectCount: count, paced: false) { sequence in
            .init(changes: changes, index: index, child: child, firstVersion: reserveVersions(count), sequence: sequence, below: [])
        }
        guard let entry else { return nil }
        heldSaveCount += 1
        heldInsertsToAnnounce.append((entry.sequence, changes.inserted))
        observation.noteHeldInserts(changes.inserted, values: changes.insertedValues)
        scheduleProcessingIfUsedDirectly()
        var outcome = SaveOutcome()
        outcome.numberInserts(from: entry.firstVersion, count: count)
        notifyMergingChildren(of: changes, outcome: outcome, excluding: child)
        return outcome
    }

    /// Whether this context holds a child's save of `changes` rather than
    /// taking it in: a `.mainQueue` context, a save of new objects only,
    /// none with a uniqueness constraint to check.
    func holds(_ changes: ChangeSet) -> Bool {
        concurrencyType == .mainQueue && changes.updated.isEmpty && changes.deleted.isEmpty
            && !changes.inserted.isEmpty && !UniquenessCheck.applies(to: changes)
    }

    /// Called on a child's thread before its save of `changes` goes into
    /// this `.mainQueue` context when the context will take it in rather
    /// than hold it (it updates or deletes): takes the saves held now in
    /// first, one main-queue block for each, as the synchronous path did at
    /// each of those saves. The block that then takes `changes` in does
    /// not pay for them too — a child that saves its new objects, then
    /// edits them, stalls the main queue for the larger of the two saves,
    /// not their sum.
    ///
    /// Only the saves held when it starts: saves another child holds here
    /// meanwhile are taken in by the save's own block, as before.
    func takeHeldSavesAhead(of changes: ChangeSet) {
        guard concurrencyType == .mainQueue, !MainQueue.isCurrent, !isCurrent, !holds(changes) else { return }
        for _ in 0..<deferredChildSaves.count {
            let more = performAndWait { () -> Bool in
                guard heldSaveCount > 0 else { return false }
                takeHeldChildSavesNow(upTo: 1)
                return heldSaveCount > 0
            }
            if !more { return }
        }
    }

    /// Makes the objects of every held save, in the order they were saved,
    /// as the synchronous path would have at each child's save; their
    /// objects-did-change went out already. Costs nothing when none is held.
    @inline(__always)
    func takeHeldChildSaves() {
        guard heldSaveCount > 0 else { return }
        takeHeldChildSavesNow()
    }

    /// Takes in the oldest `limit` held saves (all by default).
    private func takeHeldChildSavesNow(upTo limit: Int = .max) {
        let entries = deferredChildSaves.all.prefix(limit)
        heldSaveCount = limit == .max ? 0 : max(0, heldSaveCount - entries.count)
        guard let last = entries.last else { return }
        // Saves held since the last objects-did-change are announced with
        // their objects now (a change or delete of them in the same block
        // then shows as it would have), the others only published. Both
        // lists are in sequence order: the taken saves still to announce
        // are a run of the announcements'.
        let first = entries[entries.startIndex].sequence
        let from = heldInsertsToAnnounce.firstIndex { $0.sequence >= first } ?? heldInsertsToAnnounce.endIndex
        let to = heldInsertsToAnnounce[from...].firstIndex { $0.sequence > last.sequence } ?? heldInsertsToAnnounce.endIndex
        let unannounced = Set(heldInsertsToAnnounce[from..<to].map(\.sequence))
        for entry in entries {
            takeInserts(of: entry.changes, firstVersion: entry.firstVersion, announced: !unannounced.contains(entry.sequence))
        }
        heldInsertsToAnnounce.removeSubrange(from..<to)
        // Published before the entries leave the list: a child reading the
        // list, then the publication, finds each object in one of them.
        deferredTakenInThrough = last.sequence
        publishPendingChanges()
        deferredChildSaves.removeFirst(entries.count)
    }

    /// Whether this context's save can hand its held saves on without
    /// making their objects: into a parent context (a store save applies
    /// its outcome to objects), and with nothing deleted here that a held
    /// object might point to (that needs the objects validated).
    var forwardsHeldSaves: Bool {
        parent != nil && deleted.isEmpty && discardedInserts.isEmpty
    }

    /// Appends the held saves' new objects to `changes`, this context's own
    /// change set, after its own; returns what ``letGoOfForwardedSaves(_:)``
    /// needs once the destination has them.
    func appendHeldSaves(to changes: inout ChangeSet) -> ForwardedSaves? {
        guard heldSaveCount > 0 else { return nil }
        let entries = deferredChildSaves.all
        guard let first = entries.first, let last = entries.last else { return nil }
        let own = changes.inserted.count
        for entry in entries { changes.authors.formUnion(entry.changes.authors.labelled(by: transactionAuthor)) }
        if own == 0 && changes.updated.isEmpty && changes.deleted.isEmpty && entries.count == 1 {
            // The common case (an import's save, handed straight on): the
            // child's arrays themselves, not a copy.
            changes.inserted = first.changes.inserted
            changes.insertedValues = first.changes.insertedValues
        } else {
            let total = entries.reduce(own) { $0 + $1.changes.inserted.count }
            changes.inserted.reserveCapacity(total)
            changes.insertedValues.reserveCapacity(total)
            for entry in entries {
                changes.inserted.append(contentsOf: entry.changes.inserted)
                changes.insertedValues.append(contentsOf: entry.changes.insertedValues)
            }
        }
        return ForwardedSaves(ownInserts: own, firstSequence: first.sequence, lastSequence: last.sequence)
    }

    /// After the destination accepted a change set that carried held saves:
    /// they leave the list (the destination shows them to this context's
    /// children now) and stop counting as this context's changes.
    func letGoOfForwardedSaves(_ forwarded: ForwardedSaves) {
        let removed = deferredChildSaves.removeThrough(sequence: forwarded.lastSequence)
        heldSaveCount = max(0, heldSaveCount - removed)
    }

    /// Whether any of `forwarded`'s saves was taken in while the save that
    /// carried them ran (a guest call that read this context's objects):
    /// their objects are then registered here and the save's outcome must
    /// reach them.
    func tookInWhileForwarding(_ forwarded: ForwardedSaves) -> Bool {
        deferredTakenInThrough >= forwarded.firstSequence
    }
}

extension ManagedObjectContext {
    /// Called on a child's thread before its save of `changes` goes into
    /// this `.mainQueue` context, which will hold it and hand it on to a
    /// private parent (the writer): waits while the writer's recorded
    /// saves are at their bound and it runs Strata's own work (which ends
    /// in taking them in), and while it saves to the store and its next
    /// save would pass ``handOnBacklogLimit`` objects with this one.
    /// So an import is paced on its own thread, never on the main queue,
    /// by the writer it feeds, and the writer's saves stay the size the
    /// import's were — not a backlog that grows with each save, since
    /// larger saves import more slowly (see Rule 13).
    func waitForRoomToHandOn(_ changes: ChangeSet) {
        guard concurrencyType == .mainQueue, let below = parent, below.concurrencyType == .privateQueue,
              changes.updated.isEmpty, changes.deleted.isEmpty, !MainQueue.isCurrent, !below.isCurrent else { return }
        let objectCount = changes.inserted.count
        let parking = below.parking
        var ticket: WaitGraph.Ticket?
        parking.condition.withLock {
            parking.roomWaiters += 1
            // Only while the writer is sure to get on without anyone's
            // help: parked, in an open window, with a take-in block queued,
            // or saving to the store. Each of those ends in a broadcast.
            while true {
                let full = !below.deferredChildSaves.hasRoom(forObjects: objectCount)
                    && (parking.parked || parking.acceptsDeferredSaves || parking.takeInBlocksQueued > 0)
                let written = below.publishedPendingCount.load(ordering: .relaxed) - below.objectsBeingStored.load(ordering: .relaxed)
                let waiting = max(0, written) + below.deferredChildSaves.objectCount
                let behind = parking.storing && waiting + objectCount > Self.handOnBacklogLimit
                guard full || behind else { break }
                // Registered only once it waits (Rule 9; `WaitGraph.lock`
                // is a leaf), and not at all if that closes a cycle.
                if ticket == nil {
                    guard let registered = WaitGraph.shared.beginWait(holds: Self.resourcesHeldByCaller, waitsFor: below.waitResources) else { break }
                    ticket = registered
                }
                parking.condition.wait()
            }
            parking.roomWaiters -= 1
        }
        if let ticket { WaitGraph.shared.endWait(ticket) }
    }

    /// How many objects a writer saving to the store may have waiting for
    /// its next save, the producer's new one included, before the
    /// producer waits (``waitForRoomToHandOn(_:)``): an import saving
    /// every 2,000 objects has one save waiting beside the one being
    /// written, small saves gather into one of about this size. Kept that
    /// small because a larger backlog makes the writer's saves larger, and
    /// larger saves import more slowly.
    static let handOnBacklogLimit = 2_048
}

/// Held saves a context's change set carries on to its destination (see
/// ``ManagedObjectContext/appendHeldSaves(to:)``).
struct ForwardedSaves {
    /// How many of the change set's inserts are the context's own (the
    /// held ones follow them).
    let ownInserts: Int
    let firstSequence: UInt64
    let lastSequence: UInt64
}
