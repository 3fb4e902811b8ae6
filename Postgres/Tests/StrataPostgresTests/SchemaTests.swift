import Foundation
@_spi(StoreImplementation) import Strata
@testable import StrataPostgres
import PostgresNIO
import Testing

final class Bookmark: ManagedObject {}
final class Tag: ManagedObject {}
final class Folder: ManagedObject {}
final class Person: ManagedObject {}
final class Order: ManagedObject {}

/// A model with each kind of property and relationship a schema maps.
func bookmarksModel(extraAttribute: Bool = false) throws -> ManagedObjectModel {
    var bookmarkProperties: [PropertyDescription] = [
        .attribute("url", .string),
        .attribute("title", .string, optional: true),
        .attribute("visits", .integer64, defaultValue: .integer(0)),
        .attribute("rating", .integer16, optional: true),
        .attribute("rank", .integer32, optional: true),
        .attribute("score", .double, optional: true),
        .attribute("pinned", .bool, defaultValue: .bool(false)),
        .attribute("added", .date, optional: true),
        .attribute("icon", .binaryData, optional: true),
        .attribute("remoteID", .uuid, optional: true),
        .toMany("tags", "Tag", inverse: "bookmarks"),
        .toOne("folder", "Folder", inverse: "bookmarks"),
        .toMany("related", "Bookmark", inverse: nil),
    ]
    // Required, with no default: not a migration inference can make.
    if extraAttribute { bookmarkProperties.append(.attribute("notes", .string)) }
    return try ManagedObjectModel(entities: [
        EntityDescription(name: "Bookmark", managedObjectClass: Bookmark.self, properties: bookmarkProperties,
                          indexes: [IndexDescription(["visits"]), IndexDescription(["title", "added"])],
                          uniquenessConstraints: [["url"]]),
        EntityDescription(name: "Tag", managedObjectClass: Tag.self, properties: [
            .attribute("name", .string),
            .toMany("bookmarks", "Bookmark", inverse: "tags"),
        ], uniquenessConstraints: [["name"]]),
        EntityDescription(name: "Folder", managedObjectClass: Folder.self, properties: [
            .attribute("name", .string),
            .toMany("bookmarks", "Bookmark", inverse: "folder"),
            .toOne("parent", "Folder", inverse: nil),
        ]),
        EntityDescription(name: "Person", managedObjectClass: Person.self, properties: [
            .attribute("name", .string),
            .toOne("spouse", "Person", inverse: "spouse"),
            .toOne("desk", "Folder", inverse: nil),
        ]),
    ])
}

