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
///
/// What is handed over waits in one list, oldest first, under one timer:
/// a writer hands something over at every save, and a timer and a
/// background run for each would cost every save a wake-up of two threads.
/// The timer's runs are at least ``gathering`` apart, each freeing all that
/// is due: a run per release due would be that wake-up again, a grace
/// period later.
enum GracePeriod {
    /// How long what is handed over is kept, in nanoseconds (100 ms).
    static let interval: UInt64 = 100_000_000
    /// The least time between two runs of the timer, in nanoseconds (10 ms):
    /// a release waits at most this long past its period.
    static let gathering: UInt64 = 10_000_000
    /// How many times the timer has run (tests).
    static var runCount: Int { pending.runCount }
    private static let pending = PendingReleases()

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
        pending.add(after: interval) { yields in
            if held.value != nil { emptying(&held.value!, &yields) }
            held.value = nil
        }
    }

    /// `@unchecked Sendable`: `value` is set at creation and emptied once,
    /// on ``ReleasedObjects/queue``; nothing else touches it.
    private final class Held<T: Sendable>: @unchecked Sendable {
        var value: T?
        init(_ value: T) { self.value = value }
    }

    /// The releases waiting for their time, and the one timer that runs
    /// them on ``ReleasedObjects/queue``.
    ///
    /// `@unchecked Sendable`: `releases`, `scheduled` and `runs` are guarded by `lock`.
    private final class PendingReleases: @unchecked Sendable {
        typealias Release = @Sendable (inout YieldPoints) -> Void
        private let lock = Lock()
        /// Oldest first: each is due an interval after it was added.
        private var releases: [(due: UInt64, release: Release)] = []
        /// Whether a timer is set for the first of `releases`.
        private var scheduled = false
        /// How many times the timer has run.
        private var runs = 0

        var runCount: Int { lock.withLock { runs } }

        /// Adds `release`, due `nanoseconds` from now.
        func add(after nanoseconds: UInt64, _ release: @escaping Release) {
            let schedule = lock.withLock { () -> UInt64? in
                // Read under the lock: the list stays in order of when each is due.
                let due = DispatchTime.now().uptimeNanoseconds + nanoseconds
                releases.append((due, release))
                guard !scheduled else { return nil }
                scheduled = true
                return due
            }
            if let schedule { self.schedule(at: schedule) }
        }

        private func schedule(at due: UInt64) {
            ReleasedObjects.queue.asyncAfter(deadline: DispatchTime(uptimeNanoseconds: due)) { self.runDue() }
        }

        /// Runs every release due by now, as background work (the free
        /// itself is that work), and sets the timer for the next, if any.
        private func runDue() {
            let now = DispatchTime.now().uptimeNanoseconds
            var due = lock.withLock { () -> [(due: UInt64, release: Release)] in
                runs += 1
                let count = releases.prefix { $0.due <= now }.count
                defer { releases.removeFirst(count) }
                return Array(releases.prefix(count))
            }
            BackgroundScheduling.run {
                var yields = YieldPoints()
                for (_, release) in due { release(&yields) }
                due.removeAll()
            }
            let next = lock.withLock { () -> UInt64? in
                guard let first = releases.first else {
                    scheduled = false
                    return nil
                }
                return max(first.due, DispatchTime.now().uptimeNanoseconds + GracePeriod.gathering)
            }
            if let next { schedule(at: next) }
        }
    }
}
