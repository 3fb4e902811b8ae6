import Foundation

/// An object that matched a request: one registered in the fetching
/// context, or one read from the source that the context has not registered
/// (its row still as the source gave it: decoded only if needed).
enum FetchMatch {
    case registered(ManagedObject)
    /// The row is nil when the caller wants IDs only: a fetch of a whole
    /// entity then holds no record while it runs.
    case unregistered(ObjectID, KeptRow?)

    var objectID: ObjectID {
        switch self {
        case .registered(let object): object.objectID
        case .unregistered(let id, _): id
        }
    }

    /// The matched object's values: a registered object's own (filled), an
    /// unregistered one's as read (its row must have been kept).
    func values() throws(StrataError) -> [PropertyValue] {
        switch self {
        case .registered(let object):
            object.fulfill()
            return object.values
        case .unregistered(_, let row):
            guard let row else { preconditionFailure("Strata: a match's values were asked for without its row") }
            return try row.snapshot().values
        }
    }
}

extension ManagedObjectContext {
    /// The objects `request` describes, as this context sees them: its own
    /// unsaved changes and all its ancestors' included (contract C13).
    ///
    /// ```swift
    /// let request = FetchRequest<Item>(predicate: #Predicate { $0.remoteID == 42 })
    /// let found = try importer.performAndWait { try importer.fetch(request) }
    /// ```
    ///
    /// The fetch runs on this context's queue and enters no other context:
    /// it reads the store at one read view and lays each ancestor's
    /// published pending changes over it, so it never waits
    /// for an ancestor's queue — the main queue included. It sorts and pages
    /// on the values it read, then registers only the page: objects this
    /// context did not hold come back as faults unless
    /// ``FetchRequest/returnsObjectsAsFaults`` is off.
    public func fetch<Result: ManagedObject>(_ request: FetchRequest<Result>) throws(StrataError) -> [Result] {
        beginRead()
        #if DEBUG
        if request.fetchBatchSize > 0 { BatchSizeWarning.printOnce(for: Result.self) }
        #endif
        // Before the scan: a save after it must keep the scan's rows out of the cache.
        let cacheEpoch = persistentStoreCoordinator.rowCacheEpoch
        let page = request.sortDescriptors.isEmpty && request.returnsObjectsAsFaults
            ? try unorderedPageOfFaults(of: request, cacheEpoch: cacheEpoch)[...]
            : try orderedPage(of: request, keepingRows: true)
        var objects: [Result] = []
        objects.reserveCapacity(page.count)
        // Room for the objects the page registers, made once rather than by
        // doubling as they come.
        let registering = page.count { if case .unregistered = $0 { true } else { false } }
        if registering > 0 {
            registry.reserveCapacity(registry.count + registering)
            if !retainsRegistered { recentlyFetched.reserveCapacity(recentlyFetched.count + registering) }
        }
        for match in page {
            objects.append(unsafeDowncast(try object(for: match, asFault: request.returnsObjectsAsFaults, cacheEpoch: cacheEpoch), to: Result.self))
        }
        countFetched(objects.count)
        return objects
    }

    /// The page of a fetch with no order that returns faults: each stored
    /// row goes to the row cache as it is read (what ``object(for:asFault:cacheEpoch:)``
    /// would do with it once the page is cut), so no match keeps a copy of
    /// its record until then (an array per match, to allocate, touch again
    /// and free); through an exact plan, a record the cache would not take
    /// (it holds the row, or has no room) is not read at all.
    private func unorderedPageOfFaults<Result: ManagedObject>(of request: FetchRequest<Result>, cacheEpoch: UInt64) throws(StrataError) -> [FetchMatch] {
        var page: [FetchMatch] = []
        var skip = request.fetchOffset
        let limit = request.fetchLimit > 0 ? request.fetchLimit : Int.max
        try forEachMatch(of: request, rows: .offered, stopAfter: request.pageEnd) { (match, row) throws(StrataError) in
            if skip > 0 {
                skip -= 1
                return
            }
            guard page.count < limit else { return }
            if case .unregistered(let id, _) = match {
                switch row {
                case .stored(let record)?: try persistentStoreCoordinator.offerFetched(id, epoch: cacheEpoch, record.snapshot)
                case .fetched(let snapshot)?: try persistentStoreCoordinator.offerFetched(id, epoch: cacheEpoch) { snapshot }
                default: break
                }
                page.append(.unregistered(id, nil))
            } else {
                page.append(match)
            }
        }
        return page
    }

    /// The first object of `entity` (whose class is `Result`) that passes
    /// `test`, as ``fetch(_:)`` with a limit of one and no sort order would
    /// find it, but without a request, a page or a sort: the lookup of
    /// ``FetchableObject/first(in:where:equals:)`` and of an unordered
    /// ``FetchableObject/first(in:where:sortedBy:)`` whose predicate translates.
    func firstObject<Result: ManagedObject>(of type: Result.Type, entity: EntityDescription, passing test: ValueTest) throws(StrataError) -> Result? {
        try firstObject(of: type, entity: entity, term: { PointTerm(test, entity: entity) }, test: { test })
    }

    /// ``firstObject(of:entity:passing:)`` for attribute `property` (whose
    /// stored null reads as `null`) equal to `constant`: the lookup of
    /// ``FetchableObject/first(in:where:equals:)``, whose test is built only
    /// where the point lookup cannot answer.
    func firstObject<Result: ManagedObject>(
        of type: Result.Type, entity: EntityDescription, property: Int, null: PropertyValue, equalTo constant: PropertyValue
    ) throws(StrataError) -> Result? {
        try firstObject(of: type, entity: entity, term: { PointTerm(property: property, null: null, equalTo: constant, entity: entity) },
                        test: { .compare(.property(index: property, null: null), .equal, .constant(constant)) })
    }

    private func firstObject<Result: ManagedObject>(
        of type: Result.Type, entity: EntityDescription, term: () -> PointTerm?, test: () -> ValueTest
    ) throws(StrataError) -> Result? {
        beginRead()
        let source = try SourceView(of: self)
        // Where the ancestors hold no change, a lookup by one indexed
        // attribute's value takes its own path (``pointLookup(of:_:source:)``).
        if source.layers.isEmpty, persistentStoreCoordinator.storeReadsIndexes, let term = term() {
            guard let object = try pointLookup(of: entity, term, source: source) else { return nil }
            countFetched(1)
            return unsafeDowncast(object, to: Result.self)
        }
        let test = test()
        let cacheEpoch = persistentStoreCoordinator.rowCacheEpoch
        var evaluation = try PredicateEvaluation(test, entity: entity, context: self)
        var found: FetchMatch?
        try forEachMatch(of: entity, includesPending: true, evaluation: &evaluation, rows: .kept, stopAfter: 1, source: source) { match, _ in
            if found == nil { found = match }
        }
        guard let found else { return nil }
        countFetched(1)
        return unsafeDowncast(try object(for: found, asFault: true, cacheEpoch: cacheEpoch), to: Result.self)
    }

