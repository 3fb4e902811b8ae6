import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// A reader-writer lock over `pthread_rwlock_t`: any number of readers at
/// once, or one writer.
///
/// The store's `state` is one: point reads (the hot path, possibly from every
/// core) share it, and writers, flushes and compactions take it exclusively
/// for short steps. On glibc it prefers writers, so a stream of readers
/// cannot starve the write path.
///
/// ```swift
/// let state = ReadWriteLock()
/// let entry = state.withReadLock { index.lookup(key) }
/// state.withLock { index.insert(key, entry) }
/// ```
///
/// `@unchecked Sendable`: the only state is the rwlock itself and an atomic
/// count of its waiters; owners document what it guards. Not recursive: taking it again on the same thread deadlocks.
package final class ReadWriteLock: @unchecked Sendable {
    /// Heap-allocated so it never moves (a pthread object must stay where it was initialised).
    private let rwlock: UnsafeMutablePointer<pthread_rwlock_t>
    /// Threads blocked taking the lock, in either mode (``hasWaiters``).
    private let waiting = Atomic<Int>(0)

    package init() {
        rwlock = .allocate(capacity: 1)
        rwlock.initialize(to: pthread_rwlock_t())
        var attributes = pthread_rwlockattr_t()
        pthread_rwlockattr_init(&attributes)
        defer { pthread_rwlockattr_destroy(&attributes) }
        #if os(Linux) && canImport(Glibc)
        pthread_rwlockattr_setkind_np(&attributes, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP))
        #endif
        let rc = pthread_rwlock_init(rwlock, &attributes)
        precondition(rc == 0, "pthread_rwlock_init failed: \(rc)")
    }

    deinit {
        pthread_rwlock_destroy(rwlock)
        rwlock.deinitialize(count: 1)
        rwlock.deallocate()
    }

    /// Runs `body` holding the lock exclusively.
    @inline(__always)
    package func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        if pthread_rwlock_trywrlock(rwlock) != 0 { lockWaiting(reading: false) }
        defer { pthread_rwlock_unlock(rwlock) }
        return try body()
    }

    /// Whether a thread is blocked taking the lock right now: a holder that
    /// releases it between steps of a long job and takes it straight back
    /// would win it again before the woken waiter runs (a pthread lock is
    /// not fair), so it pauses only when this says someone is there.
    package var hasWaiters: Bool { waiting.load(ordering: .relaxed) > 0 }

    /// Takes the lock after a try failed, counted in ``hasWaiters`` meanwhile.
    @inline(never)
    private func lockWaiting(reading: Bool) {
        waiting.add(1, ordering: .relaxed)
        let rc = reading ? pthread_rwlock_rdlock(rwlock) : pthread_rwlock_wrlock(rwlock)
        waiting.subtract(1, ordering: .relaxed)
        precondition(rc == 0, "pthread_rwlock_\(reading ? "rdlock" : "wrlock") failed: \(rc)")
    }

    /// Runs `body` holding the lock exclusively if it is free now; nil
    /// (and `body` not run) if any thread, this one included, holds it.
    package func tryWithLock<T>(_ body: () -> T) -> T? {
        guard pthread_rwlock_trywrlock(rwlock) == 0 else { return nil }
        defer { pthread_rwlock_unlock(rwlock) }
        return body()
    }

    /// Runs `body` holding the lock shared with other readers.
    @inline(__always)
    package func withReadLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        if pthread_rwlock_tryrdlock(rwlock) != 0 { lockWaiting(reading: true) }
        defer { pthread_rwlock_unlock(rwlock) }
        return try body()
    }
}
