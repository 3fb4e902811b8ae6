internal import StrataStore
import Synchronization

/// Deferred child saves: how a child's save into a busy or idle private-queue
/// parent returns at once, without waiting for the parent's queue and
/// without doing the parent's share of the work on the child's thread
/// (contract C17; Rule 10 in <doc:ConcurrencyRules>).
///
/// A child's save can fail at its parent only by a conflict: an object it
/// updates or deletes that the parent changed since the child read it (new
/// objects conflict with nothing). The parent's present state of an object
/// is what it *publishes* for its children (Rule 12) with the saves recorded
/// here laid over it, whenever the parent is in a state where it changes
/// nothing else:
///
/// - *idle*: no block of it queued or running;
/// - *parked* in its own store write (guests serialize with the check: both
///   hold `parking.condition`);
/// - in an *open window* of its own: taking recorded saves in, or saving to
///   the store — from building the change set, through the write, to
///   letting go of what it saved — where Strata, not user code, runs and
///   nothing but the recorded saves changes the parent's objects.
///
/// In those states the child checks its change set against that view, on
/// its own thread, under `parking.condition`. A clean check — every updated
/// or deleted object still at the version the child read, or with the very
/// values it started from — cannot turn into a conflict later: the child
/// reserves the parent's versions for its objects, records the change set
/// here and returns. The parent takes recorded saves in, in the order they
/// were made, before anything else can change its objects: at the start of
/// its next block (an idle parent gets one queued for the purpose), when its
/// store write returns, when an open window closes, and at the start of any
/// guest call.
///
///     main queue (child)              writer queue (parent)
///     main.save(): edit of X          writer.save(): [open] build the change set
///       check X against the writer's    (100,000 objects)
///       publication + recorded saves    park: write, fsync
///       + the store: clean ──────┐      ...
///       record, return ◀─────────┘      unpark: take X's edit in
///     (main queue free again)           apply; let go; [close]
///
/// A save that is not clean (a conflict, or an object gone at the parent)
/// takes the synchronous path of Rule 5, which decides it under the merge
/// policy — waiting for the parent. So does a save made from inside the
/// parent, a save with a uniqueness constraint to check, a save into a
/// parent running user code, a save into a parent whose publication is
/// incomplete, and a save past the bounds below (``entryLimit``,
/// ``objectLimit``), so a fast producer cannot pile up memory — except a
/// main-queue child's save into a parent on the coordinator, which waits
/// for the parent's next window, or for room, and a background child's
/// save of new objects only, which waits on its own thread for the parent
/// to park or go idle (see ``ManagedObjectContext/deferChildSave(_:from:enteredNext:)``).
///
/// `@unchecked Sendable`: `entries`, `objects` and `lastSequence` are
/// guarded by `lock`, a leaf lock taken after the parent's
/// `parking.condition` when both are held.
final class DeferredChildSaves: @unchecked Sendable {
    /// A class, not a struct: every check of a child's save and every read
    /// through this context looks at each recorded save
    /// (``SourceView/Layer/state(of:)``), and a struct of a change set's
    /// dozen arrays was copied out, retained field by field, at each look,
    /// and copying and destroying entries became a large share of a
    /// view context's small saves while a writer's store save was under way.
    final class Entry {
        let changes: ChangeSet
        let child: ManagedObjectContext
        /// The version of the first inserted object at the parent; the
        /// inserted, then the updated objects, follow it one by one.
        let firstVersion: UInt64
        /// Recording order, from 1. A parent's publication says up to which
        /// entry it has taken in (``PublishedChanges/takenInThrough``).
        let sequence: UInt64
        /// Where each object it changes stands in `changes`: most lookups
        /// of other objects stop at its key ranges.
        let index: ChangedObjectIndex
        /// For each updated, then each deleted object the parent held
        /// unchanged when the child checked: the level below the parent's
        /// snapshot then (nil: the parent had changed it, or a recorded save
        /// had). The parent takes it as the object's saved state without a
        /// read, so taking a save in cannot fail.
        let below: [Snapshot?]

        /// `index` is built from `changes` beforehand, outside the list's
        /// lock (``ChangedObjectIndex``).
        init(changes: ChangeSet, index: ChangedObjectIndex, child: ManagedObjectContext, firstVersion: UInt64, sequence: UInt64, below: [Snapshot?]) {
            self.changes = changes
            self.index = index
            self.child = child
            self.firstVersion = firstVersion
            self.sequence = sequence
            self.below = below
        }

