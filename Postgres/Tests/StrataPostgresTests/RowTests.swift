import Foundation
@_spi(StoreImplementation) import Strata
@testable import StrataPostgres
import PostgresNIO
import Testing

/// An object's values written as rows and read back, its relationships
/// from wherever they are kept, and the version checks of updates and
/// deletes.
@Suite("PostgreSQL rows", .enabled(if: TestServer.isAvailable, "no PostgreSQL server (see the message above)"))
struct RowTests {
    let model: ManagedObjectModel
    let schema: StoreSchema

    init() throws {
        model = try bookmarksModel()
        schema = try StoreSchema(model)
    }

    func entity(_ name: String) -> EntityDescription { model.entity(named: name)! }
    func id(_ entity: String, _ key: UInt64) -> ObjectID { ObjectID(entity: self.entity(entity), storedPrimaryKey: key) }

    /// A store's tables in a new database, and a session on it.
    func store() throws -> PostgresSession {
        let session = try PostgresSession.connect(try TestServer.freshDatabase())
        _ = try SchemaInstallation.prepare(schema, of: model, on: session)
        return session
    }

    /// Values for `entity` from names (the others nil, to-manys empty).
    func values(_ entity: String, _ given: [String: PropertyValue]) -> [PropertyValue] {
        self.entity(entity).properties.map { property in
            if let value = given[property.name] { return value }
            if case .relationship(let relationship) = property, relationship.isToMany { return .objects([]) }
            return .null
        }
    }

    func read(_ ids: [ObjectID], on session: PostgresSession) throws -> [ObjectID: StoredSnapshot] {
        try session.transaction("reading") { () throws(StrataError) in
            try StoredRows.read(ids, of: ids[0].entity, in: model, schema: schema, on: session)
        }
    }

    func write(_ changes: StoreChanges, on session: PostgresSession) throws -> [ObjectID] {
        try session.transaction("a save") { () throws(StrataError) in
            var sent: RowWriter.FoldedInserts? = nil
            return try RowWriter.write(changes, schema: schema, on: session, folding: &sent)
        }
    }

