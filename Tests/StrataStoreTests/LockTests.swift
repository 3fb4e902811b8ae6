import Foundation
import Testing
@testable import StrataStore

/// `hasWaiters`, which a flush's and a compaction's repoint read between
/// chunks to pause only when a thread waits for the index's locks.
///
/// Each test forces one interleaving:
///
///     this thread                        the other thread
///     take the lock ───────────────┐
///                                  │     take the lock: the try fails,
///                                  │     counted waiting, blocks
///     sees hasWaiters (polled)     │
///     let go ──────────────────────┘     gets the lock, no longer counted,
///                                        lets go, signals `done`
///     waits for `done`; sees !hasWaiters
@Suite struct LockTests {
    /// Polls `condition` until it holds or 10 seconds pass (the other
    /// thread may be slow to start on a loaded machine); whether it held.
    private func eventually(_ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(10)
        while !condition() {
            if Date() > deadline { return false }
            usleep(200)
        }
        return true
    }

    @Test func aThreadBlockedOnAMutexShowsAsWaiting() {
        let lock = Lock()
        let done = DispatchSemaphore(value: 0)
        var seen = false
        lock.withLock {
            #expect(!lock.hasWaiters, "the holder itself is not waiting")
            Thread {
                lock.withLock {}
                done.signal()
            }.start()
            seen = eventually { lock.hasWaiters }
        }
        #expect(seen)
        done.wait()
        #expect(!lock.hasWaiters)
    }

    @Test(arguments: [(holderReads: false, waiterReads: true), (holderReads: true, waiterReads: false), (holderReads: false, waiterReads: false)])
    func aThreadBlockedOnAReadWriteLockShowsAsWaiting(holderReads: Bool, waiterReads: Bool) {
        let lock = ReadWriteLock()
        let done = DispatchSemaphore(value: 0)
        var seen = false
        let hold = {
            #expect(!lock.hasWaiters, "the holder itself is not waiting")
            Thread {
                if waiterReads { lock.withReadLock {} } else { lock.withLock {} }
                done.signal()
            }.start()
            seen = eventually { lock.hasWaiters }
        }
        if holderReads { lock.withReadLock(hold) } else { lock.withLock(hold) }
        #expect(seen)
        done.wait()
        #expect(!lock.hasWaiters)
    }

    @Test func readersSharingTheLockAreNotWaiting() {
        let lock = ReadWriteLock()
        let done = DispatchSemaphore(value: 0)
        lock.withReadLock {
            Thread {
                lock.withReadLock {}
                done.signal()
            }.start()
            // The other reader gets in beside this one, never counted.
            done.wait()
            #expect(!lock.hasWaiters)
        }
    }
}
