import Foundation
@_spi(StoreImplementation) import Strata
@testable import StrataPostgres
import PostgresNIO
import Testing

/// The library before: authors and their books, shelves of books (many to
/// many), scraps.
/// `uniqueScrapNotes`: the same, with a uniqueness constraint on Scrap's note.
func libraryModelV1(uniqueScrapNotes: Bool = false) throws -> ManagedObjectModel {
    try ManagedObjectModel(entities: [
        EntityDescription(name: "Author", properties: [
            .attribute("name", .string),
            .attribute("age", .integer16, optional: true),
            .attribute("email", .string, optional: true),
            .toMany("books", "Book", inverse: "author"),
        ], uniquenessConstraints: [["name"]]),
        EntityDescription(name: "Book", properties: [
            .attribute("title", .string),
            .attribute("pages", .integer32, optional: true),
            .toOne("author", "Author", inverse: "books"),
            .toMany("shelves", "Shelf", inverse: "books"),
        ], indexes: [IndexDescription(["title"])]),
        EntityDescription(name: "Shelf", properties: [
            .attribute("label", .string),
            .attribute("code", .string),
            .toMany("books", "Book", inverse: "shelves"),
        ]),
        EntityDescription(name: "Scrap", properties: [.attribute("note", .string)], uniquenessConstraints: uniqueScrapNotes ? [["note"]] : []),
    ])
}

/// The library after, every change an inferred migration makes: entities
/// renamed (Author → Writer, Book → Volume, which hands the shelves' join
/// table to Shelf), added (Tag) and removed (Scrap); attributes renamed
/// (title → name; Shelf's label and code swapped), widened (age), removed
/// (email), added with a default (bio), made required with a default
/// (pages); a to-one renamed (author → writer); an index renamed with its
/// attribute, one added, a uniqueness constraint added.
/// `strictPages`: pages required with no default instead.
func libraryModelV2(strictPages: Bool = false) throws -> ManagedObjectModel {
    try ManagedObjectModel(entities: [
        EntityDescription(name: "Writer", properties: [
            .attribute("name", .string),
            .attribute("age", .integer64, optional: true),
            .attribute("bio", .string, defaultValue: .string("it's \"none\"; --")),
            .attribute("since", .date, defaultValue: .date(Date(timeIntervalSinceReferenceDate: 1_000_000.25))),
            .attribute("weight", .double, defaultValue: .double(0.1)),
            .toMany("books", "Volume", inverse: "writer"),
        ], uniquenessConstraints: [["name"]], renamedFrom: "Author"),
        EntityDescription(name: "Volume", properties: [
            .attribute("name", .string, renamedFrom: "title"),
            strictPages ? .attribute("pages", .integer32) : .attribute("pages", .integer32, defaultValue: .integer(0)),
            .toOne("writer", "Writer", inverse: "books", renamedFrom: "author"),
            .toMany("shelves", "Shelf", inverse: "books"),
        ], indexes: [IndexDescription(["name"]), IndexDescription(["pages"])], renamedFrom: "Book"),
        EntityDescription(name: "Shelf", properties: [
            .attribute("label", .string, renamedFrom: "code"),
            .attribute("code", .string, renamedFrom: "label"),
            .toMany("books", "Volume", inverse: "shelves"),
        ], uniquenessConstraints: [["label"]]),
        EntityDescription(name: "Tag", properties: [.attribute("name", .string)]),
    ])
}

/// A store opened with a later model: its tables migrated by inference, in
/// one transaction, to exactly what the later model makes in an empty
/// database — the data carried over, the history renamed with it — or
/// refused, with the database left as it was.
@Suite("PostgreSQL store migrated to a later model", .enabled(if: TestServer.isAvailable, "no PostgreSQL server (see the message above)"))
struct MigrationTests {
    func open(_ configuration: PostgresConfiguration, _ model: ManagedObjectModel) throws -> PersistentStoreCoordinator {
        try openCoordinator(configuration, model)
    }

    /// Objects of `entity` in `context`, by the value of `key`.
    func objects(_ entity: String, by key: String, in context: ManagedObjectContext) throws -> [String: ManagedObject] {
        let objects = try context.fetch(FetchRequest<ManagedObject>(entityName: entity))
        return Dictionary(uniqueKeysWithValues: objects.map { ($0.value(forKey: key) as! String, $0) })
    }

