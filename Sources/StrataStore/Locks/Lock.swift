import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// A mutual-exclusion lock: a small box over a `pthread_mutex_t`.
///
/// ```swift
/// private let lock = Lock()
/// private var pending: [Batch] = []   // guarded by `lock`
///
/// lock.withLock { pending.append(batch) }
/// ```
///
/// Why not the alternatives: `Synchronization.Mutex` makes ThreadSanitizer
/// report false races on Linux, and `NSLock` would pull Foundation into the
/// engine. ThreadSanitizer understands `pthread_mutex_lock` natively.
///
/// The lock is not recursive: taking it again on the thread that holds it
/// deadlocks in release builds and traps in debug builds (the mutex is
/// `PTHREAD_MUTEX_ERRORCHECK` there, as swift-nio does). Do not call out to
/// code that may block (I/O, other locks taken in a different order) while
/// holding it.
///
/// `@unchecked Sendable`: the only state is the mutex itself, which guards
/// nothing but itself and is safe to use from any thread by construction, and
/// an atomic count of its waiters; each owner documents which of its own
/// properties the lock guards.
package final class Lock: @unchecked Sendable {
    /// Heap-allocated so it never moves: a pthread mutex must stay at the
    /// address it was initialised at, which a stored property does not promise.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// Threads blocked taking the lock (``hasWaiters``).
    private let waiting = Atomic<Int>(0)

    package init() {
        mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        defer { pthread_mutexattr_destroy(&attributes) }
        #if DEBUG
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK))
        #endif
        let rc = pthread_mutex_init(mutex, &attributes)
        precondition(rc == 0, "pthread_mutex_init failed: \(rc)")
    }

    deinit {
        let rc = pthread_mutex_destroy(mutex)
        assert(rc == 0, "pthread_mutex_destroy failed (lock still held?): \(rc)")
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with the lock held and returns its result; the lock is
    /// released however `body` exits. Keep `body` short.
    ///
    /// The error type is generic, so it is `rethrows` for ordinary closures and
    /// keeps a typed `throws(E)` when the closure declares one.
    @inline(__always)
    package func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        if pthread_mutex_trylock(mutex) != 0 { lockWaiting() }
        defer {
            let rc = pthread_mutex_unlock(mutex)
            precondition(rc == 0, "pthread_mutex_unlock failed: \(rc)")
        }
        return try body()
    }

    /// Whether a thread is blocked taking the lock right now (as
    /// ``ReadWriteLock/hasWaiters``).
    package var hasWaiters: Bool { waiting.load(ordering: .relaxed) > 0 }

    /// Takes the lock after a try failed, counted in ``hasWaiters`` meanwhile.
    @inline(never)
    private func lockWaiting() {
        waiting.add(1, ordering: .relaxed)
        let rc = pthread_mutex_lock(mutex)
        waiting.subtract(1, ordering: .relaxed)
        precondition(rc == 0, "pthread_mutex_lock failed (locked twice on one thread?): \(rc)")
    }
}
