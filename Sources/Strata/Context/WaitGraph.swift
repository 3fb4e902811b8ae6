internal import StrataStore

/// Who is blocked waiting for which context, process-wide: how Strata turns
/// the `performAndWait` cycles that deadlock Core Data into calls that finish
/// (Rule 9 in ConcurrencyRules.md).
///
/// A thread that is about to block for a context's queue first looks here.
/// If the queue is held by a thread that is itself blocked — directly or
/// through a chain of blocked threads — waiting for something the caller
/// holds, blocking would close a cycle that nothing could ever open. Then the
/// caller runs the block at once on its own thread, as a *guest* of the
/// context: every thread that could touch the context is blocked until the
/// guest returns, so the block still has the context to itself. Otherwise the
/// caller registers its wait and blocks; should a cycle form later, the
/// thread that closes it sees this registration and becomes the guest. The
/// check and the registration happen under one lock, so of the threads in a
/// cycle exactly the last to arrive runs as the guest.
///
///     thread A                          thread B
///     child.performAndWait {            parent.performAndWait {
///       parent.performAndWait {…}         child.performAndWait {…}
///       registers: holds child,           child is held by A, which waits
///       waits for parent; blocks          for parent, which B holds: a cycle
///                                         → runs the block here, as a guest
///       …runs once B's block returns    }
///
/// Resources are context serials, plus ``mainQueue`` for the main queue,
/// which a main-queue context's blocks need and any main-queue code holds.
///
/// `@unchecked Sendable`: `waiters` is guarded by `lock`.
final class WaitGraph: @unchecked Sendable {
    static let shared = WaitGraph()

    /// The resource "the main queue" (context serials count up from 1).
    static let mainQueue = UInt64.max

    /// One registered wait.
    struct Ticket: Equatable {
        fileprivate let number: UInt64
        /// The ticket of a wait that was not registered (numbers count from 1).
        fileprivate static let unregistered = Ticket(number: 0)
    }

    private struct Waiter {
        let ticket: Ticket
        let holds: [UInt64]
        let waitsFor: [UInt64]
    }

    private let lock = Lock()
    private var waiters: [Waiter] = []  // guarded by `lock`; a handful at most
    private var issued: UInt64 = 0      // guarded by `lock`

    /// Registers the caller, which holds `holds`, as waiting for `resources`
    /// — or, when waiting would close a cycle, registers nothing and returns
    /// nil: the caller runs as a guest instead. Once the wait is over (the
    /// awaited block has started), pass the ticket to ``endWait(_:)``.
    func beginWait(holds: [UInt64], waitsFor resources: [UInt64]) -> Ticket? {
        // A thread that holds nothing can close no cycle, and no one can be
        // waiting for it: nothing to check, nothing to register.
        if holds.isEmpty { return Ticket.unregistered }
        return lock.withLock {
            if closesCycle(holds: holds, waitsFor: resources) { return nil }
            issued += 1
            let ticket = Ticket(number: issued)
            waiters.append(Waiter(ticket: ticket, holds: holds, waitsFor: resources))
            return ticket
        }
    }

    /// Ends a wait; ending it again does nothing.
    func endWait(_ ticket: Ticket) {
        guard ticket != .unregistered else { return }
        lock.withLock {
            if let index = waiters.firstIndex(where: { $0.ticket == ticket }) { waiters.remove(at: index) }
        }
    }

    /// Whether a registered waiter holds `resource`: for tests that force an
    /// interleaving (a thread blocked waiting while holding the main queue).
    func hasWaiter(holding resource: UInt64) -> Bool {
        lock.withLock { waiters.contains { $0.holds.contains(resource) } }
    }

    /// Whether some blocked thread holding one of `resources` waits, directly
    /// or through other blocked threads, for something in `holds`.
    private func closesCycle(holds: [UInt64], waitsFor resources: [UInt64]) -> Bool {
        var frontier = resources
        var seen = Set(resources)
        while let resource = frontier.popLast() {
            for waiter in waiters where waiter.holds.contains(resource) {
                if waiter.waitsFor.contains(where: holds.contains) { return true }
                for next in waiter.waitsFor where seen.insert(next).inserted { frontier.append(next) }
            }
        }
        return false
    }
}

extension ManagedObjectContext {
    /// What the calling thread holds, for ``WaitGraph``: the contexts whose
    /// blocks it is inside, and the main queue when it is on it.
    static var resourcesHeldByCaller: [UInt64] {
        var held = ExecutionStack.current.contexts
        if MainQueue.isCurrent { held.append(WaitGraph.mainQueue) }
        return held
    }

    /// What waiting for this context's queue waits for.
    var waitResources: [UInt64] {
        concurrencyType == .mainQueue ? [serial, WaitGraph.mainQueue] : [serial]
    }

    /// Runs `body` as this context's block on the calling thread, while the
    /// threads that could touch the context are blocked (a guest: Rules 6
    /// and 9). Pending changes are processed by the block that holds the
    /// context's queue, when it ends.
    func runAsGuest<T, E: Error>(_ body: () throws(E) -> T) -> Result<T, E> {
        // Run holding `parking.condition`, which the context's other children
        // (the main queue's among them) wait on to record their saves: the
        // guest's loops must not give the core away meanwhile.
        BackgroundScheduling.withoutYielding { runHoldingParking(body) }
    }

    private func runHoldingParking<T, E: Error>(_ body: () throws(E) -> T) -> Result<T, E> {
        let stack = ExecutionStack.current
        stack.contexts.append(serial)
        // A child's reads after this call see what it changed here.
        defer { publishPendingChanges(); stack.contexts.removeLast() }
        // A guest sees every save its side made before it (see DeferredChildSaves).
        takeDeferredChildSaves()
        do throws(E) {
            return .success(try body())
        } catch {
            return .failure(error)
        }
    }
}
