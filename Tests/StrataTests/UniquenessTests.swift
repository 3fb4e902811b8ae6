import Foundation
import SharedTestSupport
@testable import Strata
import StrataStore
import Synchronization
import Testing

/// Uniqueness constraints: checked at every level a save crosses against
/// that level's whole view (pending inserts of the saving context and its
/// ancestors, and the store); a refused save changes nothing; under an
/// upsert policy a new object merges into the one holding its values.
@Suite struct UniquenessTests {
    static func model() -> ManagedObjectModel {
        makeModel(recipeIndexes: [IndexDescription("servings")], recipeUniqueness: [["name"], ["uuid"]], authorUniqueness: [["name"]])
    }

    /// What the store holds: each recipe name with the servings and notes
    /// of every recipe of that name, read by a fresh context.
    static func storedRecipes(_ coordinator: PersistentStoreCoordinator) throws -> [String: [StoredRecipe]] {
        let reader = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        return try reader.performAndWait { () throws in
            let recipes = try reader.fetch(FetchRequest<Recipe>())
            return Dictionary(grouping: recipes, by: \.name).mapValues { $0.map { StoredRecipe(servings: $0.servings, notes: $0.notes) } }
        }
    }

    struct StoredRecipe: Hashable {
        var servings: Int
        var notes: String?
    }

    static func insertRecipe(_ name: String, servings: Int = 1, notes: String? = nil, in context: ManagedObjectContext) -> Recipe {
        let recipe = Recipe(context: context)
        recipe.name = name
        recipe.servings = servings
        recipe.notes = notes
        return recipe
    }

    // MARK: The model