        var objectCount: Int { changes.inserted.count + changes.updated.count + changes.deleted.count }

        /// The `i`-th inserted object as the parent will hold it.
        func insertedSnapshot(at i: Int) -> Snapshot {
            Snapshot(values: changes.insertedValues[i], version: firstVersion + UInt64(i))
        }

        /// The `i`-th updated object as the parent will hold it.
        func updatedSnapshot(at i: Int) -> Snapshot {
            Snapshot(values: changes.updatedValues[i], version: updatedVersion(at: i))
        }

        func updatedVersion(at i: Int) -> UInt64 { firstVersion + UInt64(changes.inserted.count + i) }

        /// What this save does to `id`, if anything.
        func state(of id: ObjectID) -> PendingState? {
            switch index.position(of: id, in: changes) {
            case .updated(let i)?: return .updated(updatedSnapshot(at: i))
            case .deleted?: return .removed
            case .inserted(let i)?: return .inserted(insertedSnapshot(at: i))
            case nil: return nil
            }
        }

        /// Every object this save changes, with what it does to it.
        func forEachState(_ including: (EntityDescription) -> Bool, _ body: (ObjectID, PendingState) -> Void) {
            for (i, id) in changes.inserted.enumerated() where including(id.entity) { body(id, .inserted(insertedSnapshot(at: i))) }
            for (i, id) in changes.updated.enumerated() where including(id.entity) { body(id, .updated(updatedSnapshot(at: i))) }
            for id in changes.deleted where including(id.entity) { body(id, .removed) }
        }
    }

    /// At most this many saves wait at once.
    static let entryLimit = 256
    /// Past this many objects waiting, only saves of at most
    /// ``smallSaveObjects`` are recorded (a view context's edits go on
    /// returning at once while an import waits to be taken in).
    static let objectLimit = 32_768
    static let smallSaveObjects = 64

    private let lock = Lock()
    private var entries: [Entry] = []
    private var objects = 0
    private var lastSequence: UInt64 = 0
    /// `entries.count`, stored under `lock` each time it changes and read
    /// without it (``isEmpty``).
    private let entryCount = Atomic<Int>(0)

    /// Records a save built by `make` with the next sequence number, unless
    /// the bounds are reached (nil). `paced`: the object bound applies (a
    /// main-queue context's held saves are bounded by count only: they
    /// cost the memory their objects would, and a producer is paced by
    /// the main context's own saves).
    func append(objectCount: Int, paced: Bool = true, _ make: (UInt64) -> Entry) -> Entry? {
        lock.withLock {
            guard hasRoomLocked(forObjects: objectCount, paced: paced) else { return nil }
            lastSequence += 1
            let entry = make(lastSequence)
            entries.append(entry)
            entryCount.store(entries.count, ordering: .releasing)
            objects += objectCount
            return entry
        }
    }

    /// Whether `objectCount` more objects fit under the bounds, small saves
    /// included (a producer of small saves is paced by the object bound too:
    /// the main context hands them on in larger ones).
    func hasRoom(forObjects objectCount: Int) -> Bool {
        lock.withLock { entries.count < Self.entryLimit && (entries.isEmpty || objects + objectCount <= Self.objectLimit) }
    }

    /// Whether a paced ``append(objectCount:paced:_:)`` of `objectCount`
    /// objects would record the save now.
    func wouldAppend(objectCount: Int) -> Bool {
        lock.withLock { hasRoomLocked(forObjects: objectCount, paced: true) }
    }

    /// How many saves were ever recorded (tests).
    var recordedCount: UInt64 { lock.withLock { lastSequence } }

    private func hasRoomLocked(forObjects objectCount: Int, paced: Bool) -> Bool {
        entries.count < Self.entryLimit
            && (!paced || entries.isEmpty || objects + objectCount <= Self.objectLimit || objectCount <= Self.smallSaveObjects)
    }

    /// How many saves are recorded.
    var count: Int { lock.withLock { entries.count } }

    /// How many objects the recorded saves change.
    var objectCount: Int { lock.withLock { objects } }

