internal import StrataStore

/// Guest access: how a context attached to the coordinator keeps its children
/// — above all the main-queue context — from waiting on its disk I/O
/// (contract C17, better than Core Data).
///
/// A child reaches its parent (to save into it, to fault or fetch through it)
/// with ``ManagedObjectContext/childAccess(_:)`` instead of `performAndWait`.
/// While the parent's own save is writing to the store it is *parked*: its
/// queue is blocked in I/O, but its objects are not being touched, so the
/// child's call runs at once on the child's thread, as a guest of the
/// parent, instead of queueing behind the write. The parent takes its state
/// back when the write returns (waiting for a running guest to finish) and
/// then applies the save's outcome, keeping dirty whatever a guest changed
/// meanwhile (``ManagedObject/changeStamp``).
///
///     main queue                     writer queue
///     main.save()                    writer.save(): build change set
///       writer.childAccess ──┐       park ─────────────────────────┐
///                            │       coordinator.save: write+fsync │
///       (runs here, now) ◀───┘       ...                           │
///       acceptChildSave              ...                           │
///     returns                        unpark (waits for guests) ◀───┘
///                                    apply outcome; objects a guest
///                                    changed stay dirty
///
/// Only Strata's own child→parent calls are guests; a user's
/// `performAndWait` on the parent still waits for the queue.
///
/// `@unchecked Sendable`: `parked`, `acceptsDeferredSaves`, `storing`,
/// `queuedBlocks`, `takeInBlocksQueued`, `roomWaiters` and `onBlockFinished`
/// are guarded by `condition`; so are the fields of every `GuestCall`.
final class ParkingState: @unchecked Sendable {
    let condition = ConditionLock()
    var parked = false
    /// The context runs Strata's own work that changes none of its objects
    /// but through recorded child saves: an *open window*, in which a
    /// child's save is recorded instead of waiting (see ``DeferredChildSaves``).
    var acceptsDeferredSaves = false
    /// The context runs a save to the store, from building its change set
    /// to taking in what its window recorded: what it takes in meanwhile
    /// goes into its next save (see ``ManagedObjectContext/waitForRoomToHandOn(_:)``).
    var storing = false
    /// Blocks queued only to take recorded child saves in, not started yet
    /// (counted in `queuedBlocks` too): a queue holding nothing else is
    /// as good as idle for recording another.
    var takeInBlocksQueued = 0
    /// Blocks of this context enqueued on or running on its queue (through
    /// `perform`, `performAndWait` or a queued child call). Zero means the
    /// queue is idle, so a child's call may run on the child's own thread at
    /// once (``ManagedObjectContext/childAccess(_:)``).
    var queuedBlocks = 0
    /// Threads waiting for the context to record a save: for room in its
    /// list (``ManagedObjectContext/waitForRoomToHandOn(_:)``), or for a
    /// state it records in (``ManagedObjectContext/deferChildSave(_:from:enteredNext:)``).
    /// Whatever can end such a wait broadcasts while there is one.
    var roomWaiters = 0
    /// Called by ``blockFinished()``, under `condition`, on the thread that
    /// ran the block (tests: what that thread is like when its context
    /// stops counting the block).
    var onBlockFinished: (@Sendable () -> Void)?

    func blockEnqueued() { condition.withLock { queuedBlocks += 1 } }
    /// Wakes the threads waiting for room or for a state to record in, if
    /// any: after the list was taken in outside an open window.
    func wakeRoomWaiters() {
        condition.withLock { if roomWaiters > 0 { condition.broadcast() } }
    }

    func blockFinished() {
        condition.withLock {
            queuedBlocks -= 1
            if roomWaiters > 0 { condition.broadcast() }
            onBlockFinished?()
        }
    }
}

/// One child→parent call, which either the parent's queue or the caller (as
/// a guest) runs — whichever claims it first. Fields guarded by the parent's
/// `parking.condition`.
private final class GuestCall<T, E: Error>: @unchecked Sendable {
    var body: (() throws(E) -> T)?
    var claimed = false
    var result: Result<T, E>?
    init(_ body: @escaping () throws(E) -> T) { self.body = body }
}

