import Foundation
import Strata
import StrataStore
import Testing

// Fetching: predicates, sorting, paging, pending changes, counting, IDs, and
// what a fetch in a child or grandchild sees (contract C13).

/// Twelve saved recipes: R00 … R11, servings = i, vegetarian when i is even,
/// notes only on multiples of 3, rating = i % 4; each with i % 3 ingredients.
fileprivate func ftSeed(_ coordinator: PersistentStoreCoordinator) throws -> [ObjectID] {
    let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
    return try context.performAndWait {
        var ids: [ObjectID] = []
        for i in 0..<12 {
            let r = Recipe(context: context)
            r.name = String(format: "R%02d", i)
            r.servings = i
            r.vegetarian = i % 2 == 0
            r.notes = i % 3 == 0 ? "note \(i)" : nil
            r.rating = Double(i % 4)
            for j in 0..<(i % 3) {
                let g = Ingredient(context: context); g.name = "\(r.name)-g\(j)"; g.recipe = r
            }
            ids.append(r.objectID)
        }
        try context.save()
        return ids
    }
}

@Suite struct FetchTests {
    // MARK: Predicates

    @Test func predicates() throws {
        let coordinator = try makeCoordinator()
        _ = try ftSeed(coordinator)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            func names(_ predicate: Predicate<Recipe>) throws -> [String] {
                try context.fetch(FetchRequest<Recipe>(predicate: predicate)).map(\.name).sorted()
            }
            #expect(try names(#Predicate { $0.servings > 8 }) == ["R09", "R10", "R11"])
            #expect(try names(#Predicate { $0.name == "R03" }) == ["R03"])
            #expect(try names(#Predicate { $0.vegetarian && $0.servings < 5 }) == ["R00", "R02", "R04"])
            #expect(try names(#Predicate { $0.notes != nil && $0.servings > 0 }) == ["R03", "R06", "R09"])
            #expect(try names(#Predicate { $0.notes == nil }).count == 8)
            #expect(try names(#Predicate { $0.rating == 3.0 }) == ["R03", "R07", "R11"])
            #expect(try names(#Predicate { $0.name.starts(with: "R1") }) == ["R10", "R11"])
            #expect(try names(#Predicate { _ in false }) == [])
            #expect(try context.fetch(FetchRequest<Recipe>()).count == 12)
            // Across a relationship.
            let ingredients = try context.fetch(FetchRequest<Ingredient>(predicate: #Predicate { $0.recipe?.servings == 5 }))
            #expect(ingredients.map(\.name).sorted() == ["R05-g0", "R05-g1"])
        }
    }

    /// A predicate sees the context's unsaved values.
    @Test func predicateSeesUnsavedValues() throws {
        let coordinator = try makeCoordinator()
        let ids = try ftSeed(coordinator)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let r = try #require(context.object(with: ids[0]) as? Recipe)
            r.servings = 100
            let found = try context.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.servings >= 100 }))
            #expect(found == [r])
        }
    }

    // MARK: Sorting and paging

    @Test func sortDescriptors() throws {
        let coordinator = try makeCoordinator()
        _ = try ftSeed(coordinator)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let ascending = try context.fetch(FetchRequest<Recipe>(sortBy: [SortDescriptor(\.name)]))
            #expect(ascending.map(\.name) == (0..<12).map { String(format: "R%02d", $0) })
            let descending = try context.fetch(FetchRequest<Recipe>(sortBy: [SortDescriptor(\.servings, order: .reverse)]))
            #expect(descending.map(\.servings) == Array((0..<12).reversed()))
            // Two keys: rating descending, then name ascending.
            let twoKeys = try context.fetch(FetchRequest<Recipe>(
                predicate: #Predicate { $0.servings < 8 },
                sortBy: [SortDescriptor(\.rating, order: .reverse), SortDescriptor(\.name)]))
            #expect(twoKeys.map(\.name) == ["R03", "R07", "R02", "R06", "R01", "R05", "R00", "R04"])
        }
    }

    @Test func fetchLimitAndOffset() throws {
        let coordinator = try makeCoordinator()
        _ = try ftSeed(coordinator)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws -> Void in
            func page(limit: Int, offset: Int) throws -> [Int] {
                var request = FetchRequest<Recipe>(sortBy: [SortDescriptor(\.servings)])
                request.fetchLimit = limit
                request.fetchOffset = offset
                return try context.fetch(request).map(\.servings)
            }
            #expect(try page(limit: 3, offset: 0) == [0, 1, 2])
            #expect(try page(limit: 3, offset: 3) == [3, 4, 5])
            #expect(try page(limit: 5, offset: 10) == [10, 11])
            #expect(try page(limit: 0, offset: 9) == [9, 10, 11])  // 0: no limit
            #expect(try page(limit: 4, offset: 12) == [])
            #expect(try page(limit: 4, offset: 100) == [])
            #expect(try page(limit: 100, offset: 0).count == 12)
            // Limit applies after the predicate and the sort.
            var request = FetchRequest<Recipe>(predicate: #Predicate { $0.vegetarian }, sortBy: [SortDescriptor(\.servings, order: .reverse)])
            request.fetchLimit = 2
            request.fetchOffset = 1
            #expect(try context.fetch(request).map(\.servings) == [8, 6])
            #expect(try context.count(for: request) == 2)
        }
    }

    // MARK: count and IDs

    @Test func countForRequest() throws {
        let coordinator = try makeCoordinator()
        _ = try ftSeed(coordinator)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws -> Void in
            #expect(try context.count(for: FetchRequest<Recipe>()) == 12)
            #expect(try context.count(for: FetchRequest<Ingredient>()) == 12)  // 0+1+2 per three recipes
            #expect(try context.count(for: FetchRequest<Recipe>(predicate: #Predicate { $0.vegetarian })) == 6)
            #expect(try context.count(for: FetchRequest<Tag>()) == 0)
            let extra = Recipe(context: context); extra.name = "Extra"; extra.vegetarian = true
            #expect(try context.count(for: FetchRequest<Recipe>(predicate: #Predicate { $0.vegetarian })) == 7)
            var excluding = FetchRequest<Recipe>()
            excluding.includesPendingChanges = false
            #expect(try context.count(for: excluding) == 12)
        }
    }

    @Test func fetchObjectIDs() throws {
        let coordinator = try makeCoordinator()
        let ids = try ftSeed(coordinator)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let fetched = try context.fetchObjectIDs(FetchRequest<Recipe>(sortBy: [SortDescriptor(\.servings)]))
            #expect(fetched == ids)
            #expect(fetched.allSatisfy { !$0.isTemporaryID })
            let some = try context.fetchObjectIDs(FetchRequest<Recipe>(predicate: #Predicate { $0.servings == 4 }))
            #expect(some == [ids[4]])
            let fresh = Recipe(context: context); fresh.name = "New"
            let withPending = try context.fetchObjectIDs(FetchRequest<Recipe>(predicate: #Predicate { $0.name == "New" }))
            #expect(withPending == [fresh.objectID])
            #expect(withPending.first?.isTemporaryID == true)
        }
    }

    /// Fetching twice gives the same instances; objects of other entities
    /// never appear.
    @Test func fetchReturnsRegisteredInstances() throws {
        let coordinator = try makeCoordinator()
        let ids = try ftSeed(coordinator)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let held = try #require(context.object(with: ids[3]) as? Recipe)
            let first = try context.fetch(FetchRequest<Recipe>(sortBy: [SortDescriptor(\.servings)]))
            let second = try context.fetch(FetchRequest<Recipe>(sortBy: [SortDescriptor(\.servings)]))
            #expect(first.count == 12)
            #expect(zip(first, second).allSatisfy { $0 === $1 })
            #expect(first[3] === held)
            #expect(context.registeredObjects.filter { $0 is Recipe }.count == 12)
            #expect(try context.fetch(FetchRequest<Ingredient>()).allSatisfy { $0.entity.name == "Ingredient" })
        }
    }

    // MARK: includesPendingChanges

    /// With includesPendingChanges (the default) the context's own inserts
    /// count and its own deletes do not; without, the reverse.
    @Test func includesPendingChangesTrueAndFalse() throws {
        let coordinator = try makeCoordinator()
        let ids = try ftSeed(coordinator)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let added = Recipe(context: context); added.name = "Added"; added.servings = 50
            let removed = try #require(context.object(with: ids[11]) as? Recipe)
            context.delete(removed)
            var request = FetchRequest<Recipe>(predicate: #Predicate { $0.servings > 9 }, sortBy: [SortDescriptor(\.servings)])
            #expect(request.includesPendingChanges)  // the default
            #expect(try context.fetch(request).map(\.name) == ["R10", "Added"])
            #expect(try context.count(for: request) == 2)
            request.includesPendingChanges = false
            #expect(try context.fetch(request).map(\.name) == ["R10", "R11"])
            #expect(try context.count(for: request) == 2)
            #expect(try context.fetchObjectIDs(request) == [ids[10], ids[11]])
            // Nothing saved by fetching.
            #expect(added.isInserted && removed.isDeleted)
        }
    }

    // MARK: C13

    /// A fetch in a grandchild sees its own unsaved inserts, updates
    /// and deletes and those of its parent and of its grandparent.
    // C13
    @Test func grandchildFetchSeesAllAncestorsPendingChanges() throws {
        let coordinator = try makeCoordinator()
        let ids = try ftSeed(coordinator)  // R00 … R11 in the store
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "writer")
        let main = ManagedObjectContext(.privateQueue, parent: writer, name: "main")
        let grandchild = ManagedObjectContext(.privateQueue, parent: main, name: "grandchild")
        // Writer (grandparent): insert W, update R00, delete R01.
        try writer.performAndWait {
            let w = Recipe(context: writer); w.name = "W"; w.servings = 100
            (try writer.existingObject(with: ids[0]) as? Recipe)?.servings = 100
            writer.delete(try writer.existingObject(with: ids[1]))
        }
        // Main (parent): insert M, update R02 and W, delete R03.
        try main.performAndWait {
            let m = Recipe(context: main); m.name = "M"; m.servings = 100
            (try main.existingObject(with: ids[2]) as? Recipe)?.servings = 100
            let w = try #require(try main.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.name == "W" })).first)
            w.notes = "from main"
            main.delete(try main.existingObject(with: ids[3]))
        }
        try grandchild.performAndWait {
            // Own changes: insert G, update R04, delete R05.
            let g = Recipe(context: grandchild); g.name = "G"; g.servings = 100
            (grandchild.object(with: ids[4]) as? Recipe)?.servings = 100
            grandchild.delete(grandchild.object(with: ids[5]))

            let all = try grandchild.fetch(FetchRequest<Recipe>(sortBy: [SortDescriptor(\.name)]))
            #expect(all.map(\.name) == ["G", "M", "R00", "R02", "R04", "R06", "R07", "R08", "R09", "R10", "R11", "W"])
            let big = try grandchild.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.servings >= 100 }, sortBy: [SortDescriptor(\.name)]))
            #expect(big.map(\.name) == ["G", "M", "R00", "R02", "R04", "W"])
            #expect(try grandchild.count(for: FetchRequest<Recipe>()) == 12)
            let w = try #require(all.last)
            #expect(w.notes == "from main")  // the parent's update of the grandparent's insert
            #expect(w.objectID.isTemporaryID)

            // Without the grandchild's own pending changes, the ancestors' still count.
            var request = FetchRequest<Recipe>(sortBy: [SortDescriptor(\.name)])
            request.includesPendingChanges = false
            #expect(try grandchild.fetch(request).map(\.name)
                    == ["M", "R00", "R02", "R04", "R05", "R06", "R07", "R08", "R09", "R10", "R11", "W"])
        }
        // Nothing moved up or down by fetching.
        writer.performAndWait {
            // R01 and (cascade) its one ingredient.
            #expect(writer.insertedObjects.count == 1 && writer.deletedObjects.count == 2 && writer.updatedObjects.count == 1)
        }
        main.performAndWait {
            #expect(main.insertedObjects.count == 1 && main.deletedObjects.count == 1 && main.updatedObjects.count == 2)
        }
        // And after the whole chain saves, the store holds exactly that.
        try grandchild.performAndWait { try grandchild.save() }
        try main.performAndWait { try main.save() }
        try writer.performAndWait { try writer.save() }
        let fresh = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try fresh.performAndWait {
            let big = try fresh.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.servings >= 100 }, sortBy: [SortDescriptor(\.name)]))
            #expect(big.map(\.name) == ["G", "M", "R00", "R02", "R04", "W"])
            #expect(try fresh.count(for: FetchRequest<Recipe>()) == 12)
            // Cascade from the grandchild's delete of R05 reached the store.
            #expect(try fresh.count(for: FetchRequest<Ingredient>(predicate: #Predicate { $0.name.starts(with: "R05") })) == 0)
        }
    }

    /// Relationships a child fetch follows reflect the parent's
    /// pending changes too.
    // C13
    @Test func childSeesParentsPendingRelationshipChanges() throws {
        let coordinator = try makeCoordinator()
        let ids = try ftSeed(coordinator)
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try parent.performAndWait {
            let r = try #require(try parent.existingObject(with: ids[0]) as? Recipe)
            let g = Ingredient(context: parent); g.name = "pending"; g.recipe = r
        }
        let child = ManagedObjectContext(.privateQueue, parent: parent)
        try child.performAndWait {
            let found = try child.fetch(FetchRequest<Ingredient>(predicate: #Predicate { $0.recipe?.name == "R00" }))
            #expect(found.map(\.name) == ["pending"])
            let r = try #require(child.object(with: ids[0]) as? Recipe)
            #expect(r.ingredients.map(\.name) == ["pending"])
        }
    }

    // MARK: Errors and entities

    /// A request whose entity's class is not the result type is refused, as
    /// is an unknown entity name.
    @Test func wrongClassRequestIsAnError() throws {
        let coordinator = try makeCoordinator()
        _ = try ftSeed(coordinator)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        context.performAndWait {
            let wrong = #expect(throws: StrataError.self) { try context.fetch(FetchRequest<Ingredient>(entityName: "Recipe")) }
            #expect(wrong?.code == .invalidArgument)
            let count = #expect(throws: StrataError.self) { try context.count(for: FetchRequest<Tag>(entityName: "Recipe")) }
            #expect(count?.code == .invalidArgument)
            let unknown = #expect(throws: StrataError.self) { try context.fetch(FetchRequest<Recipe>(entityName: "Nope")) }
            #expect(unknown?.code == .invalidArgument)
            let ids = #expect(throws: StrataError.self) { try context.fetchObjectIDs(FetchRequest<Card>(entityName: "Author")) }
            #expect(ids?.code == .invalidArgument)
        }
    }

    /// A plain ManagedObject request names its entity and returns the
    /// entity's class.
    @Test func genericRequestByEntityName() throws {
        let coordinator = try makeCoordinator()
        _ = try ftSeed(coordinator)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let objects = try context.fetch(FetchRequest<ManagedObject>(entityName: "Recipe"))
            #expect(objects.count == 12)
            #expect(objects.allSatisfy { $0 is Recipe })
            let named = try context.fetch(FetchRequest<Recipe>(entityName: "Recipe", predicate: #Predicate { $0.servings == 1 }))
            #expect(named.map(\.name) == ["R01"])
            // A ManagedObject request without an entity name has no entity.
            #expect(throws: StrataError.self) { try context.fetch(FetchRequest<ManagedObject>()) }
        }
    }

    /// Fetching a store reopened from disk.
    @Test func fetchAfterReopen() throws {
        let directory = TemporaryDirectory()
        let model = makeModel()
        do {
            let coordinator = try makeCoordinator(directory, model: model)
            _ = try ftSeed(coordinator)
            try coordinator.close()
        }
        let coordinator = try makeCoordinator(directory, model: model)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws -> Void in
            var request = FetchRequest<Recipe>(predicate: #Predicate { $0.notes != nil }, sortBy: [SortDescriptor(\.servings, order: .reverse)])
            request.fetchLimit = 2
            #expect(try context.fetch(request).map(\.name) == ["R09", "R06"])
            #expect(try context.count(for: FetchRequest<Ingredient>()) == 12)
        }
    }
}
