import Synchronization

/// How many records a coordinator's store has read one by one (scans
/// aside), an index entry's included: what a save, a batch request or a
/// fetch through an index costs, counted rather than timed. Shared by the
/// coordinator, which tests ask, and the store, which counts.
final class RecordReadCount: Sendable {
    private let count = Atomic<Int>(0)

    func add(_ n: Int = 1) {
        count.add(n, ordering: .relaxed)
    }

    /// The count (relaxed: a test reads it on the thread that did the reads).
    func load() -> Int {
        count.load(ordering: .relaxed)
    }
}
