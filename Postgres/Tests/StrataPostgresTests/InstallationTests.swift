import Foundation
@_spi(StoreImplementation) import Strata
@testable import StrataPostgres
import PostgresNIO
import Synchronization
import Testing

/// Opening a store in a real PostgreSQL database: the schema made, its
/// rules held by the server, checked when opened again, and errors that
/// say what to do.
@Suite("PostgreSQL store's tables, on a server", .enabled(if: TestServer.isAvailable, "no PostgreSQL server (see the message above)"))
struct InstallationTests {
    /// A session on a new database, and the model's schema made in it.
    func installed(_ model: ManagedObjectModel) throws -> (PostgresSession, InstalledSchema) {
        let session = try PostgresSession.connect(try TestServer.freshDatabase())
        let installed = try SchemaInstallation.prepare(try StoreSchema(model), of: model, on: session)
        return (session, installed)
    }

    @Test func makesTheTablesOnceAndFindsThemAfter() throws {
        let model = try bookmarksModel()
        let (session, first) = try installed(model)
        defer { session.close() }
        #expect(first.created)
        let again = try PostgresSession.connect(session.configuration)
        defer { again.close() }
        let second = try SchemaInstallation.prepare(try StoreSchema(model), of: model, on: again)
        #expect(second == InstalledSchema(storeIdentifier: first.storeIdentifier, created: false, migrated: false))
        #expect(try SchemaInstallation.differences(from: try StoreSchema(model), on: session).isEmpty)
        // Every table, as the catalog lists it.
        let tables = try session.query(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1", "listing")
            .map { try $0.decode(String.self) }
        #expect(tables == ["Bookmark", "Bookmark_related", "Bookmark_tags", "Folder", "Person", "Tag", "strata_history", "strata_history_changes", "strata_history_cursors", "strata_keys", "strata_meta"])
    }

    @Test func theServerHoldsTheModelsRules() throws {
        let (session, _) = try installed(try bookmarksModel())
        defer { session.close() }
        try session.query(#"INSERT INTO "Bookmark" (strata_id, strata_version, url, visits, pinned) VALUES (1, 1, 'a', 0, false)"#, "insert")
        // Uniqueness, as the typed error a save would throw.
        // (In a transaction, as every write of the store's: the constraint is checked at commit.)
        let duplicate = #expect(throws: StrataError.self) {
            try session.transaction("inserting a bookmark") { () throws(StrataError) in
                try session.query(#"INSERT INTO "Bookmark" (strata_id, strata_version, url, visits, pinned) VALUES (2, 1, 'a', 0, false)"#, "inserting a bookmark")
            }
        }
        #expect(try session.query(#"SELECT count(*) FROM "Bookmark""#, "count").first?.decode(Int.self) == 1)
        #expect(duplicate?.code == .constraintConflict)
        #expect((duplicate?.cause as? PostgresServerError)?.constraintName == "Bookmark_url_key")
        #expect(duplicate?.message.contains("inserting a bookmark") == true)
        // Two nulls never collide (as Strata's own unique indexes).
        try session.query(#"INSERT INTO "Tag" (strata_id, strata_version, name) VALUES (1, 1, 'swift')"#, "insert")
        // A required attribute.
        #expect(throws: StrataError.self) {
            try session.query(#"INSERT INTO "Bookmark" (strata_id, strata_version, visits, pinned) VALUES (3, 1, 0, false)"#, "insert")
        }
        // Foreign keys are checked at commit: a save may write a bookmark before its folder.
        try session.transaction("a save") { () throws(StrataError) in
            try session.query(#"INSERT INTO "Bookmark" (strata_id, strata_version, url, visits, pinned, folder) VALUES (4, 1, 'b', 0, false, 9)"#, "insert")
            try session.query(#"INSERT INTO "Folder" (strata_id, strata_version, name) VALUES (9, 1, 'inbox')"#, "insert")
        }
        // …and a folder that never comes fails the commit, leaving nothing.
        let dangling = #expect(throws: StrataError.self) {
            try session.transaction("a save") { () throws(StrataError) in
                try session.query(#"INSERT INTO "Bookmark" (strata_id, strata_version, url, visits, pinned, folder) VALUES (5, 1, 'c', 0, false, 77)"#, "insert")
            }
        }
        #expect((dangling?.cause as? PostgresServerError)?.sqlState == "23503")
        #expect(try session.query(#"SELECT count(*) FROM "Bookmark" WHERE strata_id = 5"#, "count").first?.decode(Int.self) == 0)
        // A join table's rows go when either object does.
        try session.query(#"INSERT INTO "Bookmark_tags" (source_id, target_id) VALUES (1, 1)"#, "insert")
        try session.query(#"DELETE FROM "Tag" WHERE strata_id = 1"#, "delete")
        #expect(try session.query(#"SELECT count(*) FROM "Bookmark_tags""#, "count").first?.decode(Int.self) == 0)
    }

    @Test func stringsSortAsSwiftSortsThem() throws {
        let (session, _) = try installed(try bookmarksModel())
        defer { session.close() }
        // Text in NFC, as Strata keeps it: PostgreSQL's "C" collation
        // compares its UTF-8 bytes, which is the order of its scalars.
        let names = ["b", "B", "a", "Z", "é", "éx", "z", "10", "9", "", "ß", "😀", "\u{FF5E}"]
        for (i, name) in names.enumerated() {
            try session.query("INSERT INTO \"Tag\" (strata_id, strata_version, name) VALUES (\(i + 1), 1, \(name))", "insert")
        }
        let sorted = try session.query(#"SELECT name FROM "Tag" ORDER BY name"#, "sort").map { try $0.decode(String.self) }
        #expect(sorted == names.sorted())
    }

    @Test func namesThatAreSQLKeywordsOrHoldQuotes() throws {
        let model = try ManagedObjectModel(entities: [
            EntityDescription(name: "Order", managedObjectClass: Order.self, properties: [
                .attribute("select", .string),
                .attribute("it's \"quoted\"; DROP TABLE x; --", .string, optional: true),
                .attribute("group", .integer64, optional: true),
            ], indexes: [IndexDescription(["group"])], uniquenessConstraints: [["select"]]),
        ])
        let (session, installed) = try installed(model)
        defer { session.close() }
        #expect(installed.created)
        let value = "'); DELETE FROM \"Order\"; --"
        try session.query(#"INSERT INTO "Order" (strata_id, strata_version, "select", "it's ""quoted""; DROP TABLE x; --") VALUES (1, 1, 'x', \#(value))"#, "insert")
        let read = try session.query(#"SELECT "it's ""quoted""; DROP TABLE x; --" FROM "Order""#, "read").map { try $0.decode(String.self) }
        #expect(read == [value])
    }

    @Test func anotherModelIsRefusedAndNothingChanges() throws {
        let (session, first) = try installed(try bookmarksModel())
        defer { session.close() }
        let other = try bookmarksModel(extraAttribute: true)
        let refusal = #expect(throws: StrataError.self) {
            _ = try SchemaInstallation.prepare(try StoreSchema(other), of: other, on: session)
        }
        #expect(refusal?.code == .modelMismatch)
        #expect(refusal?.message.contains("another model") == true)
        #expect(refusal?.modelDifferences.contains { $0.property == "notes" && !$0.isInferable } == true)
        let model = try bookmarksModel()
        #expect(try SchemaInstallation.prepare(try StoreSchema(model), of: model, on: session) == InstalledSchema(storeIdentifier: first.storeIdentifier, created: false, migrated: false))
    }

    @Test func tablesChangedOutsideStrataAreNamed() throws {
        let model = try bookmarksModel()
        let (session, _) = try installed(model)
        defer { session.close() }
        try session.execute(#"ALTER TABLE "Bookmark" ALTER COLUMN visits TYPE text"#, "alter")
        try session.execute(#"ALTER TABLE "Tag" DROP COLUMN name"#, "alter")
        try session.execute(#"ALTER TABLE "Folder" ALTER COLUMN name DROP NOT NULL"#, "alter")
        try session.execute(#"ALTER TABLE "Person" ADD COLUMN nickname text"#, "alter")  // another service's column: let be
        let refusal = #expect(throws: StrataError.self) {
            _ = try SchemaInstallation.prepare(try StoreSchema(model), of: model, on: session)
        }
        #expect(refusal?.code == .modelMismatch)
        let message = refusal?.message ?? ""
        #expect(message.contains("Bookmark.visits is text, the model makes bigint"))
        #expect(message.contains("Tag has no column name"))
        #expect(message.contains("Folder.name is NULL, the model makes it NOT NULL"))
        #expect(!message.contains("nickname"))
    }

    @Test func aFailedCreationLeavesTheDatabaseAsItWas() throws {
        let session = try PostgresSession.connect(try TestServer.freshDatabase())
        defer { session.close() }
        // A table of another service where the model wants one.
        try session.execute(#"CREATE TABLE "Tag" (id integer)"#, "setup")
        let model = try bookmarksModel()
        let refusal = #expect(throws: StrataError.self) {
            _ = try SchemaInstallation.prepare(try StoreSchema(model), of: model, on: session)
        }
        #expect((refusal?.cause as? PostgresServerError)?.sqlState == "42P07")  // duplicate_table
        let tables = try session.query(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = current_schema()", "listing")
            .map { try $0.decode(String.self) }
        #expect(tables == ["Tag"])
    }

    @Test func processesOpeningOneEmptyDatabaseAtOnce() throws {
        let configuration = try TestServer.freshDatabase()
        let model = try bookmarksModel()
        let results = Mutex<[Result<InstalledSchema, StrataError>]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            let result = Result { () throws(StrataError) -> InstalledSchema in
                let session = try PostgresSession.connect(configuration)
                defer { session.close() }
                return try SchemaInstallation.prepare(try StoreSchema(model), of: model, on: session)
            }
            results.withLock { $0.append(result) }
        }
        let installed = try results.withLock { $0 }.map { try $0.get() }
        #expect(installed.filter(\.created).count == 1)
        #expect(Set(installed.map(\.storeIdentifier)).count == 1)
    }

    @Test func errorsSayWhatToDoAndKeepThePasswordOut() throws {
        var configuration = try TestServer.configuration(database: "no_such_database")
        configuration.password = "hunter2-never-shown"
        let missing = #expect(throws: StrataError.self) { _ = try PostgresSession.connect(configuration) }
        #expect(missing?.message.contains("createdb no_such_database") == true)
        #expect(!"\(String(describing: missing)) \(configuration)".contains("hunter2"))

        let nowhere = PostgresConfiguration(
            endpoint: .unixSocket(directory: FileManager.default.temporaryDirectory.appendingPathComponent("no-server-\(UUID())").path),
            username: "postgres", password: "hunter2-never-shown")
        let refused = #expect(throws: StrataError.self) { _ = try PostgresSession.connect(nowhere) }
        #expect(refused?.code == .storage)
        #expect(refused?.message.contains("cannot connect to PostgreSQL at the socket") == true)
        #expect(!"\(String(describing: refused))".contains("hunter2"))
    }
}