    /// The recorded saves, oldest first (a copy).
    var all: [Entry] { lock.withLock { entries } }

    /// Whether no save is recorded, without the lock (as ``all`` would say).
    var isEmpty: Bool { entryCount.load(ordering: .acquiring) == 0 }
    /// Drops the `count` oldest saves (taken in and published by then).
    /// A child's check may still hold them: they are freed after a grace
    /// period, off this thread (``GracePeriod``).
    func removeFirst(_ count: Int) {
        let removed = lock.withLock { () -> [Entry] in
            let removed = Array(entries.prefix(count))
            for entry in removed { objects -= entry.objectCount }
            entries.removeFirst(count)
            entryCount.store(entries.count, ordering: .releasing)
            return removed
        }
        // Their data only: an entry's child context, kept alive, would keep
        // the whole stack and its open store alive too.
        if !removed.isEmpty { GracePeriod.release(removed.map(\.changes)) }
    }

    /// Drops the saves up to sequence `last` that are still listed (a
    /// main-queue context's held saves its own save handed on); returns
    /// how many it dropped.
    @discardableResult
    func removeThrough(sequence last: UInt64) -> Int {
        let removed = lock.withLock { () -> [Entry] in
            let count = entries.prefix { $0.sequence <= last }.count
            let removed = Array(entries.prefix(count))
            for entry in removed { objects -= entry.objectCount }
            entries.removeFirst(count)
            entryCount.store(entries.count, ordering: .releasing)
            return removed
        }
        return removed.count
    }
}

