#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif
import Dispatch
import Synchronization
internal import StrataStore

/// A scratch pad of managed objects: objects are fetched into it, changed,
/// and saved — into its parent context, or, for a context attached to a
/// ``PersistentStoreCoordinator``, to the store as one atomic batch.
///
/// ```swift
/// let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
/// let main = ManagedObjectContext(.mainQueue, parent: writer)
/// let importer = ManagedObjectContext(.privateQueue, parent: main)
///
/// importer.perform {
///     let soup = Recipe(context: importer)
///     soup.name = "Soup"
///     try? importer.save()                       // into main, in memory
///     main.perform {
///         try? main.save()                       // into writer, in memory
///         writer.perform { try? writer.save() }  // to disk, off the main queue
///     }
/// }
/// ```
///
/// A context and its objects are used only on the context's queue
/// (contract C1–C3, C15): `.privateQueue` through ``perform(_:)->()`` and
/// ``performAndWait(_:)``; `.mainQueue` directly from the main queue or
/// through them; `.confinement` only on the thread that created it. The
/// concurrency rules are numbered in <doc:ConcurrencyRules>.
///
/// `@unchecked Sendable`: the context is shared across threads only to call
/// `perform`/`performAndWait`, which run on its queue; every other member is
/// guarded by that queue (checked under `STRATA_CONCURRENCY_DEBUG=1`), except
/// `children` and `mergesFromParent`, guarded by `relationsLock`.
public final class ManagedObjectContext: @unchecked Sendable, CustomStringConvertible {
    /// How a context is bound to a queue or thread.
    public enum ConcurrencyType: Sendable, Hashable, CustomStringConvertible {
        /// The context owns a serial queue; use it through `perform`/`performAndWait`.
        case privateQueue
        /// Bound to the main queue: direct use from the main queue, `perform` elsewhere.
        case mainQueue
        /// Bound to the thread that created it; cannot be a parent; no `perform`.
        case confinement
        public var description: String {
            switch self {
            case .privateQueue: ".privateQueue"
            case .mainQueue: ".mainQueue"
            case .confinement: ".confinement"
            }
        }
    }

    /// How the context is bound to a queue or thread, which decides where it and its objects may be
    /// used.
    public let concurrencyType: ConcurrencyType
    /// The context this one saves into; nil for a context attached to the coordinator.
    public let parent: ManagedObjectContext?
    /// ``parent``, for the paths that walk up the chain once an object (a
    /// fault filled, a source view built) and must not retain it on the
    /// way: contexts are weakly referenced, so each retain of one takes
    /// the runtime's slow, side-table path. Valid while this context
    /// lives: it holds its parent.
    let parentReference: Unmanaged<ManagedObjectContext>?
    /// The coordinator at the root of this context's chain.
    public let persistentStoreCoordinator: PersistentStoreCoordinator
    /// The model of the context's coordinator, which every context of its chain shares.
    public let model: ManagedObjectModel
    /// A name for messages and debugging.
    public let name: String

    let serial: UInt64
    /// The private queue, or the main queue; nil for `.confinement`.
    let queue: DispatchQueue?
    /// The creating thread of a `.confinement` context.
    let owningThread: pthread_t?

    // MARK: State guarded by the context's queue
    //
    // The queue rules out overlapping access, so the hottest tables skip the
    // dynamic exclusivity checks (`@exclusivity(unchecked)`).