@Suite("PostgreSQL schema from a model")
struct SchemaTests {
    @Test func tablesColumnsAndJoinTables() throws {
        let schema = try StoreSchema(try bookmarksModel())
        // The model's entities by name, then the join tables.
        #expect(schema.tables.map(\.name) == ["Bookmark", "Folder", "Person", "Tag", "Bookmark_tags", "Bookmark_related"])
        let bookmark = try #require(schema.tables.first { $0.name == "Bookmark" })
        #expect(bookmark.columns.map(\.name) == [
            "strata_id", "strata_version", "url", "title", "visits", "rating", "rank", "score", "pinned", "added", "icon",
            "remoteID", "folder",
        ])
        #expect(bookmark.columns.map(\.type) == [
            "bigint", "bigint", "text", "text", "bigint", "smallint", "integer", "double precision", "boolean",
            "timestamp with time zone", "bytea", "uuid", "bigint",
        ])
        #expect(bookmark.columns.filter { !$0.isNullable }.map(\.name) == ["strata_id", "strata_version", "url", "visits", "pinned"])
        #expect(bookmark.columns.last?.references == "Folder")
        #expect(bookmark.indexes.map(\.name) == ["Bookmark_folder_idx", "Bookmark_visits_idx", "Bookmark_title_added_idx", "Bookmark_url_key"])
        #expect(bookmark.indexes.map(\.isUnique) == [false, false, false, true])
        // The to-many side of a one-to-many, and the second side of a many-to-many, have no column or table of their own.
        let tag = try #require(schema.tables.first { $0.name == "Tag" })
        #expect(tag.columns.map(\.name) == ["strata_id", "strata_version", "name"])
        let folder = try #require(schema.tables.first { $0.name == "Folder" })
        #expect(folder.columns.map(\.name) == ["strata_id", "strata_version", "name", "parent"])
        // A one-to-one with itself keeps one column.
        let person = try #require(schema.tables.first { $0.name == "Person" })
        #expect(person.columns.map(\.name) == ["strata_id", "strata_version", "name", "spouse", "desk"])
        let join = try #require(schema.tables.first { $0.name == "Bookmark_tags" })
        #expect(join.entity == nil)
        #expect(join.columns.map(\.name) == ["source_id", "target_id"])
        #expect(join.columns.map(\.references) == ["Bookmark", "Tag"])
        #expect(join.primaryKey == ["source_id", "target_id"])
        #expect(join.indexes.map(\.columns) == [["target_id"]])
    }

    @Test func oneToOneKeepsItsColumnOnTheFirstSide() throws {
        final class A: ManagedObject {}
        final class B: ManagedObject {}
        let model = try ManagedObjectModel(entities: [
            EntityDescription(name: "B", managedObjectClass: B.self, properties: [.toOne("a", "A", inverse: "b")]),
            EntityDescription(name: "A", managedObjectClass: A.self, properties: [.toOne("b", "B", inverse: "a")]),
        ])
        let schema = try StoreSchema(model)
        #expect(schema.tables.first { $0.name == "A" }?.columns.map(\.name) == ["strata_id", "strata_version", "b"])
        #expect(schema.tables.first { $0.name == "B" }?.columns.map(\.name) == ["strata_id", "strata_version"])
    }

    @Test func statementsQuoteEveryName() throws {
        let model = try ManagedObjectModel(entities: [
            EntityDescription(name: "Order", managedObjectClass: Order.self, properties: [
                .attribute("select", .string),
                .attribute("it's \"quoted\"", .string, optional: true),
                .attribute("--comment", .integer64, optional: true),
            ], uniquenessConstraints: [["select"]]),
        ])
        let statements = try StoreSchema(model).creationStatements
        #expect(statements.contains(#"""
            CREATE TABLE "Order" ("strata_id" bigint NOT NULL, "strata_version" bigint NOT NULL, "select" text COLLATE "C" NOT NULL, \#
            "it's ""quoted""" text COLLATE "C", "--comment" bigint, CONSTRAINT "Order_pkey" PRIMARY KEY ("strata_id"))
            """#))
        #expect(statements.contains(#"ALTER TABLE "Order" ADD CONSTRAINT "Order_select_key" UNIQUE ("select") DEFERRABLE INITIALLY DEFERRED"#))
    }

    @Test func namesPostgreSQLCannotKeepAreRefused() throws {
        func model(entity: String = "Item", attribute: String = "name", extra: [EntityDescription] = []) throws -> ManagedObjectModel {
            final class Item: ManagedObject {}
            return try ManagedObjectModel(entities: [
                EntityDescription(name: entity, managedObjectClass: Item.self, properties: [
                    .attribute(attribute, .string), .toMany("parts", entity, inverse: nil),
                ]),
            ] + extra)
        }
        func refusal(_ model: ManagedObjectModel) -> StrataError? {
            #expect(throws: StrataError.self) { try StoreSchema(model) }
        }
        let long = String(repeating: "x", count: 64)
        let tooLong = try #require(refusal(try model(attribute: long)))
        #expect(tooLong.code == .invalidModel)
        #expect(tooLong.message.contains("64 bytes long"))
        #expect(try StoreSchema(try model(attribute: String(repeating: "x", count: 63))).tables.count == 2)
        #expect(refusal(try model(attribute: "strata_version"))?.message.contains("Strata's own column") == true)
        #expect(refusal(try model(entity: "strata_meta"))?.message.contains("Strata's own table") == true)
        // An entity named as another's join table.
        final class Other: ManagedObject {}
        let clash = try model(extra: [EntityDescription(name: "Item_parts", managedObjectClass: Other.self, properties: [])])
        #expect(refusal(clash)?.message.contains("Item_parts") == true)
    }

    @Test func madeNamesStayDistinctAndShort() {
        let a = SQLIdentifier.made([String(repeating: "e", count: 40), String(repeating: "a", count: 30) + "1", "idx"])
        let b = SQLIdentifier.made([String(repeating: "e", count: 40), String(repeating: "a", count: 30) + "2", "idx"])
        #expect(a != b)
        #expect(a.utf8.count <= 63 && b.utf8.count <= 63)
        #expect(SQLIdentifier.made(["Bookmark", "url", "key"]) == "Bookmark_url_key")
    }
}
