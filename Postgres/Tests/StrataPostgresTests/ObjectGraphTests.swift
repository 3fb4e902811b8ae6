import Foundation
@_spi(StoreImplementation) import Strata
@testable import StrataPostgres
import Testing

final class Note: ManagedObject {
    @Attribute("title") var title: String
    @Attribute("visits") var visits: Int
    @Attribute("added") var added: Date?
    @Relationship("labels") var labels: Set<Label>
    @Relationship("shelf") var shelf: Shelf?
}

final class Label: ManagedObject {
    @Attribute("name") var name: String
    @Relationship("notes") var notes: Set<Note>
}

final class Shelf: ManagedObject {
    @Attribute("name") var name: String
    @Relationship("notes") var notes: Set<Note>
}

func notesModel() throws -> ManagedObjectModel {
    try ManagedObjectModel(entities: [
        EntityDescription(name: "Note", managedObjectClass: Note.self, properties: [
            .attribute("title", .string),
            .attribute("visits", .integer64, defaultValue: .integer(0)),
            .attribute("added", .date, optional: true),
            .toMany("labels", "Label", inverse: "notes"),
            .toOne("shelf", "Shelf", inverse: "notes"),
        ]),
        EntityDescription(name: "Label", managedObjectClass: Label.self, properties: [
            .attribute("name", .string),
            .toMany("notes", "Note", inverse: "labels"),
        ], uniquenessConstraints: [["name"]]),
        EntityDescription(name: "Shelf", managedObjectClass: Shelf.self, properties: [
            .attribute("name", .string),
            .toMany("notes", "Note", inverse: "shelf", deleteRule: .cascade),
        ]),
    ])
}

/// Strata's contexts over PostgreSQL, through the store seam: the same
/// saves, fetches, relationships, children, uniqueness and conflicts as
/// over the log store — and two coordinators (two processes) on one database.
@Suite("Contexts over PostgreSQL", .enabled(if: TestServer.isAvailable, "no PostgreSQL server (see the message above)"))
struct ObjectGraphTests {
    func makeCoordinator(_ configuration: PostgresConfiguration, _ model: ManagedObjectModel) throws -> PersistentStoreCoordinator {
        let coordinator = PersistentStoreCoordinator(model: model)
        try coordinator.addPersistentStore(try PostgresStore(configuration, model: model))
        return coordinator
    }

    @Test func savesFetchesRelationshipsAndChildren() throws {
        let model = try notesModel()
        let configuration = try TestServer.freshDatabase()
        let coordinator = try makeCoordinator(configuration, model)
        defer { try? coordinator.close() }
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try writer.performAndWait {
            let shelf = Shelf(context: writer)
            shelf.name = "Inbox"
            let swift = Label(context: writer)
            swift.name = "swift"
            let sql = Label(context: writer)
            sql.name = "it's SQL; --"
            for (title, visits) in [("Soup", 4), ("Salad", 2), ("Stew", 6), ("Bread", 8)] {
                let note = Note(context: writer)
                note.title = title
                note.visits = visits
                note.shelf = shelf
                note.labels = visits > 3 ? [swift, sql] : [sql]
            }
            try writer.save()
        }
        let reader = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try reader.performAndWait {
            var request = FetchRequest<Note>(predicate: #Predicate { $0.visits > 3 }, sortBy: [SortDescriptor(\.title)])
            request.fetchLimit = 2
            #expect(try reader.fetch(request).map(\.title) == ["Bread", "Soup"])
            #expect(try reader.count(for: FetchRequest<Note>(predicate: #Predicate { $0.visits > 3 })) == 3)
            let swift = try #require(try Label.first(in: reader, where: \.name, equals: "swift"))
            #expect(Set(swift.notes.map(\.title)) == ["Soup", "Stew", "Bread"])
            let soup = try #require(try Note.first(in: reader, where: \.title, equals: "Soup"))
            #expect(Set(soup.labels.map(\.name)) == ["swift", "it's SQL; --"])
            #expect(soup.shelf?.notes.count == 4)
            let child = ManagedObjectContext(.privateQueue, parent: reader)
            try child.performAndWait {
                let stew = try #require(try Note.first(in: child, where: \.title, equals: "Stew"))
                stew.visits = 1
                stew.labels = []
                try child.save()
            }
            try reader.save()
        }
        // A second coordinator — another process — reads what the first saved.
        let other = try makeCoordinator(configuration, model)
        defer { try? other.close() }
        let context = ManagedObjectContext(.privateQueue, coordinator: other)
        try context.performAndWait {
            let stew = try #require(try Note.first(in: context, where: \.title, equals: "Stew"))
            #expect(stew.visits == 1)
            #expect(stew.labels.isEmpty)
            // The cascade: the shelf goes, its notes with it.
            let shelf = try #require(try Shelf.first(in: context, where: \.name, equals: "Inbox"))
            context.delete(shelf)
            try context.save()
            #expect(try context.count(for: FetchRequest<Note>()) == 0)
            #expect(try context.count(for: FetchRequest<Label>()) == 2)
        }
    }

    @Test func uniquenessAndConflictsAcrossProcesses() throws {
        let model = try notesModel()
        let configuration = try TestServer.freshDatabase()
        let first = try makeCoordinator(configuration, model), second = try makeCoordinator(configuration, model)
        defer { try? first.close(); try? second.close() }
        let a = ManagedObjectContext(.privateQueue, coordinator: first)
        let id = try a.performAndWait {
            let label = Label(context: a)
            label.name = "swift"
            try a.save()
            return label.objectID
        }
        // The other process claims the same name: PostgreSQL's UNIQUE refuses it.
        let b = ManagedObjectContext(.privateQueue, coordinator: second)
        let duplicate = #expect(throws: StrataError.self) {
            try b.performAndWait {
                Label(context: b).name = "swift"
                try b.save()
            }
        }
        #expect(duplicate?.code == .constraintConflict)
        // It renames the label; then the first process, which read the old version, edits it too.
        let c = ManagedObjectContext(.privateQueue, coordinator: second)
        try c.performAndWait {
            let label = try #require(try c.existingObject(with: id) as? Label)
            label.name = "Swift"
            try c.save()
        }
        let stale = #expect(throws: StrataError.self) {
            try a.performAndWait {
                let label = try #require(try a.existingObject(with: id) as? Label)
                label.name = "SWIFT"
                try a.save()
            }
        }
        #expect(stale?.code == .mergeConflict)
        #expect(stale?.conflicts.map(\.objectID) == [id])
        let fresh = ManagedObjectContext(.privateQueue, coordinator: first)
        let name = try fresh.performAndWait { () throws in (try fresh.existingObject(with: id) as? Label)?.name }
        #expect(name == "Swift")
    }
}
