#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// A mutex with a condition variable, over pthreads: the writers' queue of
/// group commit waits on it. (Not `Synchronization.Mutex`, whose futex slow
/// path ThreadSanitizer cannot see on Linux.)
package final class ConditionLock: @unchecked Sendable {
    // Sendable because: the pthread objects are the synchronization; they are
    // allocated once and never moved. What they guard is documented by users.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>

    package init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    package func lock() { pthread_mutex_lock(mutex) }
    package func unlock() { pthread_mutex_unlock(mutex) }

    @inline(__always)
    package func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Waits for a broadcast; call with the lock held, re-check the condition after.
    package func wait() { pthread_cond_wait(condition, mutex) }

    package func broadcast() { pthread_cond_broadcast(condition) }
}