    /// The object a fetch returns for `match`: registered here as it is, or
    /// registered now, as a fault (its values left in the row cache, if it
    /// has room) or filled.
    private func object(for match: FetchMatch, asFault: Bool, cacheEpoch: UInt64) throws(StrataError) -> ManagedObject {
        switch match {
        case .registered(let object):
            return object
        case .unregistered(let id, let kept):
            // No row kept: a fault whose row went to the cache as it was read
            // (``unorderedPageOfFaults(of:cacheEpoch:)``).
            guard let row = kept else { return registeredOrFault(for: id, fetched: true) }
            guard asFault else { return materialize(id, try row.snapshot(), fetched: true) }
            // Filled from the row cache when first used, if it had room.
            switch row {
            case .stored(let record): try persistentStoreCoordinator.offerFetched(id, epoch: cacheEpoch, record.snapshot)
            case .fetched(let snapshot): try persistentStoreCoordinator.offerFetched(id, epoch: cacheEpoch) { snapshot }
            case .pending, .cached: break
            }
            return registeredOrFault(for: id, fetched: true)
        }
    }

    /// The objects `request` describes, holding only their IDs until they
    /// are used: touching one registers (and fills) it with the rest of its
    /// batch of ``FetchRequest/fetchBatchSize`` (20 when 0). Fetching a whole
    /// entity costs memory for its IDs, not its objects.
    ///
    /// ```swift
    /// var request = FetchRequest<Recipe>(sortBy: [SortDescriptor(\.name)])
    /// request.fetchBatchSize = 50
    /// let recipes = try context.fetchResults(request)   // IDs only
    /// print(recipes[0].name)                            // fills recipes 0–49
    /// ```
    ///
    /// The collection belongs to this context: use it on its queue.
    public func fetchResults<Result: ManagedObject>(_ request: FetchRequest<Result>) throws(StrataError) -> FetchedResults<Result> {
        beginRead()
        let ids = request.sortDescriptors.isEmpty ? try matchingIDs(of: request) : try orderedPage(of: request, keepingRows: true).map(\.objectID)
        return FetchedResults(objectIDs: ids, context: self, batchSize: request.fetchBatchSize > 0 ? request.fetchBatchSize : 20)
    }

    /// The IDs of the objects `request` describes; no object is materialized
    /// for it (sorting reads values, not objects).
    public func fetchObjectIDs<Result: ManagedObject>(_ request: FetchRequest<Result>) throws(StrataError) -> [ObjectID] {
        beginRead()
        if request.sortDescriptors.isEmpty { return try matchingIDs(of: request) }
        return try orderedPage(of: request, keepingRows: true).map(\.objectID)
    }

    /// How many objects `request` describes (limit and offset applied),
    /// materializing none.
    public func count<Result: ManagedObject>(for request: FetchRequest<Result>) throws(StrataError) -> Int {
        beginRead()
        var count = 0
        if let counted = try countedByStore(request) {
            count = counted
        } else {
            try forEachMatch(of: request, rows: .none, stopAfter: request.pageEnd) { _, _ in count += 1 }
        }
        count = max(0, count - request.fetchOffset)
        return request.fetchLimit > 0 ? min(count, request.fetchLimit) : count
    }

    /// How a fetch of `request` reads the store: which index, within which
    /// bounds, or a scan of every record (see ``QueryPlan``); whether its
    /// predicate is evaluated by Foundation on each candidate (it does not
    /// translate, so no index can serve it); and whether its matches are
    /// sorted in memory (`THEN SORT IN MEMORY`) or read in order from an
    /// index (`ORDER BY`). On PostgreSQL, the statement sent (`VIA SELECT …`,
    /// its constants as parameters, `-- then judged in Swift` where the
    /// clause does not decide alone).
    ///
    /// ```swift
    /// let plan = try context.explain(FetchRequest<Item>(predicate: #Predicate { $0.remoteID == 42 }))
    /// // SEARCH Item USING INDEX (remoteID) (remoteID = ?)
    /// ```
    public func explain<Result: ManagedObject>(_ request: FetchRequest<Result>) throws(StrataError) -> QueryPlan {
        if let ordered = try orderedPlan(for: request) { return ordered.plan }
        let entity = try request.entity(in: model)
        let test = request.predicate.flatMap { ValueTest.compile($0, entity: entity) }
        var plan = persistentStoreCoordinator.storeReadsIndexes ? QueryPlanner.plan(test, entity: entity) : .scan(entity)
        var sortedByStore = false
        if !persistentStoreCoordinator.storeReadsIndexes {
            // Another store: the statement it sends, in the request's order
            // where a page of it is read in that order (``firstInStoreOrder(of:)``).
            let narrowing = test.flatMap(StorePredicate.init)
            if let order = storeOrder(of: request, entity: entity), let statement = try persistentStoreCoordinator.storeStatement(of: entity, matching: narrowing, orderedBy: order) {
                plan = plan.saying(" VIA " + statement)
                sortedByStore = true
            } else if let statement = try persistentStoreCoordinator.storeStatement(of: entity, matching: narrowing, orderedBy: nil) {
                plan = plan.saying(" VIA " + statement)
            }
        }
        if request.predicate != nil && test == nil { plan = plan.saying(" (the predicate is evaluated by Foundation on each object)") }
        if !request.sortDescriptors.isEmpty && !sortedByStore {
            let names = request.sortDescriptors.map { descriptor in
                let name = descriptor.keyPath.flatMap { PropertyProbe.property(read: $0, entity: entity) }.map { entity.properties[$0.index].name }
                return (name ?? "a comparator") + (descriptor.order == .reverse ? " DESC" : "")
            }
            plan = plan.saying(", THEN SORT IN MEMORY BY " + names.joined(separator: ", "))
        }
        return plan
    }

    // MARK: Internal

