/// When a store's following thread (``StoreFollowing``) starts its next
/// catch-up. A change that finds the reader idle is caught up with at once
/// (at most one catch-up per ``shortest``); while changes keep coming, the
/// catch-ups come at most one per `interval`, which doubles up to
/// ``longest`` while the stream lasts and halves back once the reader is
/// idle again.
///
/// Why: a catch-up costs a reader process about the same whether it takes
/// in one save or twenty (reading on in the log, the notification, its
/// contexts' merges, the threads each wakes), so a writer saving thousands
/// of times a second would have every reader catch up nearly as often,
/// with CPU its saves then wait for on a small machine. A fixed longer
/// interval would delay every lone save too; this delays only a stream's
/// saves, by at most ``longest``.
///
/// What says "stream": a change already waiting when the last catch-up
/// ended, or a last catch-up that took in ``streamBatches`` saves or more.
/// Not how soon a change came: a writer pacing its saves a little slower
/// than the reader catches up is followed save by save. The count keeps a
/// stream a stream through the writer's pauses (an fsync that took longer)
/// that leave nothing waiting at the end of one catch-up; it is more than
/// two so that a writer saving every 2 ms, which a catch-up at the longest
/// interval finds two saves of, is not paced as a stream for it.
struct CatchUpPacing {
    /// The interval while the reader is idle between changes, in nanoseconds.
    static let shortest: UInt64 = 1_000_000
    /// The interval a stream of changes grows it to, in nanoseconds.
    static let longest: UInt64 = 4_000_000
    /// The saves one catch-up takes in that make it a stream's.
    static let streamBatches: UInt64 = 3

    /// The least time from the start of one catch-up to the next's.
    private(set) var interval = Self.shortest

    /// How long to wait before the next catch-up, for a change that came
    /// `since` nanoseconds after the last one started; `waiting`: it came
    /// while that catch-up ran or waited (the reader found it there);
    /// `batches`: the saves that catch-up took in.
    mutating func wait(since: UInt64, waiting: Bool, batches: UInt64) -> UInt64 {
        let stream = waiting || batches >= Self.streamBatches
        interval = stream ? min(interval * 2, Self.longest) : max(interval / 2, Self.shortest)
        return since < interval ? interval - since : 0
    }
}
