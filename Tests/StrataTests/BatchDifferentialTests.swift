import Foundation
import SharedTestSupport
@testable import Strata
import StrataStore
import Testing

/// Batch requests leave the same store as the same changes made through a
/// context: random object graphs (cascade, nullify and deny relationships,
/// a uniqueness constraint), copied; one copy changed by a batch request
/// in random batch sizes, the other by a context that fetches, changes
/// or deletes, and saves; then every stored object compared, and a
/// refusal (deny) must be a refusal on both sides.
@Suite struct BatchDifferentialTests {
    static let model = makeModel(recipeUniqueness: [["name"]])

    @Test(arguments: 0..<40) func aBatchRequestLeavesWhatAContextLeaves(seed: Int) throws {
        var random = SeededGenerator(seed: UInt64(seed) &* 0x9E37_79B9 &+ 7)
        let directory = TemporaryDirectory()
        let first = directory.path + "/batch", second = directory.path + "/context"
        try Self.makeGraph(at: first, random: &random)
        try FileManager.default.copyItem(atPath: first, toPath: second)
        let batchSide = try Self.makeOpenCoordinator(first), contextSide = try Self.makeOpenCoordinator(second)
        let context = ManagedObjectContext(.privateQueue, coordinator: contextSide)
        let batchSize = Int(random.next() % 12) + 1

        let operation = Int(random.next() % 5)
        let description: String
        let batchOutcome: Result<Void, StrataError>, contextOutcome: Result<Void, StrataError>
        switch operation {
        case 0:
            let low = Int(random.next() % 10), high = low + Int(random.next() % 5)
            description = "delete recipes with \(low) ≤ servings < \(high)"
            let predicate = #Predicate<Recipe> { $0.servings >= low && $0.servings < high }
            var request = BatchDeleteRequest<Recipe>(where: predicate)
            request.batchSize = batchSize
            batchOutcome = Result { () throws(StrataError) in try batchSide.execute(request) }
            contextOutcome = Self.inContext(context) { () throws(StrataError) in
                for recipe in try Recipe.all(in: context, where: predicate) { context.delete(recipe) }
            }
        case 1:
            let labels = Set((0..<3).map { _ in "T\(random.next() % 6)" })
            description = "delete tags \(labels.sorted())"
            let predicate = #Predicate<Tag> { labels.contains($0.label) }
            var request = BatchDeleteRequest<Tag>(where: predicate)
            request.batchSize = batchSize
            batchOutcome = Result { () throws(StrataError) in try batchSide.execute(request) }
            contextOutcome = Self.inContext(context) { () throws(StrataError) in
                for tag in try Tag.all(in: context, where: predicate) { context.delete(tag) }
            }
        case 2:
            // Deny: an author holding recipes refuses. One batch, so that a
            // refusal leaves nothing written on either side.
            let names = Set((0..<2).map { _ in "A\(random.next() % 5)" })
            description = "delete authors \(names.sorted())"
            let predicate = #Predicate<Author> { names.contains($0.name) }
            batchOutcome = Result { () throws(StrataError) in try batchSide.execute(BatchDeleteRequest<Author>(where: predicate)) }
            contextOutcome = Self.inContext(context) { () throws(StrataError) in
                for author in try Author.all(in: context, where: predicate) { context.delete(author) }
            }
        case 3:
            let rows: [[String: PropertyValue]] = (0..<Int(random.next() % 30)).map { _ in
                var row: [String: PropertyValue] = ["name": .string("R\(random.next() % 60)")]
                if random.next() % 2 == 0 { row["servings"] = .integer(Int64(random.next() % 10)) }
                if random.next() % 2 == 0 { row["notes"] = random.next() % 3 == 0 ? .null : .string("n\(random.next() % 4)") }
                return row
            }
            description = "insert \(rows.count) rows"
            var request = BatchInsertRequest<Recipe>(objects: rows)
            request.batchSize = batchSize
            batchOutcome = Result { () throws(StrataError) in try batchSide.execute(request) }
            contextOutcome = Self.inContext(context) { () throws(StrataError) in
                for row in rows {
                    guard case .string(let name) = row["name"] else { continue }
                    let recipe = try Recipe.first(in: context, where: #Predicate { $0.name == name }) ?? Recipe(context: context)
                    for (key, value) in row { try recipe.setPropertyValue(value, forKey: key) }
                }
            }
        default:
            let below = Int(random.next() % 10), rating = Double(random.next() % 5)
            description = "set rating \(rating) where servings < \(below)"
            let predicate = #Predicate<Recipe> { $0.servings < below }
            var request = BatchUpdateRequest<Recipe>(where: predicate, set: ["rating": .double(rating)])
            request.batchSize = batchSize
            batchOutcome = Result { () throws(StrataError) in try batchSide.execute(request) }
            contextOutcome = Self.inContext(context) { () throws(StrataError) in
                for recipe in try Recipe.all(in: context, where: predicate) { recipe.rating = rating }
            }
        }
        switch (batchOutcome, contextOutcome) {
        case (.success, .success):
            break
        case (.failure(let a), .failure(let b)):
            #expect(a.code == b.code && a.validationFailures.map(\.reason).sorted(by: { $0.rawValue < $1.rawValue })
                == b.validationFailures.map(\.reason).sorted(by: { $0.rawValue < $1.rawValue }), "\(description): \(a) | \(b)")
        default:
            Issue.record("\(description), batches of \(batchSize): the batch request \(batchOutcome), the context \(contextOutcome)")
        }
        let (batchState, contextState) = (try Self.state(of: batchSide), try Self.state(of: contextSide))
        let differing = Set(batchState.keys).union(contextState.keys).sorted().filter { batchState[$0] != contextState[$0] }.map {
            "\($0): batch \(batchState[$0].map { "\($0)" } ?? "none") | context \(contextState[$0].map { "\($0)" } ?? "none")"
        }
        #expect(differing.isEmpty, "\(description), batches of \(batchSize): the stores differ in \(differing.count) objects: \(differing.prefix(3))")
        try batchSide.close()
        try contextSide.close()
    }

