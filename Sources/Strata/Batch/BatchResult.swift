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
