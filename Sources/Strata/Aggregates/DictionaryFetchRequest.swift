public import Foundation

/// A fetch that returns values, not objects: chosen properties of each
/// match, distinct values, or counts, sums, minimums, maximums and averages
/// per group (Core Data's dictionary result type with `propertiesToFetch`
/// and `propertiesToGroupBy`; SQL's `SELECT … GROUP BY`).
///
/// ```swift
/// // How many recipes serve each number of people, with 2 or more:
/// let request = DictionaryFetchRequest<Recipe>(
///     predicate: #Predicate { $0.servings >= 2 },
///     propertiesToFetch: ["servings", .count()],
///     groupBy: ["servings"])
/// let rows = try context.fetch(request)   // [{count: 412, servings: 2}, …]
/// ```
///
/// The results are what ``ManagedObjectContext/fetch(_:)-(FetchRequest<Result>)``
/// would return, reduced: the same matches, with the context's and its
/// ancestors' pending changes counted (``includesPendingChanges``). No
/// object is registered to answer: a scan reads each record where it lies,
/// and a count per group over an index's leading attributes reads index
/// entries only.
///
/// The rules, checked when the request runs (a broken one throws
/// ``StrataError/Code/invalidArgument``):
/// - With ``propertiesToGroupBy``, every fetched attribute must be one of
///   them, and there is one result per group, in ascending order of the
///   grouped values unless ``sortBy`` says otherwise.
/// - Without, a request of aggregates only has one result for all the
///   matches (its count 0 when none match); a request of attributes (and
///   relationship counts) has one per match, in the order a fetch without
///   sort descriptors gives.
/// - ``returnsDistinctResults`` keeps one of each distinct result.
public struct DictionaryFetchRequest<Root: ManagedObject>: Sendable {
    /// The entity to read; nil for the entity whose class is `Root`.
    public var entityName: String?
    /// Which objects count, as in ``FetchRequest/predicate``.
    public var predicate: Predicate<Root>?
    /// The columns of each result.
    public var propertiesToFetch: [FetchedProperty]
    /// Attributes (or to-one relationships) whose values form the groups;
    /// empty for no grouping.
    public var propertiesToGroupBy: [String]
    /// Whether equal results are returned once.
    public var returnsDistinctResults = false
    /// The order of the results, by their keys (applied before the page).
    public var sortBy: [ResultOrder] = []
    /// At most this many results; 0 for no limit.
    public var fetchLimit = 0
    /// Results to skip (after sorting).
    public var fetchOffset = 0
    /// Whether the context's own unsaved changes count (the default), as in
    /// ``FetchRequest/includesPendingChanges``.
    public var includesPendingChanges = true

    /// A request for the columns `propertiesToFetch` over the objects of the entity named
    /// `entityName` (nil: the entity whose class is `Root`) that match `predicate` (nil: every
    /// object), grouped by the attributes or to-one relationships named in `groupBy` (empty: no
    /// grouping).
    public init(
        entityName: String? = nil, predicate: Predicate<Root>? = nil,
        propertiesToFetch: [FetchedProperty], groupBy propertiesToGroupBy: [String] = []
    ) {
        self.entityName = entityName
        self.predicate = predicate
        self.propertiesToFetch = propertiesToFetch
        self.propertiesToGroupBy = propertiesToGroupBy
    }

    /// The same matches, as an object fetch describes them.
    var matchRequest: FetchRequest<Root> {
        var request = FetchRequest<Root>(entityName: entityName, predicate: predicate)
        request.includesPendingChanges = includesPendingChanges
        return request
    }
}
