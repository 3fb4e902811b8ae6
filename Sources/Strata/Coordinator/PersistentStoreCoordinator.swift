public import Foundation
public import StrataStore
import Synchronization

/// The bridge between contexts and storage: it owns the store, turns each
/// save of an attached context into ONE atomic batch (contract C11),
/// keeps a row cache of committed snapshots, hands out primary keys, and is
/// safe to call from any queue.
///
/// ```swift
/// let coordinator = PersistentStoreCoordinator(model: model)
/// try coordinator.addPersistentStore(.log, directory: "/var/lib/app/recipes.strata")
/// let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
/// ```
///
/// `@unchecked Sendable`: `backend` (the store), `nextKeys` and
/// `rootContexts` are guarded by `lock` (`hasExternalStore` is atomic);
/// `rowCache` (with its epoch) by `cacheLock`; `aliases` by `aliasLock` (a
/// leaf lock); saves are serialized by `saveLock`; catch-ups by
/// `catchUpLock`. Lock order: saveLock → catchUpLock → lock → cacheLock;
/// none is held while a context runs code (a catch-up only queues its
/// merges).
public final class PersistentStoreCoordinator: @unchecked Sendable {
    /// Where records live.
    public enum StoreType: Sendable, Hashable {
        /// A StrataStore directory on disk: durable, crash-safe (the default).
        case log
        /// A dictionary in memory, gone with the coordinator.
        case inMemory
    }

    /// The model of the coordinator's store, which every context on the coordinator uses.
    public let model: ManagedObjectModel
    /// The row cache's byte budget (see ``init(model:rowCacheBudget:)``).
    public let rowCacheBudget: Int

    let saveLock = Lock()
    /// Held by ``catchUpWithStore()`` throughout: one catch-up at a time,
    /// its merges queued in order, and a close waits for it. Taken after
    /// `saveLock`, before `lock` and `cacheLock`.
    let catchUpLock = Lock()
    private let lock = Lock()
    private var backend: StoreBackend?      // guarded by `lock`
    /// Whether `backend` is another store than the log store, read without
    /// `lock` on every read path (the log store's pays one relaxed load).
    private let hasExternalStore = Atomic<Bool>(false)
    /// The log store, when it is the coordinator's (guarded by `lock`).
    private var store: LogObjectStore? {
        if case .log(let store) = backend { return store }
        return nil
    }
    /// Moves on whenever `backend` is set or cleared: with the store's own
    /// read version, it tells two reads of one store's state apart from
    /// reads of different stores (``storeReadVersion()``). Guarded by `lock`.
    private var storeGeneration: UInt64 = 0
    /// Each entity's next primary key while there is no store (the store
    /// hands keys out while it is open, and adopts these).
    private var nextKeys: [UInt64]           // guarded by `lock`
    /// By serial; a context leaves when it ends (``unregister(serial:)``).
    private var rootContexts: [UInt64: WeakContext] = [:]  // guarded by `lock`
    private var _storeIdentifier: UUID?      // guarded by `lock`
    private var _erasesStoreOnModelMismatch = false  // guarded by `lock`

    #if DEBUG
    /// Development only (debug builds): a store whose model cannot be
    /// migrated to this coordinator's is deleted and made again, empty,
    /// instead of refused — for the weeks when the model changes daily and
    /// the data does not matter. Never in a release build: it is not there.
    ///
    /// ```swift
    /// coordinator.erasesStoreOnModelMismatch = true
    /// try coordinator.addPersistentStore(directory: path)
    /// ```
    public var erasesStoreOnModelMismatch: Bool {
        get { lock.withLock { _erasesStoreOnModelMismatch } }
        set { lock.withLock { _erasesStoreOnModelMismatch = newValue } }
    }
    #endif

    private var erasesOnModelMismatch: Bool { lock.withLock { _erasesStoreOnModelMismatch } }

    private let cacheLock = Lock()
    /// Guarded by `cacheLock`, which orders every access: the runtime's
    /// exclusivity checks are left out (a fault fetch asks it once a row).
    @exclusivity(unchecked) private var rowCache: RowCache
    /// The log store's changes (a save's write, a catch-up) that are
    /// readable, or about to be, before the cache takes their rows. Guarded
    /// by `cacheLock`.
    private var aheadOfCache = ChangesAheadOfCache()

    /// While ``count`` is above zero the cache may hold rows older than the
    /// store: a read of one row takes the cache's only while the store's
    /// version is still ``since`` (``cachedRow(_:)``), and a walk of an
    /// index takes none (``forEachStoredRow(of:in:cachedWhere:_:)``).
    private struct ChangesAheadOfCache {
        var count = 0
        /// The store's version before the first of them began.
        var since: UInt64 = 0
    }

    /// What recent saves changed, for fetches through an index.
    let changeLog = StoreChangeLog()

    let aliasLock = Lock()
    /// Inserted objects an upsert merged into existing ones, and those:
    /// their IDs resolve there in every context (``resolvingAlias(_:)``).
    var aliases: [ObjectID: ObjectID] = [:]  // guarded by `aliasLock`
    /// `aliases.count`, read without the lock: most coordinators have none.
    let aliasCount = Atomic<Int>(0)
    /// How many records this coordinator has read from its store one by
    /// one (scans aside), an index entry's included: what a save, a batch
    /// request or a fetch through an index costs, counted rather than timed
    /// (tests pin that a batch reads each object once, and that a fetch of
    /// faults reads no record the row cache would not take).
    let recordsRead = RecordReadCount()
    /// How many unique-index keys this coordinator has looked up in its
    /// store (tests pin that a batch insert looks each of its keys up once).
    let uniqueKeysLookedUp = Atomic<Int>(0)

