public import Foundation

/// A description of the objects to fetch: an entity, a `#Predicate`, a sort
/// order, a page.
///
/// ```swift
/// var request = FetchRequest<Recipe>(
///     predicate: #Predicate { $0.servings > 2 },
///     sortBy: [SortDescriptor(\.name)])
/// request.fetchLimit = 20
/// let recipes = try context.fetch(request)
/// ```
public struct FetchRequest<Result: ManagedObject> {
    /// The entity to fetch; nil for the entity whose class is `Result`.
    public var entityName: String?
    /// Evaluated on each candidate object, with the context's unsaved values.
    public var predicate: Predicate<Result>?
    public var sortDescriptors: [SortDescriptor<Result>]
    /// At most this many results; 0 for no limit.
    public var fetchLimit = 0
    /// Results to skip (after sorting).
    public var fetchOffset = 0
    /// Whether the context's own unsaved inserts and deletes count (the
    /// default); ancestors' unsaved changes always count, since a parent is
    /// its child's store (SEMANTICS.md line 13).
    public var includesPendingChanges = true

    public init(entityName: String? = nil, predicate: Predicate<Result>? = nil, sortBy sortDescriptors: [SortDescriptor<Result>] = []) {
        self.entityName = entityName
        self.predicate = predicate
        self.sortDescriptors = sortDescriptors
    }

    func entity(in model: ManagedObjectModel) throws(StrataError) -> EntityDescription {
        let entity: EntityDescription?
        if let entityName { entity = model.entity(named: entityName) } else { entity = model.entity(for: Result.self) }
        guard let entity else {
            throw StrataError(.invalidArgument, "no entity \(entityName ?? "with class \(Result.self)") in the model")
        }
        guard Result.self == ManagedObject.self || entity.managedObjectClass is Result.Type else {
            throw StrataError(.invalidArgument, "entity \(entity.name) has class \(entity.managedObjectClass), not \(Result.self)")
        }
        return entity
    }
}

/// One object's ID and snapshot, as a source hands them to a fetching child.
struct SourceObject: Sendable {
    var id: ObjectID
    var snapshot: Snapshot
}

extension ManagedObjectContext {
    /// The objects `request` describes, as this context sees them: its own
    /// unsaved changes and all its ancestors' included (SEMANTICS.md line 13).
    public func fetch<Result: ManagedObject>(_ request: FetchRequest<Result>) throws(StrataError) -> [Result] {
        checkQueue()
        let entity = try request.entity(in: model)
        let candidates = try candidates(of: entity, includesPendingChanges: request.includesPendingChanges)
        var matches: [Result] = []
        matches.reserveCapacity(request.predicate == nil ? candidates.count : 64)
        if let predicate = request.predicate {
            do {
                for object in candidates {
                    let typed = unsafeDowncast(object, to: Result.self)
                    if try predicate.evaluate(typed) { matches.append(typed) }
                }
            } catch {
                throw StrataError(.invalidArgument, "the predicate failed to evaluate: \(error)")
            }
        } else {
            for object in candidates { matches.append(unsafeDowncast(object, to: Result.self)) }
        }
        if !request.sortDescriptors.isEmpty { matches.sort(using: request.sortDescriptors) }
        if request.fetchOffset > 0 { matches.removeFirst(min(request.fetchOffset, matches.count)) }
        if request.fetchLimit > 0 && matches.count > request.fetchLimit { matches.removeLast(matches.count - request.fetchLimit) }
        return matches
    }

    /// The IDs of the objects `request` describes.
    public func fetchObjectIDs<Result: ManagedObject>(_ request: FetchRequest<Result>) throws(StrataError) -> [ObjectID] {
        try fetch(request).map(\.objectID)
    }

    /// How many objects `request` describes (limit and offset applied).
    public func count<Result: ManagedObject>(for request: FetchRequest<Result>) throws(StrataError) -> Int {
        try fetch(request).count
    }

    /// Every object of `entity` as this context sees it, registered here.
    func candidates(of entity: EntityDescription, includesPendingChanges: Bool) throws(StrataError) -> [ManagedObject] {
        let source = try sourceObjects(of: entity)
        var result: [ManagedObject] = []
        result.reserveCapacity(source.count + inserted.count)
        for item in source {
            if let object = registry[item.id] {
                // An insert whose store save is in flight (this context is
                // parked, or a guest saved through it) is in the store
                // already; it is listed once, with the inserts.
                if object.flags.contains(.inserted) { continue }
                if object.flags.contains(.fault) { fill(object, item.snapshot) }
                if object.flags.contains(.invalidated) || (includesPendingChanges && object.flags.contains(.deleted)) { continue }
                result.append(object)
            } else if !discardedInserts.contains(item.id) {
                result.append(materialize(item.id, item.snapshot))
            }
        }
        if includesPendingChanges {
            for object in inserted.values where object.entity === entity { result.append(object) }
        }
        return result
    }

    /// Every object of `entity` in this context's source.
    func sourceObjects(of entity: EntityDescription) throws(StrataError) -> [SourceObject] {
        if let parent {
            return try parent.childAccess { () throws(StrataError) -> [SourceObject] in try parent.objectsForChild(of: entity) }
        }
        return try persistentStoreCoordinator.objects(of: entity)
    }

    /// Runs on this context's queue for a fetching child: every object of
    /// `entity` as this context sees it, registered here (see ``snapshotForChild(_:)``).
    func objectsForChild(of entity: EntityDescription) throws(StrataError) -> [SourceObject] {
        let source = try sourceObjects(of: entity)
        var result: [SourceObject] = []
        result.reserveCapacity(source.count + inserted.count)
        for item in source {
            let object: ManagedObject
            if let registered = registry[item.id] {
                object = registered
                // In the store already while its save is in flight (parked):
                // listed once, with the inserts below.
                if object.flags.contains(.inserted) { continue }
                if object.flags.contains(.fault) { fill(object, item.snapshot) }
            } else {
                // Inserted here, written by the save in flight, and deleted
                // by a guest meanwhile: gone, whatever the store says.
                if discardedInserts.contains(item.id) { continue }
                object = materialize(item.id, item.snapshot)
            }
            guard object.flags.isDisjoint(with: [.deleted, .invalidated]) else { continue }
            object.flags.remove(.exposedVersionFresh)
            result.append(SourceObject(id: item.id, snapshot: Snapshot(values: object.values, version: object.exposedVersion)))
        }
        for (id, object) in inserted where object.entity === entity && !object.flags.contains(.deleted) {
            object.flags.remove(.exposedVersionFresh)
            result.append(SourceObject(id: id, snapshot: Snapshot(values: object.values, version: object.exposedVersion)))
        }
        return result
    }
}
