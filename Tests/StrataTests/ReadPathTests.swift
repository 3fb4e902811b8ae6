import Dispatch
import Foundation
import SharedTestSupport
import Strata
import StrataStore
import Testing

// The read path (Rule 12 in *Concurrency*): a fetch or fault in a child reads
// the store and lays its ancestors' published pending changes over it, on
// its own queue — never entering an ancestor, never materializing an
// ancestor's unchanged objects (contract C10 and C13).

@Suite struct ReadPathTests {
    /// C13, with every ancestor's queue blocked: a grandchild's fetch
    /// sees the pending inserts, updates and deletes of the writer and of
    /// the main-queue context, its own with `includesPendingChanges`, and
    /// the source's values without — and finishes while neither ancestor
    /// can run a block.
    ///
    ///     writer queue     main queue       test thread
    ///     inserts W,       inserts M,       (the grandchild inserts C,
    ///     R1 = 11,         R3 = 13, W = 21,  R5 = 15, deletes R0)
    ///     deletes R2       deletes R4
    ///     blocked ──┐      blocked ──┐
    ///               │                │      grandchild: fetch ×2 — must
    ///               │                │      return now, from the store and
    ///               │                │      the published copies
    ///     released ◀┘      released ◀┘      gate.signal() ×2
    @Test func childFetchSeesTwoLevelsOfPendingChangesWhileAncestorsAreBlocked() async throws {
        let coordinator = try makeCoordinator(TemporaryDirectory())
        let ids = try seedNumberedRecipes(coordinator, count: 6)
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "writer")
        let main = ManagedObjectContext(.mainQueue, parent: writer, name: "main")
        let child = ManagedObjectContext(.privateQueue, parent: main, name: "child")
        let insertedInWriter = try writer.performAndWait {
            let w = Recipe(context: writer); w.name = "W"; w.servings = 10
            (try writer.existingObject(with: ids[1]) as! Recipe).servings = 11
            writer.delete(try writer.existingObject(with: ids[2]))
            return w.objectID
        }
        try await main.perform { () throws(StrataError) in
            let m = Recipe(context: main); m.name = "M"; m.servings = 20
            (try main.existingObject(with: ids[3]) as! Recipe).servings = 13
            (try main.existingObject(with: insertedInWriter) as! Recipe).servings = 21
            main.delete(try main.existingObject(with: ids[4]))
        }
        try child.performAndWait {
            let c = Recipe(context: child); c.name = "C"; c.servings = 30
            (try child.existingObject(with: ids[5]) as! Recipe).servings = 15
            child.delete(try child.existingObject(with: ids[0]))
        }

        let gate = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        enqueueBlock(writer) { started.signal(); _ = gate.wait(timeout: .now() + 30) }
        DispatchQueue.main.async { started.signal(); _ = gate.wait(timeout: .now() + 30) }
        let fetched = await runOnDedicatedThread(timeout: 20) { () -> [[String]] in
            started.wait()
            started.wait()
            return (try? child.performAndWait { () throws(StrataError) -> [[String]] in
                var request = FetchRequest<Recipe>(predicate: #Predicate { $0.servings >= 10 }, sortBy: [SortDescriptor(\.name)])
                let withPending = try child.fetch(request).map { "\($0.name)=\($0.servings)" }
                request.includesPendingChanges = false
                let withoutPending = try child.fetch(request).map(\.name)
                let all = try child.fetch(FetchRequest<Recipe>(sortBy: [SortDescriptor(\.name)])).map(\.name)
                return [withPending, withoutPending, all]
            }) ?? []
        }
        gate.signal()
        gate.signal()
        let results = try #require(fetched, "the child's fetch waited for a blocked ancestor")
        #expect(results[0] == ["C=30", "M=20", "R1=11", "R3=13", "R5=15", "W=21"])
        // The source decides: R5 is 5 there, C is only the child's.
        #expect(results[1] == ["M", "R1", "R3", "W"])
        #expect(results[2] == ["C", "M", "R1", "R3", "R5", "W"])
        // The ancestors registered only what they changed themselves.
        #expect(writer.performAndWait { writer.registeredObjects.count } == 3)
        #expect(await main.perform { main.registeredObjects.count } == 4)
    }