    /// Checks the queue; a confinement context, which has no blocks to end,
    /// lets go of what it fetched before (``retainsRegisteredObjects``).
    func beginRead() {
        checkQueue()
        takeHeldChildSaves()  // a fetch sees this context's pending inserts as objects
        if concurrencyType == .confinement { releaseUnreferencedFetched() }
        // Holding nothing, nothing held can be older than what is read next.
        if registry.isEmpty { stale.restart(at: persistentStoreCoordinator.changeLog.current) }
    }

    /// The matches, sorted by the request's descriptors and cut to its page.
    private func orderedPage<Result: ManagedObject>(of request: FetchRequest<Result>, keepingRows: Bool) throws(StrataError) -> ArraySlice<FetchMatch> {
        // The predicate is translated once for the fetch, by whichever path runs.
        let ordered = keepingRows ? try orderedPlan(for: request) : nil
        if let ordered {
            let entity = try request.entity(in: model)
            let coordinator = persistentStoreCoordinator
            // An object this context does not hold is judged (and later
            // filled) on the row cache's row where it has one: no record
            // read or decoded. Unless a save landed meanwhile, which may
            // have left a cached row on either side of the walk's read
            // view: then the page is read again, from the records alone.
            var oneState = true
            func page(fromCache: Bool) throws(StrataError) -> ArraySlice<FetchMatch> {
                try firstInOrder(of: request, test: ordered.test) { (_, take) throws(StrataError) -> Bool in
                    oneState = try coordinator.forEachStoredRow(of: entity, in: ordered.plan, cachedWhere: { fromCache && registry[$0] == nil }, take)
                    return true
                }!
            }
            let cached = try page(fromCache: true)
            return oneState ? cached : try page(fromCache: false)
        }
        if keepingRows, let page = try firstInStoreOrder(of: request) { return page }
        // Without an order, any offset + limit matches are the page: the
        // store is read no further once they are found.
        var matches = try self.matches(of: request, keepingRows: keepingRows,
                                       stopAfter: request.sortDescriptors.isEmpty ? request.pageEnd : .max)
        if !request.sortDescriptors.isEmpty {
            matches = try sorted(matches, by: request.sortDescriptors)
        }
        var page = matches[...]
        if request.fetchOffset > 0 { page = page.dropFirst(request.fetchOffset) }
        if request.fetchLimit > 0 { page = page.prefix(request.fetchLimit) }
        return page
    }

    /// Sorts matches on their values — a registered object's own, an
    /// unregistered one's as read — so nothing is materialized to be
    /// sorted: by their sort values where every descriptor reads a stored
    /// attribute (``ResultsOrder``), else through two scratch objects.
    private func sorted<Result: ManagedObject>(_ matches: [FetchMatch], by descriptors: [SortDescriptor<Result>]) throws(StrataError) -> [FetchMatch] {
        guard let entity = matches.first?.objectID.entity else { return matches }
        if let order = ResultsOrder(sorting: descriptors, entity: entity) {
            // Descriptors that each read a stored attribute: the sort values
            // compared as the descriptors compare them, without a key path
            // read through an object per comparison; ties by primary key.
            var keyed: [(match: FetchMatch, key: [PropertyValue])] = []
            keyed.reserveCapacity(matches.count)
            for match in matches { keyed.append((match, order.key(of: try match.values()))) }
            keyed.sort { order.precedes($0.key, $0.match.objectID, $1.key, $1.match.objectID) }
            return keyed.map(\.match)
        }
        var keyed: [(match: FetchMatch, values: [PropertyValue])] = []
        keyed.reserveCapacity(matches.count)
        for match in matches { keyed.append((match, try match.values())) }
        let a = unsafeDowncast(entity.scratchObject(linkedTo: link), to: Result.self)
        let b = unsafeDowncast(entity.scratchObject(linkedTo: link), to: Result.self)
        keyed.sort { x, y in
            a.values = x.values
            b.values = y.values
            for descriptor in descriptors {
                switch descriptor.compare(a, b) {
                case .orderedAscending: return true
                case .orderedDescending: return false
                case .orderedSame: continue
                }
            }
            return false
        }
        return keyed.map(\.match)
    }

    /// Registers (and fills) the objects of `ids` this context holds only
    /// as faults or not at all, reading them from the source in one go.
    func prefetch(_ ids: ArraySlice<ObjectID>) {
        let missing = ids.filter { registry[$0]?.flags.contains(.fault) ?? true }
        guard !missing.isEmpty else { return }
        do {
            let source = try parent == nil ? nil : SourceView(of: self)
            // Attached to the coordinator: the store's rows in one read (one
            // statement on another store, not one round trip an object).
            let stored = source == nil ? try persistentStoreCoordinator.storedSnapshots(missing) : []
            for (i, id) in missing.enumerated() {
                let snapshot = if let source { try source.snapshot(for: id) } else { stored[i] }
                let object = registeredOrFault(for: id, fetched: true)
                // Gone since: the fault stays, and reads as deleted when used.
                if let snapshot, object.flags.contains(.fault) { fill(object, snapshot) }
            }
        } catch {
            FileHandleStandardError.write("Strata: could not load a batch of \(missing.count) objects in \(name): \(error)\n")
        }
    }

    /// Every object of the request's entity that matches its predicate, as
    /// this context sees it: the source's objects (``SourceView``), then,
    /// with `includesPendingChanges`, this context's own inserts.
    ///
    /// An object registered here is judged by its values here (a child is
    /// a snapshot, contract C10), or with `includesPendingChanges`
    /// off by the source's; one not registered here by the source's, on a
    /// scratch object (``PredicateEvaluation``) — it is materialized only if
    /// the caller wants objects. `test`, when given, stands for the
    /// request's predicate (translated already).
    func matches<Result: ManagedObject>(
        of request: FetchRequest<Result>, keepingRows: Bool, test: ValueTest? = nil, stopAfter: Int = .max
    ) throws(StrataError) -> [FetchMatch] {
        var matches: [FetchMatch] = []
        try forEachMatch(of: request, rows: keepingRows ? .kept : .none, test: test, stopAfter: stopAfter) { match, _ in matches.append(match) }
        return matches
    }

