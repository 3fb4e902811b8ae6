/// When a store's following thread (``StoreFollowing``) starts its next
/// catch-up. A change that finds the reader idle is caught up with at once
/// (at most one catch-up per ``shortest``); while changes keep coming —
/// one was already waiting when the last catch-up ended — the catch-ups
/// come at most one per `interval`, which doubles up to ``longest`` while
/// the stream lasts and halves back once the reader is idle again.
///
/// Why: a catch-up costs a reader process about the same whether it takes
/// in one save or twenty (reading on in the log, the notification, its
/// contexts' merges), so a writer saving thousands of times a second would
/// have every reader catch up nearly as often, with CPU its saves then
/// wait for on a small machine. A fixed longer interval would delay every
/// lone save too; this delays only a stream's saves, by at most
/// ``longest``. Whether a change was waiting, not how soon it came, says
/// "stream": a writer pacing its saves a little slower than the reader
/// catches up is followed save by save.
struct CatchUpPacing {
    /// The interval while the reader is idle between changes, in nanoseconds.
    static let shortest: UInt64 = 1_000_000
    /// The interval a stream of changes grows it to, in nanoseconds.
    static let longest: UInt64 = 3_000_000

    /// The least time from the start of one catch-up to the next's.
    private(set) var interval = Self.shortest

    /// How long to wait before the next catch-up, for a change that came
    /// `since` nanoseconds after the last one started; `waiting`: it came
    /// while that catch-up ran or waited (the reader found it there).
    mutating func wait(since: UInt64, waiting: Bool) -> UInt64 {
        interval = waiting ? min(interval * 2, Self.longest) : max(interval / 2, Self.shortest)
        return since < interval ? interval - since : 0
    }
}