extension ManagedObjectContext {
    /// Runs `body` as this context for a child: inline when already inside
    /// it, as a guest while this context is parked in store I/O, otherwise on
    /// its queue (like `performAndWait`).
    func childAccess<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        if isCurrent { return try runBlock(body, enteredFromMain: false) }
        // Only a context attached to the coordinator ever parks; for any
        // other parent the cheaper `performAndWait` (which runs the block on
        // this thread when the queue is free) is the same thing.
        guard let queue, parent == nil else { return try performAndWait(body) }
        // An idle queue runs a `performAndWait` on this thread, at once. Going
        // through the queue instead would wait for a worker thread to wake
        // up — on a busy machine, milliseconds of a main thread's time.
        // (Should the context start a save between the check and the call,
        // this call waits for it, as a performAndWait would.)
        if parking.condition.withLock({ !parking.parked && parking.queuedBlocks == 0 }) {
            return try performAndWait(body)
        }
        // As in performAndWait: a wait that would close a cycle runs now (Rule 9).
        guard let ticket = WaitGraph.shared.beginWait(holds: Self.resourcesHeldByCaller, waitsFor: waitResources) else {
            return try runAsGuest(body).get()
        }
        defer { WaitGraph.shared.endWait(ticket) }
        let fromMain = MainQueue.isCurrent
        let callerStack = ObjectIdentifier(ExecutionStack.current)
        let callerContexts = ExecutionStack.current.contexts
        let outcome: Result<T, E> = withoutActuallyEscaping(body) { escapable in
            let call = GuestCall(escapable)
            parking.blockEnqueued()
            queue.async {
                // Given back last, after the caller has its result and the
                // block counts finished (see ``runQueuedBlock(_:enteredFromMain:)``).
                var slice: BackgroundScheduling.ThreadSlice?
                defer {
                    self.parking.blockFinished()
                    BackgroundScheduling.restoreSlice(slice)
                }
                let result: Result<T, E>
                do {
                    // Taken out of `call` and released before the result is
                    // published: once the caller sees it, it returns and the
                    // closure must have no other owner.
                    guard let body = self.parking.condition.withLock({ () -> (() throws(E) -> T)? in
                        guard !call.claimed else { return nil }
                        call.claimed = true
                        defer { call.body = nil }
                        return call.body
                    }) else { return }
                    WaitGraph.shared.endWait(ticket)
                    let stack = ExecutionStack.current
                    let inherited = ObjectIdentifier(stack) == callerStack ? [] : callerContexts
                    stack.contexts.append(contentsOf: inherited)
                    defer { stack.contexts.removeLast(inherited.count) }
                    do throws(E) {
                        result = .success(try self.runBlock(body, enteredFromMain: fromMain, lengthenedSlice: &slice))
                    } catch {
                        result = .failure(error)
                    }
                }
                self.parking.condition.withLock {
                    call.result = result
                    self.parking.condition.broadcast()
                }
            }
            let condition = parking.condition
            condition.lock()
            while call.result == nil {
                if parking.parked && !call.claimed, let body = call.body {
                    call.claimed = true
                    call.body = nil
                    // Run as a guest, holding the lock so the owner cannot
                    // take its state back meanwhile.
                    WaitGraph.shared.endWait(ticket)
                    call.result = runAsGuest(body)
                    break
                }
                condition.wait()
            }
            let result = call.result!
            call.body = nil  // the queued block must not keep the closure
            condition.unlock()
            return result
        }
        return try outcome.get()
    }

    /// Runs `io` (which must not touch this context's state) with the context
    /// parked: children's calls run as guests meanwhile, and children's saves
    /// of new objects are recorded for later (``deferChildSave(_:from:enteredNext:)``).
    /// Returns once no guest is running and the recorded saves are taken in.
    func parked<T, E: Error>(_ io: () throws(E) -> T) throws(E) -> T {
        parking.condition.withLock {
            parking.parked = true
            parking.condition.broadcast()
        }
        let result: Result<T, E>
        do throws(E) {
            result = .success(try io())
        } catch {
            result = .failure(error)
        }
        parking.condition.withLock { parking.parked = false }
        takeDeferredChildSaves()
        parking.wakeRoomWaiters()  // what that took in made room
        return try result.get()
    }
}