    /// The IDs of the matches, paged, collected as they are found: a fetch of
    /// IDs without sort descriptors holds nothing else while it runs.
    private func matchingIDs<Result: ManagedObject>(of request: FetchRequest<Result>) throws(StrataError) -> [ObjectID] {
        var ids: [ObjectID] = []
        var skip = request.fetchOffset
        let limit = request.fetchLimit > 0 ? request.fetchLimit : Int.max
        try forEachMatch(of: request, rows: .none, stopAfter: request.pageEnd) { match, _ in
            if skip > 0 { skip -= 1; return }
            if ids.count < limit { ids.append(match.objectID) }
        }
        return ids
    }

    /// What a match carries of an object the context does not hold.
    enum RowUse {
        /// Nothing: the caller wants IDs (an exact plan then reads index entries only).
        case none
        /// A copy of the row, kept in the match (to sort, page and materialize).
        case kept
        /// The row, lent to the body for the call: read values from it there.
        case lent
        /// The row, lent to the body, where the row cache would take it: an
        /// exact plan reads the record of no other object it does not hold
        /// (a fetch of faults reads a record only to cache it, and the
        /// cache is full, or holds the row already).
        case offered

        /// Whether the body is lent the row.
        var lends: Bool { self == .lent || self == .offered }
    }

    /// What ``forEachMatch(of:includesPending:evaluation:rows:stopAfter:source:_:)``
    /// counts and keeps as it walks.
    struct MatchWalk {
        /// Where the fields the test reads lie in the record being judged.
        var fields: RecordCoding.FieldOffsets
        /// Registered objects an index scan passed by: judged afterwards.
        var visited: Set<ObjectID> = []
        /// What the walk judged outside its evaluation, for ``judgedObjects``.
        var judged = 0
        /// Matches handed to the body: past `stopAfter`, nothing more is read.
        var delivered = 0
    }

    /// Calls `body` with every match (see ``matches(of:keepingRows:)``) and,
    /// for one this context does not hold under ``RowUse/lent``, its row.
    /// `test`, when given, stands for the request's predicate.
    func forEachMatch<Result: ManagedObject>(
        of request: FetchRequest<Result>, rows: RowUse, test: ValueTest? = nil, stopAfter: Int = .max,
        _ body: (FetchMatch, SourceRow?) throws(StrataError) -> Void
    ) throws(StrataError) {
        let entity = try request.entity(in: model)
        var evaluation = try PredicateEvaluation(request.predicate, entity: entity, context: self, test: test)
        try forEachMatch(of: entity, includesPending: request.includesPendingChanges, evaluation: &evaluation,
                         rows: rows, stopAfter: stopAfter, body)
    }

    /// ``forEachMatch(of:rows:test:stopAfter:_:)`` for the objects of
    /// `entity` that `evaluation` passes. Not generic: a lookup made in a
    /// loop does not ask the runtime for the metadata of generic types on
    /// every call. `given`: the source, when the caller made it already.
    func forEachMatch(
        of entity: EntityDescription, includesPending: Bool, evaluation: inout PredicateEvaluation, rows: RowUse, stopAfter: Int,
        source given: SourceView? = nil, _ body: (FetchMatch, SourceRow?) throws(StrataError) -> Void
    ) throws(StrataError) {
        // The translated test, outside the generic evaluation: the loop
        // below runs once per stored record.
        let compiled = evaluation.compiled
        // What the walk counts and keeps, in one local. The nested functions
        // below take it inout rather than capture it: captured by functions
        // called this many closures deep, it stayed in a heap box whose
        // every access the runtime checked.
        var walk = MatchWalk(fields: RecordCoding.FieldOffsets(count: compiled?.propertiesRead ?? 0))
        // Another store answers a scan, narrowed its own way.
        let plan = persistentStoreCoordinator.storeReadsIndexes
            ? QueryPlanner.plan(compiled?.test, entity: entity) : .scan(entity, narrowedBy: compiled?.test)
        let source: SourceView
        if let given { source = given } else { source = try SourceView(of: self) }
        // Most scans run in a context that holds none of the records: skip
        // the per-record lookups then.
        let checksRegistry = !registry.isEmpty || !discardedInserts.isEmpty
        // An object this context does not hold, judged where its values lie
        // (reading only what the test reads) when the predicate translated.
        // A stored record an exact plan's index selected matches by itself
        // (``QueryPlan/isExact``): an `IN` of many keys reads each once.
        let trustsIndex = plan.isExact
        defer { judgedObjects &+= walk.judged &+ evaluation.judged }
        func deliver(_ match: FetchMatch, _ row: SourceRow?, _ walk: inout MatchWalk) throws(StrataError) {
            try body(match, row)
            walk.delivered &+= 1
        }
        @inline(__always) func judgeUnregistered(_ id: ObjectID, _ row: SourceRow, _ walk: inout MatchWalk) throws(StrataError) {
            let passes: Bool
            if trustsIndex, row.isStored {
                passes = true
            } else if let compiled {
                walk.judged &+= 1
                passes = try row.passes(compiled, fields: &walk.fields)
            } else {
                passes = try evaluation.matches(id, row)
            }
            if passes { try deliver(.unregistered(id, rows == .kept ? row.kept() : nil), rows.lends ? row : nil, &walk) }
        }
        // A count or a fetch of IDs through an exact plan reads entries, not records.
        let unread = rows == .none && plan.isExact
        func visit(_ id: ObjectID, _ row: SourceRow, _ walk: inout MatchWalk) throws(StrataError) {
            if !checksRegistry {
                try judgeUnregistered(id, row, &walk)
            } else if let object = registry[id] {
                // Judged here, so the pass over held objects below skips it
                // (which a lookup stopped by its first match never makes).
                defer { if plan.isNarrowed && walk.delivered < stopAfter { walk.visited.insert(id) } }
                // An insert whose store save is in flight (this context is
                // parked, or a guest saved through it) is in the store
                // already; it is listed once, with the inserts.
                if object.flags.contains(.inserted) { return }
                if object.flags.contains(.fault) {
                    // A fault holds the source's values, which the entry matched.
                    if case .indexed = row {
                        if !object.flags.contains(.invalidated) { try deliver(.registered(object), nil, &walk) }
                        return
                    }
                    fill(object, try row.snapshot())
                    // Filled with the stored values an exact plan's entry
                    // selected: a match without judging them again.
                    if trustsIndex, case .stored = row, !object.flags.contains(.invalidated),
                       !(includesPending && object.flags.contains(.deleted)) {
                        try deliver(.registered(object), !includesPending && rows.lends ? row : nil, &walk)
                        return
                    }
                }
                if object.flags.contains(.invalidated) { return }
                if includesPending {
                    if object.flags.contains(.deleted) { return }
                    if try evaluation.matches(object) { try deliver(.registered(object), nil, &walk) }
                } else if try evaluation.matches(id, row) {
                    // Judged, and read, by the source's values.
                    try deliver(.registered(object), rows.lends ? row : nil, &walk)
                }
            } else if !discardedInserts.contains(id) {
                try judgeUnregistered(id, row, &walk)
            }
        }
        // This context's inserts and updates that the plan's index would
        // select were they stored: looked up by key, not judged one by one.
        let pendingByKey = includesPending && checksRegistry ? plan.leading.map { leading in
            keyLookups.pending.changedObjects(of: entity, leading, in: self)
        } : nil
        // A page with no order that this context's own changes fill is
        // theirs: the source is not read (a find-or-create that meets an
        // object it made or changed a moment ago). Otherwise they are judged
        // again below, in their turn.
        if stopAfter < .max, plan.indexNumber != nil, let pendingByKey {
            var page: [ManagedObject] = []
            for object in pendingByKey where page.count < stopAfter {
                if object.flags.contains(.inserted) {
                    if try evaluation.matches(object) { page.append(object) }
                } else if object.flags.isDisjoint(with: [.fault, .deleted, .invalidated]),
                          try evaluation.matches(object), try source.snapshot(for: object.objectID) != nil {
                    page.append(object)
                }
            }
            if page.count == stopAfter {
                for object in page { try deliver(.registered(object), nil, &walk) }
                return
            }
        }
        // Kept rows of an exact plan: an object held here (and filled) is
        // judged by its own values, so its record is not read.
        let recordsWanted: ((ObjectID) -> Bool)?
        switch rows {
        case .kept where checksRegistry:
            recordsWanted = { id in self.registry[id].map { $0.flags.contains(.fault) } ?? true }
        case .offered:
            let coordinator = persistentStoreCoordinator
            recordsWanted = { id in
                if let object = self.registry[id] { return object.flags.contains(.fault) }
                return coordinator.rowCacheWants(id)
            }
        default:
            recordsWanted = nil
        }
        try source.forEachWhile(of: entity, plan: plan, leavingRecordsUnread: unread, recordsWanted: recordsWanted) { (id, row) throws(StrataError) -> Bool in
            try visit(id, row, &walk)
            return walk.delivered < stopAfter
        }
        // A fetch with a limit and no order has its page: nothing else is judged.
        guard walk.delivered < stopAfter else { return }
        if includesPending && plan.isNarrowed && checksRegistry {
            // An object held here may match on its own values (a change, or
            // a snapshot older than the source, contract C10) where
            // the index, which holds the source's, did not select it.
            // It must still exist in the source, as a scan would have met it.
            func judge(_ object: ManagedObject, _ walk: inout MatchWalk) throws(StrataError) {
                guard object.flags.isDisjoint(with: [.fault, .inserted, .deleted, .invalidated]) else { return }
                if try evaluation.matches(object), try source.snapshot(for: object.objectID) != nil { try deliver(.registered(object), nil, &walk) }
            }
            for id in possiblyStaleObjects(of: entity, source: source, updatedAmong: pendingByKey)
            where !walk.visited.contains(id) && walk.delivered < stopAfter {
                try judge(registry[id]!, &walk)
            }
        }
        if includesPending {
            if let pendingByKey {
                for object in pendingByKey where object.flags.contains(.inserted) && walk.delivered < stopAfter {
                    if try evaluation.matches(object) { try deliver(.registered(object), nil, &walk) }
                }
            } else {
                for object in inserted.values where object.entity === entity && walk.delivered < stopAfter {
                    if try evaluation.matches(object) { try deliver(.registered(object), nil, &walk) }
                }
            }
        }
    }
}