    /// Tests only: runs inside every save once its batch is in the store,
    /// while the saving context is still parked — the window in which a
    /// guest already reads the new rows. Set before the first save (a
    /// test's set-up orders it before every reader).
    nonisolated(unsafe) var afterStoreWriteForTesting: (@Sendable () -> Void)?
    /// Tests only: the objects per batch of a migration's index builds
    /// (``StagedIndexBuild``). Set before `addPersistentStore`.
    nonisolated(unsafe) var indexBuildBatchSizeForTesting: Int?

    /// A coordinator for `model`, without a store yet. `rowCacheBudget` is
    /// the byte budget of the cache of committed snapshots that faults and
    /// loads by ID read first (32 MiB by default; 0 turns it off). Memory
    /// then follows what is in use: contexts let go of the objects they no
    /// longer reference, and the cache stays within its budget
    /// (``rowCacheStatistics``).
    ///
    /// ```swift
    /// let coordinator = PersistentStoreCoordinator(model: model, rowCacheBudget: 8 << 20)
    /// ```
    public init(model: ManagedObjectModel, rowCacheBudget: Int = 32 << 20) {
        self.model = model
        self.rowCacheBudget = rowCacheBudget
        self.rowCache = RowCache(budget: rowCacheBudget)
        self.nextKeys = Array(repeating: 1, count: model.entities.count)
    }

    /// Opens (or creates) the coordinator's one store.
    ///
    /// A new store records the model. An existing one written with another
    /// model is migrated to this one when the change can be inferred (see
    /// <doc:ModelEvolution>): nothing is rewritten but the indexes the change
    /// adds; older records are upgraded as they are read. Otherwise this
    /// throws ``StrataError/Code/modelMismatch`` listing the changes in
    /// ``StrataError/modelDifferences``. A missing,
    /// foreign, locked or corrupt directory gives ``StrataError/Code/storage``
    /// with the engine's `StoreError` as the cause.
    ///
    /// With a `migrationPlan` (whose last version is this coordinator's
    /// model), a store at one of its versions goes through each later
    /// version in turn, by inference or the plan's custom stage.
    /// `migrationProgress` hears how far the building of indexes a
    /// migration adds has come (``MigrationProgress``), on this thread.
    /// `history` says whether saves record their transactions in the
    /// store's persistent history, and how long it keeps them (see
    /// <doc:History>).
    public func addPersistentStore(
        _ type: StoreType = .log, directory: String? = nil, options: StoreOptions = StoreOptions(), migrationPlan: MigrationPlan? = nil,
        migrationProgress: MigrationProgressHandler? = nil, history: PersistentHistory = .default
    ) throws(StrataError) {
        try saveLock.withLock { () throws(StrataError) in
            guard lock.withLock({ backend == nil }) else {
                throw StrataError(.storeAlreadyAdded, "the coordinator already has a store")
            }
            let opened = try LogObjectStore.open(
                type, directory: directory, options: options, model: model, migrationPlan: migrationPlan, migrationProgress: migrationProgress,
                history: history, erasesOnModelMismatch: erasesOnModelMismatch, indexBuildBatchSize: indexBuildBatchSizeForTesting ?? 16_384,
                recordsRead: recordsRead)
            lock.withLock {
                // Keys handed out before the store was added stay taken.
                opened.adoptKeys(nextKeys)
                backend = .log(opened)
                storeGeneration += 1
                _storeIdentifier = opened.identifier
            }
        }
    }

    /// `request` written by another store: as one save, or — when an
    /// update or a delete finds a version other than the one read (another
    /// process changed the object between the read and the write) — not at
    /// all, returning those objects, whose cached rows are let go of (the
    /// next read sees the other process's values).
    private func save(_ request: StoreSaveRequest, to external: ExternalStore) throws(StrataError) -> Result<StoreSaveResult, StoreRace> {
        guard request.partialUpdates.ids.isEmpty else {
            throw StrataError(.invalidArgument, "batch requests are the log store's (\(Self.externalLimits))")
        }
        if let failure = external.keys.takeFailure() { throw failure }
        var changes = StoreChanges()
        changes.inserted = Array(zip(request.inserted, request.insertedValues))
        changes.updated = request.updated.map { update in
            StoreChanges.Update(id: update.id, values: update.values, expectedVersion: update.expectedVersion,
                                changedProperties: update.changedProperties.map { update.id.entity.properties[$0].name })
        }
        changes.deleted = request.deleted.map { StoreChanges.Delete(id: $0.id, expectedVersion: $0.stored.version) }
        changes.author = request.author
        changes.contextName = request.contextName
        switch try external.store.save(changes) {
        case .written(let saveIdentifier):
            if let saveIdentifier { external.savedOwn(saveIdentifier) }
            external.readVersion.add(1, ordering: .releasing)
            var result = StoreSaveResult()
            result.wroteObjects = !request.inserted.isEmpty || !request.updated.isEmpty || !request.deleted.isEmpty
            return .success(result)
        case .conflicts(let ids):
            forgetCachedRows(ids)
            return .failure(StoreRace(objects: ids))
        }
    }

    /// Objects another process saved between a save's read of their
    /// versions and its write: nothing was written; the save decides again.
    struct StoreRace: Error {
        let objects: [ObjectID]
    }

    /// How many times a save decides again after another process's save
    /// came between its read and its write, before it gives up with
    /// ``StrataError/Code/mergeConflict``.
    static let storeRaceRounds = 8

