import Foundation
import StrataMacros

// Version 2 of the model: `title` is now `name`, and a bookmark may have a
// note. A version-1 store opens with it as it is: the change is inferred,
// and no record is rewritten (each is upgraded as it is read).
@Entity(indexes: [["visits"]], uniquenessConstraints: [["url"]])
final class Bookmark: ManagedObject {
    var url: String
    @Renamed(from: "title") var name: String
    var note: String?
    var visits: Int = 0
    @Related(inverse: "bookmarks") var tags: Set<Tag>
}

@Entity(uniquenessConstraints: [["name"]])
final class Tag: ManagedObject {
    var name: String
    @Related(inverse: "tags") var bookmarks: Set<Bookmark>
}

let directory = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "Bookmarks.store"
let container = try PersistentContainer(name: "Bookmarks", model: ManagedObjectModel(Bookmark.self, Tag.self),
                                        directory: directory, viewContext: .privateQueue)
try await container.write { context in
    try Bookmark.first(in: context, where: #Predicate { $0.url == "https://swift.org" })?.note = "start here"
}
let view = container.viewContext
let names = try await view.perform {
    try Bookmark.all(in: view, sortedBy: [SortDescriptor(\.name)]).map { "\($0.name)\($0.note.map { ": \($0)" } ?? "")" }
}
print("version 2:", names.joined(separator: ", "))
try container.close()