extension ManagedObjectContext {
    /// Records `changes` for this context to take in later, when that is
    /// safe (see ``DeferredChildSaves``); returns the outcome the child
    /// applies, or nil when the child must take the synchronous path.
    /// Called on the child's thread.
    ///
    /// A main-queue child's save that an open window records (a small
    /// one, or one of new objects only: its held saves handed on) and that
    /// finds this context — attached to the coordinator — running a block
    /// between two windows waits for the next one, or for it to park or go
    /// idle, and is recorded then (Rule 10). Between windows the context
    /// processes pending changes and posts will-save (observers run), or
    /// runs a block of user code; the synchronous path would wait for
    /// that too, and then on, for the store save's whole change set to be
    /// built. The wait is bounded (``windowWakeups``), registered with the
    /// wait graph only while it lasts, and skipped when the list is full
    /// while the context is parked (an edit then runs as a guest at once).
    ///
    /// A background child's save of new objects only, made off the main
    /// thread, waits likewise for this context to park or go idle (or, for
    /// one of at most 64 objects, for a window), bounded by
    /// ``backgroundWakeups``: taken synchronously, it would be a block of
    /// this context outside any window, as long as the import.
    ///
    /// `enteredNext`: the caller enters this context right after the save
    /// returns (a save block's durable save, ``WriterSaveGroups``), and
    /// that block takes the save in at its start. Recorded into an idle
    /// context, the save then queues no block of its own to take it in:
    /// the caller's block would otherwise wait behind that one, on another
    /// thread, at every save.
    func deferChildSave(_ changes: ChangeSet, from child: ManagedObjectContext, enteredNext: Bool = false) throws(StrataError) -> SaveOutcome? {
        guard concurrencyType == .privateQueue, let queue, !isCurrent,
              !changes.inserted.isEmpty || !changes.updated.isEmpty || !changes.deleted.isEmpty else { return nil }
        let objectCount = changes.inserted.count + changes.updated.count + changes.deleted.count
        let fromMainQueue = child.concurrencyType == .mainQueue
        // In an open window only small saves are recorded (a view
        // context's edits), and a main-queue context's saves of new
        // objects (the held saves it hands on): the main queue must not
        // wait for this context's work, and the producer behind them is
        // paced before it reaches the main queue
        // (``waitForRoomToHandOn(_:)``). Any other large save is recorded
        // only while this context is parked or idle: a background producer
        // is paced by this context that way, and taking it in makes this
        // context's next save larger.
        let insertsOnly = changes.updated.isEmpty && changes.deleted.isEmpty && fromMainQueue
        let windowRecords = objectCount <= DeferredChildSaves.smallSaveObjects || insertsOnly
        let checked = changes.updated + changes.deleted
        // Waits only under a context on the coordinator, or with nothing to
        // check: the store-save epoch below then says whether the reads
        // made before the wait still hold (a nested parent's own parent
        // changes without one).
        //
        // A background child's save of new objects only waits too, on its
        // own thread, for this context to park or go idle (not for a
        // window: that paces the producer): taken synchronously instead, a
        // large import would be one long block of this context, outside
        // any window, and a view context's edit would wait for all of it.
        let newObjectsOnly = checked.isEmpty
        let onMainThread = MainQueue.isCurrent
        let waitsInBackground = !fromMainQueue && newObjectsOnly && !onMainThread
        let waitsForWindow = (fromMainQueue && windowRecords && (parent == nil || newObjectsOnly)) || waitsInBackground
        // Built here, outside every lock, by the thread that made the save;
        // hashed only off the main queue, and only when this context may
        // record it (a background update into a busy parent is not).
        let mayRecord = fromMainQueue || waitsForWindow || parking.condition.withLock {
            parking.parked || parking.queuedBlocks == parking.takeInBlocksQueued
        }
        let index = ChangedObjectIndex(changes, hashed: !fromMainQueue && mayRecord)
        var wakeups = 0
        for _ in 0..<Self.deferAttempts {
            // The level below this context, read before taking the lock: a
            // point read per updated or deleted object, never under the lock
            // the guests and the owner take. A store save between the read
            // and the check below sends it round again.
            let storeEpoch = persistentStoreCoordinator.rowCacheEpoch
            var below: [Snapshot?] = []
            if !checked.isEmpty {
                let source = try SourceView(of: self)
                below.reserveCapacity(checked.count)
                for id in checked { below.append(try source.snapshot(for: id)) }
            }
            enum Plan { case none, again, recorded, queued }
            var recorded: DeferredChildSaves.Entry?
            let plan: Plan = parking.condition.withLock {
                var ticket: WaitGraph.Ticket?
                // Registered only while it waits: a thread that waits for
                // this one's context later must not find it waiting after.
                defer { if let ticket { WaitGraph.shared.endWait(ticket) } }
                while true {
                    let idle = parking.queuedBlocks == parking.takeInBlocksQueued
                    let records = parking.parked || (parking.acceptsDeferredSaves && windowRecords) || idle
                    let room = deferredChildSaves.wouldAppend(objectCount: objectCount)
                    if records && room { break }
                    // Full while idle: nothing will take the list in but a
                    // queued take-in block, which may be on its way. Full
                    // while parked: an edit runs as a guest at once instead
                    // (a hand-on waits: as a guest the main thread would
                    // take the whole list in). Woken many times without
                    // getting in: the parent runs short blocks back to
                    // back, and its queue is first come, first served.
                    guard waitsForWindow, !(records && idle && parking.takeInBlocksQueued == 0),
                          !(parking.parked && !newObjectsOnly),
                          wakeups < (waitsInBackground ? Self.backgroundWakeups : Self.windowWakeups) else { return .none }
                    // Not at all if the wait closes a cycle (Rule 9; `WaitGraph.lock` is a leaf).
                    if ticket == nil {
                        guard let registered = WaitGraph.shared.beginWait(holds: Self.resourcesHeldByCaller, waitsFor: waitResources) else { return .none }
                        ticket = registered
                    }
                    parking.roomWaiters += 1
                    parking.condition.wait()
                    parking.roomWaiters -= 1
                    wakeups += 1
                }
                guard checked.isEmpty || persistentStoreCoordinator.rowCacheEpoch == storeEpoch else { return .again }
                guard let layer = currentLayerForCheck(),
                      let changedHere = Self.cleanCheck(changes, against: layer, below: below) else { return .none }
                // Under the parking lock: the owner cannot unpark or close its
                // window (and miss the entry), or start a block (and run before
                // it), meanwhile.
                let entryBelow = zip(below, changedHere).map { $0.1 ? nil : $0.0 }
                recorded = deferredChildSaves.append(objectCount: objectCount) { sequence in
                    let firstVersion = reserveVersions(changes.inserted.count + changes.updated.count)
                    return .init(changes: changes, index: index, child: child, firstVersion: firstVersion, sequence: sequence, below: entryBelow)
                }
                guard recorded != nil else { return .none }
                if parking.parked || parking.acceptsDeferredSaves || parking.takeInBlocksQueued > 0 || enteredNext { return .recorded }
                parking.queuedBlocks += 1
                parking.takeInBlocksQueued += 1
                return .queued
            }
            if plan == .again { continue }
            guard plan != .none, let entry = recorded else { return nil }
            if plan == .queued {
                queue.async {
                    self.parking.condition.withLock { self.parking.takeInBlocksQueued -= 1 }
                    self.runQueuedBlock({}, enteredFromMain: false)  // takes the entry in first
                }
            }
            var outcome = SaveOutcome()
            outcome.numberInserts(from: entry.firstVersion, count: changes.inserted.count)
            outcome.updatedVersions = changes.updated.indices.map { entry.updatedVersion(at: $0) }
            return outcome
        }
        return nil
    }