    /// A child's fetch of a whole entity materializes nothing in its
    /// ancestors (before, each level above registered every object).
    @Test func parentsRegisterNothingForAChildsFetch() throws {
        let coordinator = try makeCoordinator(TemporaryDirectory())
        _ = try seedNumberedRecipes(coordinator, count: 200)
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let middle = ManagedObjectContext(.privateQueue, parent: writer)
        let child = ManagedObjectContext(.privateQueue, parent: middle)
        let found = try child.performAndWait {
            try child.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.servings % 2 == 0 }))
        }
        #expect(found.count == 100)
        #expect(child.performAndWait { child.registeredObjects.count } == 100)
        #expect(middle.performAndWait { middle.registeredObjects.count } == 0)
        #expect(writer.performAndWait { writer.registeredObjects.count } == 0)
        // Counting and listing IDs materialize nothing, even in the child.
        let other = ManagedObjectContext(.privateQueue, parent: middle)
        try other.performAndWait { () throws in
            #expect(try other.count(for: FetchRequest<Recipe>(predicate: #Predicate { $0.servings < 50 })) == 50)
            #expect(try other.fetchObjectIDs(FetchRequest<Recipe>(predicate: #Predicate { $0.servings >= 190 })).count == 10)
            #expect(other.registeredObjects.isEmpty)
        }
    }

    /// With `includesPendingChanges` off, the context's own unsaved updates
    /// do not decide the match: the store's values do (Core Data's rule).
    @Test func withoutPendingChangesTheSourceDecidesTheMatch() throws {
        let coordinator = try makeCoordinator()
        let ids = try seedNumberedRecipes(coordinator, count: 12)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            (try context.existingObject(with: ids[5]) as! Recipe).servings = 50
            (try context.existingObject(with: ids[9]) as! Recipe).servings = 1
            var request = FetchRequest<Recipe>(predicate: #Predicate { $0.servings > 8 }, sortBy: [SortDescriptor(\.servings)])
            #expect(try context.fetch(request).map(\.name) == ["R10", "R11", "R5"])
            request.includesPendingChanges = false
            let stored = try context.fetch(request)
            #expect(stored.map(\.name).sorted() == ["R10", "R11", "R9"])
            // The objects are the context's own, with its unsaved values.
            #expect(stored.first { $0.name == "R9" }?.servings == 1)
            #expect(try context.count(for: request) == 3)
        }
    }

    /// A child sees what its parent's save moved into the store, at once:
    /// nothing is lost between the parent's published copy and the store.
    @Test func aSaveOnItsWayToTheStoreIsNeverMissed() async throws {
        let coordinator = try makeCoordinator(TemporaryDirectory())
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let main = ManagedObjectContext(.privateQueue, parent: writer)
        let reader = ManagedObjectContext(.privateQueue, parent: main)
        let stop = ConcurrencyTestBox(false)
        let saver = Task.detached {
            for round in 0..<200 {
                try main.performAndWait { () throws(StrataError) in
                    let r = Recipe(context: main); r.name = "S\(round)"; r.servings = round
                    try main.save()
                }
                if round % 3 == 0 { try writer.performAndWait { () throws(StrataError) in try writer.save() } }
            }
            stop.withLock { $0 = true }
        }
        var last = 0
        while !stop.withLock({ $0 }) {
            let seen = try reader.performAndWait { () throws(StrataError) -> Int in
                reader.reset()
                return try reader.count(for: FetchRequest<Recipe>())
            }
            // Saves only add: a count that goes down missed some in flight.
            #expect(seen >= last, "a fetch saw \(seen) objects after one saw \(last)")
            last = seen
        }
        try await saver.value
        #expect(try reader.performAndWait { try reader.count(for: FetchRequest<Recipe>()) } == 200)
    }

    /// A child's save that its parent takes in inline, inside a block of the
    /// parent's that has not ended, is published at once: a grandchild
    /// reading on another thread meanwhile finds it (the child has let go).
    ///
    ///     parent block (thread A)             thread B
    ///     child.performAndWait { insert X,
    ///       save → parent, inline }
    ///     wait for B ─────────────────┐       grandchild: count → 1
    ///     (block still running)  ◀────┘
    @Test func aSaveTakenInInsideAParentsBlockIsSeenAtOnce() async throws {
        let coordinator = try makeCoordinator()
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let child = ManagedObjectContext(.privateQueue, parent: parent)
        let grandchild = ManagedObjectContext(.privateQueue, parent: child)
        let seen = try parent.performAndWait { () throws -> Int? in
            try child.performAndWait { () throws(StrataError) in
                let r = Recipe(context: child); r.name = "X"
                try child.save()
            }
            let result = ConcurrencyTestBox<Int?>(nil)
            let done = DispatchSemaphore(value: 0)
            Thread {
                result.withLock { $0 = try? grandchild.performAndWait { () throws(StrataError) in try grandchild.count(for: FetchRequest<Recipe>()) } }
                done.signal()
            }.start()
            _ = done.wait(timeout: .now() + 20)
            return result.value
        }
        #expect(seen == 1)
    }

    /// A block enqueued with `perform` from inside its parent's block sees
    /// what the parent changed before enqueuing it.
    @Test func aBlockEnqueuedFromInsideTheParentSeesTheParentsChanges() throws {
        let coordinator = try makeCoordinator()
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let child = ManagedObjectContext(.privateQueue, parent: parent)
        let done = DispatchSemaphore(value: 0)
        let seen = ConcurrencyTestBox<Int?>(nil)
        parent.performAndWait {
            let r = Recipe(context: parent); r.name = "P"
            child.perform {
                seen.withLock { $0 = try? child.count(for: FetchRequest<Recipe>()) }
                done.signal()
            }
            // The parent's block goes on (and stays unfinished) while the child reads.
            _ = done.wait(timeout: .now() + 20)
        }
        #expect(seen.value == 1)
    }

    /// A child reads what its parent has not changed from the store, which
    /// may be newer than an unchanged copy the parent registered earlier.
    /// Saving the child must not conflict with that stale copy: the parent
    /// takes the store's state first, then the child's change.
    @Test func aParentsStaleUnchangedCopyDoesNotFailAChildsSave() throws {
        let coordinator = try makeCoordinator(TemporaryDirectory())
        let id = try seedNumberedRecipes(coordinator, count: 1)[0]
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        #expect(try writer.performAndWait { (try writer.existingObject(with: id) as! Recipe).servings } == 0)
        let other = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try other.performAndWait { () throws(StrataError) in
            (try other.existingObject(with: id) as! Recipe).servings = 2
            try other.save()
        }
        let child = ManagedObjectContext(.privateQueue, parent: writer)
        try child.performAndWait { () throws(StrataError) in
            let recipe = try child.existingObject(with: id) as! Recipe
            #expect(recipe.servings == 2)
            recipe.name = "renamed"
            try child.save()
        }
        try writer.performAndWait { () throws in
            let recipe = try #require(writer.registeredObject(for: id) as? Recipe)
            #expect(recipe.servings == 2 && recipe.name == "renamed")
            try writer.save()
        }
        let reader = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try reader.performAndWait { () throws(StrataError) in
            let recipe = try reader.existingObject(with: id) as! Recipe
            #expect(recipe.servings == 2 && recipe.name == "renamed")
        }
    }
}