    /// Fills a store of the first model through a context (so its history has the saves).
    func fillVersion1(_ configuration: PostgresConfiguration) throws {
        let model = try libraryModelV1()
        let coordinator = try open(configuration, model)
        defer { try? coordinator.close() }
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            func make(_ entity: String, _ values: [String: Any?]) -> ManagedObject {
                let object = ManagedObject(entity: model.entity(named: entity)!, insertInto: context)
                for (key, value) in values { object.setValue(value, forKey: key) }
                return object
            }
            let le = make("Author", ["name": "Le Guin", "age": 88, "email": "ursula@example.org"])
            let pratchett = make("Author", ["name": "Pratchett", "age": nil])
            let earthsea = make("Book", ["title": "A Wizard of Earthsea", "pages": 183, "author": le])
            let dispossessed = make("Book", ["title": "The Dispossessed", "pages": nil, "author": le])
            let mort = make("Book", ["title": "Mort", "pages": 243, "author": pratchett])
            _ = make("Shelf", ["label": "fantasy", "code": "F", "books": Set([earthsea, mort])])
            _ = make("Shelf", ["label": "favourites", "code": "*", "books": Set([earthsea, dispossessed])])
            _ = make("Scrap", ["note": "thrown away"])
            try context.save()
            mort.setValue("Mort (2nd ed.)", forKey: "title")
            try context.save()
        }
    }

    /// What PostgreSQL's catalog says of the database's tables: columns
    /// (name, type, nullability, collation), constraints (name and
    /// definition) and indexes (name and definition) — not positions, which
    /// a migration cannot choose.
    func catalog(_ session: PostgresSession) throws -> [String] {
        let columns = try session.query("""
            SELECT table_name::text || '.' || column_name::text || ' ' || data_type::text || ' ' || is_nullable::text || ' ' || \
            coalesce(collation_name::text, '-') FROM information_schema.columns WHERE table_schema = current_schema()
            """, "catalog").map { try $0.decode(String.self) }
        let constraints = try session.query("""
            SELECT conrelid::regclass::text || ' ' || conname::text || ' ' || pg_get_constraintdef(oid) FROM pg_constraint \
            WHERE connamespace = current_schema()::regnamespace
            """, "catalog").map { try $0.decode(String.self) }
        let indexes = try session.query(
            "SELECT indexname::text || ' ' || indexdef FROM pg_indexes WHERE schemaname = current_schema()", "catalog")
            .map { try $0.decode(String.self) }
        return (columns + constraints + indexes).sorted()
    }

    @Test func aLaterModelsTablesAreWhatItMakesWithTheDataCarriedOver() throws {
        let configuration = try TestServer.freshDatabase()
        try fillVersion1(configuration)
        let model = try libraryModelV2()
        let coordinator = try open(configuration, model)
        defer { try? coordinator.close() }

        // Exactly the tables, columns, constraints and indexes the new model makes in an empty database.
        let session = try PostgresSession.connect(configuration)
        defer { session.close() }
        let fresh = try PostgresSession.connect(try TestServer.freshDatabase())
        defer { fresh.close() }
        _ = try SchemaInstallation.prepare(try StoreSchema(model), of: model, on: fresh)
        let migrated = try catalog(session), made = try catalog(fresh)
        #expect(migrated == made, "only migrated: \(Set(migrated).subtracting(made).sorted()); only made: \(Set(made).subtracting(migrated).sorted())")

        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let writers = try objects("Writer", by: "name", in: context)
            let volumes = try objects("Volume", by: "name", in: context)
            let shelves = try objects("Shelf", by: "code", in: context)
            #expect(Set(writers.keys) == ["Le Guin", "Pratchett"])
            #expect(writers["Le Guin"]?.value(forKey: "age") as? Int == 88)
            #expect(writers["Pratchett"]?.value(forKey: "age") == nil)
            // Defaults given to stored objects as PostgreSQL's own literals.
            #expect(writers["Pratchett"]?.value(forKey: "bio") as? String == "it's \"none\"; --")
            #expect(writers["Pratchett"]?.value(forKey: "since") as? Date == Date(timeIntervalSinceReferenceDate: 1_000_000.25))
            #expect(writers["Pratchett"]?.value(forKey: "weight") as? Double == 0.1)
            #expect(Set(volumes.keys) == ["A Wizard of Earthsea", "The Dispossessed", "Mort (2nd ed.)"])
            #expect(volumes["The Dispossessed"]?.value(forKey: "pages") as? Int == 0)
            #expect(volumes["A Wizard of Earthsea"]?.value(forKey: "pages") as? Int == 183)
            #expect((volumes["Mort (2nd ed.)"]?.value(forKey: "writer") as? ManagedObject) === writers["Pratchett"])
            #expect((writers["Le Guin"]?.value(forKey: "books") as? Set<ManagedObject>)?.count == 2)
            // The label and the code swapped names, each with its values.
            #expect(Set(shelves.keys) == ["fantasy", "favourites"])
            #expect(shelves["fantasy"]?.value(forKey: "label") as? String == "F")
            // The join table went to Shelf's side with its rows, both ways round.
            let fantasy = (shelves["fantasy"]?.value(forKey: "books") as? Set<ManagedObject>) ?? []
            #expect(Set(fantasy.map { $0.value(forKey: "name") as! String }) == ["A Wizard of Earthsea", "Mort (2nd ed.)"])
            let earthseaShelves = (volumes["A Wizard of Earthsea"]?.value(forKey: "shelves") as? Set<ManagedObject>) ?? []
            #expect(Set(earthseaShelves.map { $0.value(forKey: "code") as! String }) == ["fantasy", "favourites"])
            #expect(try context.count(for: FetchRequest<ManagedObject>(entityName: "Tag")) == 0)
            // New objects take keys after the stored ones (the renamed entities kept their counters).
            let volume = ManagedObject(entity: model.entity(named: "Volume")!, insertInto: context)
            volume.setValue("Small Gods", forKey: "name")
            volume.setValue(writers["Pratchett"], forKey: "writer")
            try context.save()
            #expect(volume.objectID.storedPrimaryKey > 3)
        }
        // Each renamed entity kept its counter of primary keys; the removed one's went.
        let counters = try session.query("SELECT entity FROM strata_keys ORDER BY 1", "keys").map { try $0.decode(String.self) }
        #expect(counters == ["Shelf", "Volume", "Writer"])
        // The history speaks of the entities and properties by their new names.
        let changes = try session.query("""
            SELECT DISTINCT entity || ':' || coalesce(array_to_string(property_names, ','), '') FROM strata_history_changes \
            WHERE kind = 'update'
            """, "history").map { try $0.decode(String.self) }
        // (The first an update of v1's title, the second of the save above.)
        #expect(changes == ["Volume:name", "Writer:books"])
        let entities = try session.query("SELECT DISTINCT entity FROM strata_history_changes ORDER BY 1", "history").map { try $0.decode(String.self) }
        #expect(entities == ["Scrap", "Shelf", "Volume", "Writer"])
        // Opened again with the same model: nothing to migrate.
        let again = try SchemaInstallation.prepare(try StoreSchema(model), of: model, on: session)
        #expect(!again.migrated)
    }

    @Test func anEarlierModelIsRefusedOnceTheStoreMovedOn() throws {
        let configuration = try TestServer.freshDatabase()
        try fillVersion1(configuration)
        try open(configuration, try libraryModelV2()).close()
        let session = try PostgresSession.connect(configuration)
        defer { session.close() }
        let before = try catalog(session)
        let earlier = try libraryModelV1()
        let refusal = #expect(throws: StrataError.self) {
            _ = try SchemaInstallation.prepare(try StoreSchema(earlier), of: earlier, on: session)
        }
        #expect(refusal?.code == .modelMismatch)
        #expect(refusal?.message.contains("never migrated back") == true)
        #expect(try catalog(session) == before)
    }

    @Test func aChangeInferenceCannotMakeIsRefusedAndNothingChanges() throws {
        let configuration = try TestServer.freshDatabase()
        try fillVersion1(configuration)
        let session = try PostgresSession.connect(configuration)
        defer { session.close() }
        let before = try catalog(session)
        // A type changed: not inferable.
        let retyped = try ManagedObjectModel(entities: try libraryModelV1().entities.map { entity in
            EntityDescription(name: entity.name, properties: entity.properties.map { property in
                if case .attribute(let a) = property, a.name == "email" { return .attribute("email", .integer64, optional: true) }
                if case .attribute(let a) = property { return .attribute(a.name, a.type, optional: a.isOptional, defaultValue: a.defaultValue) }
                if case .relationship(let r) = property {
                    return r.isToMany ? .toMany(r.name, r.destinationEntityName, inverse: r.inverseName)
                        : .toOne(r.name, r.destinationEntityName, inverse: r.inverseName)
                }
                return property
            }, indexes: entity.indexes.filter { !$0.isUnique }, uniquenessConstraints: entity.uniquenessConstraints)
        })
        let refusal = #expect(throws: StrataError.self) {
            _ = try SchemaInstallation.prepare(try StoreSchema(retyped), of: retyped, on: session)
        }
        #expect(refusal?.code == .modelMismatch)
        #expect(refusal?.modelDifferences.contains { $0.property == "email" && !$0.isInferable } == true)
        #expect(try catalog(session) == before)

        // Required without a default, where a stored object holds none: the
        // migration gets as far as the check, and all of it is undone.
        let strict = try libraryModelV2(strictPages: true)
        let unfilled = #expect(throws: StrataError.self) {
            _ = try SchemaInstallation.prepare(try StoreSchema(strict), of: strict, on: session)
        }
        #expect(unfilled?.code == .modelMismatch)
        #expect(unfilled?.message.contains("Volume.pages became required") == true)
        #expect(try catalog(session) == before)
        #expect(try session.query(#"SELECT count(*) FROM "Book""#, "count").first?.decode(Int.self) == 3)

        // A uniqueness constraint that stored values break.
        try session.query(#"INSERT INTO "Scrap" (strata_id, strata_version, note) VALUES (99, 1, 'thrown away')"#, "a second scrap")
        let withScrap = try catalog(session)
        let unique = try libraryModelV1(uniqueScrapNotes: true)
        let duplicated = #expect(throws: StrataError.self) {
            _ = try SchemaInstallation.prepare(try StoreSchema(unique), of: unique, on: session)
        }
        #expect(duplicated?.code == .modelMismatch)
        #expect(duplicated?.message.contains("break a uniqueness constraint") == true)
        #expect(try catalog(session) == withScrap)
    }

    @Test func aStoreThatDoesNotRecordItsModelRecordsItWhenOpenedWithIt() throws {
        let configuration = try TestServer.freshDatabase()
        try fillVersion1(configuration)
        let session = try PostgresSession.connect(configuration)
        defer { session.close() }
        // As a store made before Strata kept the model beside it.
        try session.query("DELETE FROM strata_meta WHERE key = \(SchemaInstallation.schemaKey)", "forget")
        let later = try libraryModelV2()
        let refusal = #expect(throws: StrataError.self) {
            _ = try SchemaInstallation.prepare(try StoreSchema(later), of: later, on: session)
        }
        #expect(refusal?.message.contains("does not record that model") == true)
        let model = try libraryModelV1()
        #expect(try !SchemaInstallation.prepare(try StoreSchema(model), of: model, on: session).migrated)
        #expect(try SchemaInstallation.prepare(try StoreSchema(later), of: later, on: session).migrated)
    }

    /// Inferable, but the targets would have to move between tables: refused
    /// with the relationship named, and nothing changed.
    @Test func relationshipsWhoseTargetsWouldMoveAreRefused() throws {
        func model(box: PropertyDescription, boxNotes: PropertyDescription? = nil) throws -> ManagedObjectModel {
            try ManagedObjectModel(entities: [
                EntityDescription(name: "Note", properties: [.attribute("title", .string), box]),
                EntityDescription(name: "Box", properties: [.attribute("name", .string)] + (boxNotes.map { [$0] } ?? [])),
            ])
        }
        let first = try model(box: .toOne("box", "Box", inverse: nil))
        let configuration = try TestServer.freshDatabase()
        try open(configuration, first).close()
        let session = try PostgresSession.connect(configuration)
        defer { session.close() }
        let before = try catalog(session)
        let toMany = try model(box: .toMany("box", "Box", inverse: nil))
        let wrapped = #expect(throws: StrataError.self) {
            _ = try SchemaInstallation.prepare(try StoreSchema(toMany), of: toMany, on: session)
        }
        #expect(wrapped?.code == .modelMismatch)
        #expect(wrapped?.message.contains("Note.box became to-many") == true)
        // An inverse added makes a one-to-one whose column is Box's.
        let paired = try model(box: .toOne("box", "Box", inverse: "notes"), boxNotes: .toOne("notes", "Note", inverse: "box"))
        let moved = #expect(throws: StrataError.self) {
            _ = try SchemaInstallation.prepare(try StoreSchema(paired), of: paired, on: session)
        }
        #expect(moved?.code == .modelMismatch)
        #expect(moved?.message.contains("Note.box would move to the other side") == true)
        #expect(try catalog(session) == before)
    }
}
