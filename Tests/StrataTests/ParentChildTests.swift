import Foundation
import Strata
import StrataStore
import Testing

// Contract C9–C13: parent and child contexts.

/// The names of every recipe a fresh context attached to `coordinator` finds
/// in the store, sorted (a fresh context, so nothing registered earlier hides
/// newer store state).
private func pcStoredRecipeNames(_ coordinator: PersistentStoreCoordinator) throws -> [String] {
    let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
    return try context.performAndWait {
        try context.fetch(FetchRequest<Recipe>()).map(\.name).sorted()
    }
}

private func pcBatches(_ coordinator: PersistentStoreCoordinator) -> Int {
    coordinator.storeStatistics?.batchesWritten ?? -1
}

@Suite struct ParentChildTests {
    // MARK: C9

    /// The child's inserts, updates and deletes move into the parent,
    /// which then has changes; nothing reaches the disk.
    // C9
    @Test func childSaveMovesChangesIntoParentAndWritesNothing() throws {
        let directory = TemporaryDirectory()
        let coordinator = try makeCoordinator(directory)
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let (updatedID, deletedID) = try parent.performAndWait {
            let a = Recipe(context: parent); a.name = "A"
            let b = Recipe(context: parent); b.name = "B"
            try parent.save()
            #expect(!parent.hasChanges)
            return (a.objectID, b.objectID)
        }
        let before = pcBatches(coordinator)
        let operationsBefore = coordinator.storeStatistics?.operationsWritten

        let child = ManagedObjectContext(.privateQueue, parent: parent)
        let insertedID = try child.performAndWait {
            let c = Recipe(context: child); c.name = "C"
            let a = try #require(try child.existingObject(with: updatedID) as? Recipe)
            a.name = "A2"
            child.delete(try child.existingObject(with: deletedID))
            #expect(child.hasChanges)
            try child.save()
            #expect(!child.hasChanges)
            #expect(!c.isInserted && !a.isUpdated)
            return c.objectID
        }
        // Nothing written by the child's save.
        #expect(pcBatches(coordinator) == before)
        #expect(coordinator.storeStatistics?.operationsWritten == operationsBefore)
        #expect(try pcStoredRecipeNames(coordinator) == ["A", "B"])

        parent.performAndWait {
            #expect(parent.hasChanges)
            #expect(parent.insertedObjects.map(\.objectID) == [insertedID])
            #expect(parent.updatedObjects.map(\.objectID) == [updatedID])
            #expect(parent.deletedObjects.map(\.objectID) == [deletedID])
            #expect((parent.registeredObject(for: updatedID) as? Recipe)?.name == "A2")
            #expect((parent.registeredObject(for: insertedID) as? Recipe)?.name == "C")
            #expect(parent.registeredObject(for: deletedID)?.isDeleted == true)
        }
        // The parent's save is what writes it.
        try parent.performAndWait { try parent.save() }
        #expect(pcBatches(coordinator) == before + 1)
        #expect(try pcStoredRecipeNames(coordinator) == ["A2", "C"])
    }

    /// The parent reports hasChanges after a child's save even when it
    /// had never seen the objects (they come from the store through it).
    // C9
    @Test func parentHasChangesForObjectsItNeverRegistered() throws {
        let coordinator = try makeCoordinator()
        let seeder = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let id = try seeder.performAndWait {
            let r = Recipe(context: seeder); r.name = "Seed"
            try seeder.save()
            return r.objectID
        }
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let child = ManagedObjectContext(.privateQueue, parent: parent)
        try child.performAndWait {
            let r = try #require(child.object(with: id) as? Recipe)
            r.servings = 9
            try child.save()
        }
        parent.performAndWait {
            #expect(parent.hasChanges)
            #expect((parent.registeredObject(for: id) as? Recipe)?.servings == 9)
        }
        // The store still has the old value until the parent saves.
        let probe = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try probe.performAndWait { () throws -> Void in
            #expect((try probe.existingObject(with: id) as? Recipe)?.servings == 1)
        }
    }

