/// How far a migration has come, reported while a store opens (see
/// ``PersistentStoreCoordinator/addPersistentStore(_:directory:options:migrationPlan:migrationProgress:history:)``).
///
/// An inferred migration rewrites no record; what it does in proportion to
/// the store is build the indexes the new model adds or changes. It reads
/// each object of the entity once, writes the entries in batches, then
/// checks the unique indexes among them:
///
/// ```swift
/// let container = try PersistentContainer(
///     name: "Notes", model: modelV2, directory: path,
///     migrationProgress: { progress in
///         if case .buildingIndexes(let entity) = progress.step {
///             print("indexing \(entity): \(progress.done) of \(progress.total)")
///         }
///     })
/// ```
public struct MigrationProgress: Sendable, Equatable {
    /// What the migration is doing, and so what ``MigrationProgress/done`` and
    /// ``MigrationProgress/total`` count.
    public enum Step: Sendable, Equatable {
        /// Building the index entries of this entity's objects (`done` and
        /// `total` count objects).
        case buildingIndexes(entity: String)
        /// Checking that no two of this entity's objects share the values
        /// of a unique index (`done` and `total` count the entries checked).
        case checkingUniqueness(entity: String)
    }

    /// What the migration is doing.
    public var step: Step
    /// How many of ``total`` are done: objects or index entries, as ``step`` says.
    public var done: Int
    /// How many there are to do in this step.
    public var total: Int

    /// A report of `done` out of `total` in `step`.
    public init(step: Step, done: Int, total: Int) {
        self.step = step
        self.done = done
        self.total = total
    }
}

/// Gets each ``MigrationProgress`` report, on the thread opening the store.
public typealias MigrationProgressHandler = @Sendable (MigrationProgress) -> Void