/// A request's predicate, evaluated on objects of the context or on values
/// read from the source: translated to a ``ValueTest`` on stored values
/// when it can be, else through Foundation — on the object itself, or for
/// values on one scratch object of the entity's class, linked to the
/// context (so a predicate that follows a relationship faults its target in
/// there) but never registered. Either way, judging an object that does not
/// match costs no allocation.
struct PredicateEvaluation {
    /// Foundation's evaluation of the predicate on an object, when it does
    /// not translate (nil when it does, or when there is none).
    private let foundation: ((ManagedObject) throws(StrataError) -> Bool)?
    /// The translated predicate, when it translates.
    let compiled: CompiledTest?
    private let entity: EntityDescription
    /// Not retained: an evaluation lives within one call on the context's
    /// queue, by a caller that holds the context; a context is weakly
    /// referenced (its parent's list of children), so each retain and
    /// release of one takes the slow, side-table path.
    private unowned(unsafe) let context: ManagedObjectContext
    private var scratch: ManagedObject?
    private var fields: RecordCoding.FieldOffsets
    /// How many objects it judged.
    private(set) var judged = 0

    /// `test`, when given, stands for `predicate` (a test with no predicate
    /// behind it: a relationship's targets, ``ManagedObjectContext/resolvingRelations(_:)``).
    init<Result: ManagedObject>(
        _ predicate: Predicate<Result>?, entity: EntityDescription, context: ManagedObjectContext, test: ValueTest? = nil
    ) throws(StrataError) {
        let translated = test ?? predicate.flatMap { ValueTest.compile($0, entity: entity) }
        var foundation: ((ManagedObject) throws(StrataError) -> Bool)?
        if let predicate, translated == nil {
            foundation = { (object) throws(StrataError) -> Bool in
                do {
                    return try predicate.evaluate(unsafeDowncast(object, to: Result.self))
                } catch {
                    throw StrataError(.invalidArgument, "the predicate failed to evaluate: \(error)")
                }
            }
        }
        try self.init(translated, foundation: foundation, entity: entity, context: context)
    }

    /// An evaluation of `test` (nil: every object passes).
    init(_ test: ValueTest?, entity: EntityDescription, context: ManagedObjectContext) throws(StrataError) {
        try self.init(test, foundation: nil, entity: entity, context: context)
    }

    private init(
        _ test: ValueTest?, foundation: ((ManagedObject) throws(StrataError) -> Bool)?, entity: EntityDescription, context: ManagedObjectContext
    ) throws(StrataError) {
        self.foundation = foundation
        self.compiled = try test.map { (test) throws(StrataError) in CompiledTest(try context.resolvingRelations(test)) }
        self.entity = entity
        self.context = context
        fields = RecordCoding.FieldOffsets(count: compiled?.propertiesRead ?? 0)
    }

