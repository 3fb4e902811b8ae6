import SwiftSyntaxMacros
import SwiftSyntaxMacrosTestSupport
import XCTest

@testable import StrataMacrosPlugin

/// What `@Entity` writes, and the mistakes it names instead of expanding.
final class EntityExpansionTests: XCTestCase {
    private let macros: [String: any Macro.Type] = [
        "Entity": EntityMacro.self, "Related": MarkerMacro.self, "Renamed": MarkerMacro.self, "Transient": MarkerMacro.self,
        "Unique": MarkerMacro.self, "Indexed": MarkerMacro.self,
    ]

    func testAttributesRelationshipsAndTheEntity() {
        assertMacroExpansion(
            """
            @Entity(indexes: [["visits"]], uniquenessConstraints: [["url"]])
            public final class Bookmark: ManagedObject {
                var url: String
                var visits: Int = 0
                var note: Foundation.Date?
                @Related(inverse: "bookmarks", deleteRule: .cascade) var tags: Set<Tag>
                @Renamed(from: "parent") var folder: Folder?
                @Transient var selected = false
                var label: String { url }
                static var count = 0
            }
            """,
            expandedSource: """
            public final class Bookmark: ManagedObject {
                @Strata.Attribute("url")
                var url: String
                @Strata.Attribute(modelDefault: "visits")
                var visits: Int = 0
                @Strata.Attribute("note")
                var note: Foundation.Date?
                @Strata.Relationship("tags") var tags: Set<Tag>
                @Strata.Relationship("folder") var folder: Folder?
                var selected = false
                var label: String { url }
                static var count = 0

                public static var entityDescription: Strata.EntityDescription {
                    Strata.EntityDescription(
                        name: "Bookmark", managedObjectClass: Bookmark.self,
                        properties: [
                            .attribute("url", .string),
                            .attribute("visits", .integer64, defaultValue: (0 as Int).propertyValue),
                            .attribute("note", .date, optional: true),
                            .toMany("tags", "Tag", inverse: "bookmarks", deleteRule: .cascade),
                            .toOne("folder", "Folder", inverse: nil, renamedFrom: "parent"),
                        ],
                        indexes: ([["visits"]] as [[String]]).map {
                            Strata.IndexDescription($0)
                        },
                        uniquenessConstraints: [["url"]] as [[String]])
                }
            }

            extension Bookmark: Strata.EntityDeclaring {
            }
            """,
            macros: macros)
    }

    func testKeyPathInversesDestinationsAndPerAttributeConstraints() {
        assertMacroExpansion(
            """
            @Entity(uniquenessConstraints: [["a", "b"]])
            final class Item: ManagedObject {
                @Unique var sku: String
                @Indexed var added: Date
                @Related(inverse: \\Shelf.items, destination: "Shelf2") var shelf: ShelfV2?
            }
            """,
            expandedSource: """
            final class Item: ManagedObject {
                @Strata.Attribute("sku") var sku: String
                @Strata.Attribute("added") var added: Date
                @Strata.Relationship("shelf") var shelf: ShelfV2?

                static var entityDescription: Strata.EntityDescription {
                    Strata.EntityDescription(
                        name: "Item", managedObjectClass: Item.self,
                        properties: [
                            .attribute("sku", .string),
                            .attribute("added", .date),
                            .toOne("shelf", "Shelf2", inverse: "items"),
                        ],
                        indexes: ([] as [[String]] + [["added"]]).map {
                            Strata.IndexDescription($0)
                        },
                        uniquenessConstraints: [["a", "b"]] as [[String]] + [["sku"]])
                }
            }

            extension Item: Strata.EntityDeclaring {
            }
            """,
            macros: macros)
    }

    /// What a class may hold beside its model, and how odd names and keys come out.
    func testLetsTransientsBackticksEscapesAndAccess() {
        assertMacroExpansion(
            """
            @Entity(name: nil)
            package final class Odd: ManagedObject {
                let formatter = DateFormatter()
                @Transient let cache = [String: Int]()
                var `default`: Int = -1
                @Attribute(modelDefault: "a\\"b") var quoted: String = "x"
            }
            """,
            expandedSource: """
            package final class Odd: ManagedObject {
                let formatter = DateFormatter()
                let cache = [String: Int]()
                @Strata.Attribute(modelDefault: "default")
                var `default`: Int = -1
                @Attribute(modelDefault: "a\\"b") var quoted: String = "x"

                package static var entityDescription: Strata.EntityDescription {
                    Strata.EntityDescription(
                        name: "Odd", managedObjectClass: Odd.self,
                        properties: [
                            .attribute("default", .integer64, defaultValue: (-1 as Int).propertyValue),
                            .attribute(#"a"b"#, .string, defaultValue: ("x" as String).propertyValue),
                        ])
                }
            }

            extension Odd: Strata.EntityDeclaring {
            }
            """,
            macros: macros)
    }

