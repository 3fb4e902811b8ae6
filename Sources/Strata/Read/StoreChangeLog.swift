internal import StrataStore

/// Which objects the recent saves to the store changed, by sequence: what
/// lets an indexed fetch judge, among the objects its context holds, only
/// those whose values may be older than the source's (see
/// ``ManagedObjectContext/possiblyStaleObjects(of:source:updatedAmong:)``) instead of
/// every registered object — which made a block of lookups quadratic.
///
/// A context that holds pending changes for children and drops some without
/// saving them (rollback, reset, refresh) records an *unknown* change below
/// it: what its descendants loaded from it may be stale in ways no ID list
/// says, so a descendant whose objects predate it checks them all, once
/// (``ManagedObjectContext/possiblyStaleObjects(of:source:updatedAmong:)``).
/// Other contexts never read those changes, and go on as before. A
/// catch-up that failed, or met a migration, records one that concerns
/// every reader.
///
/// Bounded: past ``limit`` IDs the oldest entries go, and a reader whose
/// objects predate what is kept checks them all, once.
///
/// A save also says, of each object it inserted or wrote with the saving
/// context's own values, which version that context had shown its
/// children for them (``ExposedState``): a child holding that version
/// holds what the store now holds, which it can know without reading the
/// store.
///
/// `@unchecked Sendable`: `sequence`, `entries`, `kept`, `exposed` and
/// `limit` are guarded by `lock`, a leaf lock.
final class StoreChangeLog: @unchecked Sendable {
    /// What one entry says changed.
    private enum Change {
        /// These objects, in the store.
        case objects([ObjectID])
        /// Unknown to the descendants of the context with serial `origin`
        /// (nil: to every reader).
        case unknown(below: UInt64?)

        /// How much of ``limit`` the entry takes.
        var weight: Int {
            if case .objects(let ids) = self { ids.count } else { 1 }
        }
    }

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
    /// Each entry: its sequence (one more than the entry before's), what
    /// changed, and the weight of every entry ever recorded up to it.
    private var entries: [(sequence: UInt64, change: Change, upTo: Int)] = []
    /// The entries' weight: IDs, and 1 per unknown change.
    private var kept = 0
    /// The weight of every entry ever recorded.
    private var recorded = 0
    /// The weight past which the oldest entries go.
    private var limit = 1 << 16
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
        append(.objects(ids), states: states)
    }

    /// Records a change no ID list describes, to the descendants of the
    /// context with serial `origin` (nil: to every reader).
    func recordUnknownChange(below origin: UInt64? = nil) { append(.unknown(below: origin), states: []) }

    /// Tests only: how many IDs the log keeps (``limit``).
    var limitForTesting: Int {
        get { lock.withLock { limit } }
        set { lock.withLock { limit = newValue } }
    }

    /// The state the newest change of `id` kept here wrote, when that
    /// change wrote a context's values: whether what a context holds at
    /// a version it was shown is what the store holds, without reading
    /// the store. Nil when the newest change is another kind, or unknown.
    func exposedState(of id: ObjectID) -> ExposedState? {
        lock.withLock { exposed[id]?.state }
    }

    private func append(_ change: Change, states: [(ObjectID, ExposedState)]) {
        lock.withLock {
            sequence += 1
            recorded += change.weight
            entries.append((sequence, change, recorded))
            kept += change.weight
            switch change {
            case .objects(let ids):
                // The newest change of each ID is this one: an older state is no longer the store's.
                if !exposed.isEmpty { for id in ids { exposed[id] = nil } }
                for (id, state) in states { exposed[id] = (sequence, state) }
            case .unknown(below: nil):
                // The store may have moved on in ways nobody knows.
                exposed.removeAll()
            case .unknown:
                // A context dropped what it had not saved: the store is as it was.
                break
            }
            var dropped = 0
            while kept > limit, dropped < entries.count - 1 {
                let entry = entries[dropped]
                kept -= entry.change.weight
                if case .objects(let ids) = entry.change {
                    for id in ids where exposed[id]?.sequence == entry.sequence { exposed[id] = nil }
                }
                dropped += 1
            }
            if dropped > 0 { entries.removeFirst(dropped) }
        }
    }

    /// Whether the changes after sequence `since` take more than half of
    /// what the log keeps: a reader that sorted them up to `since` should
    /// sort them now, while the log still lists them
    /// (``ManagedObjectContext/keepUpWithStoreChanges()``). False when some
    /// are dropped already: it is too late for that.
    func isFallingBehind(since: UInt64) -> Bool {
        lock.withLock {
            guard since < sequence, let first = entries.first, first.sequence <= since + 1 else { return false }
            let before = since < first.sequence ? first.upTo - first.change.weight : entries[Int(since - first.sequence)].upTo
            return recorded - before > limit / 2
        }
    }

    /// Every ID changed after sequence `since`, and the sequence they run
    /// through, for a reader whose ancestors' serials `isAncestor` accepts;
    /// nil when that is unknown (an unknown change to it, or entries since
    /// dropped). `isAncestor` is called under the log's lock: it must take
    /// no lock.
    func changes(since: UInt64, isAncestor: (UInt64) -> Bool) -> (ids: [ObjectID], through: UInt64)? {
        lock.withLock {
            guard since < sequence else { return ([], since) }
            guard let first = entries.first, first.sequence <= since + 1 else { return nil }
            var ids: [ObjectID] = []
            for entry in entries.reversed() {
                guard entry.sequence > since else { break }
                switch entry.change {
                case .objects(let changed): ids.append(contentsOf: changed)
                case .unknown(below: let origin?) where !isAncestor(origin): continue
                case .unknown: return nil
                }
            }
            return (ids, sequence)
        }
    }
}