    /// How many times ``deferChildSave(_:from:enteredNext:)`` reads the level below
    /// again when a store save came between its read and its check, before
    /// the save takes the synchronous path.
    static let deferAttempts = 4
    /// How many times a main-queue child's save waiting for a window may be
    /// woken and find none before it takes the synchronous path.
    static let windowWakeups = 16
    /// The same for a background child's save of new objects, waiting on
    /// its own thread for the parent to park or go idle: each of the
    /// parent's blocks wakes it several times (at the block's windows and
    /// its end), and the synchronous path is the stretch outside any window
    /// the wait exists to avoid.
    static let backgroundWakeups = 256

    /// This context's pending state as its children see it, with the saves
    /// recorded for it and not yet taken in; nil while its publication is
    /// incomplete. Called under `parking.condition`.
    private func currentLayerForCheck() -> SourceView.Layer? {
        let deferred = deferredChildSaves.all
        guard let published = publication.read() else { return nil }
        return SourceView.Layer(published: published, deferred: deferred)
    }

    /// Whether every updated and deleted object of `changes` is, in `layer`
    /// over `below`, at the version the child read or holds the values it
    /// started from: then, for each of them, whether this level (or a
    /// recorded save) changed it. Nil when the save must be decided by
    /// ``acceptChildSave(_:from:)``: a conflict, or an object gone here.
    private static func cleanCheck(_ changes: ChangeSet, against layer: SourceView.Layer, below: [Snapshot?]) -> [Bool]? {
        var changedHere: [Bool] = []
        changedHere.reserveCapacity(below.count)
        func clean(_ id: ObjectID, _ i: Int, seen: UInt64, base: [PropertyValue]) -> Bool {
            let current: Snapshot?
            switch layer.state(of: id) {
            case .inserted(let snapshot)?, .updated(let snapshot)?:
                current = snapshot
                changedHere.append(true)
            case .removed?:
                return false
            case nil:
                current = below[i]
                changedHere.append(false)
            }
            guard let current else { return false }
            return current.version == seen || current.values == base
        }
        for (i, id) in changes.updated.enumerated()
        where !clean(id, i, seen: changes.updatedVersions[i], base: changes.updatedBase[i]) { return nil }
        let offset = changes.updated.count
        for (i, id) in changes.deleted.enumerated()
        where !clean(id, offset + i, seen: changes.deletedVersions[i], base: changes.deletedBase[i]) { return nil }
        return changedHere
    }

    /// Takes in, in order, the child saves recorded for this context. Runs as
    /// this context: at the start of its outermost block, when its store
    /// write returns, when an open window closes, and at the start of a
    /// guest call.
    ///
    /// The entries leave the list only once what they changed is published
    /// (``layerForChildren()`` reads the list first, then the publication,
    /// which says up to which entry it includes: so a reading child finds
    /// each save in one or the other, and never an older one over a newer).
    func takeDeferredChildSaves() {
        // A main-queue context's list holds only its held saves.
        if concurrencyType == .mainQueue { return takeHeldChildSaves() }
        while true {
            let entries = deferredChildSaves.all
            guard let last = entries.last else { return }
            for entry in entries {
                takeInserts(of: entry.changes, firstVersion: entry.firstVersion)
                takeUpdatesAndDeletes(of: entry)
                notifyMergingChildren(of: entry.changes, outcome: SaveOutcome(), excluding: entry.child)
            }
            deferredTakenInThrough = last.sequence
            publishPendingChanges()
            deferredChildSaves.removeFirst(entries.count)
            // (Waiters for room are woken when the window this runs in
            // closes: a guest runs this holding `parking.condition`.)
        }
    }

