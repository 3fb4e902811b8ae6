import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension BackgroundScheduling {
    /// How long background work runs between two offers of its core
    /// (``YieldPoints``), in nanoseconds: 0.5 ms, an eighth of this kernel's
    /// 4 ms tick.
    package static let yieldInterval: UInt64 = 500_000

    /// Loop iterations between two readings of the clock in ``YieldPoints``.
    static let passesPerClockReading: Int32 = 32
}

/// Places in a long loop of background work where its thread offers its core
/// to a thread that is waiting for one, every ``BackgroundScheduling/yieldInterval``.
///
/// Why: with the long slice (``BackgroundScheduling``) a thread that *wakes*
/// preempts background work at once, but one that is already runnable does not.
/// In `strata-bench stall`, for instance: libdispatch's timer thread wakes the
/// main thread, which preempts it on the same core; the main thread's tick is
/// short and it sleeps again; the core then goes to the writer's save rather
/// than back to the timer thread, which is left runnable, and nothing on that
/// core reschedules before the next scheduler tick — 4 ms at HZ=250, with the
/// kernel's high-resolution tick off — so the main queue's next timer fires up
/// to a tick late, with the other core idle. A `sched_yield(2)` from the writer
/// every half millisecond ends such a wait within that time; where nothing else
/// waits for the core it returns at once.
///
/// Active only on a thread running background work with the long slice
/// (between ``BackgroundScheduling/lengthenSlice()`` and the matching
/// ``BackgroundScheduling/restoreSlice(_:)``): the same loops run on the main
/// queue, whose core must never be given away. Elsewhere a pass costs one
/// branch. Never pass one while holding a lock that readers wait on (``none``):
/// yielding hands the core to another thread for as long as it runs.
///
/// ```swift
/// var yields = YieldPoints()
/// for record in records {
///     yields.pass()
///     write(record)
/// }
/// ```
package struct YieldPoints {
    /// The calling thread's yield state; nil where the thread is not
    /// running background work.
    private let thread: UnsafeMutablePointer<BackgroundScheduling.YieldState>?
    private var countdown = BackgroundScheduling.passesPerClockReading

    package init() { thread = BackgroundScheduling.yieldState() }

    private init(thread: UnsafeMutablePointer<BackgroundScheduling.YieldState>?) { self.thread = thread }

    /// Yield points that never yield: for a loop that holds a lock others
    /// wait on (a thread that yields it keeps them waiting while it is off
    /// its core).
    package static var none: YieldPoints { YieldPoints(thread: nil) }

    /// One iteration of the loop: yields when the thread has run background
    /// work for ``BackgroundScheduling/yieldInterval`` since it last yielded.
    @inline(__always)
    package mutating func pass() {
        guard let thread else { return }
        countdown &-= 1
        if countdown > 0 { return }
        countdown = BackgroundScheduling.passesPerClockReading
        Self.yieldIfDue(thread)
    }

    @inline(never)
    private static func yieldIfDue(_ thread: UnsafeMutablePointer<BackgroundScheduling.YieldState>) {
        let now = DispatchTime.now().uptimeNanoseconds
        guard now &- thread.pointee.since >= BackgroundScheduling.yieldInterval else { return }
        sched_yield()
        thread.pointee.since = DispatchTime.now().uptimeNanoseconds
        thread.pointee.yields &+= 1
    }
}

extension BackgroundScheduling {
    /// A thread's part in ``YieldPoints``. Allocated on the thread's first
    /// background work, freed when it exits; read and written by that
    /// thread alone.
    struct YieldState {
        /// When the thread last yielded or started background work, in
        /// nanoseconds; 0 while it is not running background work.
        var since: UInt64 = 0
        /// How often it yielded, for tests.
        var yields = 0
    }

    private static let yieldStateKey: pthread_key_t = {
        var key = pthread_key_t()
        let rc = pthread_key_create(&key) { pointer in
            #if canImport(Darwin)
            pointer.assumingMemoryBound(to: YieldState.self).deallocate()
            #else
            pointer?.assumingMemoryBound(to: YieldState.self).deallocate()
            #endif
        }
        precondition(rc == 0, "BackgroundScheduling: pthread_key_create failed: \(rc)")
        return key
    }()

    private static func existingYieldState() -> UnsafeMutablePointer<YieldState>? {
        pthread_getspecific(yieldStateKey)?.assumingMemoryBound(to: YieldState.self)
    }

    /// The calling thread's yield state while it runs background work, else nil.
    static func yieldState() -> UnsafeMutablePointer<YieldState>? {
        guard let state = existingYieldState(), state.pointee.since != 0 else { return nil }
        return state
    }

    /// Starts (`true`) or ends the calling thread's background work for ``YieldPoints``.
    static func markBackgroundWork(_ running: Bool) {
        let state: UnsafeMutablePointer<YieldState>
        if let existing = existingYieldState() {
            state = existing
        } else {
            guard running else { return }
            state = .allocate(capacity: 1)
            state.initialize(to: YieldState())
            pthread_setspecific(yieldStateKey, state)
        }
        state.pointee.since = running ? max(1, DispatchTime.now().uptimeNanoseconds) : 0
    }

    /// Runs `body` with the calling thread's ``YieldPoints`` off: for work
    /// done holding a lock that other threads wait on, which a yield would
    /// keep them waiting for while this thread is off its core.
    ///
    /// ```swift
    /// condition.withLock {
    ///     BackgroundScheduling.withoutYielding { takeChangesIn() }
    /// }
    /// ```
    package static func withoutYielding<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        guard let state = yieldState() else { return try body() }
        let since = state.pointee.since
        state.pointee.since = 0
        // The interval runs on from where it was: a long body leaves a yield due.
        defer { state.pointee.since = since }
        return try body()
    }

    /// How often the calling thread has yielded at ``YieldPoints`` (for tests).
    package static var yieldsOnThisThread: Int { existingYieldState()?.pointee.yields ?? 0 }

    /// Whether ``YieldPoints`` on the calling thread may yield now: it runs
    /// background work with the long slice.
    package static var yieldPointsAreActive: Bool { yieldState() != nil }
}