/// Faults and batches: what a fetch registers, and when values are read.
@Suite struct FaultingTests {
    @Test func objectsComeBackAsFaultsUnlessAskedOtherwise() throws {
        let coordinator = try makeCoordinator(TemporaryDirectory())
        _ = try seedNumberedRecipes(coordinator, count: 10)
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let child = ManagedObjectContext(.privateQueue, parent: writer)
        try child.performAndWait { () throws(StrataError) in
            var request = FetchRequest<Recipe>(predicate: #Predicate { $0.servings >= 5 }, sortBy: [SortDescriptor(\.servings, order: .reverse)])
            let faults = try child.fetch(request)
            #expect(faults.count == 5 && faults.filter(\.isFault).count == 5)
            #expect(faults.map(\.servings) == [9, 8, 7, 6, 5])  // filled on use, in the sorted order
            #expect(faults.filter(\.isFault).isEmpty)
            child.reset()
            request.returnsObjectsAsFaults = false
            let filled = try child.fetch(request)
            #expect(filled.filter(\.isFault).isEmpty)
            #expect(filled.map(\.name) == ["R9", "R8", "R7", "R6", "R5"])
            // An object the context holds comes back as it is: changed, not a fault.
            filled[0].servings = 90
            request.returnsObjectsAsFaults = true
            let again = try child.fetch(request)
            #expect(again[0] === filled[0] && !again[0].isFault && again[0].servings == 90)
        }
    }

    @Test func batchedResultsHoldIDsUntilUsed() throws {
        let coordinator = try makeCoordinator(TemporaryDirectory())
        _ = try seedNumberedRecipes(coordinator, count: 100)
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let main = ManagedObjectContext(.privateQueue, parent: writer)
        try main.performAndWait { () throws(StrataError) in
            // A pending change above the store shows through the batch.
            (try main.existingObject(with: try main.fetchObjectIDs(FetchRequest<Recipe>(predicate: #Predicate { $0.name == "R42" }))[0]) as! Recipe).servings = 420
        }
        let child = ManagedObjectContext(.privateQueue, parent: main)
        try child.performAndWait { () throws(StrataError) in
            var request = FetchRequest<Recipe>(sortBy: [SortDescriptor(\.servings)])
            request.fetchBatchSize = 10
            let results = try child.fetchResults(request)
            #expect(results.count == 100)
            #expect(child.registeredObjects.isEmpty)  // IDs only
            #expect(results[0].servings == 0)
            #expect(child.registeredObjects.count == 10)  // the first batch, filled
            #expect(child.registeredObjects.filter(\.isFault).isEmpty)
            #expect(results[45].servings == 46)  // 42 moved to the end: 0…41, 43…
            #expect(child.registeredObjects.count == 20)
            #expect(results.last?.servings == 420)
            #expect(results.map(\.servings) == results.map(\.servings).sorted())
            #expect(results.objectIDs.count == 100)
        }
        #expect(main.performAndWait { main.registeredObjects.count } == 1)  // only what it changed
    }
}
