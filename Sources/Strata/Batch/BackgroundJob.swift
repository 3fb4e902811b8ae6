import Dispatch
import Synchronization

/// One piece of a batch request's work run on a thread of the global
/// queue while the requesting thread goes on, and joined by it: a batch
/// built ahead of its writing (``BatchesAhead``), or written behind the
/// filling of the next.
final class BackgroundJob<Value: Sendable>: Sendable {
    private let group = DispatchGroup()
    /// What the work made: set by it, taken by ``join()`` once `group` says it is done.
    private let made = Mutex<Value?>(nil)

    /// Starts `work`.
    init(_ work: @escaping @Sendable () -> Value) {
        group.enter()
        DispatchQueue.global().async { [self] in
            let value = work()
            made.withLock { $0 = value }
            group.leave()
        }
    }

    /// Waits for the work to end, then returns what it made. Once only.
    func join() -> Value {
        group.wait()
        return made.withLock { $0.take() }!
    }
}
