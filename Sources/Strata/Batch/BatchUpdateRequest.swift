public import Foundation

/// Sets attributes of every object of an entity that a predicate selects,
/// without making the objects in any context — Core Data's
/// `NSBatchUpdateRequest`, run by ``PersistentStoreCoordinator/execute(_:)-(BatchUpdateRequest<Object>)``.
///
/// ```swift
/// let request = BatchUpdateRequest<Recipe>(where: #Predicate { $0.servings == 0 }, set: ["servings": .integer(1)])
/// let result = try container.coordinator.execute(request)
/// print("\(result.objectIDs.count) recipes now serve one")
/// ```
///
/// Unlike Core Data's, it goes through everything a save does: the values
/// are checked against the model (types, required attributes), uniqueness
/// constraints hold, indexes stay in step, the store's history records it
/// (one transaction per batch of ``batchSize`` objects, under ``author``),
/// and every context that merges automatically is brought up to date —
/// the objects it holds refreshed — as by another context's save.
public struct BatchUpdateRequest<Object: ManagedObject>: Sendable {
    /// Which objects to update (nil: every object of the entity).
    public var predicate: Predicate<Object>?
    /// Each attribute to set, by name, and its new value.
    public var propertiesToUpdate: [String: PropertyValue]
    /// The author the store's history records (``HistoryTransaction/author``).
    public var author: String?
    /// Objects written per atomic batch: each batch is one store write and
    /// one history transaction; a failure (a uniqueness conflict, a full
    /// disk) leaves the batches before it written and the rest not.
    public var batchSize = 10_000
    /// Called after each batch is written, on the thread that runs the
    /// request (outside the coordinator's locks), with how far it has come.
    public var progress: (@Sendable (BatchProgress) -> Void)?

    /// A request setting `properties` on the objects `predicate` selects.
    public init(_ type: Object.Type = Object.self, where predicate: Predicate<Object>? = nil, set properties: [String: PropertyValue]) {
        self.predicate = predicate
        self.propertiesToUpdate = properties
    }
}