    /// Adds `store`, a store other than Strata's log store (the PostgreSQL
    /// store), as the coordinator's one store. What such a store does not
    /// do yet throws a typed error when asked (see ``PersistentStore``).
    ///
    /// When other processes write the store too, the coordinator follows
    /// their saves from now on, as ``followStore(onError:)`` follows a log
    /// store's writer: each comes into the row cache and the contexts that
    /// merge changes automatically, and ``storeDidChangeRemotely`` is
    /// posted. `onFollowError` hears what interrupted the following (a lost
    /// connection; it resumes by itself, missing nothing).
    @_spi(StoreImplementation)
    public func addPersistentStore(
        _ store: any PersistentStore, onFollowError: @escaping @Sendable (StrataError) -> Void = { _ in }
    ) throws(StrataError) {
        try saveLock.withLock { () throws(StrataError) in
            let external = ExternalStore(store)
            try lock.withLock { () throws(StrataError) in
                guard backend == nil else { throw StrataError(.storeAlreadyAdded, "the coordinator already has a store") }
                backend = .external(external)
                hasExternalStore.store(true, ordering: .relaxed)
                storeGeneration += 1
                _storeIdentifier = store.identifier
            }
            do throws(StrataError) {
                // Deliveries wait for this save lock: none is looked at before the store is in place.
                let following = try store.followTransactions(
                    after: nil,
                    deliver: { [weak self, weak external] transactions in
                        guard let self, let external else { return }
                        self.receive(transactions, from: external)
                    },
                    // Under the save lock: a save whose commit the store has
                    // heard of has recorded its identifier by the time it lets go.
                    passOver: { [weak self, weak external] saveIdentifiers in
                        guard let self, let external else { return false }
                        return self.saveLock.withLock { external.passOverOwn(saveIdentifiers) }
                    },
                    onError: onFollowError)
                if let following { external.follow(with: following) }
            } catch {
                lock.withLock {
                    backend = nil
                    hasExternalStore.store(false, ordering: .relaxed)
                    storeGeneration += 1
                    _storeIdentifier = nil
                }
                throw error
            }
        }
    }

    /// Closes the store; later saves and loads throw ``StrataError/Code/noPersistentStore``.
    public func close() throws(StrataError) {
        // Before the save lock, which a delivery under way may be waiting for.
        externalStore?.stopFollowing()
        try saveLock.withLock { () throws(StrataError) in
            // After a catch-up under way (``catchUpWithStore()``).
            let closing = catchUpLock.withLock {
                lock.withLock { () -> StoreBackend? in
                    // Keys it handed out stay taken, should a store be added again.
                    if let store { nextKeys = store.keyCounters }
                    defer {
                        backend = nil
                        hasExternalStore.store(false, ordering: .relaxed)
                        storeGeneration += 1
                    }
                    return backend
                }
            }
            cacheLock.withLock { rowCache.removeAll(); rowCache.advanceEpoch() }
            switch closing {
            case .log(let store)?: try store.close()
            case .external(let external)?: try external.store.close()
            case nil: break
            }
        }
    }

    /// Writes the store's log out to segments and compacts them, reclaiming
    /// the space of overwritten and deleted objects; first rewrites the
    /// records an older schema generation wrote (``upgradeStoredRecords(batchSize:progress:)``).
    /// Saves and reads go on meanwhile (the engine compacts in the background
    /// of its own locks); a no-op for the in-memory store and for a store
    /// other than the log store, which keeps its own space.
    ///
    /// ```swift
    /// try coordinator.compactStore()
    /// ```
    public func compactStore() throws(StrataError) {
        if externalStore != nil { return }
        try upgradeStoredRecords()
        try currentStore().compact()
    }

    /// The store's identity, made when it was created.
    public var storeIdentifier: UUID? { lock.withLock { _storeIdentifier } }

    /// What the row cache holds now: entries, their estimated bytes, the budget.
    public var rowCacheStatistics: RowCacheStatistics {
        cacheLock.withLock { RowCacheStatistics(entries: rowCache.count, bytes: rowCache.bytes, budget: rowCache.budget) }
    }

    /// The storage engine's counters (nil for the in-memory store or none).
    public var storeStatistics: StoreStatistics? { lock.withLock { store }?.statistics }

    /// The ID a URI from ``ObjectID/uriRepresentation()`` names; nil when it
    /// is not such a URI or names an entity this model lacks.
    public func managedObjectID(forURIRepresentation uri: URL) -> ObjectID? {
        // Split the path while it is still percent-encoded, then decode each
        // part: an entity name may hold an escaped "/" (see `uriRepresentation()`).
        let parts = uri.path(percentEncoded: true).split(separator: "/")
        guard uri.scheme == "x-strata", parts.count == 2, let name = parts[0].removingPercentEncoding,
              let entity = model.entity(named: name), let key = parts[1].removingPercentEncoding,
              let kind = key.first, kind == "p" || kind == "t", let pk = UInt64(key.dropFirst()), pk > 0
        else { return nil }
        return ObjectID(entity: entity, primaryKey: pk, isTemporary: kind == "t")
    }

    // MARK: For contexts

    func register(_ context: ManagedObjectContext) {
        lock.withLock { rootContexts[context.serial] = WeakContext(context) }
    }

    /// A context attached to this coordinator ended.
    func unregister(serial: UInt64) {
        lock.withLock { _ = rootContexts.removeValue(forKey: serial) }
    }

    /// How many contexts attached to this coordinator are alive (tests pin
    /// that ended ones leave nothing behind).
    var rootContextCount: Int { lock.withLock { rootContexts.count } }

    /// `count` primary keys of `entity` that no one else will ever get.
    func reservePrimaryKeys(for entity: EntityDescription, count: UInt64) -> Range<UInt64> {
        // Outside `lock`: a refill from another store is a round trip.
        if let external = externalStore { return external.keys.take(count, of: entity) }
        return lock.withLock {
            // Under `lock`: a close takes the store's counters back after it.
            if let store { return store.reservePrimaryKeys(for: entity, count: count) }
            let start = nextKeys[Int(entity.index)]
            nextKeys[Int(entity.index)] = start + count
            return start..<start + count
        }
    }