    /// Runs `body` in `context` and saves; rolls back what a failure left.
    static func inContext(_ context: ManagedObjectContext, _ body: () throws(StrataError) -> Void) -> Result<Void, StrataError> {
        context.performAndWait {
            let outcome = Result { () throws(StrataError) in
                try body()
                try context.save()
            }
            if case .failure = outcome { context.rollback() }
            return outcome
        }
    }

    /// A random graph: 40 recipes (unique names), each with up to three
    /// ingredients (cascade), maybe a card (cascade), some of six tags
    /// (nullify both ways) and maybe one of five authors (whose recipes
    /// deny the author's deletion).
    static func makeGraph(at path: String, random: inout SeededGenerator) throws {
        let coordinator = try makeOpenCoordinator(path)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            let tags = (0..<6).map { i -> Tag in
                let tag = Tag(context: context)
                tag.label = "T\(i)"
                return tag
            }
            let authors = (0..<5).map { i -> Author in
                let author = Author(context: context)
                author.name = "A\(i)"
                return author
            }
            for i in 0..<40 {
                let recipe = Recipe(context: context)
                recipe.name = "R\(i)"
                recipe.servings = Int(random.next() % 10)
                for j in 0..<Int(random.next() % 4) {
                    let ingredient = Ingredient(context: context)
                    ingredient.name = "I\(i).\(j)"
                    ingredient.grams = Int32(random.next() % 100)
                    ingredient.recipe = recipe
                }
                if random.next() % 2 == 0 {
                    let card = Card(context: context)
                    card.text = "C\(i)"
                    recipe.card = card
                }
                recipe.tags = Set(tags.filter { _ in random.next() % 3 == 0 })
                if random.next() % 3 != 0 { recipe.author = authors[Int(random.next() % 5)] }
            }
            try context.save()
        }
        try coordinator.close()
    }

    static func makeOpenCoordinator(_ path: String) throws -> PersistentStoreCoordinator {
        let coordinator = PersistentStoreCoordinator(model: model)
        try coordinator.addPersistentStore(.log, directory: path, options: testStoreOptions())
        return coordinator
    }

    /// Every stored object's values, by entity and primary key — recipes
    /// by name (unique), as a batch insert and a context give new ones
    /// different keys.
    static func state(of coordinator: PersistentStoreCoordinator) throws -> [String: [PropertyValue]] {
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        return try context.performAndWait { () throws -> [String: [PropertyValue]] in
            var state: [String: [PropertyValue]] = [:]
            func add<T: ManagedObject>(_ type: T.Type, key: (T) -> String) throws {
                for object in try context.fetch(FetchRequest<T>()) { state["\(T.self) \(key(object))"] = object.values }
            }
            try add(Recipe.self) { $0.name }
            try add(Ingredient.self) { "\($0.objectID.primaryKey)" }
            try add(Tag.self) { "\($0.objectID.primaryKey)" }
            try add(Author.self) { "\($0.objectID.primaryKey)" }
            try add(Card.self) { "\($0.objectID.primaryKey)" }
            return state
        }
    }
}
