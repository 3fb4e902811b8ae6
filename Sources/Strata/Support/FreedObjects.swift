import Dispatch
import Foundation
import Synchronization
internal import StrataStore

/// Resident memory that follows what the process holds: once contexts
/// have let go of many objects, the heap's free pages go back to the
/// system.
///
/// Objects are made and freed on whichever worker thread runs a context's
/// block, and glibc keeps what a thread frees in that thread's arena: a
/// block that fetched every object of a large entity and let go of them
/// left the process as large as at its peak, though nothing held them. Handing
/// free pages back (``FreeHeap/release()``) costs in proportion to the
/// heap, so it runs off every context's queue, on a utility queue, at
/// most one at a time, once ``threshold`` objects were let go of since
/// the last time — never on the main queue, never per object.
enum FreedObjects {
    /// Objects let go of since free pages were last handed back before the
    /// next hand-back: tens of megabytes of them, so that each hand-back
    /// returns far more than its walk of the heap costs.
    static let threshold = 65_536

    private static let sinceLastRelease = Atomic<Int>(0)
    private static let releaseScheduled = Atomic<Bool>(false)
    private static let releases = Atomic<Int>(0)

    /// `count` objects were let go of (freed, or about to be by the caller).
    static func note(_ count: Int) {
        guard count > 0 else { return }
        guard sinceLastRelease.add(count, ordering: .relaxed).newValue >= threshold,
              releaseScheduled.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        DispatchQueue.global(qos: .utility).async {
            sinceLastRelease.store(0, ordering: .relaxed)
            FreeHeap.release()
            releases.add(1, ordering: .relaxed)
            releaseScheduled.store(false, ordering: .releasing)
        }
    }

    /// How many times free pages were handed back (tests).
    static var releasesForTesting: Int { releases.load(ordering: .relaxed) }

    /// Waits until no hand-back is scheduled (one that is has run).
    static func waitForScheduledRelease() {
        while releaseScheduled.load(ordering: .acquiring) { usleep(1_000) }
    }

    /// Waits until no hand-back is scheduled, then forgets what was let go
    /// of since the last (tests: what follows starts from nothing).
    static func settleForTesting() {
        waitForScheduledRelease()
        sinceLastRelease.store(0, ordering: .relaxed)
    }
}

/// For benchmarks that read the process's resident memory: returns once
/// a hand-back of free pages that contexts letting go of objects
/// scheduled has run (at once when none is scheduled), so that the
/// reading does not race it.
@_spi(Benchmarks)
public func waitForScheduledMemoryHandBack() {
    FreedObjects.waitForScheduledRelease()
}