    /// An object registered in the context, filled (not a fault).
    mutating func matches(_ object: ManagedObject) throws(StrataError) -> Bool {
        judged &+= 1
        if let compiled { return compiled.test.evaluate(object.values) }
        guard let foundation else { return true }
        return try foundation(object)
    }

    /// An object holding `values`, not registered in the context.
    mutating func matches(_ id: ObjectID, values: [PropertyValue]) throws(StrataError) -> Bool {
        judged &+= 1
        if let compiled { return compiled.test.evaluate(values) }
        guard let foundation else { return true }
        let object = scratchObject(for: id)
        object.values = values
        return try foundation(object)
    }

    /// The scratch object, holding `id`.
    private mutating func scratchObject(for id: ObjectID) -> ManagedObject {
        let object: ManagedObject
        if let scratch {
            object = scratch
        } else {
            object = entity.scratchObject(linkedTo: context.link)
            scratch = object
        }
        object.primaryKey = id.primaryKey
        object.isTemporary = id.isTemporaryID
        return object
    }

    /// An object as the source has it: judged on its stored values.
    mutating func matches(_ id: ObjectID, _ row: SourceRow) throws(StrataError) -> Bool {
        judged &+= 1
        if let compiled { return try row.passes(compiled, fields: &fields) }
        guard let foundation else { return true }
        let object = scratchObject(for: id)
        object.values = try row.snapshot().values
        return try foundation(object)
    }
}

extension ManagedObjectContext {
    /// `test` with each test through a to-one relationship
    /// (``ValueTest/related``) replaced by the objects that pass it as this
    /// context sees them (its pending changes included, as a `#Predicate`
    /// following the relationship on an object here would see them): one
    /// fetch of the destination's IDs, through its indexes where they fit,
    /// instead of faulting in each object's target.
    func resolvingRelations(_ test: ValueTest) throws(StrataError) -> ValueTest {
        switch test {
        case .and(let a, let b): return .and(try resolvingRelations(a), try resolvingRelations(b))
        case .or(let a, let b): return .or(try resolvingRelations(a), try resolvingRelations(b))
        case .not(let a): return .not(try resolvingRelations(a))
        case .related(let relationship, let destination, let targetTest, let whenNil):
            var targets: Set<ObjectID> = []
            try forEachMatch(of: FetchRequest<ManagedObject>(entityName: destination.name), rows: .none, test: targetTest) { match, _ in
                targets.insert(match.objectID)
            }
            return .relatedIn(relationship: relationship, targets: targets, whenNil: whenNil)
        case .constant, .compare, .startsWith, .isIn, .relatedIn:
            return test
        }
    }

    /// The objects of `entity` registered here whose values may differ from
    /// what the source holds now — changed here, changed by a level above
    /// the store, or changed in the store since they were loaded. An
    /// object not registered here holds nothing to differ.
    ///
    /// An object loaded from the source and unchanged since, here and
    /// there, holds the source's values: an index selects it exactly when
    /// its values match. O(the changes), not O(the registry): a block of
    /// find-or-create lookups registers an object per lookup.
    ///
    /// `updatedAmong`, when given, holds every object updated here that
    /// could match (``PendingKeyIndex``): only those are listed of this
    /// context's own updates.
    func possiblyStaleObjects(of entity: EntityDescription, source: SourceView, updatedAmong: [ManagedObject]? = nil) -> Set<ObjectID> {
        sortStoreChanges(source: source)
        var ids: Set<ObjectID> = []
        for id in stale.objects where id.entity === entity && registry[id] != nil { ids.insert(id) }
        for id in source.changedObjects(of: entity, registeredIn: registry) { ids.insert(id) }
        if let updatedAmong {
            for object in updatedAmong where updated[object.objectID] != nil { ids.insert(object.objectID) }
        } else {
            for id in updated.keys where id.entity === entity { ids.insert(id) }
        }
        return ids
    }

    /// Sorts the store's changes since ``stale`` was last sorted into it,
    /// each change once: a registered object the change left holding other
    /// values than the source's. One that holds the source's values —
    /// above all what this context saved itself, which its saves' store
    /// writes then record — is as good as loaded now, and a fault loads the
    /// present state when used. So a long block (an import that saves batch
    /// after batch) pays for each store change once, not at every fetch.
    ///
    /// When the log cannot say which changes came since (it dropped them,
    /// or an ancestor dropped unsaved changes this context may have read),
    /// every object held here is checked once instead
    /// (``sortHeldObjects(source:)``), and the changes after are sorted
    /// as before: O(what is held) once, where judging every held object at
    /// every fetch cost that each time, for as long as any was held.
    private func sortStoreChanges(source: SourceView) {
        let log = persistentStoreCoordinator.changeLog
        let changes = log.changes(since: stale.floor) { origin in
            var ancestor = parentReference
            while let level = ancestor {
                if level._withUnsafeGuaranteedRef({ $0.serial == origin }) { return true }
                ancestor = level._withUnsafeGuaranteedRef { $0.parentReference }
            }
            return false
        }
        guard let (stored, through) = changes else {
            sortHeldObjects(source: source)
            return
        }
        for id in stored where !stale.objects.contains(id) {
            guard let object = registry[id], !object.flags.contains(.fault) else { continue }
            if !holdsSourceValues(object, source: source, log: log) { stale.objects.insert(id) }
        }
        stale.floor = through
    }

    /// Sorts the store's changes now, outside a fetch, when the log would
    /// soon drop some this context has not sorted
    /// (``StoreChangeLog/isFallingBehind(since:)``). Called after a save
    /// and a merge, so a context that saves batch after batch without
    /// fetching — an import that keeps its objects in a dictionary — does
    /// not fall behind the log, and need not check everything it holds at
    /// its next fetch (``sortHeldObjects(source:)``). O(the changes since
    /// the last sort), at most once per half of what the log keeps.
    func keepUpWithStoreChanges() {
        guard !registry.isEmpty, persistentStoreCoordinator.changeLog.isFallingBehind(since: stale.floor),
              let source = try? SourceView(of: self) else { return }
        sortStoreChanges(source: source)
    }

