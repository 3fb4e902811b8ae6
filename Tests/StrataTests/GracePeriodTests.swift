import Dispatch
import Foundation
@testable import Strata
import Testing

/// ``GracePeriod``: what a context drops outlives the drop by the grace
/// period (a reader holding a copy is not left to free it), and is freed
/// after it, on the background queue.
@Suite struct GracePeriodTests {
    final class Tracked: @unchecked Sendable {
        // `@unchecked Sendable`: immutable; `freed` is thread-safe.
        let freed: DispatchSemaphore
        init(_ freed: DispatchSemaphore) { self.freed = freed }
        deinit {
            dispatchPrecondition(condition: .onQueue(ReleasedObjects.queue))
            freed.signal()
        }
    }

    @Test func droppedStateOutlivesTheDropThenIsFreedInTheBackground() {
        let freed = DispatchSemaphore(value: 0)
        let started = DispatchTime.now()
        GracePeriod.release([Tracked(freed)])
        #expect(freed.wait(timeout: .now() + 0.05) == .timedOut, "freed before the grace period ended")
        #expect(freed.wait(timeout: .now() + 10) == .success, "never freed")
        #expect(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds >= 100_000_000)
    }
}
