internal import StrataStore
import Dispatch

/// Frees shared state a context dropped only once its readers are done
/// with it, and off their threads.
///
/// A child reads its parent's state without entering the parent: it copies
/// the parent's list of recorded saves and its published pending changes
/// (Rules 10 and 12) — a retain each — and lets them go when its check or
/// read is done. Should the parent drop one of them meanwhile, the child
/// holds the last reference and frees it: a 100,000-object import's change
/// set or publication, 9–17 ms of the main thread's CPU when the child is
/// the view context (measured in `strata-bench stall`, row (d)). So the
/// parent hands what it drops to ``release(_:)``, which keeps it for
/// ``interval`` — a reader holds its copy for microseconds — and then frees
/// it on ``ReleasedObjects/queue``, as background work (Rule 11).
enum GracePeriod {
    static let interval = DispatchTimeInterval.milliseconds(100)

    static func release<T: Sendable>(_ value: T) {
        ReleasedObjects.queue.asyncAfter(deadline: .now() + interval) {
            BackgroundScheduling.run { withExtendedLifetime(value) {} }
        }
    }
}