    /// A constraint is a unique index (a declared index on the same
    /// attributes becomes unique), part of the model's hash and schema: a
    /// store made with one does not open without it.
    @Test func constraintsArePartOfTheModel() throws {
        let model = Self.model()
        let recipe = try #require(model.entity(named: "Recipe"))
        #expect(recipe.uniquenessConstraints == [["name"], ["uuid"]])
        #expect(recipe.indexes.map(\.isUnique) == [false, true, true])
        let merged = try ManagedObjectModel(entities: [
            EntityDescription(name: "Item", properties: [.attribute("code", .string)], indexes: [["code"]].map { IndexDescription($0) },
                              uniquenessConstraints: [["code"]]),
        ])
        #expect(merged.entity(named: "Item")!.indexes == [IndexDescription(["code"], isUnique: true)])
        let plain = makeModel(recipeIndexes: [IndexDescription("servings"), IndexDescription("name"), IndexDescription("uuid")])
        #expect(plain.versionHash != model.versionHash)

        let directory = TemporaryDirectory()
        try makeCoordinator(directory, model: model).close()
        // Dropping the constraints is a migration: refused read-only.
        let readOnly = PersistentStoreCoordinator(model: plain)
        var options = testStoreOptions()
        options.readOnly = true
        let refused = #expect(throws: StrataError.self) {
            try readOnly.addPersistentStore(.log, directory: directory.path + "/store", options: options)
        }
        #expect(refused?.code == .modelMismatch)
        let reopened = try makeCoordinator(directory, model: Self.model())
        defer { try? reopened.close() }
        // The schema the store records reads back with its constraints.
        let record = try reopened.currentStore().records.get(RecordCoding.modelKey)
        let decoded = try ModelSchema.decode(Array(try #require(record).dropFirst(16)))
        #expect(decoded.entity(named: "Recipe")?.uniquenessConstraints == [["name"], ["uuid"]])
        #expect(decoded.versionHash == model.versionHash)
    }

    // MARK: The error policy

    /// Against the store: the save throws a typed error naming the
    /// constraint, the values and both objects; the store and the context
    /// are as they were, and the context saves once its object is fixed.
    @Test func aConflictWithTheStoreRefusesTheSaveAndKeepsTheContextUsable() throws {
        let coordinator = try makeCoordinator(TemporaryDirectory(), model: Self.model())
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let (first, second) = try context.performAndWait { () throws in
            let soup = Self.insertRecipe("Soup", servings: 2, in: context)
            try context.save()
            let again = Self.insertRecipe("Soup", servings: 4, in: context)
            return (soup.objectID, again.objectID)
        }
        try context.performAndWait { () throws in
            let error = try #require(throws: StrataError.self) { try context.save() }
            #expect(error.code == .constraintConflict)
            #expect(error.constraintConflicts == [
                ConstraintConflict(objectID: second, constraint: ["name"], values: [.string("Soup")], conflictingObjectIDs: [first]),
            ])
            #expect(context.hasChanges)
            #expect(context.insertedObjects.map(\.objectID) == [second])
        }
        #expect(try Self.storedRecipes(coordinator)["Soup"]?.count == 1)
        try context.performAndWait { () throws in
            (context.object(with: second) as! Recipe).name = "Stew"
            try context.save()
        }
        let stored = try Self.storedRecipes(coordinator)
        #expect(stored["Soup"]?.count == 1 && stored["Stew"]?.count == 1)
    }

    /// Two new objects with the same values in one save conflict; objects
    /// that swap their values in one save do not; nil never conflicts.
    @Test func duplicatesWithinOneSaveSwapsAndNil() throws {
        let coordinator = try makeCoordinator(nil, model: Self.model())
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            let a = Self.insertRecipe("A", in: context)
            let b = Self.insertRecipe("B", in: context)
            // uuid is optional and constrained: two nils are no conflict.
            try context.save()
            a.name = "B"
            b.name = "A"
            try context.save()
            let c = Self.insertRecipe("C", in: context)
            let c2 = Self.insertRecipe("C", in: context)
            let error = try #require(throws: StrataError.self) { try context.save() }
            #expect(error.constraintConflicts.count == 1)
            #expect(Set([c.objectID, c2.objectID]) == Set([error.constraintConflicts[0].objectID] + error.constraintConflicts[0].conflictingObjectIDs))
            // Canonically equivalent strings are the same value.
            c2.name = "Cre\u{301}me"
            c.name = "Cr\u{E9}me"
            let again = try #require(throws: StrataError.self) { try context.save() }
            #expect(again.code == .constraintConflict)
            context.delete(c2)
            try context.save()
        }
        #expect(try Self.storedRecipes(coordinator).keys.sorted() == ["A", "B", "Cr\u{E9}me"])
    }

    /// A child's save is checked against its ancestors' pending inserts,
    /// not only the store: an unsaved object in the parent and one saved
    /// into the grandparent both conflict — and an object a parent deleted
    /// (pending) frees its values.
    @Test func pendingInsertsOfAncestorsConflict() throws {
        let coordinator = try makeCoordinator(TemporaryDirectory(), model: Self.model())
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let middle = ManagedObjectContext(.privateQueue, parent: writer)
        try middle.performAndWait { () throws in
            _ = Self.insertRecipe("Pending", in: middle)
            _ = Self.insertRecipe("Saved up", in: middle)
        }
        let child = ManagedObjectContext(.privateQueue, parent: middle)
        for name in ["Pending", "Saved up"] {
            try child.performAndWait { () throws in
                let mine = Self.insertRecipe(name, in: child)
                let error = try #require(throws: StrataError.self) { try child.save() }
                #expect(error.code == .constraintConflict)
                child.delete(mine)
            }
            // Move "Pending" into the writer for the second round.
            if name == "Pending" {
                try middle.performAndWait { () throws in
                    let pending = try middle.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.name == "Pending" }))
                    middle.delete(pending[0])
                    try middle.save()
                }
            }
        }
        // The middle deleted "Pending" (saved into the writer, not the store):
        // its name is free for the child.
        try child.performAndWait { () throws in
            _ = Self.insertRecipe("Pending", in: child)
            try child.save()
        }
        try middle.performAndWait { () throws in try middle.save() }
        try writer.performAndWait { () throws in try writer.save() }
        let stored = try Self.storedRecipes(coordinator)
        #expect(stored.mapValues(\.count) == ["Pending": 1, "Saved up": 1])
    }

    /// The parent checks a child's save against what it changed itself since
    /// the child checked its source: here the parent's own unpublished insert.
    ///
    ///     parent queue                      child queue
    ///     insert X(name "k")
    ///     wait ────────────────┐            insert Y(name "k"), save:
    ///                          │              check the source: no "k"
    ///                          │              (X is not published yet)
    ///     signalled ◀──────────┘              wait for the parent's queue
    ///     block ends: publish X
    ///     accept the child's save: X holds "k" ──▶ constraint conflict
    @Test(arguments: [MergePolicy.error, .mergeByPropertyObjectTrump])
    func theParentChecksWhatItChangedSinceTheChildLooked(policy: MergePolicy) async throws {
        let coordinator = try makeCoordinator(nil, model: Self.model())
        // Blocking waits, on threads of their own: not on the test pool's.
        let outcome = await runOnDedicatedThread(timeout: 60) { () -> (error: StrataError?, names: [String]) in
            let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator)
            let child = ManagedObjectContext(.privateQueue, parent: parent)
            let inserted = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            parent.perform {
                _ = Self.insertRecipe("k", servings: 1, in: parent)
                inserted.signal()
                release.wait()
            }
            inserted.wait()
            let saved = DispatchSemaphore(value: 0)
            let failure = Mutex<StrataError?>(nil)
            Thread {
                child.performAndWait {
                    child.mergePolicy = policy
                    _ = Self.insertRecipe("k", servings: 7, in: child)
                    do throws(StrataError) { try child.save() } catch { failure.withLock { $0 = error } }
                }
                saved.signal()
            }.start()
            // Time for the child to check its source and wait for the parent:
            // should it be later, it sees X and the test passes for that reason.
            Thread.sleep(forTimeInterval: 0.1)
            release.signal()
            saved.wait()
            let names = parent.performAndWait {
                ((try? parent.fetch(FetchRequest<Recipe>())) ?? []).map { "\($0.name) \($0.servings)" }
            }
            return (failure.withLock { $0 }, names)
        }
        let (error, names) = try #require(outcome, "the saves did not finish")
        if policy == .error {
            #expect(error?.code == .constraintConflict)
        } else {
            #expect(error == nil)
        }
        #expect(names == [policy == .error ? "k 1" : "k 7"])
    }

    /// An update that takes another object's values is refused under every
    /// policy: there is no new object to merge.
    @Test func anUpdateTakingAnotherObjectsValuesIsRefusedUnderEveryPolicy() throws {
        let coordinator = try makeCoordinator(nil, model: Self.model())
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            context.mergePolicy = .mergeByPropertyObjectTrump
            _ = Self.insertRecipe("A", in: context)
            let b = Self.insertRecipe("B", in: context)
            try context.save()
            b.name = "A"
            let error = try #require(throws: StrataError.self) { try context.save() }
            #expect(error.code == .constraintConflict)
            #expect(error.constraintConflicts.first?.objectID == b.objectID)
        }
    }

    // MARK: Upserts

    /// Under object trump, a new object from an import child merges into the
    /// stored one through child → view context → writer → store: its set
    /// attributes win, the rest are the stored ones, to-many relationships
    /// join, and its ID resolves to the stored object in every context.
    @Test func upsertThroughTheStackUnderObjectTrump() throws {
        let coordinator = try makeCoordinator(TemporaryDirectory(), model: Self.model())
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let view = ManagedObjectContext(.privateQueue, parent: writer)
        let stored = try writer.performAndWait { () throws in
            let soup = Self.insertRecipe("Soup", servings: 2, notes: "salt", in: writer)
            let onion = Ingredient(context: writer)
            onion.name = "onion"
            onion.recipe = soup
            try writer.save()
            return soup.objectID
        }
        let importer = ManagedObjectContext(.privateQueue, parent: view)
        let newID = try importer.performAndWait { () throws in
            importer.mergePolicy = .mergeByPropertyObjectTrump
            let soup = Self.insertRecipe("Soup", servings: 6, in: importer)
            let leek = Ingredient(context: importer)
            leek.name = "leek"
            leek.recipe = soup
            try importer.save()
            return soup.objectID
        }
        #expect(newID != stored)
        try importer.performAndWait { () throws in
            let merged = try importer.existingObject(with: newID) as! Recipe
            #expect(merged.objectID == stored)
            #expect(merged.servings == 6 && merged.notes == "salt")
            #expect(Set(merged.ingredients.map(\.name)) == ["onion", "leek"])
        }
        try view.performAndWait { () throws in try view.save() }
        try writer.performAndWait { () throws in try writer.save() }
        let recipes = try Self.storedRecipes(coordinator)
        #expect(recipes["Soup"]?.count == 1)
        let reader = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try reader.performAndWait { () throws in
            let soup = reader.object(with: newID) as! Recipe
            #expect(soup.objectID == stored)
            #expect(soup.servings == 6 && soup.notes == "salt")
            #expect(Set(soup.ingredients.map(\.name)) == ["onion", "leek"])
            #expect(try reader.count(for: FetchRequest<Ingredient>()) == 2)
        }
    }

    /// An upsert merges an importer's new soup into the view's unsaved one,
    /// and the writer's save merges that into the stored soup: the
    /// importer's ID resolves to the stored soup, through the view's.
    @Test func anIDMergedIntoOneMergedLaterResolvesToTheLast() throws {
        let coordinator = try makeCoordinator(TemporaryDirectory(), model: Self.model())
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        writer.mergePolicy = .mergeByPropertyObjectTrump
        let stored = try writer.performAndWait { () throws in
            let soup = Self.insertRecipe("Soup", servings: 2, notes: "salt", in: writer)
            try writer.save()
            return soup.objectID
        }
        let view = ManagedObjectContext(.privateQueue, parent: writer)
        view.mergePolicy = .mergeByPropertyObjectTrump
        let viewID = view.performAndWait { Self.insertRecipe("Soup", servings: 4, in: view).objectID }
        let importer = ManagedObjectContext(.privateQueue, parent: view)
        importer.mergePolicy = .mergeByPropertyObjectTrump
        let importedID = try importer.performAndWait { () throws in
            let soup = Self.insertRecipe("Soup", servings: 6, in: importer)
            try importer.save()
            return soup.objectID
        }
        try view.performAndWait { () throws in try view.save() }
        try writer.performAndWait { () throws in try writer.save() }
        #expect(Set([importedID, viewID, stored]).count == 3)
        #expect(try Self.storedRecipes(coordinator)["Soup"]?.count == 1)
        #expect(coordinator.aliasLock.withLock { coordinator.aliases } == [importedID: viewID, viewID: stored])
        #expect(coordinator.resolvingAlias(importedID) == stored)
        let reader = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try reader.performAndWait { () throws in
            for id in [importedID, viewID] {
                let soup = try reader.existingObject(with: id) as! Recipe
                #expect(soup.objectID == stored && soup.servings == 6 && soup.notes == "salt")
            }
        }
    }

    /// Under store trump the stored values stay; the new object fills only
    /// what the stored one holds no value for. Found at the store by the
    /// coordinator's own check (the saving context is attached to it).
    @Test func upsertUnderStoreTrumpAtTheCoordinator() throws {
        let coordinator = try makeCoordinator(TemporaryDirectory(), model: Self.model())
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let other = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            _ = Self.insertRecipe("Soup", servings: 2, in: context)
            try context.save()
        }
        try other.performAndWait { () throws in
            other.mergePolicy = .mergeByPropertyStoreTrump
            _ = Self.insertRecipe("Soup", servings: 6, notes: "pepper", in: other)
            _ = Self.insertRecipe("Stew", in: other)
            try other.save()
        }
        let recipes = try Self.storedRecipes(coordinator)
        #expect(recipes.mapValues(\.count) == ["Soup": 1, "Stew": 1])
        #expect(recipes["Soup"] == [StoredRecipe(servings: 2, notes: "pepper")])
    }

    /// A key held twice in a child's source — its parent's pending insert,
    /// and a stored object another context saved meanwhile — is merged into
    /// the nearest holder; the parent's own save then merges that one into
    /// the stored object. (It used to throw: `racingCreatorsLeaveOneObjectPerKey`
    /// met it once under load.)
    ///
    ///     writer (coordinator)      other (coordinator)      child of writer
    ///     insert Soup #1 (pending)
    ///                               insert Soup #2; save → stored
    ///                                                        insert Soup #3; save:
    ///                                                          holders #1 (writer) and #2 (store)
    ///                                                          → merged into #1
    ///     save → #1 merged into #2 (object trump)
    @Test func aKeyHeldTwiceInTheSourceIsMergedIntoTheNearestHolder() throws {
        let coordinator = try makeCoordinator(TemporaryDirectory(), model: Self.model())
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let other = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        writer.mergePolicy = .mergeByPropertyObjectTrump
        writer.performAndWait { _ = Self.insertRecipe("Soup", servings: 1, in: writer) }
        try other.performAndWait { () throws in
            _ = Self.insertRecipe("Soup", servings: 2, in: other)
            try other.save()
        }
        let child = ManagedObjectContext(.privateQueue, parent: writer)
        let newID = try child.performAndWait { () throws -> ObjectID in
            child.mergePolicy = .mergeByPropertyObjectTrump
            let soup = Self.insertRecipe("Soup", servings: 3, notes: "child", in: child)
            try child.save()
            return soup.objectID
        }
        try writer.performAndWait { () throws in try writer.save() }
        let recipes = try Self.storedRecipes(coordinator)
        #expect(recipes.mapValues(\.count) == ["Soup": 1])
        #expect(recipes["Soup"]?.first?.notes == "child", "the child's values were lost on the way")
        let reader = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let resolved = reader.performAndWait { (reader.object(with: newID) as? Recipe)?.name }
        #expect(resolved == "Soup", "the child's new object does not resolve to the stored one")
    }

    /// Contexts racing to create the same objects: under the error policy
    /// exactly one save of each key wins; under object trump every save
    /// succeeds. Either way the store holds each key once, and its index
    /// entries match its objects.
    @Test(arguments: [MergePolicy.error, .mergeByPropertyObjectTrump])
    func racingCreatorsLeaveOneObjectPerKey(policy: MergePolicy) async throws {
        let directory = TemporaryDirectory()
        let coordinator = try makeCoordinator(directory, model: Self.model())
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let parents = [writer, ManagedObjectContext(.privateQueue, coordinator: coordinator)]
        let keys = 40
        let creators = 4
        try await withThrowingTaskGroup(of: Void.self) { group in
            for n in 0..<creators {
                let parent = parents[n % 2]
                group.addTask {
                    let child = ManagedObjectContext(.privateQueue, parent: parent)
                    var random = SeededGenerator(seed: testSeed() &+ UInt64(n))
                    for batch in Array(0..<keys).shuffled(using: &random).chunks(of: 5) {
                        try await child.perform { () throws in
                            child.mergePolicy = policy
                            for key in batch {
                                _ = try Recipe.findOrCreate(where: #Predicate { $0.name == "k\(key)" }, in: child) { recipe in
                                    recipe.name = "k\(key)"
                                    recipe.servings = n
                                }
                            }
                            do {
                                try child.save()
                            } catch let error as StrataError where error.code == .constraintConflict && policy == .error {
                                child.rollback()
                            }
                        }
                        try await parent.perform { () throws in
                            parent.mergePolicy = policy
                            do {
                                try parent.save()
                            } catch let error as StrataError where error.code == .constraintConflict && policy == .error {
                                parent.rollback()
                            }
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let recipes = try Self.storedRecipes(coordinator)
        #expect(recipes.values.allSatisfy { $0.count == 1 })
        if policy != .error { #expect(recipes.count == keys) }
        try coordinator.close()
        let report = try StoreReports.verify(directory: directory.path + "/store")
        #expect(report.problems.isEmpty, "\(report.problems)")
    }

    // MARK: Find or create

    /// `findOrCreate` finds an unsaved object of the context's ancestors,
    /// a stored one through the index, and creates only when none matches.
    @Test func findOrCreateFindsBeforeItCreates() throws {
        let coordinator = try makeCoordinator(nil, model: Self.model())
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try writer.performAndWait { () throws in
            _ = Self.insertRecipe("Stored", in: writer)
            try writer.save()
            _ = Self.insertRecipe("Pending", in: writer)
        }
        let child = ManagedObjectContext(.privateQueue, parent: writer)
        try child.performAndWait { () throws in
            var created = 0
            for name in ["Stored", "Pending", "New", "New"] {
                let recipe = try Recipe.findOrCreate(where: #Predicate { $0.name == name }, in: child) { recipe in
                    recipe.name = name
                    created += 1
                }
                #expect(recipe.name == name)
            }
            #expect(created == 1)
            #expect(child.insertedObjects.count == 1)
            try child.save()
        }
    }
}

extension Array {
    func chunks(of size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