    /// ``sortStoreChanges(source:)`` when the log lost track: every
    /// object held here, filled, is checked against the source, and the
    /// ones that differ (or were changed here) are what is stale from now
    /// on. The sequence is read first: a change recorded meanwhile is
    /// sorted again at the next fetch.
    private func sortHeldObjects(source: SourceView) {
        let log = persistentStoreCoordinator.changeLog
        let through = log.current
        var objects: Set<ObjectID> = []
        for (id, object) in registry where !object.flags.contains(.fault) {
            if !holdsSourceValues(object, source: source, log: log) { objects.insert(id) }
        }
        stale = StaleObjects(floor: through, objects: objects)
    }

    /// Whether `object` (filled) holds the source's present values: false
    /// for one with changes here. A store read only where needed: not for
    /// an object a level above changed (compared with that level's state:
    /// a change of it on its way to the store is sorted when it is
    /// stored, and one dropped is an unknown change), nor for one whose
    /// newest store change wrote what the parent showed it at the version
    /// it holds; the record's header only for one held at a store version.
    private func holdsSourceValues(_ object: ManagedObject, source: SourceView, log: StoreChangeLog) -> Bool {
        guard object.flags.isDisjoint(with: [.dirty, .inserted, .deleted]) else { return false }
        if let above = source.nearestChange(of: object.objectID) {
            guard let above else { return false }
            return above.version == object.version || above.values == object.values
        }
        if let parent, let state = log.exposedState(of: object.objectID), state.origin == parent.serial, state.exposed == object.version {
            return true
        }
        let current: VersionedRead? = Snapshot.isStoreVersion(object.version)
            ? try? source.snapshot(for: object.objectID, unlessStoredAt: object.version)
            : (try? source.snapshot(for: object.objectID)).map { .read($0) }
        switch current {
        case .unchanged?: return true
        case .read(let current?)?: return current.values == object.values
        default: return false
        }
    }
}

// MARK: Reading an index in sort order

extension ManagedObjectContext {
    /// The plan that reads an index in the order of the request's sort
    /// descriptor (``QueryPlanner/ordered(_:entity:by:descending:)``): for a
    /// request with a limit, one descriptor, either way, on a non-optional
    /// attribute whose index order is the descriptor's — an integer, a
    /// double or a date (a NaN, which no order places, lands at one
    /// end), or a string compared as Swift's `<` does (the descriptor
    /// has no string comparator: a localized one orders otherwise) — and a
    /// predicate that translates, if any; with the predicate's translation.
    /// Nil otherwise.
    func orderedPlan<Result: ManagedObject>(for request: FetchRequest<Result>) throws(StrataError) -> (plan: QueryPlan, test: ValueTest?)? {
        guard request.fetchLimit > 0, request.includesPendingChanges, request.sortDescriptors.count == 1 else { return nil }
        let descriptor = request.sortDescriptors[0]
        guard let keyPath = descriptor.keyPath else { return nil }
        let entity = try request.entity(in: model)
        guard let read = PropertyProbe.property(read: keyPath, entity: entity),
              case .attribute(let attribute) = entity.properties[read.index], !attribute.isOptional else { return nil }
        switch attribute.type {
        case .integer16, .integer32, .integer64, .double, .date: break
        // The index holds a string's canonical composition in UTF-8, whose
        // byte order is the order of its Unicode scalars: Swift's.
        case .string where descriptor.stringComparator == nil: break
        default: return nil
        }
        var test: ValueTest?
        if let predicate = request.predicate {
            guard let compiled = ValueTest.compile(predicate, entity: entity) else { return nil }
            test = compiled
        }
        guard persistentStoreCoordinator.storeReadsIndexes,
              let plan = QueryPlanner.ordered(test, entity: entity, by: read.index, descending: descriptor.order == .reverse) else { return nil }
        return (plan, test)
    }

    /// The request's page, reading the stored objects in sort order (from
    /// `stream`: an index read in order, or a store's ordered read), stopping
    /// once offset + limit stored objects matched: O(the page and what this
    /// context and the levels above changed), not O(the matches).
    ///
    /// An object whose values here or above the store may differ from the
    /// store's — the levels above changed it, this context changed it, or
    /// it holds values older than the source's — sorts by those values
    /// wherever they fall: such objects are set aside from the index's
    /// stream, judged, and sorted in with what the stream gave. Every other
    /// object holds the store's values, so the stream has it in its place.
    /// Ties come in no particular order, as without an index.
    ///
    /// `stream` hands each stored object to `take` (which says whether to go
    /// on), given how many it will probably take; it returns false, having
    /// handed none, where it cannot read in the order (then nil).
    private func firstInOrder<Result: ManagedObject>(
        of request: FetchRequest<Result>, test: ValueTest?,
        reading stream: (_ expecting: Int, _ take: (ObjectID, SourceRow) throws(StrataError) -> Bool) throws(StrataError) -> Bool
    ) throws(StrataError) -> ArraySlice<FetchMatch>? {
        let entity = try request.entity(in: model)
        let wanted = request.fetchOffset + request.fetchLimit
        var evaluation = try PredicateEvaluation(request.predicate, entity: entity, context: self, test: test)
        let compiled = evaluation.compiled
        var fields = RecordCoding.FieldOffsets(count: compiled?.propertiesRead ?? 0)
        let source = try SourceView(of: self)
        let aside = objectsSetAside(of: entity, source: source)
        var matches: [FetchMatch] = []
        matches.reserveCapacity(min(wanted, 1_024))
        var fromStream = 0
        func take(_ id: ObjectID, _ row: SourceRow) throws(StrataError) -> Bool {
            guard !aside.contains(id) else { return true }
            if let object = registry[id] {
                guard !object.flags.contains(.invalidated) else { return true }
                if object.flags.contains(.fault) { fill(object, try row.snapshot()) }
                guard try evaluation.matches(object) else { return true }
                matches.append(.registered(object))
            } else {
                let passes = if let compiled { try row.passes(compiled, fields: &fields) } else { try evaluation.matches(id, row) }
                guard passes else { return true }
                matches.append(.unregistered(id, row.kept()))
            }
            fromStream += 1
            return fromStream < wanted
        }
        guard try stream(wanted + aside.count, take) else { return nil }
        try forEachMatchSetAside(aside, of: entity, source: source, evaluation: &evaluation, includesPending: true) { matches.append($0) }
        // The stream alone is in order already (ties in the index's order).
        var page = matches.count == fromStream ? matches[...] : try sorted(matches, by: request.sortDescriptors)[...]
        if request.fetchOffset > 0 { page = page.dropFirst(request.fetchOffset) }
        return page.prefix(request.fetchLimit)
    }
}