    /// A default that is not a constant is evaluated once: said, not refused.
    /// A property inside #if cannot follow the condition into the model.
    func testNonConstantDefaultsWarnAndConditionalPropertiesAreRefused() {
        assertMacroExpansion(
            """
            @Entity
            final class Stamp: ManagedObject {
                var created: Date = Date()
                #if DEBUG
                var trace: String
                #endif
            }
            """,
            expandedSource: """
            final class Stamp: ManagedObject {
                @Strata.Attribute(modelDefault: "created")
                var created: Date = Date()
                #if DEBUG
                var trace: String
                #endif

                static var entityDescription: Strata.EntityDescription {
                    Strata.EntityDescription(
                        name: "Stamp", managedObjectClass: Stamp.self,
                        properties: [
                            .attribute("created", .date, defaultValue: (Date() as Date).propertyValue),
                        ])
                }
            }

            extension Stamp: Strata.EntityDeclaring {
            }
            """,
            diagnostics: [
                DiagnosticSpec(
                    message: "the initial value of created is the model's default, evaluated once when the model is built: "
                        + "every new object starts with that same value (set a per-object value after creating the object)",
                    line: 3, column: 5, severity: .warning),
                DiagnosticSpec(message: "@Entity cannot store a property declared inside #if: move it out, or mark it @Transient", line: 5, column: 5),
            ],
            macros: macros)
    }

    func testAnExplicitKeyIsKeptAndTheNameCanDiffer() {
        assertMacroExpansion(
            """
            @Entity(name: "Tag", renamedFrom: "Label")
            final class TagV2: ManagedObject {
                @Attribute("name") var label: String
            }
            """,
            expandedSource: """
            final class TagV2: ManagedObject {
                @Attribute("name") var label: String

                static var entityDescription: Strata.EntityDescription {
                    Strata.EntityDescription(
                        name: "Tag", managedObjectClass: TagV2.self,
                        properties: [
                            .attribute("name", .string),
                        ],
                        renamedFrom: "Label")
                }
            }

            extension TagV2: Strata.EntityDeclaring {
            }
            """,
            macros: macros)
    }

    private static let typesAccepted = "(String, Int, Int16, Int32, Int64, Double, Bool, Date, Data, UUID, or one of those optional) "
        + "nor a relationship (Set<T> or T? of a ManagedObject subclass T); mark it @Transient to keep it out of the model"

