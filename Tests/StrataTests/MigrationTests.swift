import Foundation
@testable import Strata
import StrataStore
import Synchronization
import Testing

// Classes for the migration models: an entity's class is looked up by model,
// so every version below uses the same two (and reads properties by name).
final class MNote: ManagedObject {
    @Attribute("views") var views: Int
}
final class MFolder: ManagedObject {}
final class MAttachment: ManagedObject {}

/// Model evolution: a store written with one model opens with a later one
/// when the change can be inferred (Core Data's lightweight set), rewriting
/// nothing but added indexes; older records are upgraded as they are read.
/// A change that cannot be inferred is refused with the differences, and
/// leaves the store as it was.
@Suite struct MigrationTests {
    /// Version 1: folders holding notes; `title` and `body` replace those
    /// attributes, `replacingNote` all three.
    static func v1(
        title: PropertyDescription = .attribute("title", .string), body: PropertyDescription = .attribute("body", .string, optional: true),
        note: [PropertyDescription] = [], folder: [PropertyDescription] = [], noteIndexes: [IndexDescription] = [],
        noteUniqueness: [[String]] = [], replacingNote: [PropertyDescription]? = nil, folderName: String = "Folder",
        folderRenamedFrom: String? = nil, extraEntities: [EntityDescription] = [], folderRelationship: PropertyDescription? = nil,
        noteRelationship: PropertyDescription? = nil
    ) -> ManagedObjectModel {
        let noteProperties = replacingNote ?? [title, body, .attribute("views", .integer64, defaultValue: .integer(0))]
        // MNote declares `views` an Int: a version where it is not names no
        // class (the model checks a class against its entity).
        let viewsIsAnInteger = noteProperties.contains { property in
            if case .attribute(let views) = property { views.name == "views" && [.integer16, .integer32, .integer64].contains(views.type) && !views.isOptional } else { false }
        }
        return try! ManagedObjectModel(entities: [
            EntityDescription(name: folderName, managedObjectClass: MFolder.self, properties: [
                .attribute("name", .string),
                folderRelationship ?? .toMany("notes", "Note", inverse: "folder"),
            ] + folder, renamedFrom: folderRenamedFrom),
            EntityDescription(name: "Note", managedObjectClass: viewsIsAnInteger ? MNote.self : ManagedObject.self, properties: noteProperties + [
                noteRelationship ?? .toOne("folder", folderName, inverse: "notes"),
            ] + note, indexes: noteIndexes, uniquenessConstraints: noteUniqueness),
        ] + extraEntities)
    }

    static func open(_ directory: TemporaryDirectory, _ model: ManagedObjectModel, readOnly: Bool = false) throws -> PersistentStoreCoordinator {
        let coordinator = PersistentStoreCoordinator(model: model)
        var options = testStoreOptions()
        options.readOnly = readOnly
        try coordinator.addPersistentStore(.log, directory: directory.path + "/store", options: options)
        return coordinator
    }

