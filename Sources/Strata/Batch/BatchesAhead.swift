/// A batch request's batches, each built one ahead of its writing: while
/// the requesting thread writes batch i — under the save lock, then
/// waiting on the disk — a thread of the global queue builds batch i + 1
/// and lets go of batch i - 1, whose values take a while to free too. On
/// two cores or more the building and freeing leave the requesting
/// thread's path. Building reads the store, if at all, as a guess: what
/// a batch's write goes by is what the store holds under the save lock
/// (a batch insert checks what it looked up ahead against the writes
/// since: ``BatchInsertion/lookUpHoldersAhead(at:)``).
struct BatchesAhead<Batch: Sendable> {
    private let ranges: [Range<Int>]
    private let build: @Sendable (Range<Int>) -> Batch

    /// Batches of `batchSize` (at least 1) of rows `0 ..< total`, each made by `build`.
    init(total: Int, batchSize: Int, build: @escaping @Sendable (Range<Int>) -> Batch) {
        let size = max(batchSize, 1)
        ranges = stride(from: 0, to: max(total, 0), by: size).map { $0..<min($0 + size, total) }
        self.build = build
    }

    /// Calls `body` with each batch and its rows, in order, on this
    /// thread; stops at the first error `body` throws, once the batch
    /// being built ahead is done.
    func forEach(_ body: (Range<Int>, Batch) throws(StrataError) -> Void) throws(StrataError) {
        guard !ranges.isEmpty else { return }
        var ahead: BackgroundJob<Batch>? = start(0, retiring: nil)
        defer { _ = ahead?.join() }
        var previous: Batch?
        for i in ranges.indices {
            let batch = ahead.take()!.join()
            if i + 1 < ranges.count { ahead = start(i + 1, retiring: previous.take()) }
            try body(ranges[i], batch)
            previous = batch
        }
    }

    /// Builds batch `i` on the global queue, then lets go of `retired` there.
    private func start(_ i: Int, retiring retired: Batch?) -> BackgroundJob<Batch> {
        let range = ranges[i], build = build
        return BackgroundJob {
            let batch = build(range)
            // Held by this job alone, which is let go of on its thread.
            withExtendedLifetime(retired) {}
            return batch
        }
    }
}