    func testMistakesAreNamedWhereTheyAre() {
        let cases: [(source: String, message: String)] = [
            ("var point: CGPoint", "@Entity cannot store point: CGPoint is neither an attribute type " + Self.typesAccepted),
            ("var count = 0", "count needs a type annotation (var count: String) for @Entity to map it"),
            ("weak var parent: Folder?", "parent is weak or unowned: a relationship is held by the context, not by the object; drop the modifier"),
            ("var link: URL?", "@Entity cannot store link: URL? is neither an attribute type " + Self.typesAccepted),
            ("var scores: [Int]?", "@Entity cannot store scores: [Int]? is neither an attribute type " + Self.typesAccepted),
            ("@Related(inverse: \\Tag.parent?.children) var tags: Set<Tag>",
             "the inverse of tags is one property of the destination (\\Tag.bookmarks), not \\Tag.parent?.children"),
            ("var owner: Person", "@Entity cannot store owner: Person is neither an attribute type " + Self.typesAccepted),
            ("@Related(inverse: \"x\") var name: String", "name is an attribute: @Related is for relationships"),
            ("var a: Int, b: Int", "declare one property per var in an @Entity class"),
            ("var description: String", "description is a member of ManagedObject: name the Swift property otherwise and keep description "
                + "as the model's name, @Attribute(\"description\") var descriptionValue: …"),
            ("@Unique var owner: Person?", "owner is not an attribute: @Unique and @Indexed are for attributes"),
            ("var tags: Set<Tag> = [first]", "tags is a relationship, which starts empty in every new object: remove = [first]"),
            ("@Attribute(\"n\") var count: Int = 1", "count has an initial value, which is the model's default: "
                + "write @Attribute(modelDefault: \"n\"), or leave the wrapper to @Entity"),
        ]
        for (source, message) in cases {
            // Reported on the property; the entity leaves it out.
            assertMacroExpansion(
                "@Entity\nfinal class Thing: ManagedObject {\n    \(source)\n}",
                expandedSource: """
                    final class Thing: ManagedObject {
                        \(source)

                        static var entityDescription: Strata.EntityDescription {
                            Strata.EntityDescription(
                                name: "Thing", managedObjectClass: Thing.self,
                                properties: [

                                ])
                        }
                    }

                    extension Thing: Strata.EntityDeclaring {
                    }
                    """,
                diagnostics: [DiagnosticSpec(message: message, line: 3, column: 5)],
                macros: macros.filter { $0.key == "Entity" })
        }
        // Two properties under one key: the second is reported.
        assertMacroExpansion(
            """
            @Entity
            final class Thing: ManagedObject {
                @Attribute("a") var x: Int
                @Attribute("a") var y: Int
            }
            """,
            expandedSource: """
                final class Thing: ManagedObject {
                    @Attribute("a") var x: Int
                    @Attribute("a") var y: Int

                    static var entityDescription: Strata.EntityDescription {
                        Strata.EntityDescription(
                            name: "Thing", managedObjectClass: Thing.self,
                            properties: [
                                .attribute("a", .integer64),
                            ])
                    }
                }

                extension Thing: Strata.EntityDeclaring {
                }
                """,
            diagnostics: [DiagnosticSpec(message: "two properties of Thing are stored as a", line: 4, column: 5)],
            macros: macros.filter { $0.key == "Entity" })
    }

    /// SwiftData's spellings in the class body: `#Unique` and `#Index`,
    /// each array of key paths one constraint or index, by the model's keys.
    func testUniqueAndIndexInTheBody() {
        let members: [String: any Macro.Type] = ["Entity": EntityMacro.self, "Unique": EntityMemberMacro.self, "Index": EntityMemberMacro.self]
        assertMacroExpansion(
            """
            @Entity(indexes: [["day"]])
            final class Visit: ManagedObject {
                #Unique<Visit>([\\.token], [\\.day, \\Visit.place])
                #Index<Visit>([\\.place, \\.day])
                var day: Date
                @Attribute("code") var token: String
                var place: String
            }
            """,
            expandedSource: """
            final class Visit: ManagedObject {
                @Strata.Attribute("day")
                var day: Date
                @Attribute("code") var token: String
                @Strata.Attribute("place")
                var place: String

                static var entityDescription: Strata.EntityDescription {
                    Strata.EntityDescription(
                        name: "Visit", managedObjectClass: Visit.self,
                        properties: [
                            .attribute("day", .date),
                            .attribute("code", .string),
                            .attribute("place", .string),
                        ],
                        indexes: ([["day"]] as [[String]] + [["place", "day"]]).map {
                            Strata.IndexDescription($0)
                        },
                        uniquenessConstraints: [] as [[String]] + [["code"], ["day", "place"]])
                }
            }

            extension Visit: Strata.EntityDeclaring {
            }
            """,
            macros: members)
        assertMacroExpansion(
            """
            @Entity
            final class Visit: ManagedObject {
                #Unique<Visit>([\\.missing], [\\.day.hashValue])
                var day: Date
            }
            struct Elsewhere {
                #Index<Visit>([\\.day])
            }
            """,
            expandedSource: """
            final class Visit: ManagedObject {
                @Strata.Attribute("day")
                var day: Date

                static var entityDescription: Strata.EntityDescription {
                    Strata.EntityDescription(
                        name: "Visit", managedObjectClass: Visit.self,
                        properties: [
                            .attribute("day", .date),
                        ])
                }
            }
            struct Elsewhere {
                #Index<Visit>([\\.day])
            }

            extension Visit: Strata.EntityDeclaring {
            }
            """,
            diagnostics: [
                DiagnosticSpec(message: "#Unique names missing, which is not a stored property of Visit", line: 3, column: 21),
                DiagnosticSpec(message: "#Unique names each attribute with a key path of one property, \\.name", line: 3, column: 34),
                DiagnosticSpec(message: "#Index belongs in the body of an @Entity class", line: 7, column: 5),
            ],
            macros: members)
    }
}
