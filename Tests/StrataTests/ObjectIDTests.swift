import Foundation
import Strata
import StrataStore
import Testing

// Contract C14–C15: object IDs, temporary and permanent, and how
// objects cross queues.

@Suite struct ObjectIDTests {
    // MARK: C14

    /// Temporary after insert and after a save into a parent,
    /// permanent once the chain's save reaches the store.
    // C14
    @Test func idsStayTemporaryUntilTheStoreSave() throws {
        let coordinator = try makeCoordinator()
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "writer")
        let main = ManagedObjectContext(.privateQueue, parent: writer, name: "main")
        let child = ManagedObjectContext(.privateQueue, parent: main, name: "child")
        let id = try child.performAndWait {
            let r = Recipe(context: child); r.name = "Soup"
            #expect(r.objectID.isTemporaryID)
            try child.save()
            #expect(r.objectID.isTemporaryID)  // saved into a parent: still temporary
            return r.objectID
        }
        #expect(id.isTemporaryID)
        try main.performAndWait {
            let object = try #require(main.registeredObject(for: id))
            #expect(object.objectID.isTemporaryID)
            try main.save()
            #expect(object.objectID.isTemporaryID)
        }
        try writer.performAndWait {
            let object = try #require(writer.registeredObject(for: id))
            #expect(object.objectID.isTemporaryID)
            try writer.save()
            #expect(!object.objectID.isTemporaryID)  // reached the store: permanent
            #expect(object.objectID == id)           // and equal to the temporary one
        }
    }

    /// Temporary and permanent IDs of one object compare equal and
    /// hash alike; only isTemporaryID differs.
    // C14
    @Test func temporaryAndPermanentIDsAreEqual() throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let (temporary, permanent) = try context.performAndWait {
            let r = Recipe(context: context); r.name = "Soup"
            let t = r.objectID
            try context.save()
            return (t, r.objectID)
        }
        #expect(temporary.isTemporaryID && !permanent.isTemporaryID)
        #expect(temporary == permanent)
        #expect(temporary.hashValue == permanent.hashValue)
        #expect(Set([temporary, permanent]).count == 1)
        #expect(temporary.entity === permanent.entity)
        #expect(temporary.entity.name == "Recipe")
    }

    /// `obtainPermanentIDs` makes IDs permanent before any save; the
    /// object is then stored under that very ID.
    // C14
    @Test func obtainPermanentIDsMakesIDsPermanentBeforeASave() throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let (permanent, other) = try context.performAndWait {
            let a = Recipe(context: context); a.name = "A"
            let b = Recipe(context: context); b.name = "B"
            let before = a.objectID
            try context.obtainPermanentIDs(for: [a])
            #expect(!a.objectID.isTemporaryID)
            #expect(b.objectID.isTemporaryID)  // only the objects asked for
            #expect(a.objectID == before)
            #expect(context.registeredObject(for: a.objectID) === a)
            #expect(a.isInserted)  // still unsaved
            try context.save()
            #expect(!a.objectID.isTemporaryID && !b.objectID.isTemporaryID)
            return (a.objectID, b.objectID)
        }
        #expect(permanent != other)
        let fresh = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try fresh.performAndWait { () throws -> Void in
            #expect((try fresh.existingObject(with: permanent) as? Recipe)?.name == "A")
        }
    }

    /// `obtainPermanentIDs` refuses an object of another context.
    // C14
    @Test func obtainPermanentIDsRejectsForeignObject() throws {
        let coordinator = try makeCoordinator()
        let a = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let b = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        a.performAndWait {
            let r = Recipe(context: a); r.name = "A"
            let error = b.performAndWait { #expect(throws: StrataError.self) { try b.obtainPermanentIDs(for: [r]) } }
            #expect(error?.code == .invalidArgument)
            #expect(r.objectID.isTemporaryID)
        }
    }

    /// Better than Core Data: after the save reaches the store,
    /// every context of the chain resolves the OLD temporary ID — and the new
    /// permanent one — to the very instance it had, and fetches return that
    /// instance too: no duplicates.
    // C14
    @Test func oldTemporaryIDResolvesToSameInstanceEverywhere() throws {
        let coordinator = try makeCoordinator()
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "writer")
        let main = ManagedObjectContext(.privateQueue, parent: writer, name: "main")
        let child = ManagedObjectContext(.privateQueue, parent: main, name: "child")

        // The test holds each context's instance (a context may let go of
        // saved objects nobody references; "the same instance" means the one
        // the app holds).
        let (temporaryID, childRecipe) = try child.performAndWait {
            let r = Recipe(context: child); r.name = "Soup"
            let g = Ingredient(context: child); g.name = "Salt"; g.recipe = r
            try child.save()
            return (r.objectID, r)
        }
        let mainRecipe = try main.performAndWait {
            let object = try #require(main.registeredObject(for: temporaryID))
            try main.save()
            return object
        }
        let (writerRecipe, permanentID) = try writer.performAndWait {
            let object = try #require(writer.registeredObject(for: temporaryID))
            try writer.save()
            return (object, object.objectID)
        }
        #expect(temporaryID.isTemporaryID && !permanentID.isTemporaryID)
        #expect(childRecipe !== mainRecipe && mainRecipe !== writerRecipe)

        let contexts: [(ManagedObjectContext, ManagedObject)] =
            [(child, childRecipe), (main, mainRecipe), (writer, writerRecipe)]
        for (context, instance) in contexts {
            try context.performAndWait {
                #expect(context.object(with: temporaryID) === instance, "object(with: temporary) in \(context.name)")
                #expect(try context.existingObject(with: temporaryID) === instance,
                        "existingObject(with: temporary) in \(context.name)")
                #expect(context.object(with: permanentID) === instance, "object(with: permanent) in \(context.name)")
                #expect(try context.existingObject(with: permanentID) === instance)
                // Fetching finds the same instance, once.
                let fetched = try context.fetch(FetchRequest<Recipe>())
                #expect(fetched.count == 1, "duplicates in \(context.name)")
                #expect(fetched.first === instance)
                #expect(try context.count(for: FetchRequest<Recipe>()) == 1)
                // Through a relationship too.
                let salt = try #require(try context.fetch(FetchRequest<Ingredient>()).first)
                #expect(salt.recipe === instance)
                #expect(context.registeredObjects.filter { $0.entity.name == "Recipe" }.count == 1)
            }
        }

        // Another change in the child still saves onto that same object
        // (no duplicate row appears in the store).
        try child.performAndWait {
            (child.object(with: temporaryID) as? Recipe)?.servings = 6
            try child.save()
        }
        try main.performAndWait { try main.save() }
        try writer.performAndWait { try writer.save() }
        let fresh = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try fresh.performAndWait {
            let all = try fresh.fetch(FetchRequest<Recipe>())
            #expect(all.count == 1)
            #expect(all.first?.servings == 6)
        }
    }

    /// A context that did not exist when the object was inserted
    /// also resolves the old temporary ID once the object is in the store.
    // C14
    @Test func temporaryIDResolvesInAnUnrelatedContextAfterStoreSave() throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let temporaryID = try context.performAndWait {
            let r = Recipe(context: context); r.name = "Soup"
            let id = r.objectID
            try context.save()
            return id
        }
        let other = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try other.performAndWait {
            let r = try #require(try other.existingObject(with: temporaryID) as? Recipe)
            #expect(r.name == "Soup")
            #expect(other.object(with: temporaryID) === r)
            #expect(try other.fetch(FetchRequest<Recipe>()) == [r])
        }
    }

    // MARK: URIs

    /// Temporary and permanent IDs round-trip through their URI.
    @Test func uriRepresentationRoundTrips() throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let (temporary, permanent) = try context.performAndWait {
            let r = Recipe(context: context); r.name = "Soup"
            let t = r.objectID
            try context.save()
            return (t, r.objectID)
        }
        let temporaryURI = temporary.uriRepresentation()
        let permanentURI = permanent.uriRepresentation()
        #expect(temporaryURI.scheme == "x-strata")
        #expect(temporaryURI != permanentURI)
        let t = try #require(coordinator.managedObjectID(forURIRepresentation: temporaryURI))
        let p = try #require(coordinator.managedObjectID(forURIRepresentation: permanentURI))
        #expect(t == temporary && t.isTemporaryID)
        #expect(p == permanent && !p.isTemporaryID)
        #expect(t.entity === temporary.entity)
        // Through its string form, as an app would keep it.
        let reparsed = try #require(URL(string: permanentURI.absoluteString))
        #expect(coordinator.managedObjectID(forURIRepresentation: reparsed) == permanent)
        // And the ID from the URI finds the object.
        let other = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try other.performAndWait { () throws -> Void in
            #expect((try other.existingObject(with: p) as? Recipe)?.name == "Soup")
        }
    }

    /// A URI names an entity by name, so another coordinator with the same
    /// model (e.g. after reopening the store) understands it.
    @Test func uriFromAnotherCoordinatorResolvesAfterReopen() throws {
        let directory = TemporaryDirectory()
        let uri: URL
        do {
            let coordinator = try makeCoordinator(directory)
            let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
            uri = try context.performAndWait {
                let r = Recipe(context: context); r.name = "Kept"
                try context.save()
                return r.objectID.uriRepresentation()
            }
            try coordinator.close()
        }
        let coordinator = try makeCoordinator(directory)  // a new model instance
        let id = try #require(coordinator.managedObjectID(forURIRepresentation: uri))
        #expect(id.entity === coordinator.model.entity(named: "Recipe"))
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws -> Void in
            #expect((try context.existingObject(with: id) as? Recipe)?.name == "Kept")
        }
    }

    /// A primary key is handed out once in a store's life: to an object
    /// inserted before the coordinator has a store, by the store while it is
    /// open, after it is closed and added again, and by a later coordinator
    /// of the same directory — each save records the counters with its
    /// objects, so no new object takes a stored one's key (its save would
    /// overwrite that object).
    @Test func aPrimaryKeyIsHandedOutOnceInAStoresLife() throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/store"
        var ids: [ObjectID] = []
        func insertAndSave(_ coordinator: PersistentStoreCoordinator, _ names: [String]) throws {
            let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
            ids += try context.performAndWait {
                let recipes = names.map { name in
                    let recipe = Recipe(context: context)
                    recipe.name = name
                    return recipe
                }
                try context.save()
                return recipes.map(\.objectID)
            }
        }
        /// A recipe inserted now in a context of its own, saved later.
        func unsavedRecipe(_ name: String, on coordinator: PersistentStoreCoordinator) -> (ManagedObjectContext, Recipe) {
            let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
            return (context, context.performAndWait {
                let recipe = Recipe(context: context)
                recipe.name = name
                return recipe
            })
        }
        let coordinator = PersistentStoreCoordinator(model: makeModel())
        // Before the store: keys from the coordinator's own counters.
        let (early, earlyRecipe) = unsavedRecipe("early", on: coordinator)
        try coordinator.addPersistentStore(.log, directory: path, options: testStoreOptions())
        try early.performAndWait { try early.save() }
        ids.append(earlyRecipe.objectID)
        try insertAndSave(coordinator, ["a", "b"])
        try coordinator.close()
        // A context made before the store comes back reserves keys then.
        let (between, betweenRecipe) = unsavedRecipe("between", on: coordinator)
        try coordinator.addPersistentStore(.log, directory: path, options: testStoreOptions())
        try between.performAndWait { try between.save() }
        ids.append(betweenRecipe.objectID)
        try insertAndSave(coordinator, ["c"])
        try coordinator.close()
        let reopened = PersistentStoreCoordinator(model: makeModel())
        try reopened.addPersistentStore(.log, directory: path, options: testStoreOptions())
        try insertAndSave(reopened, ["d", "e"])
        #expect(Set(ids.map(\.primaryKey)).count == ids.count, "\(ids.map(\.primaryKey))")
        let context = ManagedObjectContext(.privateQueue, coordinator: reopened)
        let stored = try context.performAndWait { try context.fetch(FetchRequest<Recipe>()).compactMap(\.name).sorted() }
        #expect(stored == ["a", "b", "between", "c", "d", "e", "early"])
    }

    /// URIs that do not name an ID of the model give nil.
    @Test func malformedURIsGiveNil() throws {
        let coordinator = try makeCoordinator()
        for text in ["x-strata:/Nope/p1", "x-strata:/Recipe/p0", "x-strata:/Recipe/q1", "x-strata:/Recipe/p",
                     "x-strata:/Recipe/pabc", "x-strata:/Recipe", "x-strata:/Recipe/p1/extra",
                     "https://example.com/Recipe/p1", "x-strata:/Recipe/p-1"] {
            let url = try #require(URL(string: text))
            #expect(coordinator.managedObjectID(forURIRepresentation: url) == nil, "\(text)")
        }
        let good = try #require(URL(string: "x-strata:/Recipe/p1"))
        #expect(coordinator.managedObjectID(forURIRepresentation: good) != nil)
    }

    // MARK: object(with:) and existingObject(with:)

    /// object(with:) gives a fault for an object not registered yet, loads
    /// it on first use, and returns the registered instance afterwards.
    @Test func objectWithGivesFaultThenLoads() throws {
        let coordinator = try makeCoordinator()
        let seeder = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let id = try seeder.performAndWait {
            let r = Recipe(context: seeder); r.name = "Soup"; r.servings = 3
            try seeder.save()
            return r.objectID
        }
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let object = context.object(with: id)
            #expect(object.isFault)
            #expect(object.objectID == id)
            #expect(!object.hasChanges)
            let r = try #require(object as? Recipe)  // the entity's class
            #expect(context.object(with: id) === r)
            #expect(r.servings == 3)
            #expect(!r.isFault)
            #expect(r.name == "Soup")
            #expect(context.registeredObject(for: id) === r)
            // existingObject(with:) returns that same, loaded instance.
            #expect(try context.existingObject(with: id) === r)
        }
    }

    /// existingObject(with:) loads at once (no fault).
    @Test func existingObjectIsNotAFault() throws {
        let coordinator = try makeCoordinator()
        let seeder = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let id = try seeder.performAndWait {
            let r = Recipe(context: seeder); r.name = "Soup"
            try seeder.save()
            return r.objectID
        }
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let object = try context.existingObject(with: id)
            #expect(!object.isFault)
            #expect(object.managedObjectContext === context)
        }
    }

    /// object(with:) never fails: a fault for an object that does not exist
    /// reads as deleted, with default values; existingObject(with:) throws
    /// objectNotFound for it.
    @Test func missingObjects() throws {
        let coordinator = try makeCoordinator()
        let missingURI = try #require(URL(string: "x-strata:/Recipe/p987654"))
        let missing = try #require(coordinator.managedObjectID(forURIRepresentation: missingURI))
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let error = #expect(throws: StrataError.self) { try context.existingObject(with: missing) }
            #expect(error?.code == .objectNotFound)
            let fault = try #require(context.object(with: missing) as? Recipe)
            #expect(fault.isFault)
            #expect(fault.name == "")
            #expect(fault.isDeleted)
            // Still not found afterwards.
            let again = #expect(throws: StrataError.self) { try context.existingObject(with: missing) }
            #expect(again?.code == .objectNotFound)
        }
    }

    /// existingObject(with:) throws objectNotFound for an object deleted and
    /// saved elsewhere, and for one inserted in another context but not saved.
    @Test func existingObjectOfDeletedOrUnsavedObjectThrows() throws {
        let coordinator = try makeCoordinator()
        let a = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let (deletedID, unsavedID) = try a.performAndWait {
            let gone = Recipe(context: a); gone.name = "Gone"
            try a.save()
            a.delete(gone)
            try a.save()
            let unsaved = Recipe(context: a); unsaved.name = "Unsaved"
            return (gone.objectID, unsaved.objectID)
        }
        let b = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        b.performAndWait {
            for id in [deletedID, unsavedID] {
                let error = #expect(throws: StrataError.self) { try b.existingObject(with: id) }
                #expect(error?.code == .objectNotFound)
            }
        }
        // In the deleting context as well.
        a.performAndWait {
            let error = #expect(throws: StrataError.self) { try a.existingObject(with: deletedID) }
            #expect(error?.code == .objectNotFound)
        }
    }

    /// An ID of another model's entity is refused by existingObject(with:).
    @Test func existingObjectRejectsIDOfAnotherModel() throws {
        let first = try makeCoordinator()
        let second = try makeCoordinator()  // its own model instance
        let a = ManagedObjectContext(.privateQueue, coordinator: first)
        let foreignID = try a.performAndWait {
            let r = Recipe(context: a); r.name = "X"
            try a.save()
            return r.objectID
        }
        let b = ManagedObjectContext(.privateQueue, coordinator: second)
        b.performAndWait {
            let error = #expect(throws: StrataError.self) { try b.existingObject(with: foreignID) }
            #expect(error?.code == .invalidArgument)
        }
    }

    // MARK: C15

    /// An ObjectID (Sendable) is how an object crosses from one
    /// private context's queue to another's; each context has its own instance.
    // C15
    @Test func objectIDsCrossBetweenPrivateQueues() async throws {
        let coordinator = try makeCoordinator()
        let importer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "importer")
        let reader = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "reader")
        let ids: [ObjectID] = try await importer.perform { () throws(StrataError) -> [ObjectID] in
            var made: [Recipe] = []
            for i in 0..<10 {
                let r = Recipe(context: importer); r.name = "R\(i)"; r.servings = i
                made.append(r)
            }
            try importer.save()
            return made.map(\.objectID)
        }
        #expect(ids.count == 10 && ids.allSatisfy { !$0.isTemporaryID })
        let names: [String] = try await reader.perform { () throws(StrataError) -> [String] in
            try ids.map { id throws(StrataError) in
                let object = try reader.existingObject(with: id)
                return (object as? Recipe)?.name ?? "?"
            }
        }
        #expect(names == (0..<10).map { "R\($0)" })
        // Distinct instances per context, same ID.
        let importerInstance = await importer.perform { ObjectIdentifier(importer.object(with: ids[0])) }
        let readerInstance = await reader.perform { ObjectIdentifier(reader.object(with: ids[0])) }
        #expect(importerInstance != readerInstance)
        let registeredHere = await reader.perform { reader.registeredObject(for: ids[0])?.managedObjectContext === reader }
        #expect(registeredHere)
    }

    /// IDs handed between two private contexts running concurrently
    /// on their own queues (a producer and a consumer) all resolve.
    // C15
    @Test func idsFromAConcurrentProducerResolveInTheConsumer() async throws {
        let coordinator = try makeCoordinator()
        let producer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "producer")
        let consumer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "consumer")
        let (stream, continuation) = AsyncStream.makeStream(of: [ObjectID].self)
        let production = Task {
            for round in 0..<5 {
                let ids = try await producer.perform { () throws(StrataError) -> [ObjectID] in
                    let rs = (0..<20).map { i in
                        let r = Recipe(context: producer); r.name = "\(round)-\(i)"; return r
                    }
                    try producer.save()
                    return rs.map(\.objectID)
                }
                continuation.yield(ids)
            }
            continuation.finish()
        }
        var seen = 0
        for await ids in stream {
            let resolved = await consumer.perform { () -> Int in
                ids.filter { id in (try? consumer.existingObject(with: id)) != nil }.count
            }
            #expect(resolved == ids.count)
            seen += resolved
        }
        try await production.value
        #expect(seen == 100)
        // Handing IDs to a child context of another queue works too.
        let child = ManagedObjectContext(.privateQueue, parent: consumer)
        let count = try await child.perform { () throws(StrataError) -> Int in try child.count(for: FetchRequest<Recipe>()) }
        #expect(count == 100)
    }
}
