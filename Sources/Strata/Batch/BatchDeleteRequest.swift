public import Foundation

/// Deletes objects of an entity, chosen by a predicate or by ID, without
/// making them in any context — Core Data's `NSBatchDeleteRequest`, run by
/// ``PersistentStoreCoordinator/execute(_:)-(BatchDeleteRequest<Object>)``.
///
/// ```swift
/// let old = BatchDeleteRequest<Recipe>(where: #Predicate { $0.servings == 0 })
/// let result = try container.coordinator.execute(old)
/// print("\(result.deletedCount) objects deleted")
/// ```
///
/// Unlike Core Data's, the relationships' delete rules apply, as to a
/// context's deletes: cascade deletes the objects a deleted object holds
/// (the result lists them too), nullify takes it out of the objects on the
/// other side, deny refuses while the other side holds objects that stay,
/// and no action refuses while an object that stays points back at it.
/// Indexes stay in step, the store's history records it (one transaction
/// per batch of ``batchSize`` objects, under ``author``), and every context
/// that merges automatically lets go of the deleted objects and refreshes
/// the nullified ones, as after another context's save.
public struct BatchDeleteRequest<Object: ManagedObject>: Sendable {
    /// Which objects to delete (nil, with no ``objectIDs``: every object
    /// of the entity).
    public var predicate: Predicate<Object>?
    /// The objects to delete, when given by ID (then ``predicate`` is not used).
    public var objectIDs: [ObjectID]?
    /// The author the store's history records (``HistoryTransaction/author``).
    public var author: String?
    /// Objects chosen per atomic batch, with what their delete rules
    /// reach: each batch is one store write and one history transaction; a
    /// failure (a deny rule, a full disk) leaves the batches before it
    /// written and the rest not.
    public var batchSize = 10_000
    /// Called after each batch is written, on the thread that runs the
    /// request (outside the coordinator's locks), with how far it has come.
    public var progress: (@Sendable (BatchProgress) -> Void)?

    /// A request deleting the objects `predicate` selects.
    public init(_ type: Object.Type = Object.self, where predicate: Predicate<Object>? = nil) {
        self.predicate = predicate
    }

    /// A request deleting the objects `objectIDs` name (of `Object`'s entity).
    public init(_ type: Object.Type = Object.self, objectIDs: [ObjectID]) {
        self.objectIDs = objectIDs
    }
}
