internal import StrataStore
import Synchronization

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
    /// `objects` by the key of an attribute, built by the first reader that
    /// asks (one per copy: a copy never changes once published).
    let keys = PublishedKeys()
}

/// A published copy's objects by the index key of one attribute of one
/// entity (``IndexKeyCoding/appendValue(_:to:)`` of their values there),
/// so that a child's indexed fetch finds the objects a level above changed
/// that may match without visiting all of them: built once per copy, by
/// the first fetch that needs it, O(the copy), on the reader's thread;
/// every later fetch over the same copy costs O(its keys).
///
/// `@unchecked Sendable`: `tables` is guarded by `lock`, a leaf lock;
/// a built table is never changed.
final class PublishedKeys: @unchecked Sendable {
    private struct Slot: Hashable {
        let entity: ObjectIdentifier
        let property: Int
    }

    private let lock = Lock()
    private var tables: [Slot: [[UInt8]: [ObjectID]]] = [:]  // guarded by `lock`

    /// The IDs among `objects` of `entity` inserted or updated with values
    /// whose attribute `property` encodes as one of `keys`.
    func ids(
        in objects: [ObjectID: PendingState], entity: EntityDescription, property: Int, keys: SortedKeys, _ body: (ObjectID) -> Void
    ) {
        let slot = Slot(entity: ObjectIdentifier(entity), property: property)
        let table = lock.withLock { tables[slot] } ?? build(objects, entity, property, slot)
        for key in keys { table[key]?.forEach(body) }
    }

    private func build(_ objects: [ObjectID: PendingState], _ entity: EntityDescription, _ property: Int, _ slot: Slot) -> [[UInt8]: [ObjectID]] {
        var table: [[UInt8]: [ObjectID]] = [:]
        for (id, state) in objects where id.entity === entity {
            switch state {
            case .inserted(let snapshot), .updated(let snapshot):
                var key: [UInt8] = []
                IndexKeyCoding.appendValue(snapshot.values[property], to: &key)
                table[key, default: []].append(id)
            case .removed:
                break
            }
        }
        // Another reader may have built it meanwhile: the same table either way.
        lock.withLock { tables[slot] = table }
        return table
    }
}

/// The copy of its pending changes a parent context publishes for its
/// children, so that a child's fetch or fault reads its ancestors' unsaved
/// state without waiting for their queues — the main queue above all
/// (Rule 12 in <doc:ConcurrencyRules>). Core Data runs a child's fetch through every
/// parent's queue instead.
///
/// The context updates the copy when each of its blocks ends (whenever it
/// processes pending changes), from what changed since the last update:
/// O(the block's changes), never O(the entity or the store). A child takes
/// the whole copy under the lock — a retain — and reads it outside.
///
/// Two dictionaries take turns, so that an update neither holds the lock
/// while it works nor copies the whole copy: the context brings the *spare*
/// one — the copy before last, which it owns — up to date (the changes of
/// the previous update, then this one's) and swaps it in under the lock; the
/// one swapped out becomes the spare. So a reading child, the main queue
/// above all, never waits for a large update (a 100,000-object import taken
/// in), and the context pays O(the last two updates). Should a child still
/// hold the spare when its turn comes, that update copies it.
///
/// A context with no child skips all of this. When it gets its first child
/// while it holds unpublished changes, the copy is *incomplete* until the
/// context's next update; a child that reads it meanwhile has the parent
/// publish through its queue, once (``ManagedObjectContext/layerForChildren()``).
/// A main-queue context publishes from birth, so no child ever waits for the
/// main queue here.
///
/// `@unchecked Sendable`: `changes`, `isComplete` and `hasChildren` are
/// guarded by `lock`, a leaf lock (`emptyAndComplete` is atomic, and
/// stored under it); `spare` and `spareLacks` belong to the
/// publishing context's queue (only its updates touch them).
final class PendingChangesPublication: @unchecked Sendable {
    private let lock = Lock()
    private var changes = PublishedChanges()  // guarded by `lock`
    private var isComplete = true             // guarded by `lock`
    /// `isComplete && changes.objects.isEmpty`, stored under `lock` each
    /// time either changes and read without it (``isEmptyAndComplete``).
    private let emptyAndComplete = Atomic<Bool>(true)
    private var hasChildren: Bool             // guarded by `lock`
    /// The copy before the published one (the context's queue).
    private var spare: [ObjectID: PendingState] = [:]
    /// What `spare` lacks to be the published copy: the last update.
    private var spareLacks: [(ObjectID, PendingState?)] = []

    init(publishesFromBirth: Bool) { hasChildren = publishesFromBirth }

    /// Copies of more pending changes than this are dropped through
    /// ``GracePeriod``: smaller ones cost a reader next to nothing to free.
    static let retiredAbove = 1_024

    /// A child was created: from now on the context publishes.
    func childAdded() { lock.withLock { hasChildren = true } }

    /// Whether the copy is complete and holds no change, without the lock:
    /// a child's read of an ancestor that has nothing pending — most reads
    /// — takes no lock and copies nothing (``ManagedObjectContext/layerForChildren()``).
    /// As of the last update, as ``read()`` would be.
    var isEmptyAndComplete: Bool { emptyAndComplete.load(ordering: .acquiring) }

    /// The published changes; nil while the copy is incomplete.
    func read() -> PublishedChanges? {
        lock.withLock { isComplete ? changes : nil }
    }

    /// Whether an update is kept: false while the context has no child (it
    /// publishes nothing then).
    var isRead: Bool { lock.withLock { hasChildren } }

    /// Publishes `update`: each object's new state (nil: nothing pending
    /// for it), over the present copy — or, with `replacing`, alone — and up
    /// to which recorded child save it includes. Returns true; while the
    /// context has no child it skips that and returns whether the copy
    /// (empty) is still right: true only when nothing is pending.
    func update(_ update: [(ObjectID, PendingState?)], replacing: Bool, hasPending: Bool, takenInThrough: UInt64) -> Bool {
        guard isRead else {
            // (`update` is left empty by a context with no child.)
            let right = replacing && !hasPending
            lock.withLock {
                isComplete = right
                emptyAndComplete.store(right && changes.objects.isEmpty, ordering: .releasing)
            }
            return right
        }
        var next = spare
        spare = [:]  // `next` is the only owner now: changed in place
        if replacing {
            next.removeAll()
        } else {
            Self.apply(spareLacks, to: &next)
        }
        Self.apply(update, to: &next)
        var published = PublishedChanges(objects: next, takenInThrough: takenInThrough)
        lock.withLock {
            swap(&changes, &published)
            isComplete = true
            emptyAndComplete.store(changes.objects.isEmpty, ordering: .releasing)
        }
        if replacing {
            // The one swapped out is behind by everything: start it afresh.
            // A child may still hold it: a large one is freed after a grace
            // period, off this thread (``GracePeriod``).
            if published.objects.count > Self.retiredAbove { GracePeriod.release(published) }
            spare = [:]
            spareLacks = update
        } else {
            spare = published.objects
            spareLacks = update
        }
        return true
    }

    private static func apply(_ update: [(ObjectID, PendingState?)], to objects: inout [ObjectID: PendingState]) {
        // One rehash up front rather than a doubling midway, which no yield
        // point can split (see ``ManagedObjectContext/takeInserts(of:firstVersion:announced:)``).
        objects.reserveCapacity(objects.count + update.count)
        var yields = YieldPoints()
        for (id, state) in update {
            yields.pass()
            if let state { objects[id] = state } else { objects.removeValue(forKey: id) }
        }
    }
}
