import Foundation
import Strata
import Testing

/// Contract C21: when two contexts change the same object and both
/// save into the same parent or store, the second save fails with a
/// merge-conflict error under the default policy; the other policies resolve
/// it property by property (store wins, in-memory wins), overwrite, or roll back.
/// Also refresh / refreshAllObjects / reset / rollback (contract C10's "after refresh").
@Suite struct MergePolicyTests {
    /// Where the two saving contexts save to.
    enum Destination: String, Sendable, CaseIterable, CustomStringConvertible {
        case store, parent
        var description: String { rawValue }
    }

    /// Two contexts saving to one destination, with an object both hold.
    struct Pair {
        let coordinator: PersistentStoreCoordinator
        /// The shared parent (nil when both save to the store).
        let parent: ManagedObjectContext?
        let first: ManagedObjectContext
        let second: ManagedObjectContext
        let ids: [ObjectID]
        var id: ObjectID { ids[0] }

        init(_ destination: Destination, names: [String] = ["Soup"]) throws {
            coordinator = try makeCoordinator()
            ids = try MergeSupport.seedRecipes(coordinator, names)
            switch destination {
            case .store:
                parent = nil
                first = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "first")
                second = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "second")
            case .parent:
                let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "parent")
                self.parent = parent
                first = ManagedObjectContext(.privateQueue, parent: parent, name: "first")
                second = ManagedObjectContext(.privateQueue, parent: parent, name: "second")
            }
            // Both read every object before either changes anything.
            for id in ids {
                _ = MergeSupport.state(in: first, id)
                _ = MergeSupport.state(in: second, id)
            }
        }

        /// The destination's state of `id` (the parent's view, or the store's).
        func destinationState(_ id: ObjectID) -> MergeRecipeState? {
            if let parent { return MergeSupport.state(in: parent, id) }
            return MergeSupport.storeState(coordinator, id)
        }

        func storeState(_ id: ObjectID) -> MergeRecipeState? { MergeSupport.storeState(coordinator, id) }

        func change(_ context: ManagedObjectContext, _ id: ObjectID? = nil, _ body: (Recipe) -> Void) throws {
            try MergeSupport.withRecipe(context, id ?? self.id) { body($0) }
        }

        /// The recipe `id` in `context`, held by the caller (a registered
        /// object nothing references may be let go after a save).
        func held(_ context: ManagedObjectContext, _ id: ObjectID? = nil) throws -> Recipe {
            try MergeSupport.withRecipe(context, id ?? self.id) { $0 }
        }

        func save(_ context: ManagedObjectContext) throws {
            try context.performAndWait { try context.save() }
        }
    }

    static let seeded = MergeRecipeState(name: "Soup", servings: 1, rating: 0)

    // MARK: The default policy: a merge conflict, and nothing changes anywhere

    // C21
    @Test(arguments: Destination.allCases)
    func secondSaveFailsWithMergeConflictNamingObjectAndProperty(_ destination: Destination) throws {
        let pair = try Pair(destination)
        #expect(pair.second.performAndWait { pair.second.mergePolicy } == .error)  // the default
        try pair.change(pair.first) { $0.name = "first" }
        try pair.save(pair.first)
        try pair.change(pair.second) { $0.name = "second"; $0.servings = 4 }

        let error = try #require(MergeSupport.saveError(pair.second))
        #expect(error.code == .mergeConflict)
        #expect(error.conflicts.count == 1)
        let conflict = try #require(error.conflicts.first)
        #expect(conflict.objectID == pair.id)
        #expect(conflict.properties == ["name"])
        #expect(!conflict.deletedAtDestination)
    }

    // C21
    @Test(arguments: Destination.allCases)
    func failedSaveChangesNothingAnywhere(_ destination: Destination) throws {
        let pair = try Pair(destination, names: ["Soup", "Stew"])
        let stew = pair.ids[1]
        try pair.change(pair.first) { $0.name = "first" }
        try pair.save(pair.first)
        let destinationBefore = pair.destinationState(pair.id)
        let storeBefore = pair.storeState(pair.id)

        // The second context: the conflicting update, plus an insert, a
        // non-conflicting update and a delete that must not get through either.
        let tagID = try pair.second.performAndWait { () throws -> ObjectID in
            let recipe = try pair.second.existingObject(with: pair.id) as! Recipe
            recipe.name = "second"
            recipe.servings = 4
            (try pair.second.existingObject(with: stew) as! Recipe).rating = 2
            let tag = Tag(context: pair.second)
            tag.label = "unsaved"
            return tag.objectID
        }
        let error = try #require(MergeSupport.saveError(pair.second))
        #expect(error.code == .mergeConflict)

        // The second context still has all its changes.
        try pair.second.performAndWait {
            #expect(pair.second.hasChanges)
            let recipe = try #require(pair.second.registeredObject(for: pair.id) as? Recipe)
            #expect(MergeRecipeState(recipe) == MergeRecipeState(name: "second", servings: 4, rating: 0))
            #expect(recipe.isUpdated)
            #expect(Set(recipe.changedValues().keys) == ["name", "servings"])
            #expect((pair.second.registeredObject(for: stew) as? Recipe)?.isUpdated == true)
            let tag = try #require(pair.second.registeredObject(for: tagID))
            #expect(tag.isInserted)
            #expect(tag.objectID.isTemporaryID)
            #expect(pair.second.insertedObjects.count == 1)
            #expect(pair.second.updatedObjects.count == 2)
        }
        // The destination keeps the first save, and only it.
        #expect(pair.destinationState(pair.id) == destinationBefore)
        #expect(pair.destinationState(pair.id) == MergeRecipeState(name: "first", servings: 1, rating: 0))
        #expect(pair.destinationState(stew) == MergeRecipeState(name: "Stew", servings: 1, rating: 0))
        #expect(pair.storeState(pair.id) == storeBefore)
        #expect(pair.storeState(stew) == MergeRecipeState(name: "Stew", servings: 1, rating: 0))
        #expect(try MergeSupport.storeCount(pair.coordinator, Tag.self) == 0)
        if let parent = pair.parent {
            try parent.performAndWait {
                let tags = try parent.count(for: FetchRequest<Tag>())
                #expect(tags == 0)
                #expect(parent.insertedObjects.isEmpty)
                #expect(parent.updatedObjects.map(\.objectID) == [pair.id])  // the first save only
            }
        }
        // The first context is untouched too.
        #expect(MergeSupport.state(in: pair.first, pair.id) == MergeRecipeState(name: "first", servings: 1, rating: 0))
    }

    // C21
    @Test(arguments: Destination.allCases)
    func everyConflictingObjectIsListed(_ destination: Destination) throws {
        let pair = try Pair(destination, names: ["Soup", "Stew", "Pie"])
        let (soup, stew, pie) = (pair.ids[0], pair.ids[1], pair.ids[2])
        try pair.change(pair.first, soup) { $0.name = "first soup" }
        try pair.change(pair.first, stew) { $0.rating = 3; $0.servings = 2 }
        try pair.save(pair.first)
        try pair.change(pair.second, soup) { $0.notes = "n" }
        try pair.change(pair.second, stew) { $0.notes = "n" }
        try pair.change(pair.second, pie) { $0.notes = "n" }  // no conflict

        let error = try #require(MergeSupport.saveError(pair.second))
        #expect(error.code == .mergeConflict)
        let byID = Dictionary(uniqueKeysWithValues: error.conflicts.map { ($0.objectID, $0.properties) })
        #expect(byID.count == 2)
        #expect(byID[soup] == ["name"])
        #expect(byID[stew].map(Set.init) == ["servings", "rating"])
        #expect(byID[pie] == nil)
    }

    // C21
    @Test(arguments: Destination.allCases)
    func afterAConflictRefreshWithMergeLetsTheSaveThrough(_ destination: Destination) throws {
        let pair = try Pair(destination)
        try pair.change(pair.first) { $0.name = "first"; $0.rating = 5 }
        try pair.save(pair.first)
        try pair.change(pair.second) { $0.name = "second" }
        #expect(MergeSupport.saveError(pair.second)?.code == .mergeConflict)
        try pair.second.performAndWait {
            let recipe = try #require(pair.second.registeredObject(for: pair.id) as? Recipe)
            pair.second.refresh(recipe, mergeChanges: true)
            #expect(MergeRecipeState(recipe) == MergeRecipeState(name: "second", servings: 1, rating: 5))
            try pair.second.save()
        }
        #expect(pair.destinationState(pair.id) == MergeRecipeState(name: "second", servings: 1, rating: 5))
    }

    // C21
    @Test(arguments: Destination.allCases)
    func noConflictWhenTheDestinationDidNotMove(_ destination: Destination) throws {
        // Control: the same edits in sequence, each context up to date, save cleanly.
        let pair = try Pair(destination)
        try pair.change(pair.second) { $0.name = "second" }
        #expect(MergeSupport.saveError(pair.second) == nil)
        try pair.change(pair.second) { $0.servings = 9 }
        #expect(MergeSupport.saveError(pair.second) == nil)  // its own save does not conflict with itself
        #expect(pair.destinationState(pair.id) == MergeRecipeState(name: "second", servings: 9, rating: 0))
    }

    // C21
    @Test func noSpuriousConflictAfterTheParentSavesToTheStore() throws {
        // The import stack (contract C12): a child saves an object into the writer,
        // the writer saves it to the store, the child changes it again. Nobody
        // else touched it, so the child's second save must not conflict.
        let coordinator = try makeCoordinator()
        let id = try MergeSupport.seedRecipe(coordinator)
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "writer")
        let child = ManagedObjectContext(.privateQueue, parent: writer, name: "child")
        let recipe = try MergeSupport.withRecipe(child, id) { $0 }  // held, as an importer holds its objects
        child.performAndWait { recipe.name = "once" }
        #expect(MergeSupport.saveError(child) == nil)
        try writer.performAndWait { try writer.save() }
        child.performAndWait { recipe.name = "twice" }
        #expect(MergeSupport.saveError(child) == nil)
        try writer.performAndWait { try writer.save() }
        #expect(MergeSupport.storeState(coordinator, id)?.name == "twice")
    }

    // MARK: The other policies, property by property

    /// The first context saves name "first" and rating 5; the second changes
    /// name to "second" and servings to 4 and saves under `policy`.
    static let resolutions: [(MergePolicy, MergeRecipeState)] = [
        // The destination's change wins where both changed; the saver's other change stays.
        (.mergeByPropertyStoreTrump, MergeRecipeState(name: "first", servings: 4, rating: 5)),
        // The saver's change wins where both changed; the destination's other change stays.
        (.mergeByPropertyObjectTrump, MergeRecipeState(name: "second", servings: 4, rating: 5)),
        // The saver's whole object replaces the destination's (rating 5 is lost).
        (.overwrite, MergeRecipeState(name: "second", servings: 4, rating: 0)),
        // The saver's changes are discarded; it takes the destination's values.
        (.rollback, MergeRecipeState(name: "first", servings: 1, rating: 5)),
    ]

    // C21
    @Test(arguments: Destination.allCases, resolutions.map(\.0))
    func policyResolvesBothChangingTheSameObject(_ destination: Destination, _ policy: MergePolicy) throws {
        let expected = Self.resolutions.first { $0.0 == policy }!.1
        let pair = try Pair(destination)
        let firstRecipe = try pair.held(pair.first)  // so that it stays at the version it saved
        try pair.change(pair.first) { $0.name = "first"; $0.rating = 5 }
        try pair.save(pair.first)
        let storeBefore = pair.storeState(pair.id)
        let recipe = try pair.held(pair.second)
        try pair.change(pair.second) { $0.name = "second"; $0.servings = 4 }
        pair.second.performAndWait { pair.second.mergePolicy = policy }

        #expect(MergeSupport.saveError(pair.second) == nil)
        #expect(pair.destinationState(pair.id) == expected)
        // The saving context's object shows what the destination now holds, with nothing left to save.
        pair.second.performAndWait {
            #expect(pair.second.registeredObject(for: pair.id) === recipe)
            #expect(MergeRecipeState(recipe) == expected)
            #expect(!recipe.hasChanges)
            #expect(!pair.second.hasChanges)
        }
        if pair.parent != nil {
            #expect(pair.storeState(pair.id) == storeBefore)  // a save into a parent writes nothing to disk
            try pair.parent!.performAndWait { try pair.parent!.save() }
            #expect(pair.storeState(pair.id) == expected)
        }
        // The resolved state is a consistent base: the second context saves again without conflict.
        try pair.change(pair.second) { $0.notes = "again" }
        #expect(MergeSupport.saveError(pair.second) == nil)
        // And the first context, now behind, is the one that conflicts.
        pair.first.performAndWait { firstRecipe.notes = "late" }
        #expect(MergeSupport.saveError(pair.first)?.code == .mergeConflict)
    }

    // C21
    @Test(arguments: Destination.allCases)
    func storeTrumpAndObjectTrumpDifferOnlyWhereBothChanged(_ destination: Destination) throws {
        // Both contexts change disjoint properties: every merging policy keeps both changes.
        for policy in [MergePolicy.mergeByPropertyStoreTrump, .mergeByPropertyObjectTrump] {
            let pair = try Pair(destination)
            try pair.change(pair.first) { $0.rating = 5 }
            try pair.save(pair.first)
            try pair.change(pair.second) { $0.servings = 4 }
            pair.second.performAndWait { pair.second.mergePolicy = policy }
            #expect(MergeSupport.saveError(pair.second) == nil)
            #expect(pair.destinationState(pair.id) == MergeRecipeState(name: "Soup", servings: 4, rating: 5), "\(policy)")
        }
    }

    // C21
    @Test func aParentsOwnEditAfterAKeptConflictStillConflicts() throws {
        // The parent's own change counts as a change at the destination. A
        // child whose conflicting save was resolved by keeping the parent's
        // state (rollback) holds the parent's version of that moment; the
        // parent's next own edit must move that version on, or the child's
        // next save would silently overwrite it.
        let coordinator = try makeCoordinator()
        let id = try MergeSupport.seedRecipe(coordinator)
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "parent")
        let child = ManagedObjectContext(.privateQueue, parent: parent, name: "child")
        _ = MergeSupport.state(in: child, id)
        try MergeSupport.withRecipe(parent, id) { $0.name = "parent 1" }
        try MergeSupport.withRecipe(child, id) { $0.servings = 4 }
        child.performAndWait { child.mergePolicy = .rollback }
        #expect(MergeSupport.saveError(child) == nil)
        #expect(MergeSupport.state(in: child, id) == MergeRecipeState(name: "parent 1", servings: 1, rating: 0))

        try MergeSupport.withRecipe(parent, id) { $0.rating = 7 }  // the parent's own edit, unseen by the child
        try MergeSupport.withRecipe(child, id) { $0.servings = 5 }
        child.performAndWait { child.mergePolicy = .error }
        let error = MergeSupport.saveError(child)
        #expect(error?.code == .mergeConflict)
        #expect(error?.conflicts.first?.properties == ["rating"])
        #expect(MergeSupport.state(in: parent, id) == MergeRecipeState(name: "parent 1", servings: 1, rating: 7))
    }

    // C21
    @Test func aParentsOwnEditConflictsWithAChildSave() throws {
        let coordinator = try makeCoordinator()
        let id = try MergeSupport.seedRecipe(coordinator)
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "parent")
        let child = ManagedObjectContext(.privateQueue, parent: parent, name: "child")
        try MergeSupport.withRecipe(child, id) { $0.servings = 4 }
        try MergeSupport.withRecipe(parent, id) { $0.servings = 6 }
        let error = MergeSupport.saveError(child)
        #expect(error?.code == .mergeConflict)
        #expect(error?.conflicts.first?.properties == ["servings"])
        #expect(MergeSupport.state(in: parent, id)?.servings == 6)
    }

    // MARK: Delete against update

    // C21
    @Test(arguments: Destination.allCases)
    func deleteOfAnObjectChangedAtTheDestinationConflicts(_ destination: Destination) throws {
        let pair = try Pair(destination)
        try pair.change(pair.first) { $0.rating = 5 }
        try pair.save(pair.first)
        try pair.second.performAndWait { pair.second.delete(try pair.second.existingObject(with: pair.id)) }

        let error = try #require(MergeSupport.saveError(pair.second))
        #expect(error.code == .mergeConflict)
        #expect(error.conflicts.map(\.objectID) == [pair.id])
        #expect(error.conflicts.first?.properties.contains("rating") == true)
        #expect(error.conflicts.first?.deletedAtDestination == false)
        // Nothing changed: the object is still at the destination with the
        // first save's value, and still deleted (unsaved) in the second context.
        #expect(pair.destinationState(pair.id) == MergeRecipeState(name: "Soup", servings: 1, rating: 5))
        pair.second.performAndWait {
            let recipe = pair.second.registeredObject(for: pair.id)
            #expect(recipe?.isDeleted == true)
            #expect(pair.second.deletedObjects.map(\.objectID) == [pair.id])
        }
    }

    // C21
    @Test(arguments: Destination.allCases, [MergePolicy.mergeByPropertyStoreTrump, .rollback])
    func destinationWinningPoliciesKeepAnObjectTheSaverDeleted(_ destination: Destination, _ policy: MergePolicy) throws {
        let pair = try Pair(destination)
        try pair.change(pair.first) { $0.rating = 5 }
        try pair.save(pair.first)
        let recipe = try pair.held(pair.second)
        pair.second.performAndWait {
            pair.second.delete(recipe)
            pair.second.mergePolicy = policy
        }
        #expect(MergeSupport.saveError(pair.second) == nil)
        let expected = MergeRecipeState(name: "Soup", servings: 1, rating: 5)
        #expect(pair.destinationState(pair.id) == expected)
        pair.second.performAndWait {
            #expect(pair.second.registeredObject(for: pair.id) === recipe)
            #expect(!recipe.isDeleted)
            #expect(MergeRecipeState(recipe) == expected)
            #expect(!pair.second.hasChanges)
        }
    }

    // C21
    @Test(arguments: Destination.allCases, [MergePolicy.mergeByPropertyObjectTrump, .overwrite])
    func saverWinningPoliciesLetTheDeleteThrough(_ destination: Destination, _ policy: MergePolicy) throws {
        let pair = try Pair(destination)
        try pair.change(pair.first) { $0.rating = 5 }
        try pair.save(pair.first)
        let recipe = try pair.held(pair.second)
        pair.second.performAndWait {
            pair.second.delete(recipe)
            pair.second.mergePolicy = policy
        }
        #expect(MergeSupport.saveError(pair.second) == nil)
        #expect(pair.destinationState(pair.id) == nil)
        pair.second.performAndWait {
            #expect(pair.second.registeredObject(for: pair.id) == nil)
            #expect(recipe.managedObjectContext == nil)
            #expect(!pair.second.hasChanges)
        }
    }

    // C21
    @Test(arguments: Destination.allCases)
    func updateOfAnObjectDeletedAtTheDestinationConflicts(_ destination: Destination) throws {
        let pair = try Pair(destination)
        try pair.first.performAndWait { pair.first.delete(try pair.first.existingObject(with: pair.id)) }
        try pair.save(pair.first)
        try pair.change(pair.second) { $0.name = "second" }

        let error = try #require(MergeSupport.saveError(pair.second))
        #expect(error.code == .mergeConflict)
        let conflict = try #require(error.conflicts.first)
        #expect(error.conflicts.count == 1)
        #expect(conflict.objectID == pair.id)
        #expect(conflict.deletedAtDestination)
        #expect(conflict.properties.isEmpty)
        // Nothing changed: still gone at the destination, still changed in the second context.
        #expect(pair.destinationState(pair.id) == nil)
        pair.second.performAndWait {
            let recipe = pair.second.registeredObject(for: pair.id) as? Recipe
            #expect(recipe?.name == "second")
            #expect(recipe?.isUpdated == true)
        }
    }

    // C21
    @Test(arguments: Destination.allCases, [MergePolicy.mergeByPropertyStoreTrump, .mergeByPropertyObjectTrump, .rollback])
    func otherPoliciesDropAnUpdateOfAnObjectDeletedAtTheDestination(_ destination: Destination, _ policy: MergePolicy) throws {
        let pair = try Pair(destination, names: ["Soup", "Stew"])
        let stew = pair.ids[1]
        try pair.first.performAndWait { pair.first.delete(try pair.first.existingObject(with: pair.id)) }
        try pair.save(pair.first)
        let recipe = try pair.held(pair.second)
        try pair.change(pair.second) { $0.name = "second" }
        try pair.change(pair.second, stew) { $0.servings = 3 }  // saved normally alongside
        pair.second.performAndWait { pair.second.mergePolicy = policy }

        #expect(MergeSupport.saveError(pair.second) == nil)
        #expect(pair.destinationState(pair.id) == nil)  // not resurrected
        #expect(pair.destinationState(stew)?.servings == 3)
        pair.second.performAndWait {
            #expect(pair.second.registeredObject(for: pair.id) == nil)
            #expect(recipe.isDeleted)  // found deleted: inaccessible
            #expect(!pair.second.hasChanges)
        }
    }

    // MARK: refresh, refreshAllObjects, reset, rollback

    // C10
    @Test func refreshWithoutMergeDiscardsChangesAndRereadsTheSource() throws {
        let coordinator = try makeCoordinator()
        let id = try MergeSupport.seedRecipe(coordinator)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let other = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try MergeSupport.withRecipe(context, id) { $0.name = "mine" }
        try MergeSupport.withRecipe(other, id) { $0.rating = 5 }
        try other.performAndWait { try other.save() }

        try context.performAndWait {
            let recipe = try #require(context.registeredObject(for: id) as? Recipe)
            context.refresh(recipe, mergeChanges: false)
            #expect(recipe.isFault)
            #expect(!context.hasChanges)
            #expect(MergeRecipeState(recipe) == MergeRecipeState(name: "Soup", servings: 1, rating: 5))
            #expect(!recipe.hasChanges)
            // Up to date now: a new change saves without conflict.
            recipe.servings = 2
            try context.save()
        }
        #expect(MergeSupport.storeState(coordinator, id) == MergeRecipeState(name: "Soup", servings: 2, rating: 5))
    }

    // C10
    @Test func refreshWithMergeKeepsOwnChangesOnTopOfTheSource() throws {
        let coordinator = try makeCoordinator()
        let id = try MergeSupport.seedRecipe(coordinator)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let other = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try MergeSupport.withRecipe(context, id) { $0.name = "mine" }
        try MergeSupport.withRecipe(other, id) { $0.rating = 5; $0.name = "theirs" }
        try other.performAndWait { try other.save() }

        try context.performAndWait {
            let recipe = try #require(context.registeredObject(for: id) as? Recipe)
            #expect(recipe.rating == 0)  // a snapshot until refreshed (contract C10)
            context.refresh(recipe, mergeChanges: true)
            #expect(!recipe.isFault)
            #expect(MergeRecipeState(recipe) == MergeRecipeState(name: "mine", servings: 1, rating: 5))
            #expect(recipe.isUpdated)
            #expect(context.hasChanges)
            #expect(recipe.committedValues(forKeys: ["name"])["name"] == .string("theirs"))
            try context.save()
        }
        #expect(MergeSupport.storeState(coordinator, id) == MergeRecipeState(name: "mine", servings: 1, rating: 5))
    }

    // C10
    @Test func refreshInAChildRereadsTheParent() throws {
        let coordinator = try makeCoordinator()
        let id = try MergeSupport.seedRecipe(coordinator)
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let child = ManagedObjectContext(.privateQueue, parent: parent)
        #expect(MergeSupport.state(in: child, id)?.servings == 1)
        try MergeSupport.withRecipe(parent, id) { $0.servings = 6 }  // the parent's own unsaved change
        #expect(MergeSupport.state(in: child, id)?.servings == 1)
        try child.performAndWait {
            let recipe = try #require(child.registeredObject(for: id) as? Recipe)
            child.refresh(recipe, mergeChanges: false)
            #expect(recipe.servings == 6)
        }
    }

    // C10
    @Test func refreshOfAnObjectDeletedAtTheSourceMakesItInaccessible() throws {
        let coordinator = try makeCoordinator()
        let id = try MergeSupport.seedRecipe(coordinator)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let other = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try MergeSupport.withRecipe(context, id) { $0.name = "mine" }
        try other.performAndWait {
            other.delete(try other.existingObject(with: id))
            try other.save()
        }
        try context.performAndWait {
            let recipe = try #require(context.registeredObject(for: id) as? Recipe)
            context.refresh(recipe, mergeChanges: true)
            #expect(recipe.isDeleted)
            #expect(context.registeredObject(for: id) == nil)
            #expect(!context.hasChanges)
        }
    }

    // C10
    /// A fault whose object was deleted at the source becomes inaccessible
    /// when first used; writing to it afterwards (an attribute, a to-many
    /// member), deleting or refreshing it changes its own values only: the
    /// context holds no change, a save writes nothing, and a fetch does not
    /// meet it (it once stayed among the updates, outside the registry, and
    /// the next indexed fetch trapped; a delete was listed, and a refresh
    /// made it a fault outside the registry).
    @Test func writingToAnObjectFoundDeletedChangesNothingToSave() throws {
        let coordinator = try makeCoordinator(model: makeModel(recipeIndexes: [IndexDescription("servings")]))
        let id = try MergeSupport.seedRecipe(coordinator)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let other = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let fault = context.performAndWait { context.object(with: id) as! Recipe }
        try other.performAndWait {
            other.delete(try other.existingObject(with: id))
            try other.save()
        }
        try context.performAndWait { () throws in
            #expect(fault.isFault)
            fault.servings = 4
            #expect(fault.isDeleted && fault.servings == 4)
            let ingredient = Ingredient(context: context)
            ingredient.name = "salt"
            try context.save()
            fault.add(ingredient, to: "ingredients")
            // Neither a delete nor a refresh brings it back into the context.
            context.delete(fault)
            context.refresh(fault, mergeChanges: false)
            #expect(fault.isDeleted && context.registeredObject(for: id) == nil)
            fault.servings = 4
            #expect(!context.hasChanges && context.updatedObjects.isEmpty && context.deletedObjects.isEmpty)
            #expect(try context.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.servings == 4 })).isEmpty)
            #expect(try Recipe.first(in: context, where: \.servings, equals: 4) == nil)
            try context.save()
        }
        let fresh = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try fresh.performAndWait { () throws in
            #expect(try fresh.count(for: FetchRequest<Recipe>()) == 0)
        }
    }

    // C10
    @Test func refreshAllObjectsRefreshesEveryRegisteredObject() throws {
        let coordinator = try makeCoordinator()
        let ids = try MergeSupport.seedRecipes(coordinator, ["Soup", "Stew"])
        let (soup, stew) = (ids[0], ids[1])
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let other = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try MergeSupport.withRecipe(context, soup) { $0.name = "mine" }
        _ = MergeSupport.state(in: context, stew)
        try MergeSupport.withRecipe(other, soup) { $0.rating = 5 }
        try MergeSupport.withRecipe(other, stew) { $0.name = "Stew 2" }
        try other.performAndWait { try other.save() }

        try context.performAndWait {
            let soupHere = try #require(context.registeredObject(for: soup) as? Recipe)
            let stewHere = try #require(context.registeredObject(for: stew) as? Recipe)
            #expect(stewHere.name == "Stew")
            context.refreshAllObjects()
            #expect(stewHere.isFault)  // unchanged objects become faults
            #expect(stewHere.name == "Stew 2")
            #expect(MergeRecipeState(soupHere) == MergeRecipeState(name: "mine", servings: 1, rating: 5))
            #expect(soupHere.isUpdated)
            try context.save()  // refreshed onto the store's versions: no conflict
        }
        #expect(MergeSupport.storeState(coordinator, soup) == MergeRecipeState(name: "mine", servings: 1, rating: 5))
    }

    // C10
    @Test func resetForgetsEverythingAndRereads() throws {
        let coordinator = try makeCoordinator()
        let id = try MergeSupport.seedRecipe(coordinator)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let other = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let recipe = try context.existingObject(with: id) as! Recipe
            recipe.name = "mine"
            let tag = Tag(context: context)
            tag.label = "unsaved"
            context.reset()
            #expect(!context.hasChanges)
            #expect(context.registeredObjects.isEmpty)
            #expect(recipe.managedObjectContext == nil)
            #expect(tag.managedObjectContext == nil)
            #expect(try context.count(for: FetchRequest<Tag>()) == 0)
        }
        try MergeSupport.withRecipe(other, id) { $0.rating = 5 }
        try other.performAndWait { try other.save() }
        try context.performAndWait {
            let again = try context.existingObject(with: id) as! Recipe
            #expect(MergeRecipeState(again) == MergeRecipeState(name: "Soup", servings: 1, rating: 5))
            try context.save()  // nothing to save
        }
        #expect(MergeSupport.storeState(coordinator, id) == MergeRecipeState(name: "Soup", servings: 1, rating: 5))
        #expect(try MergeSupport.storeCount(coordinator, Tag.self) == 0)
    }

    // C10
    @Test func rollbackDiscardsInsertsUpdatesAndDeletes() throws {
        let coordinator = try makeCoordinator()
        let ids = try MergeSupport.seedRecipes(coordinator, ["Soup", "Stew"])
        let (soup, stew) = (ids[0], ids[1])
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let saves = MergeNotificationLog(ManagedObjectContext.didSave, from: context)
        try context.performAndWait {
            let soupHere = try context.existingObject(with: soup) as! Recipe
            let stewHere = try context.existingObject(with: stew) as! Recipe
            soupHere.name = "mine"
            soupHere.servings = 3
            context.delete(stewHere)
            let tag = Tag(context: context)
            tag.label = "unsaved"
            #expect(context.hasChanges)

            context.rollback()
            #expect(!context.hasChanges)
            #expect(context.insertedObjects.isEmpty && context.updatedObjects.isEmpty && context.deletedObjects.isEmpty)
            #expect(MergeRecipeState(soupHere) == MergeRecipeState(name: "Soup", servings: 1, rating: 0))
            #expect(!soupHere.hasChanges)
            #expect(!stewHere.isDeleted)
            #expect(stewHere.name == "Stew")
            #expect(tag.managedObjectContext == nil)
            #expect(context.registeredObject(for: tag.objectID) == nil)
            try context.save()
        }
        #expect(saves.count == 0)  // nothing was left to save
        #expect(MergeSupport.storeState(coordinator, stew) != nil)
        #expect(try MergeSupport.storeCount(coordinator, Tag.self) == 0)
    }

    // C10
    @Test func rollbackReturnsToTheLastSaveNotTheFirstRead() throws {
        let coordinator = try makeCoordinator()
        let id = try MergeSupport.seedRecipe(coordinator)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let recipe = try context.existingObject(with: id) as! Recipe
            recipe.name = "saved"
            try context.save()
            recipe.name = "unsaved"
            context.rollback()
            #expect(recipe.name == "saved")
            #expect(!recipe.hasChanges)
            recipe.servings = 2
            try context.save()  // rollback left a consistent version behind: no conflict
        }
        #expect(MergeSupport.storeState(coordinator, id) == MergeRecipeState(name: "saved", servings: 2, rating: 0))
    }
}
