import Foundation
import StrataMacros
import StrataStore
import Testing

// The README's bookmarks, declared once each with @Entity.

@Entity(indexes: [["visits"]], uniquenessConstraints: [["url"]])
final class Bookmark: ManagedObject {
    var url: String
    var title: String?
    var visits: Int = 0
    var added: Date
    var rating: Double?
    var flags: Int16 = 3
    @Related(inverse: \Tag.bookmarks) var tags: Set<Tag>
    @Related(inverse: "bookmarks", deleteRule: .nullify) var folder: Folder?
    @Indexed var added2: Date?
    @Transient var selected = false
    /// Computed: not stored.
    var label: String { title ?? url }
}

@Entity
final class Tag: ManagedObject {
    @Unique @Attribute("name") var label: String
    @Related(inverse: "tags") var bookmarks: Set<Bookmark>
}

@Entity
final class Folder: ManagedObject {
    @Attribute(modelDefault: "title") var name: String = "Untitled"
    @Related(inverse: "folder", deleteRule: .cascade) var bookmarks: Set<Bookmark> = []
}

// The README's first example, as it is written there.

@Entity
final class Recipe: ManagedObject {
    var name: String
    var servings: Int = 1
    @Related(inverse: "recipe", deleteRule: .cascade) var ingredients: Set<Ingredient>
}
@Entity
final class Ingredient: ManagedObject {
    var name: String
    @Related(inverse: "ingredients") var recipe: Recipe?
}

// Two versions of one entity, as a store meets them across releases.

@Entity(name: "Note")
final class NoteV1: ManagedObject {
    var title: String
    var views: Int = 0
}

@Entity(name: "Note")
final class NoteV2: ManagedObject {
    @Renamed(from: "title") var heading: String
    var views: Int = 0
    var pinned: Bool = false
    @Related(inverse: "notes", destination: "Notebook") var notebook: NotebookV2?
}

@Entity(name: "Notebook")
final class NotebookV2: ManagedObject {
    var name: String
    @Related(inverse: "notebook", destination: "Note") var notes: Set<NoteV2>
}

// SwiftData's spellings of several-attribute constraints and indexes, in the body.

@Entity
final class Visit: ManagedObject {
    #Unique<Visit>([\.place, \.day], [\.token])
    #Index<Visit>([\.day, \.place])
    var day: Int
    @Attribute("code") var token: String
    var place: String
}

// Versions of a model as namespaces of @Entity classes (SwiftData's VersionedSchema).

enum LibraryV1 {
    @Entity final class Book: ManagedObject {
        var title: String
        var pages: Int = 0
    }
}

enum LibraryV2 {
    @Entity final class Book: ManagedObject {
        @Renamed(from: "title") var name: String
        var pages: Int = 0
        var size: String = "unknown"
        @Related(inverse: "books") var shelf: Shelf?
    }
    @Entity final class Shelf: ManagedObject {
        var label: String
        @Related(inverse: "shelf") var books: Set<Book>
    }
}

@Suite struct EntityModelTests {
    /// Two versions declared as namespaces of @Entity classes, and a plan
    /// through them with a custom stage: the store of version 1 opens with
    /// version 2's classes.
    @Test func versionsAsNamespacesOfDeclaredClasses() throws {
        #expect(LibraryV1.Book.entityDescription.name == "Book" && LibraryV2.Book.entityDescription.name == "Book")
        let directory = TemporaryStore()
        var options = StoreOptions()
        options.syncMode = .none
        do {
            let container = try PersistentContainer(name: "Library", model: ManagedObjectModel(LibraryV1.Book.self),
                                                    directory: directory.path, options: options, viewContext: .privateQueue)
            try container.saveAndWait { context in
                for (title, pages) in [("Dune", 612), ("Emma", 474), ("Ulysses", 730)] {
                    let book = LibraryV1.Book(context: context)
                    (book.title, book.pages) = (title, pages)
                }
            }
            try container.close()
        }
        let plan = try MigrationPlan(versions: [
            ModelVersion("1", declaring: LibraryV1.Book.self),
            ModelVersion("2", declaring: LibraryV2.Book.self, LibraryV2.Shelf.self),
        ], stages: [
            .custom(from: "1", to: "2") { objects in
                for book in objects where book.entity.name == "Book" {
                    if case .integer(let pages)? = book.oldValue(forKey: "pages") {
                        try book.setValue(.string(pages > 600 ? "long" : "short"), forKey: "size")
                    }
                }
            },
        ])
        let container = try PersistentContainer(name: "Library", model: ManagedObjectModel(LibraryV2.Book.self, LibraryV2.Shelf.self),
                                                directory: directory.path, options: options, viewContext: .privateQueue, migrationPlan: plan)
        let view = container.viewContext
        let books = try view.performAndWait { () throws in
            try LibraryV2.Book.all(in: view, sortedBy: [SortDescriptor(\.name)]).map { "\($0.name) \($0.size)" }
        }
        #expect(books == ["Dune long", "Emma short", "Ulysses long"])
        try container.close()
    }

