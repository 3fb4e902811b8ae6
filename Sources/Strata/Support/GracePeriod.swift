internal import StrataStore
import Dispatch

/// Frees shared state a context dropped only once its readers are done
/// with it, and off their threads.
///
/// A child reads its parent's state without entering the parent: it copies
/// the parent's list of recorded saves and its published pending changes
/// (Rules 10 and 12) — a retain each — and lets them go when its check or
/// read is done. Should the parent drop one of them meanwhile, the child
/// holds the last reference and frees it: a large import's change set or
/// publication, freed on the main thread when the child is the view
/// context, long enough to be felt there. So the parent hands what it
/// drops to ``release(_:)``, which keeps it for
/// ``interval`` — a check holds its copy for microseconds, though a long
/// fetch holds one for its whole run — and then frees it on
/// ``ReleasedObjects/queue``, as background work (Rule 11).
///
/// Hand it data, never a context: a context kept alive keeps its parent, its
/// coordinator and the open store (and its file lock) alive with it.
enum GracePeriod {
    static let interval = DispatchTimeInterval.milliseconds(100)

    static func release<T: Sendable>(_ value: T) {
        release(value) { _, _ in }
    }

    /// Change sets, freed object by object (``ChangeSet/empty(yieldingAt:)``):
    /// freed in one go, those of a large import hold a core past every yield
    /// point.
    static func release(_ changes: [ChangeSet]) {
        release(changes) { changes, yields in
            while var set = changes.popLast() { set.empty(yieldingAt: &yields) }
        }
    }

    /// Keeps `value` for ``interval``, then empties it with `emptying` (which
    /// may free it piece by piece, passing yield points) and frees what is left.
    private static func release<T: Sendable>(_ value: T, emptying: @escaping @Sendable (inout T, inout YieldPoints) -> Void) {
        let held = Held(value)
        ReleasedObjects.queue.asyncAfter(deadline: .now() + interval) {
            // Emptied inside `run`: the free itself is the background work.
            BackgroundScheduling.run {
                var yields = YieldPoints()
                if held.value != nil { emptying(&held.value!, &yields) }
                held.value = nil
            }
        }
    }

    /// `@unchecked Sendable`: `value` is set at creation and emptied once,
    /// on ``ReleasedObjects/queue``; nothing else touches it.
    private final class Held<T: Sendable>: @unchecked Sendable {
        var value: T?
        init(_ value: T) { self.value = value }
    }
}