    @exclusivity(unchecked) var registry: [ObjectID: ManagedObject] = [:]
    @exclusivity(unchecked) var inserted: [ObjectID: ManagedObject] = [:]
    @exclusivity(unchecked) var updated: [ObjectID: ManagedObject] = [:]
    @exclusivity(unchecked) var deleted: [ObjectID: ManagedObject] = [:]
    /// Bumped by every change; each object records the value of its last
    /// change (`changeStamp`), so a save can tell what changed while it wrote.
    @exclusivity(unchecked) var changeGeneration: UInt64 = 0
    /// How many objects this context's fetches have judged against their
    /// predicates: what a fetch costs, counted rather than timed (tests pin
    /// that a lookup's cost does not grow with what is pending).
    @exclusivity(unchecked) var judgedObjects = 0
    /// What lookups by an attribute's value keep (see ``KeyLookups``).
    @exclusivity(unchecked) var keyLookups = KeyLookups()
    /// Objects inserted and deleted again before a save: gone, but a
    /// reference to one must still fail validation. (Read for every match
    /// a fetch meets.)
    @exclusivity(unchecked) var discardedInserts: Set<ObjectID> = []
    /// Objects registered for fetches' results since the last
    /// ``releaseUnreferencedFetched()``: the ones it checks, so that letting
    /// go costs what was fetched, not what is registered.
    @exclusivity(unchecked) var recentlyFetched: [ObjectID] = []
    /// Fetched objects that were still referenced when last checked,
    /// checked again once as many objects have been fetched since
    /// (`fetchedSinceHeldChecked`): so an object let go of later leaves too,
    /// at a cost that stays proportional to what the context fetches.
    @exclusivity(unchecked) var heldFetched: [ObjectID] = []
    @exclusivity(unchecked) var fetchedSinceHeldChecked = 0
    /// Which registered objects the store's changes left stale, sorted up
    /// to which change (see ``StaleObjects``).
    @exclusivity(unchecked) var stale = StaleObjects()
    /// Objects changed since the last objects-did-change notification.
    @exclusivity(unchecked) var pendingChanges: [ManagedObject] = []
    /// IDs refreshed or invalidated by merges since the last notification.
    var pendingRefreshed: [ObjectID] = []
    var pendingInvalidated: [ObjectID] = []
    /// A main-queue context used directly (outside a block) has its pending
    /// changes processed by one main-queue block scheduled for the purpose.
    var processingScheduled = false
    /// Whether ``publication`` holds everything this context's children must
    /// see (false: the next publication rebuilds it whole).
    var publishedAll = true
    /// Objects whose published state may be stale (see ``markUnpublished(_:)``).
    var unpublished: [ObjectID] = []
    /// Merges for children that merge automatically, sent once the state
    /// they describe is published.
    var mergesToSend: [(ManagedObjectContext, ObjectChanges)] = []
    /// The last child save recorded for this context (Rule 10) that it
    /// has taken in, and the last one its publication says it has.
    var deferredTakenInThrough: UInt64 = 0
    var publishedTakenInThrough: UInt64 = 0
    /// How many of ``deferredChildSaves`` a `.mainQueue` context holds
    /// without having made their objects (see ``holdChildSave(_:from:)``).
    /// (Read for every object a fetch registers.)
    @exclusivity(unchecked) var heldSaveCount = 0
    /// The new objects of held saves that the next objects-did-change
    /// carries, per save (by its ``DeferredChildSaves/Entry/sequence``), oldest first.
    var heldInsertsToAnnounce: [(sequence: UInt64, ids: [ObjectID])] = []
    /// The fetched-results controllers following this context, and what
    /// they are to hear next.
    var observation = ResultsObservation()
    /// What ``undoManager`` says (nil: nothing is recorded).
    var undo: ContextUndoManager?
    /// How many of ``pendingChanges`` (from the front) are published already,
    /// by a publication in the middle of a block.
    var pendingChangesPublished = 0
    /// Primary keys reserved from the coordinator, by entity index.
    /// (Not `lazy`: a lazy array is copied by every element write.)
    @exclusivity(unchecked) var reservedKeys: [Range<UInt64>]
    @exclusivity(unchecked) var keyReservationSize: [UInt64]

    /// What a save does when another save changed the same objects first.
    public var mergePolicy: MergePolicy = .error

    /// Who the store's persistent history says made this context's saves
    /// (``HistoryTransaction/author``): set it on the contexts whose
    /// changes an app tells apart — its importer, its sync engine — and
    /// leave out its own when it fetches history
    /// (``HistoryRequest/excludedAuthors``). It names the changes made in
    /// this context, and those of child saves that name no author; a save
    /// carries the names to the parent, and the transaction records the
    /// author when one name covers every change it writes (nil otherwise).
    ///
    /// ```swift
    /// let importer = container.newBackgroundContext()
    /// importer.transactionAuthor = "import"
    /// ```
    public var transactionAuthor: String?
    /// Who made this context's changes since its last save (its own, and
    /// the child saves it took in). Written on every change: unchecked.
    @exclusivity(unchecked) var carriedAuthors = CarriedAuthors()

