import Foundation
import Strata
import Testing

/// Contract C19: every save posts a did-save notification with the IDs
/// of the inserted, updated and deleted objects (a `Sendable` payload);
/// `mergeChanges(fromContextDidSave:)` applies one to another context.
@Suite struct NotificationTests {
    // MARK: The did-save payload

    // C19
    @Test func didSaveToStoreCarriesInsertedUpdatedAndDeletedIDs() throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let didSave = MergeNotificationLog(ManagedObjectContext.didSave, from: context)

        let (a, b) = try context.performAndWait { () throws -> (ObjectID, ObjectID) in
            let a = Recipe(context: context)
            a.name = "A"
            let b = Recipe(context: context)
            b.name = "B"
            try context.save()
            return (a.objectID, b.objectID)
        }
        #expect(didSave.count == 1)
        let first = try #require(didSave.payloads.first)
        #expect(Set(first.inserted) == [a, b])
        #expect(first.updated.isEmpty)
        #expect(first.deleted.isEmpty)
        // The save reached the store: the payload names the permanent IDs (contract C14).
        #expect(first.inserted.allSatisfy { !$0.isTemporaryID })

        try context.performAndWait {
            let recipeA = try context.existingObject(with: a) as! Recipe
            let recipeB = try context.existingObject(with: b) as! Recipe
            recipeA.servings = 8
            context.delete(recipeB)
            try context.save()
        }
        #expect(didSave.count == 2)
        let second = try #require(didSave.payloads.last)
        #expect(second.inserted.isEmpty)
        #expect(second.updated == [a])
        #expect(second.deleted == [b])
    }

    // C19
    @Test func didSaveIntoParentCarriesIDsThatStayTemporary() throws {
        let coordinator = try makeCoordinator()
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let child = ManagedObjectContext(.privateQueue, parent: parent)
        let childSaves = MergeNotificationLog(ManagedObjectContext.didSave, from: child)
        let parentSaves = MergeNotificationLog(ManagedObjectContext.didSave, from: parent)

        let id = try child.performAndWait { () throws -> ObjectID in
            let tag = Tag(context: child)
            tag.label = "quick"
            try child.save()
            return tag.objectID
        }
        let payload = try #require(childSaves.payloads.first)
        #expect(childSaves.count == 1)
        #expect(payload.inserted == [id])
        #expect(payload.inserted.allSatisfy { $0.isTemporaryID })  // contract C14: still temporary
        #expect(parentSaves.count == 0)  // the parent itself did not save

        try parent.performAndWait { try parent.save() }
        let parentPayload = try #require(parentSaves.payloads.first)
        #expect(parentPayload.inserted == [id])
        #expect(parentPayload.inserted.allSatisfy { !$0.isTemporaryID })
    }

    // C19
    @Test func willSaveThenDidSaveArePostedOncePerSave() throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let willSave = MergeNotificationLog(ManagedObjectContext.willSave, from: context)
        let didSave = MergeNotificationLog(ManagedObjectContext.didSave, from: context)
        let willCountAtDidSave = MergeLockedCounter()
        let token = NotificationCenter.default.addObserver(forName: ManagedObjectContext.didSave, object: context, queue: nil) {
            [willSave] _ in willCountAtDidSave.set(willSave.count)
        }
        defer { NotificationCenter.default.removeObserver(token) }

        try context.performAndWait {
            let tag = Tag(context: context)
            tag.label = "x"
            try context.save()
        }
        #expect(willSave.count == 1)
        #expect(didSave.count == 1)
        #expect(willCountAtDidSave.value == 1)  // will-save came first
        #expect(willSave.last?.object as AnyObject? === context)
        #expect(didSave.last?.object as AnyObject? === context)
    }

    // C19
    @Test func saveWithoutChangesPostsNothing() throws {
        let coordinator = try makeCoordinator()
        let id = try MergeSupport.seedRecipe(coordinator)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let willSave = MergeNotificationLog(ManagedObjectContext.willSave, from: context)
        let didSave = MergeNotificationLog(ManagedObjectContext.didSave, from: context)

        try context.performAndWait {
            try context.save()  // nothing registered at all
            _ = try context.existingObject(with: id) as! Recipe
            try context.save()  // registered but unchanged
        }
        #expect(willSave.count == 0)
        #expect(didSave.count == 0)

        try context.performAndWait {
            let recipe = try context.existingObject(with: id) as! Recipe
            recipe.servings = 3
            try context.save()
            try context.save()  // the second one has nothing left to save
        }
        #expect(willSave.count == 1)
        #expect(didSave.count == 1)
    }

    // C19
    @Test func failedSavePostsNoDidSave() throws {
        let coordinator = try makeCoordinator()
        let id = try MergeSupport.seedRecipe(coordinator)
        let first = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let second = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let didSave = MergeNotificationLog(ManagedObjectContext.didSave, from: second)
        try MergeSupport.withRecipe(second, id) { $0.name = "second" }
        try MergeSupport.withRecipe(first, id) { $0.name = "first" }
        try first.performAndWait { try first.save() }
        #expect(MergeSupport.saveError(second)?.code == .mergeConflict)
        #expect(didSave.count == 0)
    }

    // MARK: mergeChanges(fromContextDidSave:) between contexts on one coordinator

    // C19
    @Test func mergeFromAnotherStoreContextRefreshesKeepsOwnChangesRemovesDeletedIgnoresUnregistered() throws {
        let coordinator = try makeCoordinator()
        let ids = try MergeSupport.seedRecipes(coordinator, ["Soup", "Stew", "Salad", "Pie"])
        let (soup, stew, salad, pie) = (ids[0], ids[1], ids[2], ids[3])
        let saver = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "saver")
        let receiver = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "receiver")
        let saves = MergeNotificationLog(ManagedObjectContext.didSave, from: saver)
        let changes = MergeNotificationLog(ManagedObjectContext.objectsDidChange, from: receiver)

        // The receiver holds soup (with its own unsaved change to another
        // property), stew (unchanged) and salad; pie it never registered.
        try receiver.performAndWait {
            let soupHere = try receiver.existingObject(with: soup) as! Recipe
            soupHere.servings = 6
            _ = try receiver.existingObject(with: stew)
            _ = try receiver.existingObject(with: salad)
        }
        try saver.performAndWait {
            (try saver.existingObject(with: soup) as! Recipe).name = "Soup 2"
            (try saver.existingObject(with: stew) as! Recipe).rating = 4.5
            (try saver.existingObject(with: pie) as! Recipe).name = "Pie 2"
            saver.delete(try saver.existingObject(with: salad))
            try saver.save()
        }
        let note = try #require(saves.last)
        let before = changes.count

        try receiver.performAndWait {
            receiver.mergeChanges(fromContextDidSave: note)
            let soupHere = try #require(receiver.registeredObject(for: soup) as? Recipe)
            #expect(soupHere.name == "Soup 2")     // refreshed from the save
            #expect(soupHere.servings == 6)        // own unsaved change kept
            #expect(soupHere.isUpdated)
            #expect(receiver.hasChanges)
            let stewHere = try #require(receiver.registeredObject(for: stew) as? Recipe)
            #expect(stewHere.rating == 4.5)
            #expect(!stewHere.hasChanges)
            #expect(receiver.registeredObject(for: salad) == nil)  // deleted: gone
            #expect(receiver.registeredObject(for: pie) == nil)    // unregistered: still not registered
            #expect(receiver.updatedObjects.map(\.objectID) == [soup])
        }
        // The merge was announced: refreshed and invalidated IDs.
        let merged = try #require(changes.payloads.dropFirst(before).last)
        #expect(Set(merged.refreshed) == [soup, stew])
        #expect(merged.invalidated == [salad])

        // The receiver's object now sits on the store's new version: its own
        // change saves without a conflict and the saver's change survives.
        #expect(MergeSupport.saveError(receiver) == nil)
        #expect(MergeSupport.storeState(coordinator, soup) == MergeRecipeState(name: "Soup 2", servings: 6, rating: 0))
    }

    // C19
    @Test func withoutMergeTheOtherContextKeepsItsStaleView() throws {
        // The control for the test above: the refresh comes from the merge.
        let coordinator = try makeCoordinator()
        let id = try MergeSupport.seedRecipe(coordinator)
        let saver = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let receiver = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        _ = MergeSupport.state(in: receiver, id)
        try MergeSupport.withRecipe(saver, id) { $0.name = "new" }
        try saver.performAndWait { try saver.save() }
        #expect(MergeSupport.state(in: receiver, id)?.name == "Soup")
    }

    // C19
    @Test func mergeFromSiblingChildRefreshesKeepsOwnChangesRemovesDeletedIgnoresUnregistered() throws {
        let coordinator = try makeCoordinator()
        let ids = try MergeSupport.seedRecipes(coordinator, ["Soup", "Stew", "Salad", "Pie"])
        let (soup, stew, salad, pie) = (ids[0], ids[1], ids[2], ids[3])
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "parent")
        let saver = ManagedObjectContext(.privateQueue, parent: parent, name: "saver")
        let receiver = ManagedObjectContext(.privateQueue, parent: parent, name: "receiver")
        let saves = MergeNotificationLog(ManagedObjectContext.didSave, from: saver)

        try receiver.performAndWait {
            (try receiver.existingObject(with: soup) as! Recipe).servings = 6
            _ = try receiver.existingObject(with: stew)
            _ = try receiver.existingObject(with: salad)
        }
        try saver.performAndWait {
            (try saver.existingObject(with: soup) as! Recipe).name = "Soup 2"
            (try saver.existingObject(with: stew) as! Recipe).rating = 4.5
            (try saver.existingObject(with: pie) as! Recipe).name = "Pie 2"
            saver.delete(try saver.existingObject(with: salad))
            try saver.save()
        }
        let payload = try #require(saves.payloads.last)
        #expect(Set(payload.updated) == [soup, stew, pie])
        #expect(payload.deleted == [salad])

        // Without the merge the receiver still shows its snapshot (contract C10).
        #expect(MergeSupport.state(in: receiver, stew)?.rating == 0)

        // The payload alone (Sendable) is enough: it crosses to the receiver's queue.
        try receiver.performAndWait {
            receiver.mergeChanges(fromContextDidSave: payload)
            let soupHere = try #require(receiver.registeredObject(for: soup) as? Recipe)
            #expect(soupHere.name == "Soup 2")
            #expect(soupHere.servings == 6)
            #expect(soupHere.isUpdated)
            #expect((receiver.registeredObject(for: stew) as? Recipe)?.rating == 4.5)
            #expect(receiver.registeredObject(for: salad) == nil)
            #expect(receiver.registeredObject(for: pie) == nil)
            #expect(throws: StrataError.self) { try receiver.existingObject(with: salad) }
        }
        // Saving the receiver into the parent now needs no conflict resolution,
        // and keeps the sibling's change.
        #expect(MergeSupport.saveError(receiver) == nil)
        #expect(MergeSupport.state(in: parent, soup) == MergeRecipeState(name: "Soup 2", servings: 6, rating: 0))
        // Nothing reached the store: the parent has not saved (contract C9).
        #expect(MergeSupport.storeState(coordinator, soup)?.name == "Soup")
    }

    // C19
    @Test func mergeIgnoresItsOwnSaveAndForeignNotifications() throws {
        let coordinator = try makeCoordinator()
        let id = try MergeSupport.seedRecipe(coordinator)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let saves = MergeNotificationLog(ManagedObjectContext.didSave, from: context)
        let recipe = try MergeSupport.withRecipe(context, id) { recipe -> Recipe in
            recipe.name = "mine"
            return recipe
        }
        try context.performAndWait { try context.save() }
        let own = try #require(saves.last)
        context.performAndWait {
            #expect(context.registeredObject(for: id) === recipe)
            recipe.servings = 9
            context.mergeChanges(fromContextDidSave: own)
            context.mergeChanges(fromContextDidSave: Notification(name: Notification.Name("unrelated")))
            #expect(recipe.servings == 9)
            #expect(recipe.name == "mine")
            #expect(context.hasChanges)
        }
    }
}

/// A thread-safe integer for observers.
final class MergeLockedCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var stored = 0  // guarded by `lock`
    func set(_ value: Int) { lock.withLock { stored = value } }
    var value: Int { lock.withLock { stored } }
}