    /// Applies a recorded save's updates and deletes, which its check found
    /// clean: the child's values under the versions it was given. An object
    /// this context does not hold is made from the snapshot the check read
    /// below, so nothing here reads or fails.
    private func takeUpdatesAndDeletes(of entry: DeferredChildSaves.Entry) {
        let changes = entry.changes
        let unnamed = carriedAuthors.whenTakenIn(changes.authors)
        defer { carriedAuthors.endTakingIn(unnamed) }
        for (i, id) in changes.updated.enumerated() {
            guard let object = objectForTakingIn(id, below: entry.below[i], base: changes.updatedBase[i]) else { continue }
            objectWillChange(object)
            object.replaceValues(with: changes.updatedValues[i])
            object.exposedVersion = entry.updatedVersion(at: i)
            object.flags.remove(.exposedVersionFresh)  // the child holds this version
            object.flags.insert(.validatedByChild)
        }
        let offset = changes.updated.count
        for (i, id) in changes.deleted.enumerated() {
            guard let object = objectForTakingIn(id, below: entry.below[offset + i], base: changes.deletedBase[i]) else { continue }
            takeChildDelete(of: object)
        }
    }

    /// The object a recorded update or delete applies to: the one registered
    /// here (a fault filled from `below`), or a new one made from `below`;
    /// nil when it is gone (deleted here since, by a guest).
    ///
    /// `below` is nil when this context had changed the object at the check.
    /// It may have saved it to the store and let go of it since (a store
    /// save is an open window): it is then made again from `base`, the
    /// values the child started from — the ones the check found here, so
    /// the ones saved. Its stored version is not known here; a save of it
    /// is checked against the store by those values instead.
    private func objectForTakingIn(_ id: ObjectID, below: Snapshot?, base: [PropertyValue]) -> ManagedObject? {
        if let object = registry[id] {
            if object.flags.contains(.fault) {
                fill(object, below ?? Snapshot(values: base, version: 0))
            } else if let below, object.flags.isDisjoint(with: [.dirty, .inserted, .deleted]), below.version != object.version {
                // An unchanged copy older than what the child checked
                // against: brought up to date first, as a synchronous save
                // does (it is unchanged, so nothing is lost).
                refresh(object, with: below, keepingChanges: false)
                pendingRefreshed.append(id)
            }
            return object.flags.isDisjoint(with: [.deleted, .invalidated]) ? object : nil
        }
        guard !discardedInserts.contains(id) else { return nil }
        return materialize(id, below ?? Snapshot(values: base, version: 0))
    }

    // MARK: Open windows

    /// Runs `body` — Strata's own work, which changes none of this context's
    /// objects but through recorded saves — with the context open to
    /// deferred child saves; then closes it and takes in what was recorded
    /// meanwhile. Only for a private context, from its own queue. What the
    /// context changed before is published first: a child checks against
    /// the publication (an upsert round, for one, changes objects between
    /// two windows).
    func openToDeferredSaves<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        guard concurrencyType == .privateQueue else { return try body() }
        publishPendingChanges()
        let opened = parking.condition.withLock { () -> Bool in
            guard !parking.acceptsDeferredSaves else { return false }  // nested: the outer one closes
            parking.acceptsDeferredSaves = true
            if parking.roomWaiters > 0 { parking.condition.broadcast() }
            return true
        }
        defer { if opened { closeToDeferredSaves() } }
        return try body()
    }

    /// Ends an open window (early: before work that changes objects, such
    /// as a merge policy's resolution) and takes in what it let in. What the
    /// window's work changed is published, and what was recorded meanwhile
    /// taken in, while it is still open: only saves recorded in the last
    /// instant are left for after, so the closed stretch is short.
    func closeToDeferredSaves() {
        publishPendingChanges()
        takeDeferredChildSaves()
        parking.condition.withLock {
            parking.acceptsDeferredSaves = false
            if parking.roomWaiters > 0 { parking.condition.broadcast() }
        }
        takeDeferredChildSaves()
        parking.wakeRoomWaiters()  // what that took in made room
    }
}
