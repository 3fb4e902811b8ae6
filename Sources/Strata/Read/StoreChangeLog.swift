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
/// The states are indexed by object when first asked for
/// (``exposedState(of:)``), not as they are recorded: a save of objects no
/// child holds any more (an import that lets go of what it saved) pays
/// nothing for them.
///
/// `@unchecked Sendable`: `sequence`, `entries`, `kept`, `recorded`,
/// `limit`, `exposed` and `indexedThrough` are guarded by `lock`, a leaf
/// lock.
final class StoreChangeLog: @unchecked Sendable {
    /// An object's state as a save wrote it: the values the saving context
    /// (serial `origin`) showed its children as version `exposed`, stored
    /// as version `stored`.
    struct ExposedState: Equatable {
        let origin: UInt64
        let exposed: UInt64
        let stored: UInt64
    }

    /// What one entry says changed.
    private enum Change {
        /// These objects, in the store: of those in `stated`, the save
        /// wrote the state given.
        case objects(stated: [(ObjectID, ExposedState)], unstated: [ObjectID])
        /// Unknown to the descendants of the context with serial `origin`
        /// (nil: to every reader).
        case unknown(below: UInt64?)

        /// How much of ``limit`` the entry takes.
        var weight: Int {
            if case .objects(let stated, let unstated) = self { stated.count + unstated.count } else { 1 }
        }
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
    /// For each object whose newest change among the entries indexed wrote
    /// a state: that state, and the entry's sequence.
    private var exposed: [ObjectID: (sequence: UInt64, state: ExposedState)] = [:]
    /// The entries up to this sequence are in `exposed`.
    private var indexedThrough: UInt64 = 0

    /// The present sequence: objects loaded after reading it are as new as
    /// every entry up to it.
    var current: UInt64 { lock.withLock { sequence } }

    /// Records the objects a save changed; called once its batch is
    /// readable. `stated`: those it wrote with the saving context's values,
    /// with what that context showed its children for them; `unstated`:
    /// the others.
    func record(stated: [(ObjectID, ExposedState)], unstated: [ObjectID]) {
        guard !stated.isEmpty || !unstated.isEmpty else { return }
        append(.objects(stated: stated, unstated: unstated))
    }

    /// Records the objects a save changed, none with a state.
    func record(_ ids: [ObjectID]) { record(stated: [], unstated: ids) }

    /// Records a change no ID list describes, to the descendants of the
    /// context with serial `origin` (nil: to every reader).
    func recordUnknownChange(below origin: UInt64? = nil) { append(.unknown(below: origin)) }

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
        lock.withLock {
            indexStates()
            return exposed[id]?.state
        }
    }

    /// Brings `exposed` up to the newest entry, oldest first: a newer
    /// change of an object replaces or removes what an older one said.
    /// Under `lock`.
    private func indexStates() {
        guard indexedThrough < sequence, let first = entries.first else { return }
        for entry in entries[Int(max(indexedThrough + 1, first.sequence) - first.sequence)...] {
            switch entry.change {
            case .objects(let stated, let unstated):
                if !exposed.isEmpty { for id in unstated { exposed[id] = nil } }
                for (id, state) in stated { exposed[id] = (entry.sequence, state) }
            case .unknown(below: nil):
                // The store may have moved on in ways nobody knows.
                exposed.removeAll()
            case .unknown:
                // A context dropped what it had not saved: the store is as it was.
                break
            }
        }
        indexedThrough = sequence
    }

    private func append(_ change: Change) {
        lock.withLock {
            sequence += 1
            recorded += change.weight
            entries.append((sequence, change, recorded))
            kept += change.weight
            var dropped = 0
            while kept > limit, dropped < entries.count - 1 {
                let entry = entries[dropped]
                kept -= entry.change.weight
                // Only what was indexed is in `exposed` (every older entry was too).
                if entry.sequence <= indexedThrough, case .objects(let stated, _) = entry.change {
                    for (id, _) in stated where exposed[id]?.sequence == entry.sequence { exposed[id] = nil }
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
                case .objects(let stated, let unstated):
                    for (id, _) in stated { ids.append(id) }
                    ids.append(contentsOf: unstated)
                case .unknown(below: let origin?) where !isAncestor(origin): continue
                case .unknown: return nil
                }
            }
            return (ids, sequence)
        }
    }
}