    /// The coordinator's store, whichever it is; nil when none is open.
    var currentBackend: StoreBackend? { lock.withLock { backend } }

    /// The log store, or ``StrataError/Code/noPersistentStore``; with
    /// another store, ``StrataError/Code/invalidArgument`` (what asks for
    /// it is the log store's alone: compaction, batch requests, following).
    func currentStore() throws(StrataError) -> LogObjectStore {
        switch lock.withLock({ backend }) {
        case .log(let store)?: return store
        case .external?: throw StrataError(.invalidArgument, "this needs Strata's log store; the coordinator's store is another (\(Self.externalLimits))")
        case nil: throw StrataError(.noPersistentStore, "the coordinator has no open store")
        }
    }

    /// What another store does not do yet, for errors.
    static let externalLimits = """
        batch requests, compaction and catching up by hand are the log store's \
        (a coordinator follows another store's other writers by itself)
        """

    /// The store behind the seam, when it is not the log store.
    var externalStore: ExternalStore? {
        guard hasExternalStore.load(ordering: .relaxed) else { return nil }
        if case .external(let external)? = lock.withLock({ backend }) { return external }
        return nil
    }

    /// Which state of which store a read made now would see: equal for two
    /// reads only if no write a read can see came between them.
    func storeReadVersion() throws(StrataError) -> StoreReadVersion {
        let (backend, generation) = lock.withLock { (self.backend, self.storeGeneration) }
        switch backend {
        case .log(let store)?: return StoreReadVersion(generation: generation, sequence: store.records.readVersion)
        case .external(let external)?: return StoreReadVersion(generation: generation, sequence: external.readVersion.load(ordering: .acquiring))
        case nil: throw StrataError(.noPersistentStore, "the coordinator has no open store")
        }
    }

    /// Whether no write the store made visible after `version` touched the
    /// entries of `key` in `entity`'s index `index` (of one attribute): an
    /// answer read from that index at `version` holds at `now`, which the
    /// caller read before asking (``IndexKeyWrites``). False for another
    /// store, for a `now` not past `version`, or when it cannot be known.
    func indexKey(
        _ key: [UInt8], of entity: EntityDescription, index: Int, unwrittenSince version: StoreReadVersion, now: StoreReadVersion
    ) -> Bool {
        guard version.generation == now.generation, version.sequence < now.sequence else { return false }
        let (backend, generation) = lock.withLock { (self.backend, self.storeGeneration) }
        guard case .log(let store)? = backend, generation == version.generation else { return false }
        let hash = IndexKeyCoding.withPrefix(of: entity, index: index) { prefix in key.withUnsafeBytes { IndexKeyWrites.hash(prefix: prefix, key: $0) } }
        return store.indexKeyWrites.unwritten(hash, since: version.sequence)
    }

    /// The store's snapshot of `id`, through the row cache; nil when absent.
    /// `offered`: a row read from the store is cached only if it fits
    /// without pushing anything out (a batch request's reads, as a
    /// fetch's: far more rows than anyone reads again).
    func snapshot(for id: ObjectID, offered: Bool = false) throws(StrataError) -> Snapshot? {
        let (cached, epoch) = cachedRow(id)
        if let cached { return cached }
        let read: Snapshot?
        if let external = externalStore {
            read = try external.store.snapshots(of: [id])[0].map(Snapshot.init)
        } else {
            read = try currentStore().values(of: id)
        }
        guard let snapshot = read else { return nil }
        cache(snapshot, for: id, readAt: epoch, offered: offered)
        return snapshot
    }

    /// Caches `snapshot` of `id`, read from the store when the row cache
    /// was at `epoch` — unless a save came in since, whose rows it may
    /// predate. `offered`: only if it fits without pushing anything out.
    private func cache(_ snapshot: Snapshot, for id: ObjectID, readAt epoch: UInt64, offered: Bool = false) {
        cacheLock.withLock {
            guard rowCache.epoch == epoch else { return }
            if offered { rowCache.insertIfRoom(snapshot, for: id) } else { rowCache.insert(snapshot, for: id) }
        }
    }

    /// The store's snapshot of `id` for a reader that holds its state at
    /// store version `held`: ``VersionedRead/unchanged`` when the store
    /// still holds that version (a version names one state of an object),
    /// known from the row cache or the record's header without decoding
    /// the rest — an object with a large to-many relationship would
    /// otherwise be decoded whole at every save or fetch that asks, where
    /// the row cache has no room for it; else what ``snapshot(for:offered:)``
    /// reads, from the same read of the record.
    func snapshot(for id: ObjectID, unlessAt held: UInt64) throws(StrataError) -> VersionedRead {
        let (cached, epoch) = cachedRow(id)
        if let cached { return cached.version == held ? .unchanged : .read(cached) }
        if let external = externalStore {
            let snapshot = try external.store.snapshots(of: [id])[0].map(Snapshot.init)
            if let snapshot { cache(snapshot, for: id, readAt: epoch) }
            return snapshot?.version == held ? .unchanged : .read(snapshot)
        }
        let read = try currentStore().values(of: id, unlessAt: held)
        if case .read(let snapshot?) = read { cache(snapshot, for: id, readAt: epoch) }
        return read
    }

    /// The store's version of `id` (the row cache's, or its record's
    /// header); nil when it is not stored.
    func storedVersion(of id: ObjectID) throws(StrataError) -> UInt64? {
        if let cached = cachedRow(id).row { return cached.version }
        if let external = externalStore { return try external.store.snapshots(of: [id])[0]?.version }
        return try currentStore().version(of: id)
    }

