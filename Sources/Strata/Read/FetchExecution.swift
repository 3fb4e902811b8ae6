import Foundation

/// An object that matched a request: one registered in the fetching
/// context, or one read from the source that the context has not registered.
enum FetchMatch {
    case registered(ManagedObject)
    case unregistered(ObjectID, Snapshot)

    var objectID: ObjectID {
        switch self {
        case .registered(let object): object.objectID
        case .unregistered(let id, _): id
        }
    }
}

extension ManagedObjectContext {
    /// The objects `request` describes, as this context sees them: its own
    /// unsaved changes and all its ancestors' included (SEMANTICS.md line 13).
    ///
    /// ```swift
    /// let request = FetchRequest<Item>(predicate: #Predicate { $0.remoteID == 42 })
    /// let found = try importer.performAndWait { try importer.fetch(request) }
    /// ```
    ///
    /// The fetch runs on this context's queue and enters no other context:
    /// it reads the store at one read view and lays each ancestor's
    /// published pending changes over it (``SourceView``), so it never waits
    /// for an ancestor's queue — the main queue included — and materializes
    /// only the objects that match, here.
    public func fetch<Result: ManagedObject>(_ request: FetchRequest<Result>) throws(StrataError) -> [Result] {
        checkQueue()
        let matches = try self.matches(of: request)
        var objects: [Result] = []
        objects.reserveCapacity(matches.count)
        for match in matches {
            switch match {
            case .registered(let object): objects.append(unsafeDowncast(object, to: Result.self))
            case .unregistered(let id, let snapshot): objects.append(unsafeDowncast(materialize(id, snapshot), to: Result.self))
            }
        }
        if !request.sortDescriptors.isEmpty { objects.sort(using: request.sortDescriptors) }
        return Self.page(objects, of: request)
    }

    /// The IDs of the objects `request` describes. Without sort descriptors
    /// no object is materialized for it.
    public func fetchObjectIDs<Result: ManagedObject>(_ request: FetchRequest<Result>) throws(StrataError) -> [ObjectID] {
        guard request.sortDescriptors.isEmpty else { return try fetch(request).map(\.objectID) }
        checkQueue()
        return Self.page(try matches(of: request).map(\.objectID), of: request)
    }

    /// How many objects `request` describes (limit and offset applied),
    /// materializing none.
    public func count<Result: ManagedObject>(for request: FetchRequest<Result>) throws(StrataError) -> Int {
        checkQueue()
        var count = try matches(of: request).count
        count = max(0, count - request.fetchOffset)
        return request.fetchLimit > 0 ? min(count, request.fetchLimit) : count
    }

    // MARK: Internal

    private static func page<T>(_ items: [T], of request: FetchRequest<some ManagedObject>) -> [T] {
        var items = items
        if request.fetchOffset > 0 { items.removeFirst(min(request.fetchOffset, items.count)) }
        if request.fetchLimit > 0 && items.count > request.fetchLimit { items.removeLast(items.count - request.fetchLimit) }
        return items
    }

    /// Every object of the request's entity that matches its predicate, as
    /// this context sees it: the source's objects (``SourceView``), then,
    /// with `includesPendingChanges`, this context's own inserts.
    ///
    /// An object registered here is judged by its values here (a child is
    /// a snapshot, SEMANTICS.md line 10), or with `includesPendingChanges`
    /// off by the source's; one not registered here by the source's, on a
    /// scratch object (``PredicateEvaluation``) — it is materialized only if
    /// the caller wants objects.
    func matches<Result: ManagedObject>(of request: FetchRequest<Result>) throws(StrataError) -> [FetchMatch] {
        let entity = try request.entity(in: model)
        let includesPending = request.includesPendingChanges
        var evaluation = PredicateEvaluation(request.predicate, entity: entity, context: self)
        // The translated test, outside the generic evaluation: the loop
        // below runs once per stored record.
        let compiled = evaluation.compiled.map(CompiledTest.init)
        var matches: [FetchMatch] = []
        let source = try SourceView(of: self)
        try source.forEach(of: entity) { id, row throws(StrataError) in
            if let object = registry[id] {
                // An insert whose store save is in flight (this context is
                // parked, or a guest saved through it) is in the store
                // already; it is listed once, with the inserts.
                if object.flags.contains(.inserted) { return }
                if object.flags.contains(.fault) { fill(object, try row.snapshot()) }
                if object.flags.contains(.invalidated) { return }
                if includesPending {
                    if object.flags.contains(.deleted) { return }
                    if try evaluation.matches(object) { matches.append(.registered(object)) }
                } else if try evaluation.matches(id, row) {
                    matches.append(.registered(object))
                }
            } else if !discardedInserts.contains(id) {
                if let compiled {
                    // Judged on as few decoded values as the test reads.
                    if try row.passes(compiled) { matches.append(.unregistered(id, try row.snapshot())) }
                } else {
                    let snapshot = try row.snapshot()
                    if try evaluation.matches(id, snapshot) { matches.append(.unregistered(id, snapshot)) }
                }
            }
        }
        if includesPending {
            for object in inserted.values where object.entity === entity {
                if try evaluation.matches(object) { matches.append(.registered(object)) }
            }
        }
        return matches
    }
}

/// A request's predicate, evaluated on objects of the context or on values
/// read from the source: translated to a ``ValueTest`` on stored values
/// when it can be, else through Foundation — on the object itself, or for
/// values on one scratch object of the entity's class, linked to the
/// context (so a predicate that follows a relationship faults its target in
/// there) but never registered. Either way, judging an object that does not
/// match costs no allocation.
struct PredicateEvaluation<Result: ManagedObject> {
    private let predicate: Predicate<Result>?
    let compiled: ValueTest?
    private let entity: EntityDescription
    private let context: ManagedObjectContext
    private var scratch: Result?

    init(_ predicate: Predicate<Result>?, entity: EntityDescription, context: ManagedObjectContext) {
        self.predicate = predicate
        self.compiled = predicate.flatMap { ValueTest.compile($0, entity: entity) }
        self.entity = entity
        self.context = context
    }

    /// An object registered in the context, filled (not a fault).
    mutating func matches(_ object: ManagedObject) throws(StrataError) -> Bool {
        guard let predicate else { return true }
        if let compiled { return compiled.evaluate(object.values) }
        return try evaluate(predicate, unsafeDowncast(object, to: Result.self))
    }

    mutating func matches(_ id: ObjectID, _ row: SourceRow) throws(StrataError) -> Bool {
        guard predicate != nil else { return true }
        if let compiled { return try row.passes(CompiledTest(compiled)) }
        return try matches(id, try row.snapshot())
    }

    mutating func matches(_ id: ObjectID, _ snapshot: Snapshot) throws(StrataError) -> Bool {
        guard let predicate else { return true }
        if let compiled { return compiled.evaluate(snapshot.values) }
        let object: Result
        if let scratch {
            object = scratch
        } else {
            object = unsafeDowncast(entity.managedObjectClass.init(entity: entity, insertInto: nil), to: Result.self)
            object.link = context.link
            object.flags = []
            scratch = object
        }
        object.primaryKey = id.primaryKey
        object.isTemporary = id.isTemporaryID
        object.values = snapshot.values
        return try evaluate(predicate, object)
    }

    private func evaluate(_ predicate: Predicate<Result>, _ object: Result) throws(StrataError) -> Bool {
        do {
            return try predicate.evaluate(object)
        } catch {
            throw StrataError(.invalidArgument, "the predicate failed to evaluate: \(error)")
        }
    }
}
