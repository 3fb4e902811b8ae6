import Foundation
@testable import Strata
import Testing

/// A typed property (`@Attribute`, `@Relationship`) finds its property by
/// name the first time, then by its wrapper's key path, per entity
/// (``WrapperIndexes``).
@Suite struct WrapperIndexTests {
    static let bookmarkProperties: [PropertyDescription] = [
        .attribute("url", .string), .attribute("visits", .integer64), .attribute("title", .string, optional: true),
        .toMany("tags", "Tag", inverse: "bookmarks"),
    ]

    static func model(bookmark properties: [PropertyDescription] = bookmarkProperties) throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Bookmark", managedObjectClass: DBookmark.self, properties: properties),
            EntityDescription(name: "Tag", managedObjectClass: DTag.self, properties: [
                .attribute("label", .string), .toMany("bookmarks", "Bookmark", inverse: "tags"),
            ]),
        ])
    }

    @Test func eachWrapperIsLookedUpByNameOnceAndKeptByItsKeyPath() throws {
        let model = try Self.model()
        let bookmarkEntity = try #require(model.entity(named: "Bookmark"))
        let context = ManagedObjectContext(.privateQueue, coordinator: try makeCoordinator(model: model))
        try context.performAndWait { () throws in
            for round in 0..<3 {
                let bookmark = DBookmark(context: context)
                bookmark.url = "https://example.org/\(round)"
                bookmark.visits = round
                bookmark.title = round == 1 ? nil : "page \(round)"
                let tag = DTag(context: context)
                tag.label = "t\(round)"
                bookmark.tags = [tag]
                #expect(bookmark.url == "https://example.org/\(round)")
                #expect(bookmark.visits == round)
                #expect(bookmark.title == (round == 1 ? nil : "page \(round)"))
                #expect(bookmark.tags == [tag] && tag.bookmarks == [bookmark])
                // By name, the same values: each wrapper wrote its own property.
                #expect(bookmark.value(forKey: "url") as? String == "https://example.org/\(round)")
                #expect(bookmark.value(forKey: "visits") as? Int == round)
            }
            try context.save()
        }
        // One entry per wrapper, however often each was used: the key paths
        // the accessors are handed are the same objects every time.
        #expect(bookmarkEntity.wrapperIndexes.keptCount == 4)
    }

    @Test func oneClassUnderEntitiesThatOrderItsPropertiesDifferentlyWritesEachEntitysOwn() throws {
        let reordered = try Self.model(bookmark: Self.bookmarkProperties.reversed())
        for model in [try Self.model(), reordered] {
            let context = ManagedObjectContext(.privateQueue, coordinator: try makeCoordinator(model: model))
            try context.performAndWait { () throws in
                let bookmark = DBookmark(context: context)
                bookmark.url = "https://swift.org"
                bookmark.visits = 7
                bookmark.title = "Swift"
                #expect(bookmark.propertyValue(forKey: "url") == .string("https://swift.org"))
                #expect(bookmark.propertyValue(forKey: "visits") == .integer(7))
                #expect(bookmark.propertyValue(forKey: "title") == .string("Swift"))
                #expect(bookmark.url == "https://swift.org" && bookmark.visits == 7 && bookmark.title == "Swift")
            }
        }
    }

    @Test func manyThreadsMeetingAnEntitysWrappersFirstAllReadTheirOwnValues() throws {
        let model = try Self.model()
        let coordinator = try makeCoordinator(model: model)
        let failures = Failures()
        // Every thread starts on a model none has used: the first lookups race.
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
            context.performAndWait {
                for i in 0..<200 {
                    let bookmark = DBookmark(context: context)
                    bookmark.url = "t\(thread)-\(i)"
                    bookmark.visits = thread * 1_000 + i
                    bookmark.title = i.isMultiple(of: 2) ? nil : "odd"
                    if bookmark.url != "t\(thread)-\(i)" || bookmark.visits != thread * 1_000 + i
                        || bookmark.title != (i.isMultiple(of: 2) ? nil : "odd")
                        || bookmark.propertyValue(forKey: "visits") != .integer(Int64(thread * 1_000 + i)) {
                        failures.add("thread \(thread), object \(i)")
                    }
                }
            }
        }
        #expect(failures.all.isEmpty)
        #expect(try #require(model.entity(named: "Bookmark")).wrapperIndexes.keptCount == 3)
    }

    @Test func pastItsCapacityAKeyPathIsLookedUpEveryTime() {
        let indexes = WrapperIndexes(capacity: 2)
        let keyPaths: [AnyKeyPath] = [\DBookmark.url, \DBookmark.visits, \DBookmark.title]
        var finds = [0, 0, 0]
        for _ in 0..<3 {
            for (i, keyPath) in keyPaths.enumerated() {
                let position = indexes.position(of: keyPath) {
                    finds[i] += 1
                    return i * 10
                }
                #expect(position == i * 10)
            }
        }
        #expect(finds == [1, 1, 3])
        #expect(indexes.keptCount == 2)
    }
}

/// Failures noted from many threads.
private final class Failures: @unchecked Sendable {
    private let lock = NSLock()
    private var noted: [String] = []  // guarded by `lock`
    func add(_ failure: String) { lock.withLock { noted.append(failure) } }
    var all: [String] { lock.withLock { noted } }
}
