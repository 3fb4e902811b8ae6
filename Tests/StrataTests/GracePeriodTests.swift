import Dispatch
import Foundation
@testable import Strata
import StrataStore
import Testing

/// ``GracePeriod``: what a context drops outlives the drop by the grace
/// period (a reader holding a copy is not left to free it), and is freed
/// after it, on the background queue.
@Suite struct GracePeriodTests {
    final class Tracked: @unchecked Sendable {
        // `@unchecked Sendable`: `freed` is thread-safe; `sliceWhenFreed` is
        // written once, in `deinit`, before `freed` is signalled.
        let freed: DispatchSemaphore
        let sliceWhenFreed: UnsafeMutablePointer<UInt64?>
        init(_ freed: DispatchSemaphore, _ slice: UnsafeMutablePointer<UInt64?>) {
            self.freed = freed
            sliceWhenFreed = slice
        }
        deinit {
            dispatchPrecondition(condition: .onQueue(ReleasedObjects.queue))
            sliceWhenFreed.pointee = BackgroundScheduling.currentSlice()
            freed.signal()
        }
    }

    @Test func droppedStateOutlivesTheDropThenIsFreedInTheBackground() {
        let freed = DispatchSemaphore(value: 0)
        let slice = UnsafeMutablePointer<UInt64?>.allocate(capacity: 1)
        slice.initialize(to: nil)
        defer { slice.deallocate() }
        let started = DispatchTime.now()
        GracePeriod.release([Tracked(freed, slice)])
        #expect(freed.wait(timeout: .now() + 0.05) == .timedOut, "freed before the grace period ended")
        #expect(freed.wait(timeout: .now() + 10) == .success, "never freed")
        #expect(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds >= 100_000_000)
        // Freed as background work (Rule 11), where the kernel honours it.
        if BackgroundScheduling.honoursThreadSlices {
            #expect(slice.pointee == BackgroundScheduling.slice, "freed with slice \(String(describing: slice.pointee))")
        }
    }

    /// Releases share one timer, and each waits out its own period: one
    /// handed over 50 ms after another is not freed with it.
    @Test func eachReleaseWaitsItsOwnPeriodUnderOneTimer() {
        let (first, second) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let slice = UnsafeMutablePointer<UInt64?>.allocate(capacity: 1)
        slice.initialize(to: nil)
        defer { slice.deallocate() }
        GracePeriod.release([Tracked(first, slice)])
        usleep(50_000)
        let secondReleased = DispatchTime.now().uptimeNanoseconds
        GracePeriod.release([Tracked(second, slice)])
        #expect(first.wait(timeout: .now() + 10) == .success, "never freed")
        #expect(second.wait(timeout: .now() + 10) == .success, "never freed")
        #expect(DispatchTime.now().uptimeNanoseconds - secondReleased >= 100_000_000, "freed with the one before, before its own period ended")
    }

    /// Releases handed over a millisecond apart (a writer saving a
    /// thousand times a second) are freed in runs at least
    /// ``GracePeriod/gathering`` apart, each taking all that is due, not a
    /// run per release. (Other tests' releases share the timer: its runs
    /// are still that far apart.)
    @Test func releasesDueCloseTogetherAreFreedTogether() {
        let slice = UnsafeMutablePointer<UInt64?>.allocate(capacity: 1)
        slice.initialize(to: nil)
        defer { slice.deallocate() }
        let count = 50
        let freed = (0..<count).map { _ in DispatchSemaphore(value: 0) }
        let runsBefore = GracePeriod.runCount
        for semaphore in freed {
            GracePeriod.release([Tracked(semaphore, slice)])
            usleep(1_000)
        }
        for semaphore in freed { #expect(semaphore.wait(timeout: .now() + 10) == .success, "never freed") }
        let runs = GracePeriod.runCount - runsBefore
        // 50 releases over at least 50 ms, freed over at least as long: at
        // most about one run per 10 ms of that, where a run per release due
        // makes 50.
        #expect(runs <= 20, "\(runs) runs of the timer for \(count) releases a millisecond apart")
    }

    /// Change sets are freed object by object, passing yield points: freed
    /// in one go, a large one holds its core for milliseconds that no yield
    /// point can split.
    @Test func aChangeSetIsFreedObjectByObjectPassingYieldPoints() async {
        let recipe = makeModel().entity(named: "Recipe")!
        let n = 200_000
        var changes = ChangeSet()
        changes.inserted = (0..<UInt64(n)).map { ObjectID(entity: recipe, primaryKey: $0, isTemporary: false) }
        changes.insertedValues = (0..<n).map { [.string("recipe \($0)")] }
        changes.updated = [ObjectID(entity: recipe, primaryKey: 1, isTemporary: false)]
        changes.updatedValues = [[.string("new")]]
        changes.updatedBase = [[.string("old")]]
        changes.deleted = [ObjectID(entity: recipe, primaryKey: 2, isTemporary: false)]
        changes.deletedBase = [[.string("gone")]]
        let filled = changes
        let (emptied, yields, milliseconds) = await runOnDedicatedThread { () -> (ChangeSet, Int, Double) in
            var changes = filled
            return BackgroundScheduling.run {
                let before = BackgroundScheduling.yieldsOnThisThread
                let started = DispatchTime.now().uptimeNanoseconds
                var yieldPoints = YieldPoints()
                changes.empty(yieldingAt: &yieldPoints)
                let elapsed = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6
                return (changes, BackgroundScheduling.yieldsOnThisThread - before, elapsed)
            }
        }
        #expect(emptied.inserted.isEmpty && emptied.insertedValues.isEmpty && emptied.updated.isEmpty && emptied.updatedValues.isEmpty
                && emptied.updatedBase.isEmpty && emptied.deleted.isEmpty && emptied.deletedBase.isEmpty)
        // Yields come every 0.5 ms of wall time, once the copy above is freed too.
        if BackgroundScheduling.honoursThreadSlices && milliseconds >= 2 {
            #expect(yields >= 1, "no yield in \(milliseconds) ms of freeing")
        }
    }
}
