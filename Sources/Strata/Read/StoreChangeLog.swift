internal import StrataStore

/// Which objects the recent saves to the store changed, by sequence: what
/// lets an indexed fetch judge, among the objects its context holds, only
/// those whose values may be older than the source's (see
/// ``ManagedObjectContext/possiblyStaleObjects(of:source:)``) instead of
/// every registered object — which made a block of lookups quadratic.
///
/// A context that holds pending changes for children and drops some without
/// saving them (rollback, reset, refresh) records an *unknown* change: what
/// its children loaded from it may be stale in ways no ID list says, so a
/// reader whose objects predate it checks them all.
///
/// Bounded: past ``limit`` IDs the oldest entries go, and a reader whose
/// objects predate what is kept checks them all.
///
/// `@unchecked Sendable`: `sequence`, `entries` and `kept` are guarded by `lock`, a leaf lock.
final class StoreChangeLog: @unchecked Sendable {
    static let limit = 1 << 16

    private let lock = Lock()
    /// The sequence of the last entry (0: none yet).
    private var sequence: UInt64 = 0
    /// Each entry: its sequence and the IDs changed (nil: unknown).
    private var entries: [(sequence: UInt64, ids: [ObjectID]?)] = []
    private var kept = 0

    /// The present sequence: objects loaded after reading it are as new as
    /// every entry up to it.
    var current: UInt64 { lock.withLock { sequence } }

    /// Records the IDs a save changed; called once its batch is readable.
    func record(_ ids: [ObjectID]) {
        guard !ids.isEmpty else { return }
        append(ids)
    }

    /// Records a change no ID list describes.
    func recordUnknownChange() { append(nil) }

    private func append(_ ids: [ObjectID]?) {
        lock.withLock {
            sequence += 1
            entries.append((sequence, ids))
            kept += ids?.count ?? 1
            var dropped = 0
            while kept > Self.limit, dropped < entries.count - 1 {
                kept -= entries[dropped].ids?.count ?? 1
                dropped += 1
            }
            if dropped > 0 { entries.removeFirst(dropped) }
        }
    }

    /// Every ID changed after sequence `since`, and the sequence they run
    /// through; nil when that is unknown (an unknown change, or entries
    /// since dropped).
    func changes(since: UInt64) -> (ids: [ObjectID], through: UInt64)? {
        lock.withLock {
            guard since < sequence else { return ([], since) }
            guard let first = entries.first, first.sequence <= since + 1 else { return nil }
            var ids: [ObjectID] = []
            for entry in entries.reversed() {
                guard entry.sequence > since else { break }
                guard let changed = entry.ids else { return nil }
                ids.append(contentsOf: changed)
            }
            return (ids, sequence)
        }
    }
}