    /// The store's snapshots of `ids`, in their order (nil: not stored),
    /// for a batch request: the row cache's where it holds them, the others
    /// read from the store in one call and offered to the cache
    /// (``snapshot(for:offered:)``).
    func storedSnapshots(_ ids: [ObjectID]) throws(StrataError) -> [Snapshot?] {
        var (snapshots, epoch, since) = cacheLock.withLock {
            (ids.map { rowCache[$0] }, rowCache.epoch, aheadOfCache.count > 0 ? aheadOfCache.since : nil)
        }
        if let since, storeMoved(since: since) { snapshots = Array(repeating: nil, count: ids.count) }
        let missing = ids.indices.filter { snapshots[$0] == nil }
        guard !missing.isEmpty else { return snapshots }
        let read: [Snapshot?]
        if let external = externalStore {
            read = try external.store.snapshots(of: missing.map { ids[$0] }).map { $0.map(Snapshot.init) }
        } else {
            read = try currentStore().values(of: missing.map { ids[$0] })
        }
        for (i, snapshot) in zip(missing, read) { snapshots[i] = snapshot }
        cacheLock.withLock {
            guard rowCache.epoch == epoch else { return }
            for i in missing {
                if let snapshot = snapshots[i] { rowCache.insertIfRoom(snapshot, for: ids[i]) }
            }
        }
        return snapshots
    }

    /// Drops `ids` from the row cache and starts a new epoch: the store
    /// changed them without a save here (``catchUpWithStore()``).
    func forgetCachedRows(_ ids: [ObjectID]) {
        cacheLock.withLock {
            rowCache.advanceEpoch()
            for id in ids { rowCache.remove(id) }
        }
    }

    /// Empties the row cache and starts a new epoch: the store changed in
    /// ways no list of objects says (a catch-up that failed part way).
    func forgetAllCachedRows() {
        cacheLock.withLock {
            rowCache.removeAll()
            rowCache.advanceEpoch()
        }
    }

    /// The contexts attached to this coordinator that are alive, in serial order.
    var liveRootContexts: [ManagedObjectContext] {
        lock.withLock { WeakContext.alive(in: rootContexts) }.sorted { $0.0 < $1.0 }.map(\.1)
    }

    /// The row cache's epoch: read before a scan, handed back to
    /// ``offerFetched(_:epoch:_:)``, so that a save in between keeps the
    /// scan's older snapshots out.
    var rowCacheEpoch: UInt64 { cacheLock.withLock { rowCache.epoch } }

    /// Whether the row cache would take `id`'s row from a fetch
    /// (``offerFetched(_:epoch:_:)``): it is below its budget and does not
    /// hold the row. A fetch of faults reads no record it would not take.
    func rowCacheWants(_ id: ObjectID) -> Bool {
        cacheLock.withLock { rowCache.wants(id) }
    }

    /// Offers the row cache `id`'s row, which a fetch read from the store:
    /// decoded (`snapshot`) and cached only while the cache is below its
    /// budget (a fetch fills it only while it is, never evicting for a
    /// scan) and does not hold the row already (saves keep what it holds
    /// current, so decoding the row again would only replace it); dropped
    /// when a save came in since `epoch` or it does not fit.
    func offerFetched(_ id: ObjectID, epoch: UInt64, _ snapshot: () throws(StrataError) -> Snapshot) throws(StrataError) {
        guard rowCacheWants(id) else { return }
        cache(try snapshot(), for: id, readAt: epoch, offered: true)
    }

    /// Calls `body` with every stored object of `entity` as a source row,
    /// in primary-key order, at one state of the store, until it returns
    /// false. From the log store: one prefix scan, each record still
    /// encoded and lent for the call (``SourceRow/stored(_:)``), nothing
    /// allocated per record; from another store: the values it decoded
    /// (``SourceRow/fetched(_:)``), narrowed by `narrowing` where it can.
    /// The caller judges each row either way. Runs on the caller's thread
    /// and leaves the row cache alone: a scan touches far more rows than
    /// anyone will use again.
    func forEachStoredRow(
        of entity: EntityDescription, matching narrowing: StorePredicate? = nil, _ body: (ObjectID, SourceRow) throws(StrataError) -> Bool
    ) throws(StrataError) {
        if let external = externalStore {
            _ = try external.store.forEachStored(of: entity, matching: narrowing) { (id, stored) throws(StrataError) -> Bool in
                try body(id, .fetched(Snapshot(stored)))
            }
            return
        }
        try currentStore().forEachStored(of: entity) { (record) throws(StrataError) -> Bool in try body(record.id, .stored(record)) }
    }

    /// ``forEachStoredRow(of:matching:_:)`` in `order` (see
    /// ``PersistentStore/forEachStored(of:matching:orderedBy:expecting:_:)``)
    /// from a store other than the log store that can read in it: whether
    /// every row it gave passes `narrowing`, or nil — `body` never called —
    /// when it cannot (the log store reads an order through its indexes:
    /// ``forEachStored(of:in:_:)``).
    func forEachStoredRow(
        of entity: EntityDescription, matching narrowing: StorePredicate?, orderedBy order: [StoreSortKey], expecting: Int,
        _ body: (ObjectID, SourceRow) throws(StrataError) -> Bool
    ) throws(StrataError) -> Bool? {
        guard let external = externalStore else { return nil }
        return try external.store.forEachStored(of: entity, matching: narrowing, orderedBy: order, expecting: expecting) {
            (id, stored) throws(StrataError) -> Bool in try body(id, .fetched(Snapshot(stored)))
        }
    }