    // MARK: C10

    /// An object the child registered keeps the state it had when
    /// registered, even after the parent changes it (saved or not), and even
    /// when the child fetches it again.
    // C10
    @Test func registeredObjectKeepsSnapshotAfterParentChanges() throws {
        let coordinator = try makeCoordinator()
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let id = try parent.performAndWait {
            let r = Recipe(context: parent); r.name = "v1"; r.servings = 1
            try parent.save()
            return r.objectID
        }
        let child = ManagedObjectContext(.privateQueue, parent: parent)
        child.performAndWait {
            #expect((child.object(with: id) as? Recipe)?.name == "v1")
        }
        try parent.performAndWait {
            let r = try #require(parent.registeredObject(for: id) as? Recipe)
            r.name = "v2"
            r.servings = 2
        }
        try child.performAndWait {
            let r = try #require(child.registeredObject(for: id) as? Recipe)
            #expect(r.name == "v1")
            #expect(r.servings == 1)
            // A fetch does not push the parent's state into a registered object.
            let fetched = try child.fetch(FetchRequest<Recipe>())
            #expect(fetched.count == 1)
            #expect(fetched.first === r)
            #expect(fetched.first?.name == "v1")
        }
        // Even after the parent saves to the store.
        try parent.performAndWait { try parent.save() }
        child.performAndWait {
            #expect((child.registeredObject(for: id) as? Recipe)?.name == "v1")
        }
    }