    /// Two folders and five notes: note i is titled "N<i>", has `i` views,
    /// a body unless i is even, and lies in folder A (i < 3) or B.
    static func seed(_ directory: TemporaryDirectory, model: ManagedObjectModel = v1(), duplicateTitle: Bool = false) throws {
        let coordinator = try open(directory, model)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            let folders = ["A", "B"].map { name -> ManagedObject in
                let folder = ManagedObject(entity: model.entity(named: "Folder")!, insertInto: context)
                folder.setValue(name, forKey: "name")
                return folder
            }
            for i in 0..<5 {
                let note = MNote(context: context)
                note.setValue(duplicateTitle && i == 4 ? "N0" : "N\(i)", forKey: "title")
                note.setValue(i % 2 == 0 ? nil : "body \(i)", forKey: "body")
                note.views = i
                note.setValue(folders[i < 3 ? 0 : 1], forKey: "folder")
            }
            try context.save()
        }
        try coordinator.close()
    }

    /// Every note as "title|views|folder name", sorted, read through `model`.
    static func notes(_ coordinator: PersistentStoreCoordinator, title: String = "title", folder: String = "folder") throws -> [String] {
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        return try context.performAndWait { () throws in
            try context.fetch(FetchRequest<MNote>()).map { note in
                let folderValue = note.value(forKey: folder)
                let folderObject = (folderValue as? ManagedObject) ?? (folderValue as? Set<ManagedObject>)?.first
                return "\(note.value(forKey: title) as? String ?? "-")|\(note.views)|\(folderObject?.value(forKey: "name") as? String ?? "-")"
            }.sorted()
        }
    }

    static let seeded = ["N0|0|A", "N1|1|A", "N2|2|A", "N3|3|B", "N4|4|B"]

    static func inspect(_ directory: TemporaryDirectory) throws -> ObjectStoreInspector {
        try ObjectStoreInspector(directory: directory.path + "/store")
    }

    // MARK: Inferred changes

    /// Adding an attribute (required, with a default) and an entity whose
    /// name sorts first — which moves every other entity's position in the
    /// model — opens without rewriting a record: the old records read with
    /// the default, relationships still resolve, new objects save beside the
    /// old ones, and it all survives a reopen.
    @Test func addingAnAttributeAndAnEntityRewritesNothing() throws {
        let directory = TemporaryDirectory()
        try Self.seed(directory)
        let attachment = EntityDescription(name: "Attachment", managedObjectClass: MAttachment.self, properties: [.attribute("file", .string)])
        let v2 = Self.v1(note: [.attribute("pinned", .bool, defaultValue: .bool(true))], extraEntities: [attachment])
        #expect(v2.entity(named: "Note")!.index != Self.v1().entity(named: "Note")!.index)
        let coordinator = try Self.open(directory, v2)
        #expect(try Self.notes(coordinator) == Self.seeded)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            let notes = try context.fetch(FetchRequest<MNote>(predicate: #Predicate { $0.views >= 3 }))
            #expect(notes.count == 2)
            #expect(notes.allSatisfy { $0.value(forKey: "pinned") as? Bool == true })
            let note = MNote(context: context)
            note.setValue("N5", forKey: "title")
            note.views = 5
            note.setValue(false, forKey: "pinned")
            let file = MAttachment(context: context)
            file.setValue("a.png", forKey: "file")
            try context.save()
        }
        // Nothing was rewritten: the seven old records wait for their upgrade.
        let inspector = try Self.inspect(directory)
        let summary = inspector.summary()
        // Keys as stored still name the entities they were stored under.
        var described: [String] = []
        inspector.contents.forEachKey(prefix: [0x6F]) { described.append(inspector.describeKey($0).split(separator: "/")[0].description) }
        #expect(described.sorted() == ["Attachment", "Folder", "Folder", "Note", "Note", "Note", "Note", "Note", "Note"])
        #expect(summary.recordsAwaitingUpgrade == 7)
        #expect(summary.schemaGenerations.count == 2)
        try coordinator.close()

        let reopened = try Self.open(directory, v2)
        defer { try? reopened.close() }
        #expect(try Self.notes(reopened) == Self.seeded + ["N5|5|-"])
        let again = ManagedObjectContext(.privateQueue, coordinator: reopened)
        try again.performAndWait { () throws in
            let pinned = try again.fetch(FetchRequest<MNote>()).filter { $0.value(forKey: "pinned") as? Bool == true }
            #expect(pinned.count == 5)
            #expect(try again.count(for: FetchRequest<MAttachment>()) == 1)
        }
        let check = try Self.inspect(directory).verifyRecords()
        #expect(check.problems.isEmpty, "\(check.problems)")
    }

    /// Renames follow Core Data's canonical-name rule: every later version
    /// names the *first* name, so a store of version 1 migrates straight to
    /// version 3 and a store of version 2 does too, to the same objects.
    /// Version 2 renames `title` to `heading`; version 3 renames it again to
    /// `subject` and the entity Folder to Notebook.
    @Test func renamesMigrateFromEveryEarlierVersion() throws {
        func v2() -> ManagedObjectModel {
            Self.v1(title: .attribute("heading", .string, renamedFrom: "title"))
        }
        func v3() -> ManagedObjectModel {
            Self.v1(replacingNote: [
                .attribute("views", .integer64, defaultValue: .integer(0)),
                .attribute("subject", .string, renamedFrom: "title"),
            ], folderName: "Notebook", folderRenamedFrom: "Folder")
        }
        let stepwise = TemporaryDirectory(), direct = TemporaryDirectory()
        try Self.seed(stepwise)
        try Self.seed(direct)
        do {
            let at2 = try Self.open(stepwise, v2())
            #expect(try Self.notes(at2, title: "heading") == Self.seeded)
            try at2.close()
        }
        for directory in [stepwise, direct] {
            let at3 = try Self.open(directory, v3())
            #expect(try Self.notes(at3, title: "subject") == Self.seeded)
            try at3.close()
            let check = try Self.inspect(directory).verifyRecords()
            #expect(check.problems.isEmpty, "\(check.problems)")
        }
        #expect(try Self.inspect(stepwise).summary().schemaGenerations.count == 3)
    }

    /// A to-one relationship may become to-many (its object becomes the
    /// set's one member); an optional attribute may become required when it
    /// has a default, which the objects that held none get.
    @Test func toOneBecomesToManyAndRequiredGetsItsDefault() throws {
        let directory = TemporaryDirectory()
        try Self.seed(directory)
        let v2 = Self.v1(body: .attribute("body", .string, defaultValue: .string("(empty)")), folderRelationship: .toMany("notes", "Note", inverse: "folder"), noteRelationship: .toMany("folder", "Folder", inverse: "notes"))
        let coordinator = try Self.open(directory, v2)
        defer { try? coordinator.close() }
        #expect(try Self.notes(coordinator) == Self.seeded)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            let bodies = try context.fetch(FetchRequest<MNote>()).map { $0.value(forKey: "body") as? String ?? "nil" }.sorted()
            #expect(bodies == ["(empty)", "(empty)", "(empty)", "body 1", "body 3"])
            // The relationship now holds sets, and saves as one.
            let note = try context.fetch(FetchRequest<MNote>(predicate: #Predicate { $0.views == 0 }))[0]
            let folders = try context.fetch(FetchRequest<MFolder>())
            note.setValue(Set(folders.map { $0 as ManagedObject }), forKey: "folder")
            try context.save()
        }
        let check = try Self.inspect(directory).verifyRecords()
        #expect(check.problems.isEmpty, "\(check.problems)")
    }

    /// An attribute that becomes required without a default migrates only
    /// when every stored object holds a value (Core Data's rule); otherwise
    /// the error names the property and the objects, and the store is untouched.
    @Test func requiredWithoutDefaultNeedsEveryObjectToHoldAValue() throws {
        let directory = TemporaryDirectory()
        try Self.seed(directory)
        let strict = Self.v1(body: .attribute("body", .string))
        let error = #expect(throws: StrataError.self) { try Self.open(directory, strict) }
        #expect(error?.code == .modelMismatch)
        #expect(error?.modelDifferences.map(\.description) == ["Note.body: became required — not inferable: 3 stored objects hold no value; give it a default value, or fill them in first"])
        // Untouched: version 1 still opens, with one generation.
        let coordinator = try Self.open(directory, Self.v1())
        #expect(try Self.notes(coordinator) == Self.seeded)
        try coordinator.close()
        #expect(try Self.inspect(directory).summary().schemaGenerations.count == 1)
        // An optional title every note holds may become required at once.
        let titled = TemporaryDirectory()
        try Self.seed(titled, model: Self.v1(title: .attribute("title", .string, optional: true)))
        let required = try Self.open(titled, Self.v1())
        #expect(try Self.notes(required) == Self.seeded)
        try required.close()
        #expect(try Self.inspect(titled).summary().schemaGenerations.count == 1)
    }

    // MARK: Indexes

    /// An added index is built at open, in the migration's batch, and
    /// queries read it; a uniqueness constraint the stored objects break is
    /// refused with the objects that share values, leaving the store as it was.
    @Test func addedIndexesAreBuiltAndUniquenessIsChecked() throws {
        let directory = TemporaryDirectory()
        try Self.seed(directory, duplicateTitle: true)
        let unique = Self.v1(noteUniqueness: [["title"]])
        let error = #expect(throws: StrataError.self) { try Self.open(directory, unique) }
        #expect(error?.code == .constraintConflict)
        #expect(error?.constraintConflicts.count == 1)
        #expect(error?.constraintConflicts.first?.values == [.string("N0")])

        let indexed = Self.v1(noteIndexes: [IndexDescription("views")])
        let coordinator = try Self.open(directory, indexed)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            let request = FetchRequest<MNote>(predicate: #Predicate { $0.views == 3 })
            #expect(try context.explain(request).index != nil)
            #expect(try context.fetch(request).map(\.views) == [3])
        }
        try coordinator.close()
        #expect(try Self.inspect(directory).verifyRecords().problems.isEmpty)
        // Replacing it by another deletes its entries and builds the other's.
        // (Going back to version 1 itself would be refused: a model the
        // store has already moved past reads as an older application.)
        try Self.open(directory, Self.v1(noteIndexes: [IndexDescription("title")])).close()
        let check = try Self.inspect(directory).verifyRecords()
        #expect(check.problems.isEmpty, "\(check.problems)")
        #expect(try Self.inspect(directory).summary().entities.flatMap(\.indexes).map(\.attributes) == [["title"]])
    }

    /// A removed entity's objects are deleted with the migration.
    @Test func removingAnEntityDeletesItsObjects() throws {
        let directory = TemporaryDirectory()
        let attachment = { EntityDescription(name: "Attachment", managedObjectClass: MAttachment.self, properties: [.attribute("file", .string)]) }
        let withAttachments = Self.v1(extraEntities: [attachment()])
        try Self.seed(directory, model: withAttachments)
        do {
            let coordinator = try Self.open(directory, withAttachments)
            let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
            try context.performAndWait { () throws in
                MAttachment(context: context).setValue("a", forKey: "file")
                try context.save()
            }
            try coordinator.close()
        }
        let coordinator = try Self.open(directory, Self.v1())
        #expect(try Self.notes(coordinator) == Self.seeded)
        try coordinator.close()
        let inspector = try Self.inspect(directory)
        #expect(inspector.summary().entities.map(\.entity) == ["Folder", "Note"])
        let check = try inspector.verifyRecords()
        #expect(check.problems.isEmpty, "\(check.problems)")
    }

    // MARK: Refusals

    /// A change no inference handles lists every difference, the one that
    /// blocks marked with why, and leaves the store untouched.
    @Test func aChangeThatCannotBeInferredListsTheDifferences() throws {
        let directory = TemporaryDirectory()
        try Self.seed(directory)
        let retyped = Self.v1(replacingNote: [
            .attribute("title", .string),
            .attribute("views", .string),
        ])
        let error = #expect(throws: StrataError.self) { try Self.open(directory, retyped) }
        #expect(error?.code == .modelMismatch)
        let differences = error?.modelDifferences ?? []
        #expect(differences.filter { !$0.isInferable }.map(\.property) == ["views"])
        #expect(differences.contains { $0.property == "body" && $0.change == .propertyRemoved && $0.isInferable })
        #expect(error?.description.contains("Note.views: type changed from integer64 to string — not inferable") == true)
        let coordinator = try Self.open(directory, Self.v1())
        #expect(try Self.notes(coordinator) == Self.seeded)
        try coordinator.close()
    }

    /// A store migrated by a newer version of the application is refused by
    /// the older one; a read-only open cannot migrate.
    @Test func newerStoresAndReadOnlyOpensAreRefused() throws {
        let directory = TemporaryDirectory()
        try Self.seed(directory)
        let v2 = Self.v1(note: [.attribute("pinned", .bool, defaultValue: .bool(false))])
        let readOnly = #expect(throws: StrataError.self) { try Self.open(directory, v2, readOnly: true) }
        #expect(readOnly?.code == .modelMismatch)
        try Self.open(directory, v2).close()
        let older = #expect(throws: StrataError.self) { try Self.open(directory, Self.v1()) }
        #expect(older?.code == .modelMismatch)
        #expect(older?.message.contains("newer version") == true)
    }
}