    /// Whether the context keeps every object it registered until `reset()`.
    ///
    /// Off (the default), the context lets go of unchanged objects that
    /// nothing outside it references: the ones a save saved, and the ones it
    /// registered for a fetch's results (``fetch(_:)->[Result]``, ``fetchResults(_:)``)
    /// once the block that fetched them ends — for a main-queue context used
    /// directly, at the end of the main queue's turn; for a confinement
    /// context, at its next fetch. A fetched object still referenced then is
    /// checked again once the context has fetched as many objects since (so
    /// the checks cost at most about twice what it fetches). Using one again
    /// loads it afresh (from the row cache when it is there). That keeps a
    /// long import's contexts — the main context above all — and a server's
    /// querying contexts from growing with everything ever imported or
    /// fetched. Objects looked up by ID or reached through a relationship
    /// stay registered until a save lets go of them or `reset()`:
    /// contract C10 and C19–C21 (a registered object keeps its snapshot,
    /// merges refresh it, conflicts are found against it) are stated for them.
    /// A `.mainQueue` context frees what it lets go of on a background
    /// queue, so a subclass's `deinit` may run there.
    ///
    /// ```swift
    /// let total = try context.performAndWait {
    ///     try context.fetch(FetchRequest<Recipe>()).reduce(0) { $0 + $1.servings }
    /// }   // let go: the context holds none of the recipes now
    /// ```
    public var retainsRegisteredObjects: Bool {
        get { retainsRegistered }
        set { retainsRegistered = newValue }
    }
    /// ``retainsRegisteredObjects``, read for every object a fetch
    /// registers: unchecked.
    @exclusivity(unchecked) var retainsRegistered = false

    // MARK: State guarded by `relationsLock`

    /// Lets children in while this context's save writes to the store (see
    /// ``childAccess(_:)``).
    let parking = ParkingState()

    /// What this context's objects point to (see ``ContextLink``).
    let link = ContextLink()

    /// Children's saves this context takes in later (see ``deferChildSave(_:from:enteredNext:)``).
    let deferredChildSaves = DeferredChildSaves()

    /// The copy of its pending changes this context's children read (guarded
    /// by its own lock).
    let publication: PendingChangesPublication

    // MARK: State that is atomic

    /// Source of fresh exposed versions: (1 << 63) | serial << 40 | counter,
    /// never equal to a store version (those stay below 2^63). Atomic, not
    /// queue-guarded: a child reserves versions for a save this context
    /// takes in later, from the child's own thread.
    let versionCounter = Atomic<UInt64>(0)

    /// Whether this private context's last outermost block ran at least
    /// ``longBlockNanoseconds``: its next one then runs as background work
    /// with the long slice (Rule 11). Setting the slice and giving it back
    /// cost a few system calls, which only blocks that long amortize; a
    /// context that runs quick reads pays nothing. Atomic: a
    /// guest call may end while the context's own block starts.
    let runsLongBlocks = Atomic<Bool>(false)

    /// Whether this context publishes its pending changes (Rule 12): a
    /// main-queue context always, a private one once it has had a child.
    /// Until then it keeps no list of what to publish (a save's objects
    /// included); its first publication with a child rebuilds the copy whole
    /// (see ``PendingChangesPublication``). Atomic: set by a child's
    /// initializer, on any thread.
    let publishes: Atomic<Bool>

    /// How many objects this context holds unsaved, as of its last
    /// publication (Rule 12): what its next save would carry. Read by a
    /// producer paced by this context (``waitForRoomToHandOn(_:)``) on its
    /// own thread; atomic for that.
    let publishedPendingCount = Atomic<Int>(0)
    /// How many objects this context held changed (inserted, updated,
    /// deleted, or in children's saves it holds) when its last block ended,
    /// or a child's save since handed it (``recordUnsavedCount()``). Read
    /// from any thread by ``PersistentContainer/close()`` and its `deinit`,
    /// to name the contexts whose changes would be lost; only whether it is
    /// zero matters exactly.
    let unsavedObjectCount = Atomic<Int>(0)
    /// How many of ``publishedPendingCount`` a store save under way is
    /// writing (0 otherwise): they leave with that save, not the next.
    let objectsBeingStored = Atomic<Int>(0)

