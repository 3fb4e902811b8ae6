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
/// the whole copy under the lock — a retain — and reads it outside; should
/// the context update it while a child still holds it, that one update
/// copies the dictionary (O(the context's pending changes)).
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

    init(publishesFromBirth: Bool) { hasChildren = publishesFromBirth }

    /// A child was created: from now on the context publishes.
    func childAdded() { lock.withLock { hasChildren = true } }

    /// The published changes; nil while the copy is incomplete.
    func read() -> PublishedChanges? {
        lock.withLock { isComplete ? changes : nil }
    }

    /// Applies `update` to the published copy (in place unless a reader
    /// still holds the previous one) and returns true — or, while the
    /// context has no child, skips it and returns whether the copy (empty)
    /// is still right: true only when the context `hasChanges` not.
    func update(hasChanges: Bool, _ update: (inout PublishedChanges) -> Void) -> Bool {
        lock.withLock {
            guard hasChildren else {
                isComplete = !hasChanges
                return isComplete
            }
            update(&changes)
            isComplete = true
            return true
        }
    }
}