    /// ``PersistentStore/aggregates(of:matching:groupedBy:computing:excluding:)``
    /// of a store other than the log store; nil where it cannot, and on the
    /// log store (which counts groups from an index's entries).
    func storedAggregates(
        of entity: EntityDescription, matching narrowing: StorePredicate?, groupedBy properties: [Int],
        computing columns: [StoreAggregate], excluding: [ObjectID]
    ) throws(StrataError) -> [StoreGroup]? {
        guard let external = externalStore else { return nil }
        return try external.store.aggregates(of: entity, matching: narrowing, groupedBy: properties, computing: columns, excluding: excluding)
    }

    /// The statement a store other than the log store sends for a read of
    /// `entity` narrowed by `narrowing`, in `order` when given (see
    /// ``PersistentStore/statement(of:matching:orderedBy:)``); nil on the log store.
    func storeStatement(of entity: EntityDescription, matching narrowing: StorePredicate?, orderedBy order: [StoreSortKey]?) throws(StrataError) -> String? {
        guard let external = externalStore else { return nil }
        return try external.store.statement(of: entity, matching: narrowing, orderedBy: order)
    }

    /// Whether the store reads an index's key ranges (Strata's log store):
    /// a fetch on another store is planned as a scan, which the store may
    /// narrow.
    var storeReadsIndexes: Bool { externalStore == nil }

    /// Calls `body` with every stored object of `entity` whose entry in the
    /// plan's index lies in its ranges, in index order (last first for a
    /// descending plan), at one read view: the entries and the records they
    /// name are read from the same state.
    func forEachStored(of entity: EntityDescription, in plan: QueryPlan, _ body: (BorrowedRecord) throws(StrataError) -> Void) throws(StrataError) {
        try forEachStored(of: entity, in: plan) { record throws(StrataError) -> Bool in
            try body(record)
            return true
        }
    }

    /// ``forEachStored(of:in:_:)`` until `body` returns false.
    func forEachStored(of entity: EntityDescription, in plan: QueryPlan, _ body: (BorrowedRecord) throws(StrataError) -> Bool) throws(StrataError) {
        try forEachStored(of: entity, in: plan, reading: { _ in true }) { (_, record) throws(StrataError) -> Bool in try body(record!) }
    }

    /// ``forEachStored(of:in:_:)`` reading the record of only the objects
    /// `wanted` names: `body` gets nil for the others (a lookup that meets
    /// an object its context holds needs no record), until it returns false.
    func forEachStored(
        of entity: EntityDescription, in plan: QueryPlan, reading wanted: (ObjectID) -> Bool,
        _ body: (ObjectID, BorrowedRecord?) throws(StrataError) -> Bool
    ) throws(StrataError) {
        try forEachStored(of: entity, in: plan.ranges, descending: plan.isDescending, index: plan.index, reading: wanted, body)
    }

    /// ``forEachStored(of:in:_:)`` as source rows, each object that
    /// `cacheable` names given the row cache's snapshot where the cache
    /// holds one (``SourceRow/cached(_:)``, its record not read) and its
    /// record otherwise. The cache takes a save's rows just after the
    /// store does, so a save that lands during the walk can leave a cached
    /// row on either side of the walk's read view: returns false when one
    /// may have (the rows given are then not one state: read again with
    /// ``forEachStored(of:in:_:)``).
    func forEachStoredRow(
        of entity: EntityDescription, in plan: QueryPlan, cachedWhere cacheable: (ObjectID) -> Bool,
        _ body: (ObjectID, SourceRow) throws(StrataError) -> Bool
    ) throws(StrataError) -> Bool {
        // Before the walk's read view is taken: a change readable in it was
        // either taken by the cache already, or is still being taken, or
        // came after this — which the check after the walk sees.
        let (epoch, usable) = cacheLock.withLock { (rowCache.epoch, aheadOfCache.count == 0) }
        var cached: Snapshot?
        var anyCached = false
        try forEachStored(of: entity, in: plan, reading: { id in
            cached = usable && cacheable(id) ? cacheLock.withLock { rowCache[id] } : nil
            return cached == nil
        }) { (id, record) throws(StrataError) -> Bool in
            if let record { return try body(id, .stored(record)) }
            anyCached = true
            return try body(id, .cached(cached!))
        }
        return !anyCached || cacheLock.withLock { rowCache.epoch == epoch && aheadOfCache.count == 0 }
    }

    /// Runs `change`, which makes changes to the log store `store`
    /// readable before the row cache takes their rows, or lets go of them
    /// (``aheadOfCache``), which it does before it returns.
    func changingStoreAheadOfCache<T>(_ store: LogObjectStore, _ change: () throws(StrataError) -> T) throws(StrataError) -> T {
        let version = store.records.readVersion
        cacheLock.withLock {
            if aheadOfCache.count == 0 { aheadOfCache.since = version }
            aheadOfCache.count += 1
        }
        defer { cacheLock.withLock { aheadOfCache.count -= 1 } }
        return try change()
    }

    /// The row cache's row of `id` (nil when it holds none, or may hold
    /// one older than the store's: ``aheadOfCache``) and its epoch.
    private func cachedRow(_ id: ObjectID) -> (row: Snapshot?, epoch: UInt64) {
        let (row, epoch, since) = cacheLock.withLock { (rowCache[id], rowCache.epoch, aheadOfCache.count > 0 ? aheadOfCache.since : nil) }
        guard row != nil, let since else { return (row, epoch) }
        return (storeMoved(since: since) ? nil : row, epoch)
    }

    /// Whether the log store's readable version is past `version` (or it
    /// is gone): a change ahead of the cache may be readable.
    private func storeMoved(since version: UInt64) -> Bool {
        guard let store = try? currentStore() else { return true }
        return store.records.readVersion != version
    }

