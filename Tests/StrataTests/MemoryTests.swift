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
        // The reader holds them; the writer, which only passed them on, holds none.
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
}
