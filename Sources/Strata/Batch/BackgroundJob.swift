import Dispatch
internal import StrataStore

/// One piece of a batch request's work run on a thread of the global
/// queue while the requesting thread goes on, and joined by it: a batch
/// built ahead of its writing (``BatchesAhead``), or written behind the
/// filling of the next.
///
/// The work, and whatever it holds (a coordinator, a batch to let go of),
/// is let go of on that thread before ``join()`` returns: nothing of it
/// outlives the request that joined it.
///
/// `@unchecked Sendable`: `work` and `made` are guarded by `lock`; the
/// job takes `work` once and sets `made` once, before `group` says it is done.
final class BackgroundJob<Value: Sendable>: @unchecked Sendable {
    private let group = DispatchGroup()
    private let lock = Lock()
    private var work: (@Sendable () -> Value)?
    private var made: Value?

    /// Starts `work`.
    init(_ work: @escaping @Sendable () -> Value) {
        self.work = work
        group.enter()
        DispatchQueue.global().async { [self] in
            var work = lock.withLock { self.work.take() }
            let value = work!()
            work = nil
            lock.withLock { made = value }
            group.leave()
        }
    }

    /// Waits for the work to end, then returns what it made. Once only.
    func join() -> Value {
        group.wait()
        return lock.withLock { made.take() }!
    }
}