    /// ``forEachStored(of:in:reading:_:)`` for the entries of `index` in
    /// `ranges`, without a plan (a point lookup makes none).
    func forEachStored(
        of entity: EntityDescription, in ranges: KeyRanges, descending: Bool = false, index: IndexDescription?,
        reading wanted: (ObjectID) -> Bool, _ body: (ObjectID, BorrowedRecord?) throws(StrataError) -> Bool
    ) throws(StrataError) {
        try currentStore().forEachStored(of: entity, in: ranges, descending: descending, index: index, reading: wanted, body)
    }

    /// Calls `body` with every stored object of `entity` that has an entry
    /// in the plan's index within its ranges, in index order, reading no
    /// record (for an exact plan: each is a match).
    func forEachIndexed(of entity: EntityDescription, in plan: QueryPlan, _ body: (ObjectID) throws(StrataError) -> Void) throws(StrataError) {
        try forEachIndexed(of: entity, in: plan) { (id) throws(StrataError) -> Bool in
            try body(id)
            return true
        }
    }

    /// ``forEachIndexed(of:in:_:)`` until `body` returns false.
    func forEachIndexed(of entity: EntityDescription, in plan: QueryPlan, _ body: (ObjectID) throws(StrataError) -> Bool) throws(StrataError) {
        try currentStore().forEachEntry(of: entity, in: plan.ranges, descending: plan.isDescending, index: plan.index) { _, primaryKey throws(StrataError) -> Bool in
            try body(ObjectID(entity: entity, primaryKey: primaryKey, isTemporary: false))
        }
    }

    /// Calls `body` with every entry of the plan's index within its ranges,
    /// lent for the call, and the primary key it ends with, in index order,
    /// at one read view, reading no record.
    func forEachEntry(
        of entity: EntityDescription, in plan: QueryPlan, _ body: (UnsafeRawBufferPointer, UInt64) throws(StrataError) -> Void
    ) throws(StrataError) {
        try currentStore().forEachEntry(of: entity, in: plan.ranges, descending: plan.isDescending, index: plan.index) { entry, primaryKey throws(StrataError) -> Bool in
            try body(entry, primaryKey)
            return true
        }
    }

    /// Writes a save of an attached context as one atomic batch, after
    /// checking every updated and deleted object against the store's version
    /// and every unique key the save claims against the store's unique
    /// indexes. Nothing changes (store, cache) if it throws.
    func save(_ changes: ChangeSet, from context: ManagedObjectContext) throws(StrataError) -> SaveOutcome {
        let (outcome, payload) = try saveLock.withLock { () throws(StrataError) -> (SaveOutcome, ObjectChanges) in
            // Another store's other writers can come between this save's
            // read of the versions and its write: then it reads them again
            // and decides again — by the merge policy, as for a conflict it
            // had seen first.
            var raced: [ObjectID] = []
            for _ in 0..<Self.storeRaceRounds {
                switch try write(changes, from: context) {
                case .success(let written): return written
                case .failure(let race): raced = race.objects
                }
            }
            var error = StrataError(.mergeConflict, """
                other processes changed or deleted \(raced.map(\.description).joined(separator: ", ")) between this save's reads and \
                its writes \(Self.storeRaceRounds) times in a row: nothing was saved; save again
                """)
            error.conflicts = raced.map { MergeConflict(objectID: $0, properties: [], deletedAtDestination: false) }
            throw error
        }
        let listeners = WeakContext.merging(lock.withLock { WeakContext.alive(in: rootContexts) }, excluding: context)
        for listener in listeners {
            listener.perform { listener.mergeChanges(fromContextDidSave: payload) }
        }
        return outcome
    }

    /// The body of ``save(_:from:)``, under `saveLock`: checks and writes
    /// `changes`, and returns what the attached contexts that merge are
    /// to hear; unique values are checked unless the changes say they were
    /// (``ChangeSet/uniquenessChecked``). Another store may refuse the
    /// write for objects another process saved since the versions were
    /// read (``StoreRace``): nothing is written then.
    func write(_ changes: ChangeSet, from context: ManagedObjectContext) throws(StrataError) -> Result<(SaveOutcome, ObjectChanges), StoreRace> {
        // The log store's write is readable before the row cache takes its rows.
        guard externalStore == nil else { return try writeAndCache(changes, from: context) }
        return try changingStoreAheadOfCache(try currentStore()) { () throws(StrataError) in try writeAndCache(changes, from: context) }
    }

