import Foundation
@_spi(StoreImplementation) import Strata
@testable import StrataPostgres
import PostgresNIO
import Testing

/// Reads of objects on statements prepared on their connection: from a
/// text's second read, never in a transaction, with the same rows as
/// unnamed — every type of value read back — and, when the statement goes
/// stale under a table's change or a parameter's type, read unnamed again.
@Suite("Reads on prepared statements", .enabled(if: TestServer.isAvailable, "no PostgreSQL server (see the message above)"))
struct PreparedReadTests {
    /// The statements prepared on `session`'s connection.
    func prepared(on session: PostgresSession) throws -> Int64 {
        try SchemaInstallation.decode(session.query("SELECT count(*) FROM pg_prepared_statements", "counting").first,
                                      as: Int64.self, "counting")
    }

    /// Each value of a bookmark, each relationship's targets too, reads
    /// back the same through an unnamed statement and a prepared one (whose
    /// cells postgres-nio labels as text); the text is prepared at its
    /// second read, and once.
    @Test func everyValueReadsTheSameOnAPreparedStatement() throws {
        let configuration = try TestServer.freshDatabase()
        let model = try bookmarksModel()
        let coordinator = try openCoordinator(configuration, model)
        defer { try? coordinator.close() }
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let ids = try context.performAndWait {
            let folder = ManagedObject(entity: model.entity(named: "Folder")!, insertInto: context)
            folder.setValue("reading", forKey: "name")
            let tag = ManagedObject(entity: model.entity(named: "Tag")!, insertInto: context)
            tag.setValue("swift", forKey: "name")
            let bookmarks = (0..<2).map { i in
                let bookmark = ManagedObject(entity: model.entity(named: "Bookmark")!, insertInto: context)
                bookmark.setValue("https://swift.org/\(i)", forKey: "url")
                bookmark.setValue("it's \"quoted\"; -- and café", forKey: "title")
                bookmark.setValue(Int64.max - Int64(i), forKey: "visits")
                bookmark.setValue(Int16.min, forKey: "rating")
                bookmark.setValue(Int32.max, forKey: "rank")
                bookmark.setValue(-0.5, forKey: "score")
                bookmark.setValue(true, forKey: "pinned")
                bookmark.setValue(Date(timeIntervalSince1970: 1_700_000_000.25), forKey: "added")
                bookmark.setValue(Data([0, 1, 2, 255]), forKey: "icon")
                bookmark.setValue(UUID(), forKey: "remoteID")
                bookmark.setValue(folder, forKey: "folder")
                bookmark.setValue(Set([tag]), forKey: "tags")
                return bookmark
            }
            bookmarks[0].setValue(Set([bookmarks[1]]), forKey: "related")
            try context.save()
            return bookmarks.map(\.objectID)
        }
        let store = try PostgresStore(configuration, model: model)
        defer { store.close() }
        let session = try PostgresSession.connect(configuration)
        defer { session.close() }
        let entity = model.entity(named: "Bookmark")!
        let reads = try (0..<3).map { _ in
            try StoredRows.read(ids, of: entity, in: model, schema: store.schema, on: session)
        }
        #expect(reads[0].count == 2)
        #expect(reads[1] == reads[0] && reads[2] == reads[0])
        #expect(try prepared(on: session) == 1)
    }

    /// In a transaction a read goes unnamed: a prepared statement that
    /// failed there would doom the transaction.
    @Test func aTransactionsReadsAreNotPrepared() throws {
        let session = try PostgresSession.connect(try TestServer.freshDatabase())
        defer { session.close() }
        try session.execute("CREATE TABLE t (id bigint PRIMARY KEY, a integer NOT NULL)", "making")
        try session.execute("INSERT INTO t VALUES (1, 10), (2, 20)", "filling")
        var parameters = StatementParameters()
        parameters.append([Int64(1), 2])
        let sql = "SELECT a FROM t WHERE id = ANY($1::bigint[]) ORDER BY id"
        try session.transaction("reading") { () throws(StrataError) in
            for _ in 0..<3 { _ = try session.read(sql, parameters, "reading") }
        }
        #expect(try prepared(on: session) == 0)
        for _ in 0..<2 { _ = try session.read(sql, parameters, "reading") }
        #expect(try prepared(on: session) == 1)
    }

