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
///
/// Or fill each object through its class's properties, as Core Data's
/// `managedObjectHandler` does — no dictionary, no names looked up, the
/// types checked by Swift — row by row, a batch at a time, so a feed of a
/// million rows never sits in memory as dictionaries:
///
/// ```swift
/// let request = BatchInsertRequest<Product>(count: feed.count) { i, product in
///     product.sku = feed[i].sku
///     product.price = feed[i].price
/// }
/// try container.coordinator.execute(request)
/// ```
public struct BatchInsertRequest<Object: ManagedObject>: Sendable {
    /// The objects to insert, each as its attributes' values by name
    /// (empty for a request that fills them, ``init(_:count:fill:)``).
    public var objects: [[String: PropertyValue]]
    /// How many objects ``init(_:count:fill:)``'s closure fills, and the
    /// closure; nil for a request of ``objects``.
    let filled: (count: Int, fill: @Sendable (Int, Object) -> Void)?
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
        filled = nil
    }

    /// A request inserting `count` objects of `Object`'s entity, each filled
    /// by `fill` (called with the row's number, 0 ..< `count`, in order, on
    /// the thread that runs the request) on an object in no context that
    /// starts with the entity's defaults — the same object for every row,
    /// its values reset in between, so keep none of it. Set attributes only.
    ///
    /// Rows are checked a batch at a time, as they are filled: a row that
    /// sets a relationship, leaves a required attribute nil or holds a
    /// value its attribute does not take stops the request with the
    /// batches before it written. Each batch is written on another thread
    /// while `fill` fills the next: so `fill` is called for the rows of
    /// the batch after one whose write fails (which the request then
    /// throws, writing nothing more), ``progress`` hears of a batch once
    /// the next is filled, and `fill` should not read the store for what
    /// earlier rows wrote. Where the entity has uniqueness
    /// constraints, a row that meets a stored object gives it every
    /// attribute — the row is the object whole (an attribute `fill` did not
    /// set takes its default), unlike a row of ``objects``, which gives only
    /// the attributes it names.
    public init(_ type: Object.Type = Object.self, count: Int, fill: @escaping @Sendable (_ row: Int, _ object: Object) -> Void) {
        objects = []
        filled = (max(count, 0), fill)
    }
}