    /// Objects the child has not registered yet show the parent's
    /// present (unsaved) state, in object(with:), existingObject(with:) and fetches.
    // C10
    @Test func unregisteredObjectsShowNewParentState() throws {
        let coordinator = try makeCoordinator()
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let (idA, idB, idC) = try parent.performAndWait {
            let a = Recipe(context: parent); a.name = "a1"
            let b = Recipe(context: parent); b.name = "b1"
            let c = Recipe(context: parent); c.name = "c1"
            try parent.save()
            return (a.objectID, b.objectID, c.objectID)
        }
        let child = ManagedObjectContext(.privateQueue, parent: parent)  // created before the change
        parent.performAndWait {
            (parent.registeredObject(for: idA) as? Recipe)?.name = "a2"
            (parent.registeredObject(for: idB) as? Recipe)?.name = "b2"
            (parent.registeredObject(for: idC) as? Recipe)?.name = "c2"
        }
        try child.performAndWait {
            #expect((child.object(with: idA) as? Recipe)?.name == "a2")
            #expect((try child.existingObject(with: idB) as? Recipe)?.name == "b2")
            let c = try child.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.name == "c2" }))
            #expect(c.map(\.objectID) == [idC])
        }
    }

    /// Refresh (discarding or merging) brings the parent's new state
    /// into a registered object; merging keeps the child's own changes on top.
    // C10
    @Test func refreshShowsNewParentState() throws {
        let coordinator = try makeCoordinator()
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let (idA, idB) = try parent.performAndWait {
            let a = Recipe(context: parent); a.name = "a1"
            let b = Recipe(context: parent); b.name = "b1"
            try parent.save()
            return (a.objectID, b.objectID)
        }
        let child = ManagedObjectContext(.privateQueue, parent: parent)
        try child.performAndWait {
            _ = try #require(child.object(with: idA) as? Recipe).name
            let b = try #require(child.object(with: idB) as? Recipe)
            b.servings = 7  // a local change to keep
        }
        parent.performAndWait {
            (parent.registeredObject(for: idA) as? Recipe)?.name = "a2"
            (parent.registeredObject(for: idB) as? Recipe)?.name = "b2"
        }
        try child.performAndWait {
            let a = try #require(child.registeredObject(for: idA) as? Recipe)
            let b = try #require(child.registeredObject(for: idB) as? Recipe)
            #expect(a.name == "a1" && b.name == "b1")
            child.refresh(a, mergeChanges: false)
            #expect(a.isFault)
            #expect(a.name == "a2")
            child.refresh(b, mergeChanges: true)
            #expect(b.name == "b2")
            #expect(b.servings == 7)
            #expect(b.isUpdated)
            #expect(b.changedValues() == ["servings": .integer(7)])
        }
    }

    /// A child whose objects the parent changed afterwards does not
    /// silently overwrite the parent's newer state when it saves.
    // C10
    @Test func staleChildSaveDoesNotOverwriteParentSilently() throws {
        let coordinator = try makeCoordinator()
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let id = try parent.performAndWait {
            let r = Recipe(context: parent); r.name = "v1"
            try parent.save()
            return r.objectID
        }
        let child = ManagedObjectContext(.privateQueue, parent: parent)
        child.performAndWait { (child.object(with: id) as? Recipe)?.servings = 5 }
        parent.performAndWait { (parent.registeredObject(for: id) as? Recipe)?.name = "v2" }
        let error = child.performAndWait { #expect(throws: StrataError.self) { try child.save() } }
        #expect(error?.code == .mergeConflict)
        parent.performAndWait {
            let r = parent.registeredObject(for: id) as? Recipe
            #expect(r?.name == "v2")
            #expect(r?.servings == 1)
        }
        child.performAndWait { #expect(child.hasChanges) }
    }

    // MARK: C11

    /// A coordinator-attached save of many objects is exactly one
    /// batch in the engine, holding every object.
    // C11
    @Test func saveOfManyObjectsIsOneBatch() throws {
        let directory = TemporaryDirectory()
        let coordinator = try makeCoordinator(directory)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let start = pcBatches(coordinator)
        let operationsStart = try #require(coordinator.storeStatistics?.operationsWritten)
        try context.performAndWait {
            for i in 0..<300 {
                let r = Recipe(context: context); r.name = "R\(i)"
                for j in 0..<3 {
                    let g = Ingredient(context: context); g.name = "I\(i)-\(j)"; g.recipe = r
                }
            }
            try context.save()
        }
        #expect(pcBatches(coordinator) == start + 1)
        // 1200 objects (plus metadata and the history's transaction) in that one batch.
        let operations = try #require(coordinator.storeStatistics?.operationsWritten) - operationsStart
        #expect(operations >= 1201 && operations <= 1202)

        // A save of inserts, updates and deletes together: one more batch.
        try context.performAndWait {
            let recipes = try context.fetch(FetchRequest<Recipe>(sortBy: [SortDescriptor(\.name)]))
            for r in recipes.prefix(50) { r.servings = 4 }
            for r in recipes.suffix(50) { context.delete(r) }  // cascades to their ingredients
            for i in 0..<100 { let t = Tag(context: context); t.label = "T\(i)" }
            try context.save()
        }
        #expect(pcBatches(coordinator) == start + 2)

        // A save with nothing to save writes nothing.
        try context.performAndWait { try context.save() }
        #expect(pcBatches(coordinator) == start + 2)

        // Every save a batch of its own.
        for n in 0..<3 {
            try context.performAndWait {
                let t = Tag(context: context); t.label = "extra\(n)"
                try context.save()
            }
            #expect(pcBatches(coordinator) == start + 3 + n)
        }
        let counts = try context.performAndWait {
            (try context.count(for: FetchRequest<Recipe>()), try context.count(for: FetchRequest<Ingredient>()),
             try context.count(for: FetchRequest<Tag>()))
        }
        #expect(counts.0 == 250 && counts.1 == 750 && counts.2 == 103)
    }

    /// The one batch is all or nothing — reopening the store finds
    /// every object of each save.
    // C11
    @Test func everyObjectOfASaveIsOnDiskAfterReopen() throws {
        let directory = TemporaryDirectory()
        let model = makeModel()
        do {
            let coordinator = try makeCoordinator(directory, model: model)
            let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
            try context.performAndWait {
                for i in 0..<500 { let r = Recipe(context: context); r.name = "R\(i)"; r.servings = i }
                try context.save()
            }
            try coordinator.close()
        }
        let coordinator = try makeCoordinator(directory, model: model)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let servings = try context.performAndWait {
            try context.fetch(FetchRequest<Recipe>()).map(\.servings).sorted()
        }
        #expect(servings == Array(0..<500))
    }

    /// And "a failed save changes nothing": a save refused by validation
    /// writes no batch.
    // C11
    @Test func failedSaveWritesNoBatch() throws {
        let directory = TemporaryDirectory()
        let coordinator = try makeCoordinator(directory)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let start = pcBatches(coordinator)
        context.performAndWait {
            for i in 0..<10 { let r = Recipe(context: context); r.name = "ok\(i)" }
            _ = Recipe(context: context)  // no name: required
            #expect(throws: StrataError.self) { try context.save() }
        }
        #expect(pcBatches(coordinator) == start)
        #expect(try pcStoredRecipeNames(coordinator) == [])
    }

    // MARK: C12

    /// Grandchild → child → writer → disk, each level in turn; only
    /// the writer's save writes, and what it writes survives a reopen.
    // C12
    @Test func eachLevelSavesInTurn() throws {
        let directory = TemporaryDirectory()
        let model = makeModel()
        do {
            let coordinator = try makeCoordinator(directory, model: model)
            let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "writer")
            let main = ManagedObjectContext(.privateQueue, parent: writer, name: "main")
            let importer = ManagedObjectContext(.privateQueue, parent: main, name: "import")
            let start = pcBatches(coordinator)
            try importer.performAndWait {
                for i in 0..<20 {
                    let r = Recipe(context: importer); r.name = "R\(i)"
                    let g = Ingredient(context: importer); g.name = "G\(i)"; g.recipe = r
                }
                try importer.save()
            }
            #expect(pcBatches(coordinator) == start)
            main.performAndWait { #expect(main.hasChanges && main.insertedObjects.count == 40) }
            writer.performAndWait { #expect(!writer.hasChanges) }
            try main.performAndWait { try main.save() }
            #expect(pcBatches(coordinator) == start)
            writer.performAndWait { #expect(writer.hasChanges && writer.insertedObjects.count == 40) }
            #expect(try pcStoredRecipeNames(coordinator) == [])
            try writer.performAndWait { try writer.save() }
            #expect(pcBatches(coordinator) == start + 1)
            writer.performAndWait { #expect(!writer.hasChanges) }
            try coordinator.close()
        }
        let coordinator = try makeCoordinator(directory, model: model)
        #expect(try pcStoredRecipeNames(coordinator).count == 20)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            for r in try context.fetch(FetchRequest<Recipe>()) {
                #expect(r.ingredients.map(\.name) == ["G" + r.name.dropFirst()])
            }
        }
    }

    // MARK: C13

    /// A child's fetch sees its own unsaved inserts, updates and
    /// deletes and its parent's.
    // C13
    @Test func childFetchSeesOwnAndParentPendingChanges() throws {
        let coordinator = try makeCoordinator()
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let ids = try parent.performAndWait {
            let rs = (0..<4).map { i in let r = Recipe(context: parent); r.name = "S\(i)"; return r }
            try parent.save()
            rs[0].servings = 10                 // parent's unsaved update
            parent.delete(rs[1])                // parent's unsaved delete
            let p = Recipe(context: parent); p.name = "P"  // parent's unsaved insert
            return rs.map(\.objectID)
        }
        let child = ManagedObjectContext(.privateQueue, parent: parent)
        try child.performAndWait {
            let c = Recipe(context: child); c.name = "C"
            c.servings = 10
            let s2 = try #require(child.object(with: ids[2]) as? Recipe)
            s2.servings = 10
            child.delete(try child.existingObject(with: ids[3]))
            let names = try child.fetch(FetchRequest<Recipe>()).map(\.name).sorted()
            #expect(names == ["C", "P", "S0", "S2"])
            let big = try child.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.servings >= 10 })).map(\.name).sorted()
            #expect(big == ["C", "S0", "S2"])
        }
    }
}
