// Micro-benchmarks of Strata's object graph, through its public API only.
//
// Record encoding and decoding are internal to Strata, so they are measured
// where the public API does them: a save of a coordinator-attached context
// encodes every inserted object into one record of the batch it writes, and a
// fetch decodes every stored record of the entity (fetches always scan the
// store; the row cache serves single-object loads, not fetches). The stores
// are in memory, so the figures are the object graph's, not the disk's.
// Building contexts and inserting the objects to save is never measured.

import Benchmark
import Foundation
import Strata

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        warmupIterations: 3,
        maxDuration: .seconds(2),
        maxIterations: 10_000
    )

    // Encode: one save of 16 new objects (six attributes each) from a fresh
    // context attached to the coordinator: validation, 16 record encodings,
    // one atomic batch into the in-memory store. The store keeps growing.
    let encoder = GraphFixture()
    Benchmark("graph: save 16 objects (record encode)") { benchmark in
        let context = ManagedObjectContext(.privateQueue, coordinator: encoder.coordinator)
        do {
            try context.performAndWait { () throws(StrataError) in
                GraphFixture.insertRecipes(GraphFixture.handful, into: context, startingAt: encoder.nextRecipe)
                encoder.nextRecipe += GraphFixture.handful
                benchmark.startMeasurement()
                try context.save()
                benchmark.stopMeasurement()
            }
        } catch {
            benchmark.error("save failed: \(error)")
        }
    } setup: {
        try encoder.setUp(storedRecipes: 0)
    }

    // Decode: a fetch of all 16 stored objects from a fresh context: one
    // prefix scan, 16 record decodings, 16 objects materialized.
    let decoder = GraphFixture()
    Benchmark("graph: fetch 16 objects (record decode)") { benchmark in
        let context = ManagedObjectContext(.privateQueue, coordinator: decoder.coordinator)
        do {
            let count = try context.performAndWait { () throws(StrataError) -> Int in
                benchmark.startMeasurement()
                var request = FetchRequest<BenchRecipe>()
                request.returnsObjectsAsFaults = false  // decoded and materialized, as the name says
                let recipes = try context.fetch(request)
                benchmark.stopMeasurement()
                return recipes.count
            }
            if count != GraphFixture.handful { benchmark.error("fetched \(count) objects, expected \(GraphFixture.handful)") }
        } catch {
            benchmark.error("fetch failed: \(error)")
        }
    } setup: {
        try decoder.setUp(storedRecipes: GraphFixture.handful)
    }

    // Child → parent: a private child's save of 1,000 inserted objects into
    // its private parent (in memory; a save into a private parent as Strata's
    // concurrency Rule 10 describes it). Fresh parent and child every iteration.
    let nested = GraphFixture()
    Benchmark(
        "graph: child→parent save of 1000 objects",
        configuration: .init(maxIterations: 1_000)
    ) { benchmark in
        let parent = ManagedObjectContext(.privateQueue, coordinator: nested.coordinator)
        let child = ManagedObjectContext(.privateQueue, parent: parent)
        do {
            try child.performAndWait { () throws(StrataError) in
                GraphFixture.insertRecipes(1_000, into: child, startingAt: 0)
                benchmark.startMeasurement()
                try child.save()
                benchmark.stopMeasurement()
            }
            let moved = parent.performAndWait { parent.insertedObjects.count }
            if moved != 1_000 { benchmark.error("the parent holds \(moved) inserted objects, expected 1000") }
        } catch {
            benchmark.error("child save failed: \(error)")
        }
    } setup: {
        try nested.setUp(storedRecipes: 0)
    }

    // Insert + save, the import path per object: 1,000 objects made and
    // their six attributes set in a fresh coordinator-attached context, then
    // saved as one batch into the in-memory store (which keeps growing).
    // Without an index, then with two (`name`, `servings`): the difference
    // is the index maintenance — an entry per index per object, encoded in
    // the same batch.
    for indexed in [false, true] {
        let importer = GraphFixture(indexed: indexed)
        Benchmark(
            indexed ? "graph: insert+save 1000 objects, 2 indexes" : "graph: insert+save 1000 objects",
            configuration: .init(maxIterations: 300)
        ) { benchmark in
            let context = ManagedObjectContext(.privateQueue, coordinator: importer.coordinator)
            do {
                try context.performAndWait { () throws(StrataError) in
                    benchmark.startMeasurement()
                    GraphFixture.insertRecipes(1_000, into: context, startingAt: importer.nextRecipe)
                    try context.save()
                    benchmark.stopMeasurement()
                    importer.nextRecipe += 1_000
                }
            } catch {
                benchmark.error("save failed: \(error)")
            }
        } setup: {
            try importer.setUp(storedRecipes: 0)
        }
    }

    // Index maintenance on update: 1,000 stored objects, both indexed
    // attributes changed on each (set, not measured) and saved: per object
    // and index, the old entry removed and the new one written, in one batch.
    let updater = GraphFixture(indexed: true)
    Benchmark(
        "graph: save 1000 updates of 2 indexed attributes",
        configuration: .init(maxIterations: 1_000)
    ) { benchmark in
        let context = ManagedObjectContext(.privateQueue, coordinator: updater.coordinator)
        do {
            try context.performAndWait { () throws(StrataError) in
                var request = FetchRequest<BenchRecipe>()
                request.returnsObjectsAsFaults = false
                let recipes = try context.fetch(request)
                updater.nextRecipe += 1
                for (i, recipe) in recipes.enumerated() {
                    recipe.name = "Recipe \(i), round \(updater.nextRecipe)"
                    recipe.servings += 1
                }
                benchmark.startMeasurement()
                try context.save()
                benchmark.stopMeasurement()
                if recipes.count != 1_000 { benchmark.error("updated \(recipes.count) objects, expected 1000") }
            }
        } catch {
            benchmark.error("update failed: \(error)")
        }
    } setup: {
        try updater.setUp(storedRecipes: 1_000)
    }
}

