import Dispatch
import Foundation
import Strata
import Testing

/// Contract C20: with `automaticallyMergesChangesFromParent` a context
/// merges its parent's saves (a sibling's save into the shared parent) — or,
/// attached to the coordinator, the store's saves — by itself. Contract C10:
/// without it, changes never flow down.
@Suite struct AutomaticMergeTests {
    /// How long a "does not arrive" check waits before concluding.
    static let quietPeriod: UInt64 = 150_000_000

    // MARK: Sibling children of one parent

    /// A merge that arrives late must not undo a newer state. Found by
    /// StressTests: the parent's versions for an object it reloaded from the
    /// store were the store's, which cannot be ordered against the versions
    /// of its notifications, so a late notification's older snapshot won.
    ///
    ///     watcher queue                 saver / parent
    ///     blocked ─────────────┐        saver: rating = 1, save → parent
    ///                          │          parent queues merge M1 (servings 0)
    ///                          │        parent: servings = 7, save to disk,
    ///                          │          lets go of the object
    ///     fetch: reloads it ◀──┘          (servings 7, rating 1)
    ///     M1 runs: must keep servings 7
    // C20
    @Test func aLateMergeDoesNotUndoANewerState() async throws {
        let coordinator = try makeCoordinator(TemporaryDirectory())
        let soup = try MergeSupport.seedRecipes(coordinator, ["Soup"])[0]
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "parent")
        let saver = ManagedObjectContext(.privateQueue, parent: parent, name: "saver")
        let watcher = ManagedObjectContext(.privateQueue, parent: parent, name: "watcher")
        watcher.automaticallyMergesChangesFromParent = true
        // The fetched object must still be registered when M1 runs (nothing
        // holds it: without this the block's end would let go of it).
        watcher.performAndWait { watcher.retainsRegisteredObjects = true }
        let gate = DispatchSemaphore(value: 0)
        let blocker: @Sendable () -> Void = {
            _ = gate.wait(timeout: .now() + 10)
            _ = try? watcher.fetch(FetchRequest<Recipe>())
        }
        enqueueBlock(watcher, blocker)
        try saver.performAndWait { () throws in
            (try saver.existingObject(with: soup) as! Recipe).rating = 1
            try saver.save()
        }
        try parent.performAndWait { () throws in
            (try parent.existingObject(with: soup) as! Recipe).servings = 7
            try parent.save()
        }
        gate.signal()
        let state = await runOnDedicatedThread(timeout: 20) {
            watcher.performAndWait { () -> [Double] in
                guard let recipe = watcher.registeredObject(for: soup) as? Recipe else { return [] }
                return [Double(recipe.servings), recipe.rating]
            }
        }
        #expect(state == [7, 1], "the late merge took the older snapshot")
    }

    // C20
    @Test func siblingSaveShowsUpInMergingChildWithoutRefresh() async throws {
        let coordinator = try makeCoordinator()
        let ids = try MergeSupport.seedRecipes(coordinator, ["Soup", "Salad"])
        let (soup, salad) = (ids[0], ids[1])
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "parent")
        let saver = ManagedObjectContext(.privateQueue, parent: parent, name: "saver")
        let watcher = ManagedObjectContext(.privateQueue, parent: parent, name: "watcher")
        watcher.automaticallyMergesChangesFromParent = true
        #expect(watcher.automaticallyMergesChangesFromParent)
        let changes = NotificationRecorder(ManagedObjectContext.objectsDidChange, from: watcher)

        // The watcher holds both, with an unsaved change of its own on soup.
        try watcher.performAndWait {
            (try watcher.existingObject(with: soup) as! Recipe).servings = 5
            _ = try watcher.existingObject(with: salad)
        }
        try saver.performAndWait {
            (try saver.existingObject(with: soup) as! Recipe).name = "Soup 2"
            saver.delete(try saver.existingObject(with: salad))
            try saver.save()
        }
        let arrived = await eventually {
            watcher.performAndWait { (watcher.registeredObject(for: soup) as? Recipe)?.name == "Soup 2" }
        }
        #expect(arrived)
        try watcher.performAndWait {
            let soupHere = try #require(watcher.registeredObject(for: soup) as? Recipe)
            #expect(soupHere.servings == 5)  // its own change kept on top
            #expect(soupHere.isUpdated)
            #expect(watcher.registeredObject(for: salad) == nil)  // the deletion arrived too
        }
        #expect(changes.all.contains { $0.refreshed.contains(soup) })
        #expect(changes.all.contains { $0.invalidated.contains(salad) })
        // Merged onto the parent's new state: the watcher saves without a conflict.
        #expect(MergeSupport.saveError(watcher) == nil)
        #expect(MergeSupport.state(in: parent, soup) == MergeRecipeState(name: "Soup 2", servings: 5, rating: 0))
    }

    // C10
    @Test func withoutTheFlagASiblingSaveDoesNotFlowDown() async throws {
        let coordinator = try makeCoordinator()
        let id = try MergeSupport.seedRecipe(coordinator)
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "parent")
        let saver = ManagedObjectContext(.privateQueue, parent: parent, name: "saver")
        let snapshotHolder = ManagedObjectContext(.privateQueue, parent: parent, name: "holder")
        #expect(!snapshotHolder.automaticallyMergesChangesFromParent)  // off by default

        #expect(MergeSupport.state(in: snapshotHolder, id)?.name == "Soup")
        try MergeSupport.withRecipe(saver, id) { $0.name = "Soup 2" }
        try saver.performAndWait { try saver.save() }
        try await Task.sleep(nanoseconds: Self.quietPeriod)
        MergeSupport.drain(snapshotHolder)
        #expect(MergeSupport.state(in: snapshotHolder, id)?.name == "Soup")
        // The parent has it; a context that registers the object only now sees it.
        #expect(MergeSupport.state(in: parent, id)?.name == "Soup 2")
        let late = ManagedObjectContext(.privateQueue, parent: parent, name: "late")
        #expect(MergeSupport.state(in: late, id)?.name == "Soup 2")
        // And refresh brings the holder up to date (contract C10).
        try snapshotHolder.performAndWait {
            let recipe = try #require(snapshotHolder.registeredObject(for: id) as? Recipe)
            snapshotHolder.refresh(recipe, mergeChanges: false)
            #expect(recipe.name == "Soup 2")
        }
    }

    // C20
    @Test func onlyTheChildrenWithTheFlagMerge() async throws {
        let coordinator = try makeCoordinator()
        let id = try MergeSupport.seedRecipe(coordinator)
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let saver = ManagedObjectContext(.privateQueue, parent: parent)
        let merging = ManagedObjectContext(.privateQueue, parent: parent)
        merging.automaticallyMergesChangesFromParent = true
        let plain = ManagedObjectContext(.privateQueue, parent: parent)
        _ = MergeSupport.state(in: merging, id)
        _ = MergeSupport.state(in: plain, id)

        try MergeSupport.withRecipe(saver, id) { $0.rating = 3 }
        try saver.performAndWait { try saver.save() }
        let arrived = await eventually {
            merging.performAndWait { (merging.registeredObject(for: id) as? Recipe)?.rating == 3 }
        }
        #expect(arrived)
        MergeSupport.drain(plain)
        #expect(MergeSupport.state(in: plain, id)?.rating == 0)
    }

    // C20
    @Test func turningTheFlagOffStopsMerging() async throws {
        let coordinator = try makeCoordinator()
        let id = try MergeSupport.seedRecipe(coordinator)
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let saver = ManagedObjectContext(.privateQueue, parent: parent)
        let watcher = ManagedObjectContext(.privateQueue, parent: parent)
        watcher.automaticallyMergesChangesFromParent = true
        _ = MergeSupport.state(in: watcher, id)

        try MergeSupport.withRecipe(saver, id) { $0.servings = 2 }
        try saver.performAndWait { try saver.save() }
        #expect(await eventually { MergeSupport.state(in: watcher, id)?.servings == 2 })

        watcher.automaticallyMergesChangesFromParent = false
        try MergeSupport.withRecipe(saver, id) { $0.servings = 3 }
        try saver.performAndWait { try saver.save() }
        try await Task.sleep(nanoseconds: Self.quietPeriod)
        MergeSupport.drain(watcher)
        #expect(MergeSupport.state(in: watcher, id)?.servings == 2)
    }

    // C20
    @Test func mergingChildSeesInsertsOnlyWhenItAsks() async throws {
        // Inserted objects are not pushed into a merging child's registry, but
        // fetching there finds them (they are in the parent: contract C13).
        let coordinator = try makeCoordinator()
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let saver = ManagedObjectContext(.privateQueue, parent: parent)
        let watcher = ManagedObjectContext(.privateQueue, parent: parent)
        watcher.automaticallyMergesChangesFromParent = true
        let id = try saver.performAndWait { () throws -> ObjectID in
            let tag = Tag(context: saver)
            tag.label = "new"
            try saver.save()
            return tag.objectID
        }
        try await Task.sleep(nanoseconds: 20_000_000)
        try watcher.performAndWait {
            #expect(watcher.registeredObject(for: id) == nil)
            let tags = try watcher.fetch(FetchRequest<Tag>())
            #expect(tags.map(\.label) == ["new"])
        }
    }

    // C20, C21
    @Test func aDeleteThePolicyKeptDoesNotRemoveTheObjectFromMergingChildren() async throws {
        // A sibling deletes an object the parent changed meanwhile, and its
        // policy keeps the parent's object: the object still exists, so a
        // merging child must not lose it (contract C20 and C21).
        let coordinator = try makeCoordinator()
        let id = try MergeSupport.seedRecipe(coordinator)
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "parent")
        let updater = ManagedObjectContext(.privateQueue, parent: parent, name: "updater")
        let deleter = ManagedObjectContext(.privateQueue, parent: parent, name: "deleter")
        let watcher = ManagedObjectContext(.privateQueue, parent: parent, name: "watcher")
        watcher.automaticallyMergesChangesFromParent = true
        _ = MergeSupport.state(in: watcher, id)
        _ = MergeSupport.state(in: deleter, id)

        try MergeSupport.withRecipe(updater, id) { $0.rating = 5 }
        try updater.performAndWait { try updater.save() }
        #expect(await eventually { MergeSupport.state(in: watcher, id)?.rating == 5 })

        try deleter.performAndWait {
            deleter.delete(try deleter.existingObject(with: id))
            deleter.mergePolicy = .mergeByPropertyStoreTrump
            try deleter.save()
        }
        #expect(MergeSupport.state(in: parent, id)?.rating == 5)  // kept at the parent
        try await Task.sleep(nanoseconds: Self.quietPeriod)
        MergeSupport.drain(watcher)
        watcher.performAndWait {
            let recipe = watcher.registeredObject(for: id) as? Recipe
            #expect(recipe != nil)
            #expect(recipe?.isDeleted == false)
            #expect(recipe?.rating == 5)
        }
    }

    // MARK: Contexts attached to the coordinator

    // C20
    @Test func storeSaveShowsUpInMergingCoordinatorContext() async throws {
        let coordinator = try makeCoordinator()
        let ids = try MergeSupport.seedRecipes(coordinator, ["Soup", "Salad"])
        let (soup, salad) = (ids[0], ids[1])
        let saver = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "saver")
        let watcher = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "watcher")
        watcher.automaticallyMergesChangesFromParent = true

        try watcher.performAndWait {
            (try watcher.existingObject(with: soup) as! Recipe).servings = 7
            _ = try watcher.existingObject(with: salad)
        }
        try saver.performAndWait {
            (try saver.existingObject(with: soup) as! Recipe).rating = 4
            saver.delete(try saver.existingObject(with: salad))
            try saver.save()
        }
        let arrived = await eventually {
            watcher.performAndWait {
                (watcher.registeredObject(for: soup) as? Recipe)?.rating == 4 && watcher.registeredObject(for: salad) == nil
            }
        }
        #expect(arrived)
        try watcher.performAndWait {
            let soupHere = try #require(watcher.registeredObject(for: soup) as? Recipe)
            #expect(soupHere.servings == 7)
            #expect(soupHere.isUpdated)
        }
        #expect(MergeSupport.saveError(watcher) == nil)
        #expect(MergeSupport.storeState(coordinator, soup) == MergeRecipeState(name: "Soup", servings: 7, rating: 4))
    }

    // C10
    @Test func storeSaveDoesNotReachCoordinatorContextWithoutTheFlag() async throws {
        let coordinator = try makeCoordinator()
        let id = try MergeSupport.seedRecipe(coordinator)
        let saver = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let holder = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        #expect(MergeSupport.state(in: holder, id)?.rating == 0)
        try MergeSupport.withRecipe(saver, id) { $0.rating = 4 }
        try saver.performAndWait { try saver.save() }
        try await Task.sleep(nanoseconds: Self.quietPeriod)
        MergeSupport.drain(holder)
        #expect(MergeSupport.state(in: holder, id)?.rating == 0)
        #expect(MergeSupport.storeState(coordinator, id)?.rating == 4)
    }

    // C20
    @Test func parentsOwnSaveToTheStoreDoesNotDisturbItsMergingChildren() async throws {
        // A merging child of a writer: the writer's own save to disk changes
        // nothing the child has not already got, and the child keeps working.
        let directory = TemporaryDirectory()
        let coordinator = try makeCoordinator(directory)
        let id = try MergeSupport.seedRecipe(coordinator)
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "writer")
        let importer = ManagedObjectContext(.privateQueue, parent: writer, name: "importer")
        let ui = ManagedObjectContext(.privateQueue, parent: writer, name: "ui")
        ui.automaticallyMergesChangesFromParent = true
        _ = MergeSupport.state(in: ui, id)

        try MergeSupport.withRecipe(importer, id) { $0.name = "Imported" }
        try importer.performAndWait { try importer.save() }
        try writer.performAndWait { try writer.save() }
        #expect(await eventually { MergeSupport.state(in: ui, id)?.name == "Imported" })
        #expect(MergeSupport.storeState(coordinator, id)?.name == "Imported")
        try MergeSupport.withRecipe(ui, id) { $0.servings = 2 }
        #expect(MergeSupport.saveError(ui) == nil)
        try writer.performAndWait { try writer.save() }
        #expect(MergeSupport.storeState(coordinator, id) == MergeRecipeState(name: "Imported", servings: 2, rating: 0))
    }
}