    /// `#Unique` and `#Index` become the entity's constraints and indexes,
    /// by the model's keys, and the store keeps the constraint.
    @Test func uniqueAndIndexInTheBody() throws {
        #expect(Visit.entityDescription.uniquenessConstraints == [["place", "day"], ["code"]])
        #expect(Visit.entityDescription.indexes.filter { !$0.isUnique } == [IndexDescription(["day", "place"])])
        let container = try PersistentContainer(name: "Visits", model: ManagedObjectModel(Visit.self), directory: nil, viewContext: .privateQueue)
        try container.saveAndWait { context in
            let visit = Visit(context: context)
            (visit.day, visit.token, visit.place) = (1, "a", "home")
        }
        #expect(throws: StrataError.self) {
            try container.saveAndWait { context in
                let again = Visit(context: context)
                (again.day, again.token, again.place) = (1, "b", "home")
            }
        }
        let plan = try container.viewContext.performAndWait {
            try container.viewContext.explain(FetchRequest<Visit>(predicate: #Predicate { $0.day == 1 && $0.place == "home" }))
        }
        #expect(plan.description.contains("USING INDEX"), "\(plan)")
    }

    /// What @Entity derives is the model a user would write by hand.
    @Test func derivedModelEqualsTheHandWrittenOne() throws {
        let derived = Bookmark.entityDescription
        let written = EntityDescription(name: "Bookmark", managedObjectClass: Bookmark.self, properties: [
            .attribute("url", .string),
            .attribute("title", .string, optional: true),
            .attribute("visits", .integer64, defaultValue: .integer(0)),
            .attribute("added", .date),
            .attribute("rating", .double, optional: true),
            .attribute("flags", .integer16, defaultValue: .integer(3)),
            .toMany("tags", "Tag", inverse: "bookmarks"),
            .toOne("folder", "Folder", inverse: "bookmarks", deleteRule: .nullify),
            .attribute("added2", .date, optional: true),
        ], indexes: [IndexDescription(["visits"]), IndexDescription(["added2"])], uniquenessConstraints: [["url"]])
        #expect(derived.name == written.name)
        #expect(derived.managedObjectClass == written.managedObjectClass)
        #expect(derived.properties == written.properties)
        #expect(derived.indexes == written.indexes)
        // An explicit key is kept; the Swift name is not the model's.
        #expect(Tag.entityDescription.properties == [.attribute("name", .string), .toMany("bookmarks", "Bookmark", inverse: "tags")])
        #expect(Tag.entityDescription.indexes == [IndexDescription(["name"], isUnique: true)])
        #expect(Folder.entityDescription.properties == [
            .attribute("title", .string, defaultValue: .string("Untitled")),
            .toMany("bookmarks", "Bookmark", inverse: "folder", deleteRule: .cascade),
        ])
        #expect(NoteV2.entityDescription.name == "Note")
        #expect(NoteV2.entityDescription.properties.first == .attribute("heading", .string, renamedFrom: "title"))
        // A new description each time: two models may use the class.
        #expect(Bookmark.entityDescription !== Bookmark.entityDescription)
        _ = try ManagedObjectModel(declaring: [Bookmark.self, Tag.self, Folder.self])
        _ = try ManagedObjectModel(Bookmark.self, Tag.self, Folder.self)
    }

    /// Objects of @Entity classes go to disk and come back: attributes,
    /// defaults, both kinds of relationship with their inverses, an index
    /// and a uniqueness constraint.
    @Test func roundTripThroughDisk() throws {
        let directory = TemporaryStore()
        let model = try ManagedObjectModel(declaring: [Bookmark.self, Tag.self, Folder.self])
        var options = StoreOptions()
        options.syncMode = .none
        do {
            let container = try PersistentContainer(name: "Bookmarks", model: model, directory: directory.path, options: options, viewContext: .privateQueue)
            try container.saveAndWait { context in
                let swift = Tag(context: context)
                swift.label = "swift"
                let folder = Folder(context: context)
                #expect(folder.name == "Untitled" && folder.bookmarks.isEmpty)
                folder.name = "Reading"
                for i in 0..<5 {
                    let bookmark = Bookmark(context: context)
                    #expect(bookmark.visits == 0 && bookmark.flags == 3 && bookmark.title == nil)
                    bookmark.url = "https://example.com/\(i)"
                    bookmark.added = Date(timeIntervalSinceReferenceDate: Double(i))
                    bookmark.visits = i * 10
                    bookmark.selected = true
                    if i.isMultiple(of: 2) { bookmark.tags = [swift] }
                    bookmark.folder = folder
                }
            }
            try container.close()
        }
        let container = try PersistentContainer(name: "Bookmarks", model: model, directory: directory.path, options: options, viewContext: .privateQueue)
        let context = container.newBackgroundContext(childOfWriter: true)
        try context.performAndWait { () throws in
            let popular = try Bookmark.all(in: context, where: #Predicate { $0.visits >= 20 }, sortedBy: [SortDescriptor(\.visits, order: .reverse)])
            #expect(popular.map(\.url) == ["https://example.com/4", "https://example.com/3", "https://example.com/2"])
            #expect(popular.allSatisfy { !$0.selected })  // transient: not stored
            #expect(try context.explain(FetchRequest<Bookmark>(predicate: #Predicate { $0.visits >= 20 })).description.contains("USING INDEX (visits)"))
            let tag = try #require(try Tag.first(in: context, where: #Predicate { $0.label == "swift" }))
            #expect(Set(tag.bookmarks.map(\.url)) == ["https://example.com/0", "https://example.com/2", "https://example.com/4"])
            let folder = try #require(try Folder.first(in: context))
            #expect(folder.bookmarks.count == 5)
            // The uniqueness constraint holds.
            let twin = Bookmark(context: context)
            twin.url = "https://example.com/1"
            twin.added = Date()
            #expect(throws: StrataError.self) { try context.save() }
            context.rollback()
            let twinTag = Tag(context: context)
            twinTag.label = "swift"
            #expect(throws: StrataError.self) { try context.save() }
        }
        try container.close()
    }

    /// The README's model: a default, an inverse kept in step, a cascade.
    @Test func readmeModelWorksAsWritten() throws {
        let model = try ManagedObjectModel(declaring: [Recipe.self, Ingredient.self])
        let container = try PersistentContainer(name: "Recipes", model: model, directory: nil, viewContext: .privateQueue)
        let context = container.newBackgroundContext(childOfWriter: true)
        try context.performAndWait { () throws in
            let soup = Recipe(context: context)
            soup.name = "Soup"
            #expect(soup.servings == 1)
            let salt = Ingredient(context: context)
            salt.name = "Salt"
            salt.recipe = soup
            #expect(soup.ingredients == [salt])
            try context.save()
            context.delete(soup)
            try context.save()
            #expect(try Ingredient.count(in: context) == 0)
        }
        try container.close()
    }

    /// A store written with one @Entity version opens with the next: the
    /// renamed attribute keeps its values, the new one gets its default.
    @Test func migrationBetweenTwoDeclaredVersions() throws {
        let directory = TemporaryStore()
        var options = StoreOptions()
        options.syncMode = .none
        do {
            let container = try PersistentContainer(
                name: "Notes", model: try ManagedObjectModel(declaring: [NoteV1.self]), directory: directory.path, options: options, viewContext: .privateQueue)
            try container.saveAndWait { context in
                for title in ["a", "b"] {
                    let note = NoteV1(context: context)
                    note.title = title
                    note.views = title == "a" ? 7 : 1
                }
            }
            try container.close()
        }
        let container = try PersistentContainer(
            name: "Notes", model: try ManagedObjectModel(declaring: [NoteV2.self, NotebookV2.self]), directory: directory.path, options: options,
            viewContext: .privateQueue)
        let context = container.newBackgroundContext(childOfWriter: true)
        try context.performAndWait { () throws in
            let notes = try NoteV2.all(in: context, sortedBy: [SortDescriptor(\.heading)])
            #expect(notes.map(\.heading) == ["a", "b"])
            #expect(notes.map(\.views) == [7, 1])
            #expect(notes.allSatisfy { !$0.pinned })
            // The added entity, related across the names @Entity(name:) gave.
            let notebook = NotebookV2(context: context)
            notebook.name = "work"
            notes[0].notebook = notebook
            #expect(notebook.notes == [notes[0]])
            try context.save()
        }
        try container.close()
    }
}

/// A fresh directory, removed when the test ends.
final class TemporaryStore {
    let path: String
    init(_ name: String = #function) {
        path = FileManager.default.temporaryDirectory
            .appendingPathComponent("strata-macro-tests/\(name.filter { $0.isLetter })-\(UUID().uuidString.prefix(8))").path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}