// MARK: - Model and fixture

final class BenchRecipe: ManagedObject {
    @Attribute("name") var name: String
    @Attribute("servings") var servings: Int
    @Attribute("rating") var rating: Double
    @Attribute("notes") var notes: String?
    @Attribute("vegetarian") var vegetarian: Bool
    @Attribute("created") var created: Date
}

/// One benchmark's in-memory coordinator (made in `setup`, so that a model
/// is built once per benchmark) and the next recipe number to insert.
final class GraphFixture {
    static let handful = 16

    /// Whether the model indexes `name` and `servings`.
    let indexed: Bool
    private var _coordinator: PersistentStoreCoordinator?
    var nextRecipe = 0

    var coordinator: PersistentStoreCoordinator {
        guard let _coordinator else { preconditionFailure("the fixture has no coordinator: setup did not run") }
        return _coordinator
    }

    init(indexed: Bool = false) {
        self.indexed = indexed
    }

    /// A fresh in-memory store holding `storedRecipes` recipes.
    func setUp(storedRecipes: Int) throws {
        let model = try ManagedObjectModel(entities: [
            EntityDescription(name: "Recipe", managedObjectClass: BenchRecipe.self, properties: [
                .attribute("name", .string),
                .attribute("servings", .integer64, defaultValue: .integer(1)),
                .attribute("rating", .double, defaultValue: .double(0)),
                .attribute("notes", .string, optional: true),
                .attribute("vegetarian", .bool, defaultValue: .bool(false)),
                .attribute("created", .date, defaultValue: .date(Date(timeIntervalSinceReferenceDate: 0))),
            ], indexes: indexed ? [IndexDescription("name"), IndexDescription("servings")] : []),
        ])
        let coordinator = PersistentStoreCoordinator(model: model)
        try coordinator.addPersistentStore(.inMemory)
        _coordinator = coordinator
        nextRecipe = 0
        guard storedRecipes > 0 else { return }
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws(StrataError) in
            Self.insertRecipes(storedRecipes, into: context, startingAt: 0)
            try context.save()
        }
        nextRecipe = storedRecipes
    }

    /// Inserts `count` recipes numbered from `first`; call on `context`'s queue.
    static func insertRecipes(_ count: Int, into context: ManagedObjectContext, startingAt first: Int) {
        for i in first ..< first + count {
            let recipe = BenchRecipe(context: context)
            recipe.name = "Recipe \(i)"
            recipe.servings = i % 8 + 1
            recipe.rating = Double(i % 50) / 10
            recipe.notes = i % 3 == 0 ? "Serve warm; keeps for \(i % 5 + 1) days." : nil
            recipe.vegetarian = i % 2 == 0
            recipe.created = Date(timeIntervalSinceReferenceDate: Double(i) * 60)
        }
    }
}