    /// 1 ms: long enough that the system calls of setting the slice and
    /// giving it back are a negligible share of such a block.
    static let longBlockNanoseconds: UInt64 = 1_000_000

    /// A private context holding at least this many changed objects, its
    /// own or children's saves recorded for it, runs its next block as
    /// background work whatever its last block took: a save or a take-in
    /// of that many objects is long (its cost grows with each object), and
    /// the first such block — a writer's first save of an import — is
    /// the one the main thread would otherwise wait behind.
    static let longWorkObjects = 4_096

    let relationsLock = Lock()
    /// By serial: a child leaves when it ends (its `deinit`), so a server
    /// that makes a context per request keeps nothing per request here.
    private var _children: [UInt64: WeakContext] = [:]
    private var _mergesFromParent = false

    /// Creates a context attached to `coordinator`: its saves go to the store.
    public init(_ concurrencyType: ConcurrencyType, coordinator: PersistentStoreCoordinator, name: String? = nil) {
        self.concurrencyType = concurrencyType
        self.parent = nil
        self.parentReference = nil
        self.persistentStoreCoordinator = coordinator
        self.model = coordinator.model
        self.publication = PendingChangesPublication(publishesFromBirth: concurrencyType == .mainQueue)
        self.publishes = Atomic(concurrencyType == .mainQueue)
        (self.reservedKeys, self.keyReservationSize) = Self.emptyKeyReservations(coordinator.model)
        self.serial = ContextSerial.next()
        self.name = name ?? "context #\(serial)"
        (self.queue, self.owningThread) = Self.binding(concurrencyType, serial: serial, name: self.name)
        link.unmanaged = .passUnretained(self)
        link.tracksObservation = concurrencyType == .mainQueue
        coordinator.register(self)
    }

    /// Creates a child of `parent`: its saves go into the parent (contract
    /// C9). A `.confinement` context cannot be a parent (contract C3–C4);
    /// using one is a programming error and traps.
    public init(_ concurrencyType: ConcurrencyType, parent: ManagedObjectContext, name: String? = nil) {
        precondition(parent.concurrencyType != .confinement,
                     "Strata: a .confinement context cannot be a parent (\(parent.name))")
        self.concurrencyType = concurrencyType
        self.parent = parent
        self.parentReference = Unmanaged.passUnretained(parent)
        self.persistentStoreCoordinator = parent.persistentStoreCoordinator
        self.model = parent.model
        self.publication = PendingChangesPublication(publishesFromBirth: concurrencyType == .mainQueue)
        self.publishes = Atomic(concurrencyType == .mainQueue)
        (self.reservedKeys, self.keyReservationSize) = Self.emptyKeyReservations(parent.model)
        self.serial = ContextSerial.next()
        self.name = name ?? "context #\(serial)"
        (self.queue, self.owningThread) = Self.binding(concurrencyType, serial: serial, name: self.name)
        link.unmanaged = .passUnretained(self)
        link.tracksObservation = concurrencyType == .mainQueue
        let serial = serial
        parent.relationsLock.withLock { parent._children[serial] = WeakContext(self) }
        parent.publishes.store(true, ordering: .relaxed)
        parent.publication.childAdded()
    }

    deinit {
        // Objects that outlive the context now see no context.
        link.unmanaged = nil
        let serial = serial
        if let parent {
            parent.relationsLock.withLock { _ = parent._children.removeValue(forKey: serial) }
        } else {
            persistentStoreCoordinator.unregister(serial: serial)
        }
    }

    private static func binding(_ type: ConcurrencyType, serial: UInt64, name: String) -> (DispatchQueue?, pthread_t?) {
        switch type {
        case .privateQueue: return (DispatchQueue(label: "strata.context.\(serial) (\(name))"), nil)
        case .mainQueue: return (DispatchQueue.main, nil)
        case .confinement: return (nil, pthread_self())
        }
    }

    public var description: String { "<ManagedObjectContext \(name) \(concurrencyType)>" }

    // MARK: Merging from the parent

