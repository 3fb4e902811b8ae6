/// What a batch request did (``PersistentStoreCoordinator/execute(_:)-(BatchInsertRequest<Object>)``
/// and the update and delete requests).
public struct BatchResult: Sendable {
    /// The objects it wrote — inserted, changed or deleted — in the order
    /// it wrote them. An object whose values were already the new ones is
    /// not written, and not listed; nor is one another save had deleted.
    public var objectIDs: [ObjectID] = []
    /// How many of ``objectIDs`` it inserted (a batch insert).
    public var insertedCount = 0
    /// How many of ``objectIDs`` it changed: a batch update's objects, a
    /// batch insert's rows that met a stored object on a uniqueness
    /// constraint, a batch delete's objects that a nullify rule took a
    /// deleted object out of.
    public var updatedCount = 0
    /// How many of ``objectIDs`` it deleted (a batch delete, with those
    /// its cascade rules reached).
    public var deletedCount = 0
    /// The history's newest transaction after it (nil when history is off).
    public var historyToken: HistoryToken?

    /// Adds what one atomic batch wrote.
    mutating func add(_ written: ObjectChanges) {
        objectIDs += written.inserted
        objectIDs += written.updated
        objectIDs += written.deleted
        insertedCount += written.inserted.count
        updatedCount += written.updated.count
        deletedCount += written.deleted.count
    }
}

/// How far a batch request has come: what a request's `progress` handler
/// hears after each batch is written (``BatchInsertRequest/progress``,
/// ``BatchUpdateRequest/progress``, ``BatchDeleteRequest/progress``).
public struct BatchProgress: Sendable {
    /// The request's rows (a batch insert) or chosen objects (an update or
    /// a delete) done so far: written, or found unchanged or gone.
    public var completedCount: Int
    /// How many rows or chosen objects the request has.
    public var totalCount: Int
    /// What the batches done so far wrote.
    public var result: BatchResult
}
