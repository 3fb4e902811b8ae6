internal import StrataStore

/// One object's state in a context's unsaved changes, as that context's
/// children read it.
enum PendingState: Sendable {
    /// Inserted here: it exists, with these values, under the version the
    /// context shows its children (a later save into it is checked against it).
    case inserted(Snapshot)
    /// Changed here: these values and version — if the object still exists
    /// below (an update of an object a level below deleted is dropped when
    /// saved, so the child does not see it either).
    case updated(Snapshot)
    /// Deleted (or inserted and deleted again): gone, whatever the levels
    /// below say.
    case removed
}

/// A context's unsaved changes, by object: what its children lay over what
/// the levels below hold, without entering the context (see
/// ``PendingChangesPublication``).
struct PublishedChanges: Sendable {
    var objects: [ObjectID: PendingState] = [:]
    /// The last recorded child save (``DeferredChildSaves/Entry/sequence``)
    /// taken in by the time of this copy: later ones are newer than it.
    var takenInThrough: UInt64 = 0
}

/// The copy of its pending changes a parent context publishes for its
/// children, so that a child's fetch or fault reads its ancestors' unsaved
/// state without waiting for their queues — the main queue above all
/// (Rule 12 in *Concurrency*). Core Data runs a child's fetch through every
/// parent's queue instead.
///
/// The context updates the copy when each of its blocks ends (whenever it
/// processes pending changes), from what changed since the last update:
/// O(the block's changes), never O(the entity or the store). A child takes
/// the whole copy under the lock — a retain — and reads it outside.
///
/// The lock is never held for long, so a reading child — the main queue —
/// never waits for a large update: a small update is made in place under
/// the lock (should a child still hold the previous copy, that one update
/// copies the dictionary); a large one (a big save taken in, the copy
/// rebuilt or emptied after a save) is built on a copy outside the lock and
/// swapped in, and the old copy is freed outside it too. The writer of an
/// import pays O(its pending changes) for that copy, off the main queue.
///
/// A context with no child skips all of this. When it gets its first child
/// while it holds unpublished changes, the copy is *incomplete* until the
/// context's next update; a child that reads it meanwhile has the parent
/// publish through its queue, once (``ManagedObjectContext/layerForChildren()``).
/// A main-queue context publishes from birth, so no child ever waits for the
/// main queue here.
///
/// `@unchecked Sendable`: `changes`, `isComplete` and `hasChildren` are
/// guarded by `lock`, a leaf lock.
final class PendingChangesPublication: @unchecked Sendable {
    private let lock = Lock()
    private var changes = PublishedChanges()  // guarded by `lock`
    private var isComplete = true             // guarded by `lock`
    private var hasChildren: Bool             // guarded by `lock`

    /// Past this many changed objects an update is built outside the lock.
    static let largeUpdate = 256

    init(publishesFromBirth: Bool) { hasChildren = publishesFromBirth }

    /// A child was created: from now on the context publishes.
    func childAdded() { lock.withLock { hasChildren = true } }

    /// The published changes; nil while the copy is incomplete.
    func read() -> PublishedChanges? {
        lock.withLock { isComplete ? changes : nil }
    }

    /// How a context brings the copy up to date.
    enum Update {
        /// Nothing is pending: the copy is emptied.
        case empty
        /// The copy is rebuilt from scratch by the closure.
        case rebuild
        /// The closure changes about this many objects of the copy.
        case changes(Int)
    }

    /// Brings the copy up to date (`apply` gets it empty for `.rebuild`) and
    /// says up to which recorded child save it includes; returns true. While
    /// the context has no child it skips that and returns whether the copy
    /// (empty) is still right: true only for `.empty`.
    func update(_ kind: Update, takenInThrough: UInt64, _ apply: (inout [ObjectID: PendingState]) -> Void) -> Bool {
        let inPlace: Bool? = lock.withLock {
            guard hasChildren else {
                isComplete = if case .empty = kind { true } else { false }
                return nil
            }
            guard case .changes(let count) = kind, count <= Self.largeUpdate else { return false }
            apply(&changes.objects)
            changes.takenInThrough = takenInThrough
            isComplete = true
            return true
        }
        guard let inPlace else { return isCompleteNow }
        if inPlace { return true }
        var next = PublishedChanges(takenInThrough: takenInThrough)
        if case .changes = kind { next.objects = lock.withLock { changes.objects } }
        if case .empty = kind {} else { apply(&next.objects) }  // copies the shared dictionary first: outside the lock
        lock.withLock {
            swap(&changes, &next)
            isComplete = true
        }
        return true  // `next`, the old copy, is freed here, outside the lock
    }

    private var isCompleteNow: Bool { lock.withLock { isComplete } }
}