    /// A prepared statement gone stale — a column's type changed under it
    /// by another connection, or a parameter of a type other than the one
    /// the server inferred — is dropped, and the read runs unnamed: the
    /// rows come back, no error.
    @Test func aStaleStatementIsReadUnnamed() throws {
        let configuration = try TestServer.freshDatabase()
        let session = try PostgresSession.connect(configuration)
        defer { session.close() }
        let other = try PostgresSession.connect(configuration)
        defer { other.close() }
        try session.execute("CREATE TABLE t (id bigint PRIMARY KEY, a integer NOT NULL)", "making")
        try session.execute("INSERT INTO t VALUES (1, 10), (2, 20)", "filling")
        func values(_ rows: [PostgresRow]) throws -> [Int64] {
            try rows.map { row in
                let cell = StoredRows.binary(row.makeRandomAccess()[0])
                return cell.dataType == .int8 ? try cell.decode(Int64.self) : Int64(try cell.decode(Int32.self))
            }
        }
        var ids = StatementParameters()
        ids.append([Int64(1), 2])
        let byID = "SELECT a FROM t WHERE id = ANY($1::bigint[]) ORDER BY id"
        for _ in 0..<2 { #expect(try values(session.read(byID, ids, "reading")) == [10, 20]) }
        #expect(try prepared(on: session) == 1)
        // The plan's result was an integer; it is a bigint now.
        try other.execute("ALTER TABLE t ALTER COLUMN a TYPE bigint", "widening")
        #expect(try values(session.read(byID, ids, "reading")) == [10, 20])
        #expect(session.refusesToPrepare(byID))
        #expect(try prepared(on: session) == 0)
        #expect(try values(session.read(byID, ids, "reading")) == [10, 20])

        // `a = $1` makes the server infer an integer, which 8 bytes are not;
        // unnamed, the parameter's own type (bigint) is compared.
        try other.execute("ALTER TABLE t ALTER COLUMN a TYPE integer", "narrowing")
        var twenty = StatementParameters()
        twenty.append(Int64(20))
        let byValue = "SELECT a FROM t WHERE a = $1"
        for _ in 0..<3 { #expect(try values(session.read(byValue, twenty, "reading")) == [20]) }
        #expect(session.refusesToPrepare(byValue))
    }

    /// A read the server refuses for what it asks (here a division by
    /// zero) throws that, typed, from its prepared statement as from an
    /// unnamed one — once, not read again — and its statement stays.
    @Test func aReadsOwnFailureIsThrownOnce() throws {
        let session = try PostgresSession.connect(try TestServer.freshDatabase())
        defer { session.close() }
        try session.execute("CREATE TABLE t (id bigint PRIMARY KEY, a integer NOT NULL)", "making")
        try session.execute("INSERT INTO t VALUES (1, 10), (2, 20)", "filling")
        let sql = "SELECT 100 / (a - $1::bigint) FROM t WHERE id = ANY($2::bigint[])"
        func read(_ divisor: Int64, _ id: Int64) throws(StrataError) -> [PostgresRow] {
            var parameters = StatementParameters()
            parameters.append(divisor)
            parameters.append([id])
            return try session.read(sql, parameters, "dividing")
        }
        _ = try read(0, 1)
        _ = try read(0, 1)
        #expect(try prepared(on: session) == 1)
        let refused = #expect(throws: StrataError.self) { _ = try read(20, 2) }
        #expect((refused?.cause as? PostgresServerError)?.sqlState == "22012")
        #expect(!session.refusesToPrepare(sql))
        #expect(try prepared(on: session) == 1)
    }

    /// A store's reads — a lookup's page, a fault's fill, an ordered page
    /// — are prepared on its connection from their second run (one
    /// connection here, to count what is prepared on it).
    @Test func aStoresReadsArePrepared() throws {
        let configuration = try TestServer.freshDatabase()
        let model = try notesModel()
        let coordinator = PersistentStoreCoordinator(model: model)
        let store = try PostgresStore(configuration, model: model, sessions: 1)
        try coordinator.addPersistentStore(store)
        defer { try? coordinator.close() }
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try writer.performAndWait {
            for i in 0..<5 {
                let note = Note(context: writer)
                note.title = "note \(i)"
                note.visits = i
            }
            try writer.save()
        }
        for _ in 0..<2 {
            let reader = ManagedObjectContext(.privateQueue, coordinator: coordinator)
            try reader.performAndWait {
                let found = try #require(try Note.first(in: reader, where: #Predicate { $0.title == "note 3" }))
                #expect(found.visits == 3)
                var top = FetchRequest<Note>(sortBy: [SortDescriptor(\.visits, order: .reverse)])
                top.fetchLimit = 2
                #expect(try reader.fetch(top).map(\.visits) == [4, 3])
            }
        }
        let statements = try store.pool.withSession { (session) throws(StrataError) in
            try SchemaInstallation.decode(session.query("SELECT count(*) FROM pg_prepared_statements", "counting").first,
                                          as: Int64.self, "counting")
        }
        #expect(statements == 2)
    }
}