extension ManagedObjectContext {
    /// The request's page from a store other than the log store that reads
    /// in the request's order (``PersistentStoreCoordinator/forEachStoredRow(of:matching:orderedBy:expecting:_:)``),
    /// as ``firstInOrder(of:_:)`` reads it from an index: the store's
    /// objects in order until offset + limit matched, the objects this
    /// context and the levels above changed judged as they see them, then
    /// sorted in if any matched. Nil where the store cannot, or the request
    /// is not one it can serve: no limit, an order by a comparator or an
    /// object, or a predicate that does not translate.
    private func firstInStoreOrder<Result: ManagedObject>(of request: FetchRequest<Result>) throws(StrataError) -> ArraySlice<FetchMatch>? {
        let coordinator = persistentStoreCoordinator
        guard !coordinator.storeReadsIndexes else { return nil }
        let entity = try request.entity(in: model)
        guard let keys = storeOrder(of: request, entity: entity) else { return nil }
        var test: ValueTest?
        if let predicate = request.predicate {
            guard let compiled = ValueTest.compile(predicate, entity: entity) else { return nil }
            test = compiled
        }
        let narrowing = test.flatMap(StorePredicate.init)
        return try firstInOrder(of: request, test: test) { (expecting, take) throws(StrataError) -> Bool in
            try coordinator.forEachStoredRow(of: entity, matching: narrowing, orderedBy: keys, expecting: expecting, take) != nil
        }
    }

    /// The order a store other than the log store reads `request`'s page
    /// in (``firstInStoreOrder(of:)``): for a page (a limit) of a sort by
    /// stored attributes, compared by value; nil otherwise.
    private func storeOrder<Result: ManagedObject>(of request: FetchRequest<Result>, entity: EntityDescription) -> [StoreSortKey]? {
        guard request.fetchLimit > 0, request.includesPendingChanges, !request.sortDescriptors.isEmpty else { return nil }
        return ResultsOrder(sorting: request.sortDescriptors, entity: entity)?.storeSortKeys
    }

    /// How many objects `request` describes (before its offset and limit),
    /// counted by a store other than the log store: the stored objects that
    /// pass but those this context and the levels above changed (or hold
    /// stale), which are judged as it sees them, with its inserts. Nil
    /// where the store cannot count exactly by the request's predicate, or
    /// reads indexes (the log store: counts are made from its entries).
    private func countedByStore<Result: ManagedObject>(_ request: FetchRequest<Result>) throws(StrataError) -> Int? {
        let coordinator = persistentStoreCoordinator
        guard !coordinator.storeReadsIndexes, request.includesPendingChanges else { return nil }
        let entity = try request.entity(in: model)
        guard let (test, narrowing) = storeTranslation(of: request.predicate, entity: entity) else { return nil }
        let source = try SourceView(of: self)
        let aside = objectsSetAside(of: entity, source: source)
        guard let groups = try coordinator.storedAggregates(
            of: entity, matching: narrowing, groupedBy: [], computing: [.count], excluding: Array(aside)
        ), let stored = groups.first?.results.first else { return nil }
        var count = stored.values
        var evaluation = try PredicateEvaluation(request.predicate, entity: entity, context: self, test: test)
        try forEachMatchSetAside(aside, of: entity, source: source, evaluation: &evaluation, includesPending: true) { _ in count += 1 }
        return count
    }

    /// `predicate` as a store other than the log store answers it exactly:
    /// its translation, and the store's form of it (both nil without a
    /// predicate); nil when it does not translate whole.
    func storeTranslation<Result: ManagedObject>(
        of predicate: Predicate<Result>?, entity: EntityDescription
    ) -> (test: ValueTest?, narrowing: StorePredicate?)? {
        guard let predicate else { return (nil, nil) }
        guard let test = ValueTest.compile(predicate, entity: entity), let narrowing = StorePredicate(test) else { return nil }
        return (test, narrowing)
    }

    /// The objects of `entity` whose index entries a read of the index
    /// must not take at their word, judged instead on the values this
    /// context sees (``forEachMatchSetAside(_:of:source:evaluation:includesPending:_:)``):
    /// what the levels above the store changed, what this context holds
    /// that may be older than the source (``possiblyStaleObjects(of:source:updatedAmong:)``),
    /// and what it inserted or deleted — an insert whose store save is in
    /// flight is stored already, and is listed with the inserts.
    func objectsSetAside(of entity: EntityDescription, source: SourceView) -> Set<ObjectID> {
        var aside = Set(source.changedObjects(of: entity))
        guard !registry.isEmpty || !discardedInserts.isEmpty else { return aside }
        aside.formUnion(possiblyStaleObjects(of: entity, source: source))
        for id in deleted.keys where id.entity === entity { aside.insert(id) }
        for id in inserted.keys where id.entity === entity { aside.insert(id) }
        for id in discardedInserts where id.entity === entity { aside.insert(id) }
        return aside
    }

    /// Calls `body` with each object of `aside` that matches as this
    /// context sees it, then (with `includesPending`) each of its inserts
    /// that matches: an object held here, with pending changes, as itself
    /// (filled if a fault); any other with the source's snapshot. An object
    /// the source no longer has, this context deleted or inserted, or one
    /// it discarded, is not a match here.
    func forEachMatchSetAside(
        _ aside: Set<ObjectID>, of entity: EntityDescription, source: SourceView,
        evaluation: inout PredicateEvaluation, includesPending: Bool, _ body: (FetchMatch) throws(StrataError) -> Void
    ) throws(StrataError) {
        for id in aside where inserted[id] == nil && !discardedInserts.contains(id) {
            if includesPending, let object = registry[id] {
                guard object.flags.isDisjoint(with: [.deleted, .invalidated]), let current = try source.snapshot(for: id) else { continue }
                if object.flags.contains(.fault) { fill(object, current) }
                if try evaluation.matches(object) { try body(.registered(object)) }
            } else if let current = try source.snapshot(for: id), try evaluation.matches(id, .pending(current)) {
                try body(.unregistered(id, .pending(current)))
            }
        }
        guard includesPending else { return }
        for object in inserted.values where object.entity === entity {
            if try evaluation.matches(object) { try body(.registered(object)) }
        }
    }
}
