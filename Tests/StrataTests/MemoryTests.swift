import Foundation
import Strata
import Testing

/// Memory that follows use, not the store: the row cache stays within its
/// byte budget however many objects are loaded, a child's fetch registers
/// nothing in its ancestors, and what a context lets go of leaves it.
@Suite struct MemoryTests {
    @Test func loadingEveryObjectKeepsTheRowCacheWithinItsBudget() throws {
        let budget = 256 << 10
        let directory = TemporaryDirectory()
        let coordinator = PersistentStoreCoordinator(model: makeModel(), rowCacheBudget: budget)
        try coordinator.addPersistentStore(.log, directory: directory.path + "/store", options: testStoreOptions())
        let ids = try seedNumberedRecipes(coordinator, count: 5_000) { "A recipe with a name longer than fifteen bytes, number \($0)" }
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let reader = ManagedObjectContext(.privateQueue, parent: writer)
        var peak = 0
        try reader.performAndWait { () throws(StrataError) in
            for (i, id) in ids.enumerated() {
                _ = (try reader.existingObject(with: id) as! Recipe).servings
                if i % 100 == 0 { peak = max(peak, coordinator.rowCacheStatistics.bytes) }
            }
        }
        let loaded = coordinator.rowCacheStatistics
        #expect(peak <= budget && loaded.bytes <= budget)
        #expect(loaded.entries > 0 && loaded.entries < ids.count, "\(loaded)")
        // Looked up by ID, they stay registered in the reader until a reset;
        // the writer, which only passed them on, holds none.
        #expect(reader.performAndWait { reader.registeredObjects.count } == ids.count)
        #expect(writer.performAndWait { writer.registeredObjects.count } == 0)
        reader.performAndWait { reader.reset() }
        #expect(reader.performAndWait { reader.registeredObjects.count } == 0)
        // A fetch of the whole entity fills the cache only within its budget,
        // and leaves the parent empty.
        let fetcher = ManagedObjectContext(.privateQueue, parent: writer)
        #expect(try fetcher.performAndWait { try fetcher.fetch(FetchRequest<Recipe>()).count } == ids.count)
        #expect(coordinator.rowCacheStatistics.bytes <= budget)
        #expect(writer.performAndWait { writer.registeredObjects.count } == 0)
        // Closing empties it.
        try coordinator.close()
        let closed = coordinator.rowCacheStatistics
        #expect(closed.entries == 0 && closed.bytes == 0 && closed.budget == budget)
    }

    /// A context lets go of what it read once nothing outside it references
    /// it (``ManagedObjectContext/retainsRegisteredObjects`` off): when the
    /// block ends, or at a confinement context's next fetch; what was held
    /// then is checked again after as many more reads. What is held, or
    /// changed, stays, and stays the same instance.
    @Test func readObjectsNobodyHoldsAreLetGo() throws {
        let coordinator = try makeCoordinator()
        let count = ProcessInfo.processInfo.environment["STRATA_SANITIZED"] == nil ? 2_000 : 400
        let ids = try seedNumberedRecipes(coordinator, count: count) { "Recipe \($0)" }
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        // Read, touched, not kept.
        let names = try context.performAndWait { () throws(StrataError) in
            try context.fetch(FetchRequest<Recipe>()).reduce(0) { $0 + $1.name.count }
        }
        #expect(names > 0)
        #expect(context.performAndWait { context.registeredObjects.count } == 0)
        // Kept: they stay, and are the ones a lookup by ID returns.
        var kept: [Recipe]? = try context.performAndWait { () throws(StrataError) in try context.fetch(FetchRequest<Recipe>()) }
        #expect(context.performAndWait { context.registeredObjects.count } == ids.count)
        let first = try #require(kept?.first)
        #expect(try context.performAndWait { () throws(StrataError) in try context.existingObject(with: first.objectID) } === first)
        // Let go of by the caller later: checked again once the context has
        // read or fetched as many objects since, here by one more fetch of
        // them all. A changed one stays.
        context.performAndWait { first.servings = 99 }
        kept = nil
        _ = try context.performAndWait { () throws(StrataError) in try context.fetch(FetchRequest<Recipe>()).count }
        #expect(context.performAndWait { context.registeredObjects.count } == 1)
        #expect(try context.performAndWait { () throws(StrataError) in try context.existingObject(with: first.objectID) } === first)
        context.performAndWait { context.rollback() }

        // Kept by the context itself when asked to.
        let keeping = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        keeping.performAndWait { keeping.retainsRegisteredObjects = true }
        _ = try keeping.performAndWait { () throws(StrataError) in try keeping.fetch(FetchRequest<Recipe>()).count }
        #expect(keeping.performAndWait { keeping.registeredObjects.count } == ids.count)

        // A confinement context has no blocks: its next fetch lets go.
        let confined = ManagedObjectContext(.confinement, coordinator: coordinator)
        _ = try confined.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.servings >= 0 })).count
        #expect(confined.registeredObjects.count == ids.count)
        let one = try confined.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.name == "Recipe 7" }))
        #expect(one.count == 1 && confined.registeredObjects.count == 1)
    }
}
