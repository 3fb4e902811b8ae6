internal import StrataStore

/// Deferred child saves: how a child's save of new objects into a busy or
/// idle private-queue parent returns at once, without doing the parent's
/// share of the work on the child's thread (SEMANTICS.md line 17; Rule 10
/// in *Concurrency*).
///
/// A child's save that only inserts cannot fail at the parent: new objects
/// conflict with nothing. So when the parent is a `.privateQueue` context
/// that is either idle or *parked* in its own store write, the child
/// reserves the parent's versions for the new objects, records the change
/// set here and returns. The parent takes the recorded saves in, in the
/// order they were made, before it does anything else:
///
///     main queue (child)              writer queue (parent)
///     main.save()                     writer.save(): build change set
///       deferChildSave: parked? ─┐    park ──────────────────────────┐
///       record, return ◀─────────┘    coordinator.save: write+fsync  │
///     (main queue free again)         ...                            │
///                                     unpark ◀───────────────────────┘
///                                     take in recorded saves (as a guest
///                                     would have); apply the outcome
///
/// - A parked parent takes them in when its write returns, before it applies
///   the outcome — exactly where a guest's changes would have landed.
/// - An idle parent gets one queued block that takes them in; any later
///   block of the parent, or `performAndWait`, is behind it on the queue.
/// - A guest call (a child's fetch or fault through the parked parent, a
///   Rule 9 guest) takes them in first, so a child always sees its own saves.
///
/// A parent that is running a block and not parked may be waiting for this
/// very child (Rule 9): the save then takes the ordinary synchronous path,
/// as does any save that updates or deletes (it may conflict) and any save
/// made from inside the parent. At most ``limit`` saves wait at once; past
/// that the child waits, so a fast producer cannot pile up memory.
///
/// `@unchecked Sendable`: `entries` is guarded by `lock`, a leaf lock taken
/// after the parent's `parking.condition` when both are held.
final class DeferredChildSaves: @unchecked Sendable {
    struct Entry {
        let changes: ChangeSet
        let child: ManagedObjectContext
        let firstVersion: UInt64

        /// The `i`-th inserted object as the parent will hold it: its values,
        /// under the version reserved for it.
        func insertedSnapshot(at i: Int) -> Snapshot {
            Snapshot(values: changes.insertedValues[i], version: firstVersion + UInt64(i))
        }
    }

    static let limit = 16

    private let lock = Lock()
    private var entries: [Entry] = []

    func append(_ entry: Entry) { lock.withLock { entries.append(entry) } }
    var count: Int { lock.withLock { entries.count } }
    /// The recorded saves, oldest first (a copy).
    var all: [Entry] { lock.withLock { entries } }
    /// Drops the `count` oldest saves (taken in and published by then).
    func removeFirst(_ count: Int) { lock.withLock { entries.removeFirst(count) } }
}

extension ManagedObjectContext {
    /// Records `changes` for this context to take in later, when that is
    /// safe (see ``DeferredChildSaves``); returns the outcome the child
    /// applies, or nil when the child must take the synchronous path.
    /// Called on the child's thread.
    func deferChildSave(_ changes: ChangeSet, from child: ManagedObjectContext) -> SaveOutcome? {
        guard concurrencyType == .privateQueue, let queue,
              changes.updated.isEmpty, changes.deleted.isEmpty, !changes.inserted.isEmpty,
              !isCurrent else { return nil }
        enum Plan { case none, parked, queued }
        var firstVersion: UInt64 = 0
        let plan: Plan = parking.condition.withLock {
            let parked = parking.parked
            guard parked || parking.queuedBlocks == 0, deferredChildSaves.count < DeferredChildSaves.limit else { return .none }
            // Under the parking lock: the owner cannot unpark (and miss the
            // entry) or start a block (and run before it) meanwhile.
            firstVersion = reserveVersions(changes.inserted.count)
            deferredChildSaves.append(.init(changes: changes, child: child, firstVersion: firstVersion))
            if parked { return .parked }
            parking.queuedBlocks += 1
            return .queued
        }
        switch plan {
        case .none:
            return nil
        case .parked:
            break
        case .queued:
            queue.async {
                self.runBlock({}, enteredFromMain: false)  // takes the entry in first
                self.parking.blockFinished()
            }
        }
        var outcome = SaveOutcome()
        outcome.numberInserts(from: firstVersion, count: changes.inserted.count)
        return outcome
    }

    /// Takes in, in order, the child saves recorded for this context. Runs as
    /// this context: at the start of its outermost block, when its store
    /// write returns, and at the start of a guest call.
    ///
    /// The entries leave the list only once what they inserted is published
    /// (``layerForChildren()`` reads the list first, then the publication:
    /// so a fetching child finds each save in one or the other).
    func takeDeferredChildSaves() {
        while true {
            let entries = deferredChildSaves.all
            guard !entries.isEmpty else { return }
            for entry in entries {
                takeInserts(of: entry.changes, firstVersion: entry.firstVersion)
                notifyMergingChildren(of: entry.changes, outcome: SaveOutcome(), excluding: entry.child)
            }
            publishPendingChanges()
            deferredChildSaves.removeFirst(entries.count)
        }
    }
}
