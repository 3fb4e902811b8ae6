import Foundation
@testable import Strata
import Testing

// Classes whose declarations disagree with the entities below, one mistake each.
final class DBookmark: ManagedObject {
    @Attribute("url") var url: String
    @Attribute("visits") var visits: Int
    @Attribute("title") var title: String?
    @Relationship("tags") var tags: Set<DTag>
}
final class DTag: ManagedObject {
    @Attribute("label") var label: String
    @Relationship("bookmarks") var bookmarks: Set<DBookmark>
}
final class DOther: ManagedObject {}
/// A subclass: its own declarations and its superclass's are checked.
final class DStarred: DBookmarkBase {
    @Attribute("stars") var stars: Int16
}
class DBookmarkBase: ManagedObject {
    @Attribute("url") var url: String
}

/// A class and the entity that names it are checked against each other
/// when the model is made: every mistake is a typed error naming the
/// class, the property and both types, never a crash at the first write.
@Suite struct DeclaredPropertyTests {
    static func tag(_ properties: [PropertyDescription]? = nil, class type: ManagedObject.Type = DTag.self) -> EntityDescription {
        EntityDescription(name: "Tag", managedObjectClass: type, properties: properties ?? [
            .attribute("label", .string), .toMany("bookmarks", "Bookmark", inverse: "tags"),
        ])
    }

    static func model(_ bookmark: [PropertyDescription], tag: EntityDescription = tag(), bookmarkClass: ManagedObject.Type = DBookmark.self) throws(StrataError) -> ManagedObjectModel {
        try ManagedObjectModel(entities: [EntityDescription(name: "Bookmark", managedObjectClass: bookmarkClass, properties: bookmark), tag])
    }

    static let agreeing: [PropertyDescription] = [
        .attribute("url", .string), .attribute("visits", .integer64), .attribute("title", .string, optional: true),
        .toMany("tags", "Tag", inverse: "bookmarks"),
    ]

    /// Replaces the property named `name` in ``agreeing``.
    static func agreeing(replacing name: String, with property: PropertyDescription) -> [PropertyDescription] {
        agreeing.map { $0.name == name ? property : $0 }
    }

    @Test func anAgreeingModelIsMadeAndItsObjectsWork() throws {
        let model = try Self.model(Self.agreeing)
        let coordinator = try makeCoordinator(model: model)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            let bookmark = DBookmark(context: context)
            bookmark.url = "https://swift.org"
            bookmark.visits = 3
            let tag = DTag(context: context)
            tag.label = "swift"
            bookmark.tags = [tag]
            try context.save()
            #expect(tag.bookmarks == [bookmark])
        }
        // Any integer attribute fits an Int; an entity that names no class is not checked.
        _ = try Self.model(Self.agreeing(replacing: "visits", with: .attribute("visits", .integer16)))
        _ = try ManagedObjectModel(entities: [EntityDescription(name: "Loose", properties: [.attribute("url", .binaryData)])])
    }

    @Test(arguments: [
        // A key the entity does not have (the typo the issue met: "visit").
        ("visits", PropertyDescription.attribute("visit", .integer64),
         ["DBookmark.visits (@Attribute(\"visits\") Int) names no property of entity Bookmark", "tags, title, url, visit"]),
        // The type.
        ("visits", .attribute("visits", .string), ["DBookmark.visits (@Attribute(\"visits\") Int) does not fit Bookmark.visits", "string attribute", "Int holds integer16 or integer32 or integer64"]),
        ("url", .attribute("url", .binaryData), ["DBookmark.url (@Attribute(\"url\") String)", "binaryData attribute"]),
        // Optionality, both ways.
        ("title", .attribute("title", .string), ["DBookmark.title (@Attribute(\"title\") Optional<String>)", "a nil would fail at save"]),
        ("url", .attribute("url", .string, optional: true), ["DBookmark.url", "an optional string attribute", "declare the property String?"]),
        // The kind.
        ("url", .toOne("url", "Tag", inverse: nil), ["DBookmark.url", "which is a relationship"]),
    ] as [(String, PropertyDescription, [String])])
    func aMistakeInAnAttributeIsATypedErrorNamingBothSides(name: String, property: PropertyDescription, phrases: [String]) {
        do {
            _ = try Self.model(Self.agreeing(replacing: name, with: property))
            Issue.record("the model was made")
        } catch {
            #expect(error.code == .invalidModel)
            for phrase in phrases { #expect(error.message.contains(phrase), "\(error.message)") }
        }
    }

    @Test func aMistakeInARelationshipIsATypedErrorNamingBothSides() {
        func expectRefused(_ make: () throws(StrataError) -> ManagedObjectModel, _ phrases: [String]) {
            switch Result(catching: make) {
            case .success: Issue.record("the model was made")
            case .failure(let error):
                #expect(error.code == .invalidModel)
                for phrase in phrases { #expect(error.message.contains(phrase), "\(error.message)") }
            }
        }
        // Set<DTag> on a to-one relationship.
        expectRefused({ () throws(StrataError) in
            try Self.model(Self.agreeing(replacing: "tags", with: .toOne("tags", "Tag", inverse: "bookmarks")),
                           tag: Self.tag([.attribute("label", .string), .toMany("bookmarks", "Bookmark", inverse: "tags")]))
        }, ["DBookmark.tags (@Relationship(\"tags\") Set<DTag>)", "which is to-one (declare the property DTag?)"])
        // A destination whose objects are another class.
        expectRefused({ () throws(StrataError) in
            try Self.model(Self.agreeing, tag: Self.tag(class: DOther.self))
        }, ["DBookmark.tags", "a to-many relationship to Tag, whose objects are DOther, not DTag"])
        // @Relationship on an attribute.
        expectRefused({ () throws(StrataError) in
            try Self.model(Self.agreeing(replacing: "tags", with: .toMany("tags", "Tag", inverse: nil)),
                           tag: Self.tag([.attribute("label", .string), .attribute("bookmarks", .string)]))
        }, ["DTag.bookmarks (@Relationship(\"bookmarks\") Set<DBookmark>)", "which is an attribute"])
    }

    @Test func aSubclassIsCheckedWithItsSuperclassesDeclarations() throws {
        func starred(_ properties: [PropertyDescription]) throws(StrataError) -> ManagedObjectModel {
            try ManagedObjectModel(entities: [EntityDescription(name: "Starred", managedObjectClass: DStarred.self, properties: properties)])
        }
        _ = try starred([.attribute("url", .string), .attribute("stars", .integer16)])
        #expect(throws: StrataError.self) { try starred([.attribute("stars", .integer16)]) }  // the superclass's url
        // Int16 reads an integer32 back truncated: refused.
        #expect { try starred([.attribute("url", .string), .attribute("stars", .integer32)]) } throws: { error in
            (error as? StrataError)?.message.contains("Int16 holds integer16") == true
        }
    }
}