extension MigrationTests {
    /// Old records can be rewritten at the current generation, in bounded
    /// batches, without changing what anyone reads; compaction does it first.
    @Test func upgradingStoredRecordsRewritesOnlyOldOnes() throws {
        let directory = TemporaryDirectory()
        try Self.seed(directory)
        let attachment = EntityDescription(name: "Attachment", managedObjectClass: MAttachment.self, properties: [.attribute("file", .string)])
        let v2 = Self.v1(note: [.attribute("pinned", .bool, defaultValue: .bool(true))], extraEntities: [attachment])
        let coordinator = try Self.open(directory, v2)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        // A note updated after the migration is already current.
        try context.performAndWait { () throws in
            let note = try context.fetch(FetchRequest<MNote>(predicate: #Predicate { $0.views == 4 }))[0]
            note.setValue(false, forKey: "pinned")
            try context.save()
        }
        var reported: [Int] = []
        #expect(try coordinator.upgradeStoredRecords(batchSize: 2) { reported.append($0) } == 6)
        #expect(reported == [2, 4, 6])  // the two folders; then the four old notes, two by two
        #expect(try Self.inspect(directory).summary().recordsAwaitingUpgrade == 0)
        #expect(try coordinator.upgradeStoredRecords() == 0)
        #expect(try Self.notes(coordinator) == Self.seeded)
        try context.performAndWait { () throws in
            let pinned = try context.fetch(FetchRequest<MNote>()).map { $0.value(forKey: "pinned") as? Bool }
            #expect(pinned.filter { $0 == true }.count == 4)
            // The versions did not move: the context's copies save without conflict.
            let note = try context.fetch(FetchRequest<MNote>(predicate: #Predicate { $0.views == 1 }))[0]
            note.views = 10
            try context.save()
        }
        try coordinator.compactStore()
        try coordinator.close()
        let check = try Self.inspect(directory).verifyRecords()
        #expect(check.problems.isEmpty, "\(check.problems)")
    }
}

extension MigrationTests {
    /// A batch update patches records where they lie: one of an older
    /// schema is patched as the current schema reads it (upgraded first),
    /// and written under the current generation.
    @Test func aBatchUpdatePatchesRecordsOfAnOlderSchema() throws {
        let directory = TemporaryDirectory()
        try Self.seed(directory)
        let v2 = { Self.v1(note: [.attribute("pinned", .bool, defaultValue: .bool(true))]) }
        let coordinator = try Self.open(directory, v2())
        // The five notes are of the schema before (the folders did not change).
        let awaiting = try Self.inspect(directory).summary().recordsAwaitingUpgrade
        #expect(awaiting == 5, "\(awaiting)")
        let result = try coordinator.execute(BatchUpdateRequest<MNote>(where: #Predicate { $0.views >= 2 }, set: ["body": .string("patched")]))
        #expect(result.updatedCount == 3)
        func bodies(_ coordinator: PersistentStoreCoordinator) throws -> [String] {
            let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
            return try context.performAndWait { () throws in
                try context.fetch(FetchRequest<MNote>()).map { note in
                    "\(note.views)|\(note.value(forKey: "body") as? String ?? "-")|\(note.value(forKey: "pinned") as? Bool == true)"
                }.sorted()
            }
        }
        let expected = ["0|-|true", "1|body 1|true", "2|patched|true", "3|patched|true", "4|patched|true"]
        #expect(try bodies(coordinator) == expected)
        #expect(try Self.notes(coordinator) == Self.seeded)
        try coordinator.close()
        // The three patched records are of the current generation now.
        let stillAwaiting = try Self.inspect(directory).summary().recordsAwaitingUpgrade
        #expect(stillAwaiting == 2, "\(stillAwaiting)")
        let reopened = try Self.open(directory, v2())
        #expect(try bodies(reopened) == expected)
        try reopened.close()
        let check = try Self.inspect(directory).verifyRecords()
        #expect(check.problems.isEmpty, "\(check.problems)")
    }
}

extension MigrationTests {
    /// A migration is one atomic batch: a write, a sync or a short write
    /// failing at any of its calls leaves a store that is at the old model
    /// or the new, never between — an old-model open either works or is
    /// refused as newer, a new-model open always reads every object, and
    /// verification finds nothing wrong.
    @Test(arguments: [FaultInjectingFileSystem.Operation.write, .sync])
    func aFailingMigrationLeavesTheOldModelOrTheNew(operation: FaultInjectingFileSystem.Operation) throws {
        let seeded = TemporaryDirectory()
        try Self.seed(seeded)
        let v2 = { Self.v1(note: [.attribute("pinned", .bool, defaultValue: .bool(true))], noteIndexes: [IndexDescription("views")]) }
        var failures = 0, call = 1
        while call < 40 {
            let directory = TemporaryDirectory("\(#function)\(call)")
            try FileManager.default.copyItem(atPath: seeded.path + "/store", toPath: directory.path + "/store")
            let disk = FaultInjectingFileSystem()
            disk.inject(operation == .write && call % 2 == 0 ? .shortWrite : .error(EIO), on: operation, atCall: call)
            var options = testStoreOptions()
            options.syncMode = .always
            options.fileSystem = disk
            let coordinator = PersistentStoreCoordinator(model: v2())
            do {
                try coordinator.addPersistentStore(.log, directory: directory.path + "/store", options: options)
                try coordinator.close()
            } catch {
                failures += 1
            }
            let fired = disk.injectedFaultCount > 0
            // At the old model, or the new: v1 opens or is refused as newer.
            do {
                try Self.open(directory, Self.v1()).close()
            } catch let error as StrataError {
                #expect(error.code == .modelMismatch && error.message.contains("newer version"), "call \(call): \(error)")
            }
            let reopened = try Self.open(directory, v2())
            #expect(try Self.notes(reopened) == Self.seeded, "call \(call)")
            try reopened.close()
            let check = try Self.inspect(directory).verifyRecords()
            #expect(check.problems.isEmpty, "call \(call): \(check.problems)")
            if !fired { break }  // past the migration's last call
            call += 1
        }
        #expect(failures > 0 && call > 1)
    }
}

extension MigrationTests {
    /// The engine's own compaction — the background one, or a compaction
    /// not preceded by `upgradeStoredRecords` — upgrades the old records it
    /// copies (``StoredSchemas/compactionRewriter``): none awaits its
    /// upgrade after, and every value reads as before.
    @Test func theEnginesCompactionUpgradesTheRecordsItCopies() throws {
        let directory = TemporaryDirectory()
        try Self.seed(directory)
        do {
            let coordinator = try Self.open(directory, Self.v1())
            try coordinator.compactStore()  // the seven records, in a segment, all of generation 0
            try coordinator.close()
        }
        let v2 = Self.v1(note: [.attribute("pinned", .bool, defaultValue: .bool(true))])
        let coordinator = try Self.open(directory, v2)
        // The five notes (the folders' layout did not change: they read as they are).
        let before = try Self.inspect(directory).summary()
        #expect(before.recordsAwaitingUpgrade == 5)
        #expect(before.recordsPerFile.map(\.records) == [[7, 0]], "\(before.recordsPerFile)")  // one segment
        try coordinator.currentStore().records.compact()  // the engine's, alone
        #expect(try Self.notes(coordinator) == Self.seeded)
        try coordinator.close()
        let inspector = try Self.inspect(directory)
        #expect(inspector.summary().recordsAwaitingUpgrade == 0)
        #expect(inspector.summary().schemaGenerations.map(\.records) == [2, 5])
        #expect(inspector.summary().recordsPerFile.map(\.records) == [[2, 5]])
        #expect(inspector.summary().recordsPerFile.map(\.file) != before.recordsPerFile.map(\.file))
        let check = try inspector.verifyRecords()
        #expect(check.problems.isEmpty, "\(check.problems)")
        let reopened = try Self.open(directory, v2)
        #expect(try Self.notes(reopened) == Self.seeded)
        try reopened.close()
    }
}

extension MigrationTests {
    /// A record, or a schema history, in a format newer than this build
    /// knows is refused as written by a newer Strata
    /// (``StrataError/Code/unsupportedFormat``), not reported as corrupt: the
    /// store is sound, the application is old.
    @Test func newerRecordAndHistoryFormatsAreRefusedAsNewer() throws {
        let directory = TemporaryDirectory()
        try Self.seed(directory)
        let path = directory.path + "/store"
        let note = Self.v1().entity(named: "Note")!
        do {
            let engine = try StrataStore(directory: path, options: testStoreOptions())
            let first = try #require(try engine.scan(prefix: RecordCoding.prefix(of: note), limit: 1).first)
            var batch = WriteBatch()
            batch.put(first.key, [3] + first.value.dropFirst())
            _ = try engine.write(batch)
            try engine.close()
        }
        let coordinator = try Self.open(directory, Self.v1())
        let error = #expect(throws: StrataError.self) { _ = try Self.notes(coordinator) }
        #expect(error?.code == .unsupportedFormat, "\(String(describing: error))")
        try coordinator.close()
        // A migration reading it (an index build) says the same (review).
        let indexing = #expect(throws: StrataError.self) { try Self.open(directory, Self.v1(noteIndexes: [IndexDescription("views")])) }
        #expect(indexing?.code == .unsupportedFormat, "\(String(describing: indexing))")

        do {
            let engine = try StrataStore(directory: path, options: testStoreOptions())
            var batch = WriteBatch()
            batch.put(StoredSchemas.historyKey, [3, 1])
            _ = try engine.write(batch)
            try engine.close()
        }
        let refused = #expect(throws: StrataError.self) { try Self.open(directory, Self.v1()) }
        #expect(refused?.code == .unsupportedFormat, "\(String(describing: refused))")
        let inspecting = #expect(throws: StrataError.self) { try Self.inspect(directory) }
        #expect(inspecting?.code == .unsupportedFormat, "\(String(describing: inspecting))")
    }
}

/// Cases a review found (each failed before its fix).
extension MigrationTests {
    static func bodies(_ coordinator: PersistentStoreCoordinator, key: String) throws -> [String] {
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        return try context.performAndWait { () throws in
            try context.fetch(FetchRequest<MNote>()).map { note in
                "\(note.views):\(note.value(forKey: key).map { "\($0)" } ?? "nil")"
            }.sorted()
        }
    }

    /// An indexed attribute that becomes required with a default: its
    /// records read the default, so its index entries are made again from it…
    @Test func aFilledIndexedAttributeHasItsEntriesMadeAgain() throws {
        let directory = TemporaryDirectory()
        let v1 = Self.v1(noteIndexes: [IndexDescription("body")])
        try Self.seed(directory, model: v1)
        let v2 = Self.v1(body: .attribute("body", .string, defaultValue: .string("(empty)")), noteIndexes: [IndexDescription("body")])
        try Self.open(directory, v2).close()
        let check = try Self.inspect(directory).verifyRecords()
        #expect(check.problems.isEmpty, "\(check.problems)")
    }

    /// …and a unique one is checked against the values it now holds.
    @Test func aFilledUniqueAttributeIsCheckedForDuplicates() throws {
        let directory = TemporaryDirectory()
        let v1 = Self.v1(noteUniqueness: [["body"]])
        try Self.seed(directory, model: v1)
        let v2 = Self.v1(body: .attribute("body", .string, defaultValue: .string("(empty)")), noteUniqueness: [["body"]])
        // Three notes would share "(empty)".
        let error = #expect(throws: StrataError.self) { try Self.open(directory, v2).close() }
        #expect(error?.code == .constraintConflict)
    }

    /// Deleting an object after such a fill removes its entry: a fetch
    /// through the index finds the others and nothing dangling.
    @Test func deletingAfterAFillLeavesNoDanglingEntry() throws {
        let directory = TemporaryDirectory()
        let v1 = Self.v1(noteIndexes: [IndexDescription("body")])
        try Self.seed(directory, model: v1)
        let v2 = Self.v1(body: .attribute("body", .string, defaultValue: .string("(empty)")), noteIndexes: [IndexDescription("body")])
        let coordinator = try Self.open(directory, v2)
        defer { try? coordinator.close() }
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            for note in try context.fetch(FetchRequest<MNote>()) where note.views == 0 { context.delete(note) }
            try context.save()
        }
        let entity = v2.entity(named: "Note")!
        let plan = QueryPlan(index: entity.indexes[0], indexNumber: 0, ranges: [KeyRange(prefix: IndexKeyCoding.prefix(of: entity, index: 0))],
                             isExact: false, text: .literal(""))
        var seen = 0
        try coordinator.forEachStored(of: entity, in: plan) { _ in seen += 1 }
        #expect(seen == 4)
    }

    /// A later change of default (the layout's hash unchanged) does not
    /// change what older generations' records read: they got the default
    /// of the version they were migrated to.
    @Test func aChangedDefaultDoesNotRewriteHistory() throws {
        let directory = TemporaryDirectory()
        try Self.seed(directory)
        let v2 = Self.v1(note: [.attribute("pinned", .bool, defaultValue: .bool(true))])
        let c2 = try Self.open(directory, v2)
        #expect(try Self.bodies(c2, key: "pinned") == ["0:true", "1:true", "2:true", "3:true", "4:true"])
        try c2.close()
        let v3 = Self.v1(note: [.attribute("pinned", .bool, defaultValue: .bool(false))])
        #expect(v3.versionHash == v2.versionHash)
        let c3 = try Self.open(directory, v3)
        defer { try? c3.close() }
        // Stored objects held `true`; a default change must not alter them.
        #expect(try Self.bodies(c3, key: "pinned") == ["0:true", "1:true", "2:true", "3:true", "4:true"])
    }

    /// An index on a removed attribute whose name a renamed one takes over
    /// is built again, from the renamed attribute's values.
    @Test func anIndexOnANameTakenOverByARenamedAttributeIsRebuilt() throws {
        let directory = TemporaryDirectory()
        let v1 = Self.v1(noteIndexes: [IndexDescription("body")])
        try Self.seed(directory, model: v1)
        // body removed; title renamed to body.
        let v2 = Self.v1(noteIndexes: [IndexDescription("body")], replacingNote: [
            .attribute("body", .string, optional: true, renamedFrom: "title"),
            .attribute("views", .integer64, defaultValue: .integer(0)),
        ])
        try Self.open(directory, v2).close()
        let check = try Self.inspect(directory).verifyRecords()
        #expect(check.problems.isEmpty, "\(check.problems)")
    }

    /// A later version may drop a renaming identifier once every store has
    /// moved past it: the attribute of the same name keeps its values.
    @Test func droppingARenamingIdentifierKeepsTheValues() throws {
        let directory = TemporaryDirectory()
        try Self.seed(directory)
        let v2 = Self.v1(body: .attribute("text", .string, optional: true, renamedFrom: "body"))
        try Self.open(directory, v2).close()
        let v3 = Self.v1(body: .attribute("text", .string, optional: true))
        let c3 = try Self.open(directory, v3)
        defer { try? c3.close() }
        #expect(try Self.bodies(c3, key: "text") == ["0:nil", "1:body 1", "2:nil", "3:body 3", "4:nil"])
    }

    /// Integers may widen (every width is stored alike); they may not narrow.
    @Test func integersMayWidenNotNarrow() throws {
        func views(_ type: AttributeType) -> ManagedObjectModel {
            Self.v1(replacingNote: [
                .attribute("title", .string), .attribute("body", .string, optional: true),
                .attribute("views", type, defaultValue: .integer(0)),
            ])
        }
        let small = TemporaryDirectory()
        try Self.seed(small, model: views(.integer16))
        let widened = try Self.open(small, views(.integer64))
        #expect(try Self.notes(widened) == Self.seeded)
        try widened.close()
        let error = #expect(throws: StrataError.self) { try Self.open(small, views(.integer32)) }
        #expect(error?.code == .modelMismatch)
        #expect(error?.modelDifferences.first { !$0.isInferable }?.change == .typeChanged(from: "integer64", to: "integer32"))
    }
}

/// Versioned models and custom stages.
extension MigrationTests {
    /// Version 2 turns `views` into a string ("seen N times"): not inferable,
    /// so a custom stage reads each old value beside the new and sets it.
    static func stringViews(_ identifier: String = "2", extra: [PropertyDescription] = []) throws -> ModelVersion {
        ModelVersion(identifier, model: Self.v1(replacingNote: [
            .attribute("title", .string),
            .attribute("body", .string, optional: true),
            .attribute("views", .string),
        ] + extra))
    }

    static func viewsToText(progress: (@Sendable (Int, Int) -> Void)? = nil) -> MigrationStage {
        .custom(from: "1", to: "2", batchSize: 2, progress: progress) { objects in
            for object in objects where object.entity.name == "Note" {
                guard case .integer(let n)? = object.oldValue(forKey: "views") else { continue }
                try object.setValue(.string("seen \(n) times"), forKey: "views")
                // Old relationships hold the new model's IDs.
                guard case .object(let folder)? = object.oldValue(forKey: "folder") else { continue }
                #expect(folder.entity === object.entity.destinations[object.entity.propertyIndex["folder"]!])
            }
        }
    }

    static func texts(_ coordinator: PersistentStoreCoordinator) throws -> [String] {
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        return try context.performAndWait { () throws in
            try context.fetch(FetchRequest<ManagedObject>(entityName: "Note")).map { note in
                let folder = (note.value(forKey: "folder") as? ManagedObject)?.value(forKey: "name") as? String ?? "-"
                return "\(note.value(forKey: "title") as? String ?? "-")|\(note.value(forKey: "views") as? String ?? "-")|\(folder)"
            }.sorted()
        }
    }

    static let texts = ["N0|seen 0 times|A", "N1|seen 1 times|A", "N2|seen 2 times|A", "N3|seen 3 times|B", "N4|seen 4 times|B"]

    /// A custom stage sees old and new values together, runs in batches
    /// with progress, and commits with the switch to the new version; the
    /// store then opens with the new model, every object rewritten.
    @Test func aCustomStageRewritesEveryObjectAtOnce() throws {
        let directory = TemporaryDirectory()
        try Self.seed(directory)
        let reports = Mutex<[[Int]]>([])
        let v2 = try Self.stringViews()
        let plan = try MigrationPlan(versions: [ModelVersion("1", model: Self.v1()), v2], stages: [
            Self.viewsToText { done, total in reports.withLock { $0.append([done, total]) } },
        ])
        let coordinator = PersistentStoreCoordinator(model: v2.model)
        try coordinator.addPersistentStore(.log, directory: directory.path + "/store", options: testStoreOptions(), migrationPlan: plan)
        #expect(try Self.texts(coordinator) == Self.texts)
        try coordinator.close()
        // Two folders (one batch), then five notes two by two.
        #expect(reports.withLock { $0 } == [[2, 7], [4, 7], [6, 7], [7, 7]])
        // Each entity's records and entries moved to one new number: the
        // history stays in format 1, which engines before index numbers read.
        let engine = try StrataStore(directory: directory.path + "/store", options: testStoreOptions())
        #expect(try engine.get(StoredSchemas.historyKey)?.first == 1)
        try engine.close()
        let inspector = try Self.inspect(directory)
        #expect(inspector.summary().recordsAwaitingUpgrade == 0)
        #expect(try inspector.verifyRecords().problems.isEmpty)
        // Without the plan, the same change is refused.
        let bare = TemporaryDirectory()
        try Self.seed(bare)
        let error = #expect(throws: StrataError.self) { try Self.open(bare, try Self.stringViews().model) }
        #expect(error?.code == .modelMismatch)
    }

    /// A stage that throws, or leaves a required value unset, migrates
    /// nothing: the store stays at version 1.
    @Test func aFailingStageLeavesTheStoreAtTheOldVersion() throws {
        let directory = TemporaryDirectory()
        try Self.seed(directory)
        struct Refused: Error {}
        let v1 = ModelVersion("1", model: Self.v1())
        for stage in [
            MigrationStage.custom(from: "1", to: "2") { _ in throw Refused() },
            MigrationStage.custom(from: "1", to: "2") { _ in },  // views left unset: required
        ] {
            let v2 = try Self.stringViews()
            let plan = try MigrationPlan(versions: [v1, v2], stages: [stage])
            let coordinator = PersistentStoreCoordinator(model: v2.model)
            let error = #expect(throws: StrataError.self) {
                try coordinator.addPersistentStore(.log, directory: directory.path + "/store", options: testStoreOptions(), migrationPlan: plan)
            }
            #expect(error?.code == .invalidArgument || error?.code == .validationFailed, "\(String(describing: error))")
            // What the stage wrote before it failed is taken back.
            let summary = try Self.inspect(directory).summary()
            #expect(summary.recordsAwaitingRemoval == 0 && summary.indexEntriesAwaitingRemoval == 0, "\(summary)")
            let old = try Self.open(directory, v1.model)
            #expect(try Self.notes(old) == Self.seeded)
            try old.close()
        }
    }

    /// A plan goes through each version in turn — inferred 2 → 3 after the
    /// custom 1 → 2 — from wherever the store is; `migrate(upTo:)` stops
    /// at a version, for tests of each step.
    @Test func aPlanGoesThroughEachVersionFromWhereverTheStoreIs() throws {
        let v1 = ModelVersion("1", model: Self.v1())
        let v2 = try Self.stringViews()
        let v3 = try Self.stringViews("3", extra: [.attribute("pinned", .bool, defaultValue: .bool(true))])
        let plan = try MigrationPlan(versions: [v1, v2, v3], stages: [Self.viewsToText()])
        let stepwise = TemporaryDirectory(), direct = TemporaryDirectory()
        try Self.seed(stepwise)
        try Self.seed(direct)
        try plan.migrate(storeAt: stepwise.path + "/store", upTo: "2", options: testStoreOptions())
        do {
            let at2 = try Self.open(stepwise, v2.model)
            #expect(try Self.texts(at2) == Self.texts)
            try at2.close()
        }
        for directory in [stepwise, direct] {
            let coordinator = PersistentStoreCoordinator(model: v3.model)
            try coordinator.addPersistentStore(.log, directory: directory.path + "/store", options: testStoreOptions(), migrationPlan: plan)
            #expect(try Self.texts(coordinator) == Self.texts)
            try coordinator.close()
            #expect(try Self.inspect(directory).verifyRecords().problems.isEmpty)
        }
        #expect(throws: StrataError.self) { try MigrationPlan(versions: [v1, v2], stages: [.custom(from: "1", to: "3") { _ in }]) }
    }
}

extension MigrationTests {
    /// Per-entity version hashes tell which entities changed; the inspector
    /// counts the records each generation wrote.
    @Test func entityHashesAndGenerationCounts() throws {
        let v1 = Self.v1(), v2 = Self.v1(note: [.attribute("pinned", .bool, defaultValue: .bool(true))])
        #expect(v1.entity(named: "Folder")!.versionHash == v2.entity(named: "Folder")!.versionHash)
        #expect(v1.entity(named: "Note")!.versionHash != v2.entity(named: "Note")!.versionHash)
        let optional = Self.v1(title: .attribute("title", .string, optional: true))
        // Optionality changes no stored byte (the model hash) but is part of the entity's hash.
        #expect(optional.versionHash == v1.versionHash)
        #expect(optional.entity(named: "Note")!.versionHash != v1.entity(named: "Note")!.versionHash)

        let directory = TemporaryDirectory()
        try Self.seed(directory)
        let coordinator = try Self.open(directory, v2)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            MNote(context: context).setValue("new", forKey: "title")
            try context.save()
        }
        try coordinator.close()
        let generations = try Self.inspect(directory).summary().schemaGenerations
        #expect(generations.map(\.records) == [7, 1])
        #expect(generations.map(\.entityHashes) == [v1.entities.map(\.versionHash), v2.entities.map(\.versionHash)])
    }

    /// A refused open — a change no inference handles, a store a newer
    /// model migrated — leaves every file of the store as it was, byte for
    /// byte (before, it added the log the open started), and the store
    /// opens as before with its own model.
    @Test func aRefusedOpenLeavesTheDirectoryAsItWas() throws {
        let directory = TemporaryDirectory()
        try Self.seed(directory)
        let path = directory.path + "/store"
        func contents() throws -> [String: Data] {
            var files: [String: Data] = [:]
            for name in try FileManager.default.contentsOfDirectory(atPath: path) {
                files[name] = try Data(contentsOf: URL(fileURLWithPath: path + "/" + name))
            }
            return files
        }
        let before = try contents()
        let retyped = Self.v1(replacingNote: [.attribute("title", .string), .attribute("views", .string)])
        #expect { try Self.open(directory, retyped) } throws: { ($0 as? StrataError)?.code == .modelMismatch }
        #expect(try contents() == before)
        let coordinator = try Self.open(directory, Self.v1())
        #expect(try Self.notes(coordinator).count == 5)
        try coordinator.close()
    }

    #if DEBUG
    /// Development only: a store that cannot be migrated is made again, empty.
    @Test func aDevelopmentCoordinatorErasesAStoreItCannotMigrate() throws {
        let directory = TemporaryDirectory()
        try Self.seed(directory)
        let retyped = Self.v1(replacingNote: [.attribute("title", .string), .attribute("views", .string)])
        let coordinator = PersistentStoreCoordinator(model: retyped)
        coordinator.erasesStoreOnModelMismatch = true
        try coordinator.addPersistentStore(.log, directory: directory.path + "/store", options: testStoreOptions())
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            #expect(try context.count(for: FetchRequest<ManagedObject>(entityName: "Note")) == 0)
        }
        try coordinator.close()
        // A store it can migrate is migrated, not erased.
        let kept = TemporaryDirectory()
        try Self.seed(kept)
        let migrating = PersistentStoreCoordinator(model: Self.v1(note: [.attribute("pinned", .bool, defaultValue: .bool(true))]))
        migrating.erasesStoreOnModelMismatch = true
        try migrating.addPersistentStore(.log, directory: kept.path + "/store", options: testStoreOptions())
        #expect(try Self.notes(migrating) == Self.seeded)
        try migrating.close()
    }
    #endif
}
