#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif
import Dispatch
internal import StrataStore

extension ManagedObjectContext {
    /// Enqueues `block` on the context's queue and returns at once
    /// (contract C5). Blocks run one at a time in the order they were
    /// enqueued; a `perform` from inside a block of the same context goes to
    /// the end of the queue, never inline. Each block ends by processing
    /// pending changes (contract C8).
    ///
    /// ```swift
    /// context.perform {
    ///     let soup = Recipe(context: context)
    ///     soup.name = "Soup"
    ///     try? context.save()
    /// }
    /// ```
    ///
    /// Calling it on a `.confinement` context is a programming error and traps (contract C3).
    public func perform(_ block: @escaping @Sendable () -> Void) {
        guard let queue else {
            preconditionFailure("Strata: perform on \(name) (.confinement) — a confinement context is used only on its own thread, without perform")
        }
        publishAncestorsHeldHere()
        parking.blockEnqueued()
        queue.async {
            self.runQueuedBlock(block, enteredFromMain: false)
        }
    }

    /// Runs `block` on the context's queue and waits for it (contract C6):
    /// blocks enqueued before it run first; called from inside a block
    /// of the same context (however deep) it runs inline; it returns the
    /// block's value and rethrows its error.
    ///
    /// ```swift
    /// let count = try context.performAndWait { try context.count(for: FetchRequest<Recipe>()) }
    /// ```
    ///
    /// On a `.confinement` context it runs inline on the owning thread and
    /// traps on any other.
    public func performAndWait<T, E: Error>(_ block: () throws(E) -> T) throws(E) -> T {
        if isCurrent {
            return try runBlock(block, enteredFromMain: false)
        }
        guard let queue else {
            preconditionFailure("Strata: performAndWait on \(name) (.confinement) from \(Self.currentExecutionDescription) — it is bound to the thread that created it")
        }
        // Waiting here could close a cycle of threads waiting for each other
        // (Rule 9): then run the block now, as a guest.
        guard let ticket = WaitGraph.shared.beginWait(holds: Self.resourcesHeldByCaller, waitsFor: waitResources) else {
            return try runAsGuest(block).get()
        }
        let fromMain = MainQueue.isCurrent
        // `sync` on a main queue drained by the real main thread (a run loop)
        // runs the block on the main thread, not here. It acts for this
        // blocked caller, so it is inside the caller's contexts too: without
        // that, child block → main parent's performAndWait → child's
        // performAndWait would deadlock on the child's busy queue.
        let callerStack = ExecutionStack.current
        let callerContexts = callerStack.contexts
        let watchdog = MainQueueWaitWatchdog.watch(self)
        defer { watchdog?.cancel() }
        parking.blockEnqueued()
        let result: Result<T, E> = queue.sync {
            WaitGraph.shared.endWait(ticket)
            let stack = ExecutionStack.current
            let inherited = stack === callerStack ? [] : callerContexts
            stack.contexts.append(contentsOf: inherited)
            defer { stack.contexts.removeLast(inherited.count) }
            do throws(E) {
                return .success(try runQueuedBlock(block, enteredFromMain: fromMain))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Runs `block` on the context's queue and suspends the caller until it
    /// has run, handing back its value or error (contract C7).
    ///
    /// ```swift
    /// let names = try await context.perform {
    ///     try context.fetch(FetchRequest<Recipe>()).map(\.name)
    /// }
    /// ```
    public func perform<T: Sendable, E: Error>(_ block: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        guard let queue else {
            preconditionFailure("Strata: perform on \(name) (.confinement) — a confinement context is used only on its own thread, without perform")
        }
        publishAncestorsHeldHere()
        parking.blockEnqueued()
        let result: Result<T, E> = await withCheckedContinuation { continuation in
            queue.async {
                // Given back after the caller resumes (see ``runQueuedBlock(_:enteredFromMain:)``).
                var slice: BackgroundScheduling.ThreadSlice?
                defer { BackgroundScheduling.restoreSlice(slice) }
                let result: Result<T, E>
                do throws(E) {
                    result = .success(try self.runBlock(block, enteredFromMain: false, lengthenedSlice: &slice))
                } catch {
                    result = .failure(error)
                }
                self.parking.blockFinished()
                continuation.resume(returning: result)
            }
        }
        return try result.get()
    }

    /// Runs a block the context's queue runs for `perform`,
    /// `performAndWait` or Strata's own queued calls, and counts it
    /// finished (``ParkingState/blockFinished()``) *before* the thread gives
    /// back the long slice the block may have taken. Giving it back can cost
    /// the thread its core until the next scheduler tick: the running
    /// thread's deadline is set again from the default slice, and after a
    /// long block it has had more than its share. Were the block still
    /// counted while the thread waits for its core again, a child's save
    /// (the view context's next edit) would wait for it too (Rule 10).
    /// The block must be counted with
    /// ``ParkingState/blockEnqueued()`` beforehand.
    func runQueuedBlock<T, E: Error>(_ block: () throws(E) -> T, enteredFromMain: Bool) throws(E) -> T {
        var slice: BackgroundScheduling.ThreadSlice?
        defer {
            parking.blockFinished()
            BackgroundScheduling.restoreSlice(slice)
        }
        return try runBlock(block, enteredFromMain: enteredFromMain, lengthenedSlice: &slice)
    }

    /// Runs one block as the context's: marks this thread as inside the
    /// context, and after the outermost block of the context processes its
    /// pending changes (one objects-did-change notification per block).
    func runBlock<T, E: Error>(_ block: () throws(E) -> T, enteredFromMain: Bool) throws(E) -> T {
        var slice: BackgroundScheduling.ThreadSlice?
        defer { BackgroundScheduling.restoreSlice(slice) }
        return try runBlock(block, enteredFromMain: enteredFromMain, lengthenedSlice: &slice)
    }

    /// ``runBlock(_:enteredFromMain:)``, leaving the thread's slice as the
    /// block found it in `lengthenedSlice` for the caller to give back (nil
    /// when the block left it alone).
    func runBlock<T, E: Error>(_ block: () throws(E) -> T, enteredFromMain: Bool,
                               lengthenedSlice: inout BackgroundScheduling.ThreadSlice?) throws(E) -> T {
        let stack = ExecutionStack.current
        let outermost = !stack.contexts.contains(serial)
        stack.contexts.append(serial)
        if enteredFromMain { stack.mainDepth += 1 }
        // A private context's block is background work (Rule 11), unless it
        // runs for a caller on the main queue: its thread takes the long
        // slice when the context's last block was long enough to pay for it,
        // or the context holds enough changes to make this one long.
        let timed = outermost && concurrencyType == .privateQueue && !enteredFromMain
        let started = timed ? DispatchTime.now().uptimeNanoseconds : 0
        lengthenedSlice = timed && (runsLongBlocks.load(ordering: .relaxed) || holdsLongWork)
            ? BackgroundScheduling.lengthenSlice() : nil
        // Children's saves recorded for this context come before the block
        // (and more may be recorded while they are taken in).
        if outermost && concurrencyType == .privateQueue { openToDeferredSaves { takeDeferredChildSaves() } }
        defer {
            if outermost { endBlock() }
            if timed {
                let long = DispatchTime.now().uptimeNanoseconds - started >= Self.longBlockNanoseconds
                runsLongBlocks.store(long, ordering: .relaxed)
            }
            stack.contexts.removeLast()
            if enteredFromMain { stack.mainDepth -= 1 }
        }
        return try block()
    }

    /// Whether this context holds ``longWorkObjects`` changed objects or
    /// more, its own or in children's saves recorded for it. On its queue.
    private var holdsLongWork: Bool {
        inserted.count + updated.count + deleted.count + deferredChildSaves.objectCount >= Self.longWorkObjects
    }

    /// What the outermost block of the context does last: process pending
    /// changes (one objects-did-change per block), let go of what it
    /// fetched, and end the undo group. For a private context, once what the block changed is
    /// published, gathering the notification and letting go are an open
    /// window (Rule 10): O(the block's changes), not to be waited for by a
    /// child's save.
    private func endBlock() {
        processPendingChangesInWindow(thenInWindow: releaseUnreferencedFetched)
        undo?.blockEnded()
    }

    /// ``processPendingChanges()`` as Strata's own work does it: for a
    /// private context, publishing the changes and gathering the
    /// notification — O(the pending changes: a whole import's after taking
    /// it in) — are an open window (Rule 10), then `thenInWindow` runs in
    /// it; only posting, which runs observers, is outside. Outside a window,
    /// a view context's edit would wait for all of it at the start of the
    /// save of a large import.
    func processPendingChangesInWindow(thenInWindow: () -> Void = {}) {
        guard concurrencyType == .privateQueue else {
            processPendingChanges()
            thenInWindow()
            return
        }
        let changes = openToDeferredSaves { () -> ObjectChanges? in
            defer { thenInWindow() }
            return collectPendingChanges()
        }
        postObjectsDidChange(changes)
        // What the window's close took in: its own notification.
        processPendingChanges()
    }

    /// Whether the caller may use this context now: inside one of its blocks,
    /// on the main queue for a `.mainQueue` context, on the owning thread for
    /// a `.confinement` one.
    var isCurrent: Bool {
        switch concurrencyType {
        case .privateQueue: return ExecutionStack.current.holds(serial)
        case .mainQueue: return ExecutionStack.current.holds(serial) || MainQueue.isCurrent
        case .confinement: return pthread_equal(owningThread!, pthread_self()) != 0
        }
    }

    /// Whether the caller is inside one of this context's blocks (as opposed
    /// to using a main-queue context directly).
    var isInsideBlock: Bool { ExecutionStack.current.holds(serial) }

    /// With the concurrency debug switch on, traps unless the caller may use
    /// the context (contract C22).
    @inline(__always)
    func checkQueue(function: @autoclosure () -> String = "the context") {
        if ConcurrencyDebug.isEnabled && !isCurrent {
            concurrencyViolation(function())
        }
    }

    func concurrencyViolation(_ what: String) -> Never {
        fatalError("""
            Strata concurrency violation: \(what) of context '\(name)' (\(concurrencyType)) \
            used from \(Self.currentExecutionDescription), outside the context's \
            \(concurrencyType == .confinement ? "thread" : "queue"). \
            Use perform/performAndWait, or hand an ObjectID across queues.
            """)
    }

    /// "thread 0x… on the main queue" / "… inside context #3's block" / "… on no context's queue".
    static var currentExecutionDescription: String {
        let thread = "thread \(String(describing: pthread_self()))"
        if let innermost = ExecutionStack.current.contexts.last { return thread + " inside a block of context #\(innermost)" }
        if MainQueue.isCurrent { return thread + " on the main queue" }
        return thread + " on no context's queue"
    }
}
