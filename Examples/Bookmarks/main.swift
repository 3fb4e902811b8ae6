import Foundation
import StrataMacros

// The model: each entity declared once, as a class. @Entity derives the
// entity from the stored properties (a type it cannot store is a compile
// error on that property).
@Entity(indexes: [["visits"]], uniquenessConstraints: [["url"]])
final class Bookmark: ManagedObject {
    var url: String
    var title: String
    var visits: Int = 0
    @Related(inverse: "bookmarks") var tags: Set<Tag>
}

@Entity(uniquenessConstraints: [["name"]])
final class Tag: ManagedObject {
    var name: String
    @Related(inverse: "tags") var bookmarks: Set<Bookmark>
}

let model = try ManagedObjectModel(Bookmark.self, Tag.self)
let directory = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "Bookmarks.store"

// The stack: a writer context owns the store on disk, the view context is
// its child. A tool has no main run loop, so its view context gets a
// private queue (an app with a UI keeps the default, the main queue).
let container = try PersistentContainer(name: "Bookmarks", model: model, directory: directory,
                                        viewContext: .privateQueue)

// An import in the background, on disk when `write` returns. Running it
// twice changes nothing: each record finds the bookmark and tags it made.
let records: [(url: String, title: String, visits: Int, tags: [String])] = [
    ("https://swift.org", "Swift", 42, ["swift", "language"]),
    ("https://github.com/apple/swift-nio", "SwiftNIO", 17, ["swift", "networking"]),
    ("https://www.sqlite.org", "SQLite", 23, ["database"]),
    ("https://github.com/groue/GRDB.swift", "GRDB", 8, ["swift", "database"]),
]
try await container.write { context in
    for record in records {
        let bookmark = try Bookmark.findOrCreate(where: \.url, equals: record.url, in: context)
        bookmark.title = record.title
        bookmark.visits = record.visits
        bookmark.tags = Set(try record.tags.map { name in
            try Tag.findOrCreate(where: \.name, equals: name, in: context)
        })
    }
}

// A fetch: the three most visited, read from the visits index's end.
let view = container.viewContext
let top = try await view.perform {
    var request = FetchRequest<Bookmark>(sortBy: [SortDescriptor(\.visits, order: .reverse)])
    request.fetchLimit = 3
    return try view.fetch(request).map { "\($0.title) (\($0.visits))" }
}
print("most visited:", top.joined(separator: ", "))

// An aggregate: bookmarks per tag, counted without making an object.
let perTag = try await view.perform {
    let request = DictionaryFetchRequest<Tag>(propertiesToFetch: ["name", .count(of: "bookmarks")])
    return try view.fetch(request).map { row in
        "\(row.value("name", as: String.self)!) \(row.value(.count(of: "bookmarks"), as: Int.self)!)"
    }
}
print("per tag:", perTag.sorted().joined(separator: ", "))

try container.close()
