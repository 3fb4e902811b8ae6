public import StrataStore

/// One version of an app's model, named: what a ``MigrationPlan`` lists.
/// An older version names no classes: today's `Note` declares today's
/// properties, which the model checks against each entity that names it
/// (``ManagedObjectModel/init(entities:)``); a migration reads an older
/// version's values through ``MigratingObject``.
///
/// ```swift
/// let v1 = try ModelVersion("1", entities: [
///     EntityDescription(name: "Note", properties: [.attribute("views", .string)]),
/// ])
/// ```
public struct ModelVersion: Sendable {
    /// The version's name, unique in a plan: what stages and
    /// ``MigrationPlan/migrate(storeAt:upTo:options:)`` refer to it by.
    public let identifier: String
    /// The version's model.
    public let model: ManagedObjectModel

    /// Makes the version's model (``ManagedObjectModel/init(entities:)``).
    public init(_ identifier: String, entities: [EntityDescription]) throws(StrataError) {
        self.identifier = identifier
        self.model = try ManagedObjectModel(entities: entities)
    }

    /// A version named `identifier` whose model is made already.
    public init(_ identifier: String, model: ManagedObjectModel) {
        self.identifier = identifier
        self.model = model
    }

    /// A version whose model is the entities `types` declare: `@Entity`
    /// classes, each version's in a namespace of its own (SwiftData's
    /// `VersionedSchema`, without a protocol to conform to). A nested class
    /// is named by its own name, so `NotesV1.Note` and `NotesV2.Note` are
    /// two versions of the entity `Note`.
    ///
    /// ```swift
    /// enum NotesV1 {
    ///     @Entity final class Note: ManagedObject { var title: String }
    /// }
    /// enum NotesV2 {
    ///     @Entity final class Note: ManagedObject { @Renamed(from: "title") var heading: String }
    /// }
    /// let plan = try MigrationPlan(versions: [
    ///     ModelVersion("1", declaring: NotesV1.Note.self),
    ///     ModelVersion("2", declaring: NotesV2.Note.self),
    /// ])
    /// ```
    public init(_ identifier: String, declaring types: any EntityDeclaring.Type...) throws(StrataError) {
        self.identifier = identifier
        self.model = try ManagedObjectModel(declaring: types)
    }
}

/// How a store moves from one model version to the next: by inference
/// (``lightweight(from:to:)``, what a plan does between two versions it has
/// no stage for), or by a custom stage that sees each object's old and new
/// values together and sets what inference cannot.
public struct MigrationStage: Sendable {
    /// The identifier of the version the stage migrates from.
    public let from: String
    /// The identifier of the version it migrates to, the next one in the plan.
    public let to: String
    let batchSize: Int
    let body: (@Sendable ([MigratingObject]) throws -> Void)?
    let progress: (@Sendable (_ done: Int, _ total: Int) -> Void)?

    var isCustom: Bool { body != nil }

    /// Inferred, as a store without a plan is migrated.
    public static func lightweight(from: String, to: String) -> MigrationStage {
        MigrationStage(from: from, to: to, batchSize: 0, body: nil, progress: nil)
    }

    /// A custom stage: `migrate` gets the stored objects `batchSize` at a
    /// time, each with its values under the old version
    /// (``MigratingObject/oldValue(forKey:)``) and under the new one, which
    /// start as inference makes them — carried over where a property
    /// matches, the default where it is new or its type changed — and which
    /// it may set. Each batch is written as it is done, where no reader of
    /// the old version looks, and ONE small atomic batch then switches to
    /// the new version: a throw, a crash or a value the new model refuses
    /// leaves the store at the old version (what the stage wrote is
    /// deleted). `progress` gets the objects done and the total after each
    /// batch.
    ///
    /// ```swift
    /// .custom(from: "1", to: "2") { objects in
    ///     for note in objects where note.entity.name == "Note" {
    ///         if case .string(let text)? = note.oldValue(forKey: "views") {
    ///             try note.setValue(.integer(Int64(text) ?? 0), forKey: "views")
    ///         }
    ///     }
    /// }
    /// ```
    public static func custom(
        from: String, to: String, batchSize: Int = 1_000, progress: (@Sendable (_ done: Int, _ total: Int) -> Void)? = nil,
        migrate: @escaping @Sendable ([MigratingObject]) throws -> Void
    ) -> MigrationStage {
        MigrationStage(from: from, to: to, batchSize: max(1, batchSize), body: migrate, progress: progress)
    }
}

/// The model versions a store may have been written with, oldest first, the
/// last being the app's model, and the custom stages between some of them
/// (the others are inferred).
///
/// ```swift
/// let plan = MigrationPlan(versions: [v1, v2, v3], stages: [
///     .custom(from: "2", to: "3") { objects in … },
/// ])
/// let container = try PersistentContainer(name: "Notes", model: v3.model, directory: path, migrationPlan: plan)
/// ```
///
/// A store at version 1 goes through 2, then 3, each step one atomic batch;
/// a store at a model the plan does not list is migrated straight to the
/// last version by inference.
public struct MigrationPlan: Sendable {
    /// The model versions, oldest first; the last is the app's model.
    public let versions: [ModelVersion]
    /// The stages given to the plan; a step between two versions that none joins is inferred.
    public let stages: [MigrationStage]

    /// Throws ``StrataError/Code/invalidArgument`` when versions repeat an
    /// identifier or a model, or a stage names versions that do not follow
    /// each other in the list.
    public init(versions: [ModelVersion], stages: [MigrationStage] = []) throws(StrataError) {
        guard !versions.isEmpty, Set(versions.map(\.identifier)).count == versions.count,
              Set(versions.map(\.model.schema)).count == versions.count else {
            throw StrataError(.invalidArgument, "a migration plan needs versions with distinct identifiers and distinct models")
        }
        for stage in stages {
            guard let i = versions.firstIndex(where: { $0.identifier == stage.from }), i + 1 < versions.count,
                  versions[i + 1].identifier == stage.to else {
                throw StrataError(.invalidArgument, "stage \(stage.from) → \(stage.to) does not join two consecutive versions of the plan")
            }
        }
        self.versions = versions
        self.stages = stages
    }

    /// Migrates the store in `directory` up to the version `identifier` (and
    /// no further), then closes it: for tests of each step.
    ///
    /// ```swift
    /// try plan.migrate(storeAt: path, upTo: "2")
    /// ```
    public func migrate(storeAt directory: String, upTo identifier: String, options: StoreOptions = StoreOptions()) throws(StrataError) {
        guard let last = versions.firstIndex(where: { $0.identifier == identifier }) else {
            throw StrataError(.invalidArgument, "the plan has no version \(identifier)")
        }
        let partial = try MigrationPlan(versions: Array(versions[...last]), stages: stages.filter { stage in
            versions[...last].contains { $0.identifier == stage.to }
        })
        let coordinator = PersistentStoreCoordinator(model: versions[last].model)
        try coordinator.addPersistentStore(.log, directory: directory, options: options, migrationPlan: partial)
        try coordinator.close()
    }

    /// The custom stage into version `identifier` from the one before, if any.
    func customStage(from: String, to: String) -> MigrationStage? {
        stages.first { $0.from == from && $0.to == to && $0.isCustom }
    }
}
