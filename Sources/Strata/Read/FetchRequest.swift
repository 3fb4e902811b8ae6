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
///
/// A request is `Sendable`: build it anywhere, run it inside `perform`.
public struct FetchRequest<Result: ManagedObject>: Sendable {
    /// The entity to fetch; nil for the entity whose class is `Result`.
    public var entityName: String?
    /// Which objects to return. With ``includesPendingChanges`` it sees the
    /// context's own unsaved values; without, the values of the context's
    /// source (its parent's view, or the store).
    public var predicate: Predicate<Result>?
    /// The order of the results, the first descriptor deciding first; empty for the store's order.
    public var sortDescriptors: [SortDescriptor<Result>]
    /// At most this many results; 0 for no limit.
    public var fetchLimit = 0
    /// Results to skip (after sorting).
    public var fetchOffset = 0
    /// Whether the context's own unsaved changes count (the default): its
    /// inserts are candidates, its deletes are left out, and the predicate
    /// sees its unsaved values. Without, as in Core Data, the context's
    /// source decides which objects match — the store for a context on the
    /// coordinator, the parent's view for a child — and the context's own
    /// inserts are left out. Ancestors' unsaved changes always count, since
    /// a parent is its child's store (contract C13).
    public var includesPendingChanges = true
    /// Whether objects the context does not hold yet come back as faults,
    /// filled when first used (the default, as in Core Data): a fetch then
    /// costs memory for the objects it returns, not their values. Their
    /// values wait in the coordinator's row cache while it has room, so
    /// filling them reads no store. Objects the context holds come back as
    /// they are.
    public var returnsObjectsAsFaults = true
    /// For ``ManagedObjectContext/fetchResults(_:)``: how many objects are
    /// filled together when one of them is first used (0: 20) — Core
    /// Data's batched fetch, whose result holds IDs until it is walked.
    /// ``ManagedObjectContext/fetch(_:)->[Result]`` returns an array, which cannot
    /// wait: it registers every match at once whatever this says, and in a
    /// debug build prints a warning (once) that sends the caller to
    /// `fetchResults`.
    public var fetchBatchSize = 0

    /// A request for the objects of the entity named `entityName` (nil: the entity whose class is
    /// `Result`) that match `predicate` (nil: every object), in the order of `sortDescriptors`.
    public init(entityName: String? = nil, predicate: Predicate<Result>? = nil, sortBy sortDescriptors: [SortDescriptor<Result>] = []) {
        self.entityName = entityName
        self.predicate = predicate
        self.sortDescriptors = sortDescriptors
    }

    /// How many matches make the page, in whatever order: offset + limit,
    /// or all of them without a limit.
    var pageEnd: Int { fetchLimit > 0 ? fetchOffset + fetchLimit : .max }

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

