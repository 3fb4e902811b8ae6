/// Inserts objects of an entity from values, without making them in any
/// context — Core Data's `NSBatchInsertRequest`, run by
/// ``PersistentStoreCoordinator/execute(_:)-(BatchInsertRequest<Object>)``.
///
/// ```swift
/// let rows: [[String: PropertyValue]] = feed.map { ["name": .string($0.name), "servings": .integer($0.servings)] }
/// let result = try container.coordinator.execute(BatchInsertRequest<Recipe>(objects: rows))
/// print("\(result.insertedCount) new, \(result.updatedCount) updated")
/// ```
///
/// Each row names attributes (not relationships) and their values; those
/// it leaves out hold their defaults. Where the entity has uniqueness
/// constraints, the request is an upsert: a row whose values of a
/// constraint a stored object holds updates that object (the properties
/// the row gives, the others kept), and rows of one request that share
/// such values make one object (later rows' properties over earlier ones').
///
/// Unlike Core Data's, it goes through everything a save does: every row
/// is checked against the model before any is written (types, required
/// attributes), indexes stay in step, the store's history records it (one
/// transaction per batch of ``batchSize`` rows, under ``author``), and
/// every context that merges automatically is brought up to date as by
/// another context's save.
public struct BatchInsertRequest<Object: ManagedObject>: Sendable {
    /// The objects to insert, each as its attributes' values by name.
    public var objects: [[String: PropertyValue]]
    /// The author the store's history records (``HistoryTransaction/author``).
    public var author: String?
    /// Rows written per atomic batch: each batch is one store write and one
    /// history transaction; a failure (a full disk, a row whose merged
    /// values meet a second stored object on another constraint) leaves
    /// the batches before it written and the rest not.
    public var batchSize = 10_000
    /// Called after each batch is written, on the thread that runs the
    /// request (outside the coordinator's locks), with how far it has come.
    public var progress: (@Sendable (BatchProgress) -> Void)?

    /// A request inserting `objects` as objects of `Object`'s entity.
    public init(_ type: Object.Type = Object.self, objects: [[String: PropertyValue]]) {
        self.objects = objects
    }
}
