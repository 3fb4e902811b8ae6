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
}