    private func writeAndCache(_ changes: ChangeSet, from context: ManagedObjectContext) throws(StrataError) -> Result<(SaveOutcome, ObjectChanges), StoreRace> {
        let external = externalStore
        let store = external == nil ? try currentStore() : nil
        let (updates, deletes) = changes.basesAreStored
            ? ConflictResolution.unopposed(changes)
            : try ConflictResolution.decide(changes) { id, seen, base throws(StrataError) in
                switch try snapshot(for: id, unlessAt: seen) {
                case .unchanged: Snapshot(values: base, version: seen)
                case .read(let current): current
                }
            }
        // Under the save lock: no other save can claim a key between
        // this look-up and the write. A store that refuses duplicates
        // itself is asked first when a conflict would fail the save
        // anyway: the keys are looked up only to name what it refused.
        var checkIfRefused: UniquenessCheck?
        if !changes.uniquenessChecked, let check = UniquenessCheck(changes, updates: updates) {
            if let external, external.store.refusesDuplicateUniqueValues, changes.mergePolicy.upsertObjectWins == nil {
                // The save's own objects against each other still, as Strata
                // compares keys (strings in NFC, where the store may compare bytes).
                try check.enforce(holders: [:])
                checkIfRefused = check
            } else {
                try check.enforce(holders: storedUniqueHolders(check.keysToLookUp))
            }
        }

        var request = StoreSaveRequest()
        request.inserted = changes.inserted
        request.insertedValues = changes.insertedValues
        request.partialUpdates = changes.partialUpdates
        request.author = changes.authors.single
        request.contextName = context.name
        request.updated.reserveCapacity(changes.updated.count)
        var outcome = SaveOutcome()
        outcome.reachedStore = true
        var written: [(ObjectID, Snapshot)] = []
        written.reserveCapacity(changes.updated.count)
        // For the change log: what each object's write showed children, where known.
        var exposedStates: [(ObjectID, StoreChangeLog.ExposedState)] = []
        var unstated: [ObjectID] = []
        let recordsExposed = changes.updatedExposedVersions.count == changes.updated.count
        // Whether to list, for history, the properties each written update changed.
        let recordsHistory = store?.recordsHistory ?? true
        var payload = ObjectChanges(inserted: changes.inserted)
        payload.sourceSerial = context.serial
        var payloadSnapshots: [Snapshot] = []

        outcome.insertedVersions = Array(repeating: 1, count: changes.inserted.count)
        if changes.insertedExposedVersions.count == changes.inserted.count {
            exposedStates.reserveCapacity(changes.inserted.count + changes.updated.count)
            for (i, id) in changes.inserted.enumerated() {
                exposedStates.append((id, .init(origin: context.serial, exposed: changes.insertedExposedVersions[i], stored: outcome.insertedVersions[i])))
            }
        } else {
            unstated = changes.inserted
        }
        outcome.updatedVersions.reserveCapacity(changes.updated.count)
        for (i, id) in changes.updated.enumerated() {
            switch updates[i] {
            case .write(let values, let current):
                let base = changes.updatedBase[i]
                let update = StoreSaveRequest.Update(
                    id: id, values: values, stored: current,
                    changedProperties: recordsHistory ? PropertyIndexSet(differing: values, from: base) : [])
                request.updated.append(update)
                let snapshot = Snapshot(values: values, version: update.version)
                written.append((id, snapshot))
                outcome.updatedVersions.append(update.version)
                if values != changes.updatedValues[i] {
                    outcome.resolvedValues[i] = values
                    unstated.append(id)
                } else if recordsExposed {
                    exposedStates.append((id, .init(origin: context.serial, exposed: changes.updatedExposedVersions[i], stored: update.version)))
                } else {
                    unstated.append(id)
                }
                payload.updated.append(id)
                payloadSnapshots.append(snapshot)
            case .keep(let current):
                outcome.keep(current, forUpdate: i)
            case .drop:
                outcome.drop(update: i)
            }
        }
        var removed: [ObjectID] = []
        for (i, id) in changes.deleted.enumerated() {
            switch deletes[i] {
            case .delete(let current):
                request.deleted.append(StoreSaveRequest.Delete(id: id, stored: current))
                removed.append(id)
            case .alreadyGone:
                removed.append(id)
            case .keep(let current):
                outcome.keptDeletes[i] = current
            }
        }
        payload.deleted = removed
        let result: StoreSaveResult
        if let store {
            result = try store.save(request)
        } else {
            let saved: Result<StoreSaveResult, StoreRace>
            do {
                saved = try save(request, to: external!)
            } catch {
                // Nothing was written. The conflicts the look-up names, as
                // when it comes first; the store's own error if it finds
                // none (the holder went meanwhile, or a key Strata does not
                // check, such as a primary key) or cannot look.
                if error.code == .constraintConflict, let check = checkIfRefused,
                   let holders = try? storedUniqueHolders(check.keysToLookUp) {
                    try check.enforce(holders: holders)
                }
                throw error
            }
            switch saved {
            case .success(let written): result = written
            case .failure(let race): return .failure(race)
            }
        }
        // Partial updates that found every value in place, nothing else
        // asked: the store, its cache and the change log stay as they were.
        guard result.wroteObjects || !removed.isEmpty else { return .success((outcome, payload)) }
        afterStoreWriteForTesting?()
        // Partial updates the store decoded come with their values, as the
        // updates above; the payload's snapshots stay aligned with its first
        // IDs, and a merge reads the values of the rest from the store.
        var decoded: [(ObjectID, Snapshot)] = [], patched: [ObjectID] = []
        patched.reserveCapacity(result.partiallyUpdated.count)
        for partial in result.partiallyUpdated {
            if let snapshot = partial.written {
                decoded.append((partial.id, snapshot))
                payload.updated.append(partial.id)
                payloadSnapshots.append(snapshot)
            } else {
                patched.append(partial.id)
            }
        }
        payload.updated += patched
        payload.updatedSnapshots = payloadSnapshots
        // After the write is readable: an object loaded before this is
        // listed as changed since (see ``StoreChangeLog``). Inserts too:
        // a context may hold a new object as a level above had it
        // before this save's values.
        for (id, _) in decoded { unstated.append(id) }
        unstated += patched
        unstated += removed
        changeLog.record(stated: exposedStates, unstated: unstated)
        cacheLock.withLock {
            rowCache.advanceEpoch()
            // Inserted rows stay out of the cache: an import would fill it
            // with rows no one reads soon, and a new row reads back cheaply
            // from the store's memtable. Updated rows replace what it holds;
            // a batch request's replace only rows it holds already (it
            // writes far more of them than anyone reads again).
            for (id, snapshot) in written {
                if changes.basesAreStored { rowCache.refresh(snapshot, for: id) } else { rowCache.insert(snapshot, for: id) }
            }
            for (id, snapshot) in decoded { rowCache.refresh(snapshot, for: id) }
            // Patched: no values were decoded to put there.
            for id in patched { rowCache.remove(id) }
            for id in removed { rowCache.remove(id) }
        }
        return .success((outcome, payload))
    }
}
