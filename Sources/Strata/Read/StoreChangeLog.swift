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
/// A save also says, of each object it wrote with the saving context's
/// own values, which version that context had shown its children for
/// them (``ExposedState``): a child holding that version holds what the
/// store now holds, which it can know without reading the store.
///
/// `@unchecked Sendable`: `sequence`, `entries`, `kept` and `exposed` are
/// guarded by `lock`, a leaf lock.
final class StoreChangeLog: @unchecked Sendable {
    static let limit = 1 << 16

    /// An object's state as a save wrote it: the values the saving context
    /// (serial `origin`) showed its children as version `exposed`, stored
    /// as version `stored`.
    struct ExposedState: Equatable {
        let origin: UInt64
        let exposed: UInt64
        let stored: UInt64
    }

    private let lock = Lock()
    /// The sequence of the last entry (0: none yet).
    private var sequence: UInt64 = 0
    /// Each entry: its sequence and the IDs changed (nil: unknown).
    private var entries: [(sequence: UInt64, ids: [ObjectID]?)] = []
    private var kept = 0
    /// For each object whose newest change among the entries kept wrote a
    /// context's values: that state, and the entry's sequence.
    private var exposed: [ObjectID: (sequence: UInt64, state: ExposedState)] = [:]

    /// The present sequence: objects loaded after reading it are as new as
    /// every entry up to it.
    var current: UInt64 { lock.withLock { sequence } }

    /// Records the IDs a save changed; called once its batch is readable.
    /// `states`: of the objects among them written with the saving
    /// context's values, what it showed its children for them.
    func record(_ ids: [ObjectID], states: [(ObjectID, ExposedState)] = []) {
        guard !ids.isEmpty else { return }
        append(ids, states: states)
    }

    /// Records a change no ID list describes.
    func recordUnknownChange() { append(nil, states: []) }

    /// The state the newest change of `id` kept here wrote, when that
    /// change wrote a context's values: whether what a context holds at
    /// a version it was shown is what the store holds, without reading
    /// the store. Nil when the newest change is another kind, or unknown.
    func exposedState(of id: ObjectID) -> ExposedState? {
        lock.withLock { exposed[id]?.state }
    }

    private func append(_ ids: [ObjectID]?, states: [(ObjectID, ExposedState)]) {
        lock.withLock {
            sequence += 1
            entries.append((sequence, ids))
            kept += ids?.count ?? 1
            if let ids {
                // The newest change of each ID is this one: an older state is no longer the store's.
                if !exposed.isEmpty { for id in ids { exposed[id] = nil } }
                for (id, state) in states { exposed[id] = (sequence, state) }
            } else {
                exposed.removeAll()
            }
            var dropped = 0
            while kept > Self.limit, dropped < entries.count - 1 {
                kept -= entries[dropped].ids?.count ?? 1
                for id in entries[dropped].ids ?? [] where exposed[id]?.sequence == entries[dropped].sequence { exposed[id] = nil }
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