    @Test func everyAttributeTypeComesBackAsItWent() throws {
        let session = try store()
        defer { session.close() }
        let date = Date(timeIntervalSinceReferenceDate: 812_345_678.123_456_7)
        let extremes = values("Bookmark", [
            "url": .string("https://example.com/ü?q='x';--\u{1F600}"), "title": .string(""),
            "visits": .integer(Int64.min), "rating": .integer(Int64(Int16.max)), "rank": .integer(Int64(Int32.min)),
            "score": .double(-0.0), "pinned": .bool(true), "added": .date(date),
            "icon": .data(Data([0, 1, 2, 255, 0])), "remoteID": .uuid(UUID()),
        ])
        let others = values("Bookmark", [
            "url": .string("b"), "visits": .integer(Int64.max), "score": .double(.infinity), "pinned": .bool(false),
            "icon": .data(Data()),
        ])
        let nan = values("Bookmark", ["url": .string("c"), "visits": .integer(0), "score": .double(.nan), "pinned": .bool(false)])
        #expect(try write(StoreChanges(inserted: [(id("Bookmark", 1), extremes), (id("Bookmark", 2), others), (id("Bookmark", 3), nan)]),
                          on: session).isEmpty)
        let read = try read([id("Bookmark", 1), id("Bookmark", 2), id("Bookmark", 3), id("Bookmark", 99)], on: session)
        #expect(read.count == 3)
        var expected = extremes
        // Kept to the microsecond.
        let index = entity("Bookmark").properties.firstIndex { $0.name == "added" }!
        expected[index] = .date(Date(timeIntervalSince1970: (date.timeIntervalSince1970 * 1_000_000).rounded(.down) / 1_000_000))
        #expect(read[id("Bookmark", 1)] == StoredSnapshot(values: expected, version: 1))
        if case .date(let back) = read[id("Bookmark", 1)]?.values[index] { #expect(abs(back.timeIntervalSince(date)) < 0.000_001) }
        #expect(read[id("Bookmark", 2)] == StoredSnapshot(values: others, version: 1))
        let score = entity("Bookmark").properties.firstIndex { $0.name == "score" }!
        if case .double(let d) = read[id("Bookmark", 3)]?.values[score] { #expect(d.isNaN) } else { Issue.record("no NaN") }
        // -0.0 keeps its sign.
        if case .double(let d) = read[id("Bookmark", 1)]?.values[score] { #expect(d.sign == .minus) }
    }

    @Test func relationshipsFromWhereverTheyAreKept() throws {
        let session = try store()
        defer { session.close() }
        let inbox = id("Folder", 1), swift = id("Tag", 1), rust = id("Tag", 2)
        let a = id("Bookmark", 1), b = id("Bookmark", 2)
        let ada = id("Person", 1), bob = id("Person", 2)
        #expect(try write(StoreChanges(inserted: [
            (a, values("Bookmark", ["url": .string("a"), "visits": .integer(0), "pinned": .bool(false), "folder": .object(inbox),
                                    "tags": .objects([swift, rust]), "related": .objects([b])])),
            (b, values("Bookmark", ["url": .string("b"), "visits": .integer(0), "pinned": .bool(false), "folder": .object(inbox),
                                    "tags": .objects([swift])])),
            (inbox, values("Folder", ["name": .string("inbox"), "bookmarks": .objects([a, b])])),
            (swift, values("Tag", ["name": .string("swift"), "bookmarks": .objects([a, b])])),
            (rust, values("Tag", ["name": .string("rust"), "bookmarks": .objects([a])])),
            (ada, values("Person", ["name": .string("Ada"), "spouse": .object(bob), "desk": .object(inbox)])),
            (bob, values("Person", ["name": .string("Bob"), "spouse": .object(ada)])),
        ]), on: session).isEmpty)
        let bookmarks = try read([a, b], on: session)
        #expect(bookmarks[a]?.values == values("Bookmark", [
            "url": .string("a"), "visits": .integer(0), "pinned": .bool(false), "folder": .object(inbox),
            "tags": .objects([swift, rust]), "related": .objects([b])]))
        #expect(try read([inbox], on: session)[inbox]?.values == values("Folder", ["name": .string("inbox"), "bookmarks": .objects([a, b])]))
        let tags = try read([swift, rust], on: session)
        #expect(tags[swift]?.values == values("Tag", ["name": .string("swift"), "bookmarks": .objects([a, b])]))
        #expect(tags[rust]?.values == values("Tag", ["name": .string("rust"), "bookmarks": .objects([a])]))
        // A one-to-one with itself: one column, both sides read.
        let people = try read([ada, bob], on: session)
        #expect(people[ada]?.values == values("Person", ["name": .string("Ada"), "spouse": .object(bob), "desk": .object(inbox)]))
        #expect(people[bob]?.values == values("Person", ["name": .string("Bob"), "spouse": .object(ada)]))
        // An update that takes a tag off replaces the join rows.
        var changed = bookmarks[a]!.values
        changed[entity("Bookmark").properties.firstIndex { $0.name == "tags" }!] = .objects([rust])
        #expect(try write(StoreChanges(updated: [.init(id: a, values: changed, expectedVersion: 1)]), on: session).isEmpty)
        #expect(try read([swift], on: session)[swift]?.values == values("Tag", ["name": .string("swift"), "bookmarks": .objects([b])]))
    }

    @Test func versionsGuardUpdatesAndDeletes() throws {
        let session = try store()
        defer { session.close() }
        let a = id("Tag", 1), b = id("Tag", 2)
        _ = try write(StoreChanges(inserted: [(a, values("Tag", ["name": .string("a")])), (b, values("Tag", ["name": .string("b")]))]), on: session)
        #expect(try write(StoreChanges(updated: [.init(id: a, values: values("Tag", ["name": .string("a2")]), expectedVersion: 1)]), on: session).isEmpty)
        // Another writer read version 1 of both: its update of a and its delete of b meet a changed row and an unchanged one.
        let conflicts = try write(StoreChanges(
            updated: [.init(id: a, values: values("Tag", ["name": .string("stale")]), expectedVersion: 1)],
            deleted: [.init(id: b, expectedVersion: 2)]), on: session)
        #expect(conflicts.sorted { $0.storedPrimaryKey < $1.storedPrimaryKey } == [a, b])
        let rows = try read([a, b], on: session)
        #expect(rows[a] == StoredSnapshot(values: values("Tag", ["name": .string("a2")]), version: 2))
        #expect(rows[b]?.version == 1)
        #expect(try write(StoreChanges(deleted: [.init(id: b, expectedVersion: 1)]), on: session).isEmpty)
        #expect(try read([b], on: session).isEmpty)
    }

    @Test func refusedSavesWriteNothing() throws {
        let session = try store()
        defer { session.close() }
        let nul = #expect(throws: StrataError.self) {
            _ = try write(StoreChanges(inserted: [
                (id("Tag", 1), values("Tag", ["name": .string("fine")])),
                (id("Tag", 2), values("Tag", ["name": .string("a\u{0}b")])),
            ]), on: session)
        }
        #expect(nul?.code == .invalidArgument)
        #expect(nul?.message.contains("Tag/p2.name") == true)
        #expect(try read([id("Tag", 1)], on: session).isEmpty)
        _ = try write(StoreChanges(inserted: [(id("Tag", 1), values("Tag", ["name": .string("swift")]))]), on: session)
        let duplicate = #expect(throws: StrataError.self) {
            _ = try write(StoreChanges(inserted: [(id("Tag", 2), values("Tag", ["name": .string("swift")]))]), on: session)
        }
        #expect(duplicate?.code == .constraintConflict)
        #expect(try read([id("Tag", 2)], on: session).isEmpty)
    }

    @Test func oneSaveMaySwapUniqueValues() throws {
        let session = try store()
        defer { session.close() }
        let a = id("Tag", 1), b = id("Tag", 2)
        _ = try write(StoreChanges(inserted: [(a, values("Tag", ["name": .string("a")])), (b, values("Tag", ["name": .string("b")]))]), on: session)
        #expect(try write(StoreChanges(updated: [
            .init(id: a, values: values("Tag", ["name": .string("b")]), expectedVersion: 1),
            .init(id: b, values: values("Tag", ["name": .string("a")]), expectedVersion: 1),
        ]), on: session).isEmpty)
        #expect(try read([a, b], on: session).mapValues { $0.values[0] } == [a: .string("b"), b: .string("a")])
    }

    @Test func aSaveLargerThanOneStatementTakes() throws {
        let session = try store()
        defer { session.close() }
        // Two parameters an insert (key, name), four an update: past RowWriter.maximumParameters both ways.
        let count = RowWriter.maximumParameters / 2 + 500
        let ids = (1...UInt64(count)).map { id("Tag", $0) }
        _ = try write(StoreChanges(inserted: ids.map { ($0, values("Tag", ["name": .string("tag \($0.storedPrimaryKey)")])) }), on: session)
        let conflicts = try write(StoreChanges(updated: ids.map {
            .init(id: $0, values: values("Tag", ["name": .string("renamed \($0.storedPrimaryKey)")]), expectedVersion: $0.storedPrimaryKey == 7 ? 5 : 1)
        }), on: session)
        #expect(conflicts == [id("Tag", 7)])
        let rows = try read([id("Tag", 1), id("Tag", 7), id("Tag", UInt64(count))], on: session)
        #expect(rows[id("Tag", 1)] == StoredSnapshot(values: values("Tag", ["name": .string("renamed 1")]), version: 2))
        #expect(rows[id("Tag", 7)] == StoredSnapshot(values: values("Tag", ["name": .string("tag 7")]), version: 1))
        #expect(rows[id("Tag", UInt64(count))]?.version == 2)
    }
}
