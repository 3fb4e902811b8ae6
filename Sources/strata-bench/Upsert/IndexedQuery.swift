import ArgumentParser
import Dispatch
import Foundation
import Strata

/// The queries `upsert` times through the store's indexes, each also run
/// on SQLite with the same indexes (``SQLiteUpsert/queries(objects:path:)``).
enum IndexedQuery {
    struct Query {
        let title: String
        let sql: String
    }

    /// Recipe `n` was created `n` seconds after the base date and serves `n % 6 + 1`.
    static let base = 700_000_000.0
    static let window = 1_000.0
    /// The window's start: recipes from the middle of the store.
    static func windowStart(objects: Int) -> Double { Double(objects / 2) }

    static let all = [
        Query(title: "count(for:) created in a 1,000-second window (about 1,000 match; entries only)",
              sql: "SELECT COUNT(*) FROM recipe WHERE created >= ?1 AND created < ?2"),
        Query(title: "count(for:) servings == 3 (1 in 6 match; entries only)",
              sql: "SELECT COUNT(*) FROM recipe WHERE servings = 3"),
        Query(title: "fetch sorted by created, limit 20, where servings == 3",
              sql: "SELECT id, name, servings, rating, created FROM recipe WHERE servings = 3 ORDER BY created LIMIT 20"),
        Query(title: "fetch sorted by created, limit 20, created in the window",
              sql: "SELECT id, name, servings, rating, created FROM recipe WHERE created >= ?1 AND created < ?2 ORDER BY created LIMIT 20"),
        Query(title: "count per servings (group by over its index; entries only)",
              sql: "SELECT servings, COUNT(*) FROM recipe GROUP BY servings"),
        Query(title: "sum of rating per servings (group by; every record read)",
              sql: "SELECT servings, SUM(rating) FROM recipe GROUP BY servings"),
    ]

    /// Milliseconds per query (the median of 5, after one unmeasured run),
    /// each checked against what the store holds.
    static func measure(objects: Int, in container: PersistentContainer) throws -> [String: Double] {
        let context = container.newBackgroundContext(childOfWriter: false)
        let from = Date(timeIntervalSinceReferenceDate: base + windowStart(objects: objects))
        let to = Date(timeIntervalSinceReferenceDate: base + windowStart(objects: objects) + window)
        var results: [String: Double] = [:]
        func time(_ query: Query, expect expected: Int, _ run: () throws -> Int) throws {
            var samples: [Double] = []
            for round in 0..<6 {
                var got = 0
                let elapsed = try seconds { got = try run() }
                guard got == expected else { throw ValidationError("\(query.title): \(got), expected \(expected)") }
                if round > 0 { samples.append(elapsed * 1000) }
            }
            results[query.title] = median(samples)
        }
        try context.performAndWait { () throws in
            // What a scan counts (`|| false` leaves the planner no index): the
            // upserts of earlier rounds moved some recipes in and out.
            let inWindow = try context.count(for: FetchRequest<BenchRecipe>(predicate: #Predicate { ($0.created >= from && $0.created < to) || false }))
            try time(all[0], expect: inWindow) {
                try context.count(for: FetchRequest<BenchRecipe>(predicate: #Predicate { $0.created >= from && $0.created < to }))
            }
            let servingThree = try context.count(for: FetchRequest<BenchRecipe>(predicate: #Predicate { $0.servings == 3 || false }))
            try time(all[1], expect: servingThree) {
                try context.count(for: FetchRequest<BenchRecipe>(predicate: #Predicate { $0.servings == 3 }))
            }
            var sorted = FetchRequest<BenchRecipe>(predicate: #Predicate { $0.servings == 3 }, sortBy: [SortDescriptor(\.created)])
            sorted.fetchLimit = 20
            try time(all[2], expect: 20) { try context.fetch(sorted).count }
            var windowed = FetchRequest<BenchRecipe>(predicate: #Predicate { $0.created >= from && $0.created < to }, sortBy: [SortDescriptor(\.created)])
            windowed.fetchLimit = 20
            try time(all[3], expect: min(20, inWindow)) { try context.fetch(windowed).count }
            let perServings = DictionaryFetchRequest<BenchRecipe>(propertiesToFetch: ["servings", .count()], groupBy: ["servings"])
            let groups = try context.fetch(perServings)
            // Earlier rounds' upserts added recipes: the store's count is the total.
            let stored = try context.count(for: FetchRequest<BenchRecipe>())
            let counted = groups.reduce(0) { $0 + ($1.value("count", as: Int.self) ?? 0) }
            guard counted == stored, groups.first(where: { $0.value("servings", as: Int.self) == 3 })?.value("count", as: Int.self) == servingThree else {
                throw ValidationError("\(all[4].title): \(groups), expected \(stored) recipes, \(servingThree) serving 3")
            }
            try time(all[4], expect: groups.count) { try context.fetch(perServings).count }
            let ratings = DictionaryFetchRequest<BenchRecipe>(propertiesToFetch: ["servings", .sum("rating")], groupBy: ["servings"])
            try time(all[5], expect: groups.count) { try context.fetch(ratings).count }
            context.reset()
        }
        return results
    }
}