    /// Whether this context merges, by itself, the saves its parent receives
    /// from its other children — or, attached to the coordinator, the saves
    /// other contexts make to the store (contract C20).
    public var automaticallyMergesChangesFromParent: Bool {
        get { relationsLock.withLock { _mergesFromParent } }
        set { relationsLock.withLock { _mergesFromParent = newValue } }
    }

    /// How many children are alive (tests pin that ended ones leave nothing behind).
    var childCount: Int { relationsLock.withLock { _children.count } }

    /// The live children, strong for the caller's use (taken under the lock, let go of after it).
    var liveChildren: [ManagedObjectContext] { relationsLock.withLock { WeakContext.alive(in: _children) }.map(\.1) }

    /// The live children that merge automatically, other than `excluded`.
    func mergingChildren(excluding excluded: ManagedObjectContext?) -> [ManagedObjectContext] {
        WeakContext.merging(relationsLock.withLock { WeakContext.alive(in: _children) }, excluding: excluded)
    }

    // MARK: Versions and keys

    func nextVersion() -> UInt64 {
        version(versionCounter.wrappingAdd(1, ordering: .relaxed).newValue)
    }

    /// `count` fresh versions, the first of them returned (the rest follow it).
    func reserveVersions(_ count: Int) -> UInt64 {
        let last = versionCounter.wrappingAdd(UInt64(count), ordering: .relaxed).newValue
        return version(last - UInt64(count) + 1)
    }

    private func version(_ counter: UInt64) -> UInt64 {
        (1 << 63) | (serial & 0x7F_FFFF) << 40 | (counter & 0xFF_FFFF_FFFF)
    }

    private static func emptyKeyReservations(_ model: ManagedObjectModel) -> ([Range<UInt64>], [UInt64]) {
        (Array(repeating: 0..<0, count: model.entities.count), Array(repeating: 32, count: model.entities.count))
    }

    func allocatePrimaryKey(for entity: EntityDescription) -> UInt64 {
        let index = Int(entity.index)
        let range = reservedKeys[index]
        if !range.isEmpty {
            reservedKeys[index] = range.lowerBound + 1..<range.upperBound
            return range.lowerBound
        }
        // Reservations grow (64 … 4096) so a bulk import asks the coordinator rarely.
        let size = min(keyReservationSize[index] * 2, 4096)
        keyReservationSize[index] = size
        let fresh = persistentStoreCoordinator.reservePrimaryKeys(for: entity, count: size)
        reservedKeys[index] = fresh.dropFirst()
        return fresh.lowerBound
    }
}

/// The registered objects a store change since they were loaded left with
/// values other than the source's (`objects`), found from the store's
/// changes up to sequence `floor`: the sequence when the registry last held
/// no loaded object, or when every held object was last checked, or the
/// last change sorted since. Every object
/// registered after a change was loaded no earlier than it (see
/// ``ManagedObjectContext/possiblyStaleObjects(of:source:updatedAmong:)``).
struct StaleObjects {
    var floor: UInt64 = 0
    var objects: Set<ObjectID> = []

    /// Nothing registered: nothing can be older than what is read after `sequence`.
    mutating func restart(at sequence: UInt64) {
        floor = sequence
        objects.removeAll()
    }
}

/// A weak reference to a context, for lists of children and listeners.
struct WeakContext {
    weak var context: ManagedObjectContext?
    init(_ context: ManagedObjectContext) { self.context = context }

    /// The contexts of `list` still alive, as strong references with their
    /// serials: taken under the list's lock, and let go of after it (a
    /// context let go of under the lock would end there, and its `deinit`
    /// takes the lock).
    static func alive(in list: [UInt64: WeakContext]) -> [(UInt64, ManagedObjectContext)] {
        list.compactMap { serial, weak in weak.context.map { (serial, $0) } }
    }

    /// Of `alive`, the contexts other than `excluded` that merge changes
    /// automatically, in serial order: sorted outside the lock, as every
    /// context's creation and end takes it, and a server has many alive.
    static func merging(_ alive: [(UInt64, ManagedObjectContext)], excluding excluded: ManagedObjectContext?) -> [ManagedObjectContext] {
        alive.filter { $0.1 !== excluded && $0.1.automaticallyMergesChangesFromParent }.sorted { $0.0 < $1.0 }.map(\.1)
    }
}
