import Foundation
import Strata

/// What the benchmark stores: an entry with a unique key, a title of
/// skewed length, a count and a date — and the batch that saved it (the
/// kill cycles check batches are whole).
final class Entry: ManagedObject {
    @Attribute("key") var key: String
    @Attribute("title") var title: String
    @Attribute("count") var count: Int
    @Attribute("stamp") var stamp: Date
    @Attribute("batch") var batch: Int
}

enum BenchModel {
    /// `indexes`: the list pages' indexes too (on `count`, and on `title`).
    static func make(indexes: Bool = false) throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Entry", managedObjectClass: Entry.self, properties: [
                .attribute("key", .string),
                .attribute("title", .string),
                .attribute("count", .integer64, defaultValue: .integer(0)),
                .attribute("stamp", .date),
                .attribute("batch", .integer64, defaultValue: .integer(0)),
            ], indexes: indexes ? [IndexDescription(["count"]), IndexDescription(["title"])] : [], uniquenessConstraints: [["key"]]),
        ])
    }

    /// A title as real titles run: mostly short, some long (a skewed length).
    static func title(_ n: Int) -> String {
        let words = ["soup", "a bookmark", "release notes", "the quick brown fox", "ünïcödé", "naïve café", "x"]
        let length = n % 97 == 0 ? 40 : (n % 7 == 0 ? 6 : 2)
        return (0..<length).map { words[($0 &* 31 &+ n) % words.count] }.joined(separator: " ")
    }
}
