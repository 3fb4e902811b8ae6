import Foundation
@_spi(StoreImplementation) @testable import Strata
import Synchronization
import Testing

/// A store behind the seam that is not a key-value log: objects in a
/// dictionary, answering only through ``PersistentStore`` — the proof that
/// the protocol is enough for the object graph, before PostgreSQL.
final class DictionaryStore: PersistentStore {
    let identifier = UUID()
    private let state = Mutex<(objects: [ObjectIdentifier: [UInt64: StoredSnapshot]], nextKeys: [ObjectIdentifier: UInt64], closed: Bool)>(([:], [:], false))
    /// Saves that reached it (for tests).
    let saves = Atomic<Int>(0)
    /// Calls of ``snapshots(of:)``: round trips, on a store over a network (for tests).
    let snapshotReads = Atomic<Int>(0)
    /// The predicates its scans were narrowed by, in order (for tests).
    let narrowings = Mutex<[StorePredicate?]>([])

    private func open<T>(_ body: (inout (objects: [ObjectIdentifier: [UInt64: StoredSnapshot]], nextKeys: [ObjectIdentifier: UInt64], closed: Bool)) throws(StrataError) -> T) throws(StrataError) -> T {
        try state.withLock { (state) throws(StrataError) -> T in
            guard !state.closed else { throw StrataError(code: .noPersistentStore, message: "closed") }
            return try body(&state)
        }
    }

    func reservePrimaryKeys(for entity: EntityDescription, count: UInt64) throws(StrataError) -> Range<UInt64> {
        try open { (state) throws(StrataError) in
            let start = state.nextKeys[ObjectIdentifier(entity), default: 1]
            state.nextKeys[ObjectIdentifier(entity)] = start + count
            return start..<start + count
        }
    }

    func snapshots(of ids: [ObjectID]) throws(StrataError) -> [StoredSnapshot?] {
        snapshotReads.add(1, ordering: .relaxed)
        return try open { (state) throws(StrataError) in ids.map { state.objects[ObjectIdentifier($0.entity)]?[$0.storedPrimaryKey] } }
    }

    func forEachStored(
        of entity: EntityDescription, matching predicate: StorePredicate?, _ body: (ObjectID, StoredSnapshot) throws(StrataError) -> Bool
    ) throws(StrataError) -> Bool {
        narrowings.withLock { $0.append(predicate) }
        let rows = try open { (state) throws(StrataError) in (state.objects[ObjectIdentifier(entity)] ?? [:]).sorted { $0.key < $1.key } }
        for (key, snapshot) in rows where predicate?.evaluate(snapshot.values) ?? true {
            guard try body(ObjectID(entity: entity, storedPrimaryKey: key), snapshot) else { break }
        }
        return true
    }

    func holders(of keys: [[PropertyValue]], constraint: [String], of entity: EntityDescription) throws(StrataError) -> [[ObjectID]] {
        let positions = constraint.map { name in entity.properties.firstIndex { $0.name == name }! }
        let rows = try open { (state) throws(StrataError) in state.objects[ObjectIdentifier(entity)] ?? [:] }
        return keys.map { key in
            guard !key.contains(.null) else { return [] }
            return rows.filter { _, snapshot in positions.map { snapshot.values[$0] } == key }
                .map { ObjectID(entity: entity, storedPrimaryKey: $0.key) }.sorted { $0.storedPrimaryKey < $1.storedPrimaryKey }
        }
    }

    func save(_ changes: StoreChanges) throws(StrataError) -> StoreSaveOutcome {
        let race = races.withLock { (races) -> (ObjectID, @Sendable (inout [PropertyValue]) -> Void)? in
            guard let race = races.first else { return nil }
            races.removeFirst()
            return race
        }
        if let (id, change) = race { changeBehindTheCoordinator(id, change) }
        return try open { (state) throws(StrataError) -> StoreSaveOutcome in
            let stale = changes.updated.filter { state.objects[ObjectIdentifier($0.id.entity)]?[$0.id.storedPrimaryKey]?.version != $0.expectedVersion }.map(\.id)
                + changes.deleted.filter { state.objects[ObjectIdentifier($0.id.entity)]?[$0.id.storedPrimaryKey]?.version != $0.expectedVersion }.map(\.id)
            guard stale.isEmpty else { return .conflicts(stale) }
            for delete in changes.deleted { state.objects[ObjectIdentifier(delete.id.entity)]?[delete.id.storedPrimaryKey] = nil }
            for update in changes.updated {
                state.objects[ObjectIdentifier(update.id.entity), default: [:]][update.id.storedPrimaryKey] =
                    StoredSnapshot(values: update.values, version: update.expectedVersion + 1)
            }
            for (id, values) in changes.inserted {
                state.objects[ObjectIdentifier(id.entity), default: [:]][id.storedPrimaryKey] = StoredSnapshot(values: values, version: 1)
            }
            saves.add(1, ordering: .relaxed)
            return .written(transaction: nil)
        }
    }

    func close() throws(StrataError) {
        state.withLock { $0.closed = true }
    }

    /// Other processes' writes that land just before the next saves, one
    /// each: between what a save read and its write.
    private let races = Mutex<[(ObjectID, @Sendable (inout [PropertyValue]) -> Void)]>([])

    func changeBeforeTheNextSaves(_ id: ObjectID, times count: Int = 1, _ change: @escaping @Sendable (inout [PropertyValue]) -> Void) {
        races.withLock { $0 += Array(repeating: (id, change), count: count) }
    }

    /// Another process's write: `id`'s values changed and its version moved on, behind the coordinator's back.
    func changeBehindTheCoordinator(_ id: ObjectID, _ change: (inout [PropertyValue]) -> Void) {
        state.withLock { state in
            guard var snapshot = state.objects[ObjectIdentifier(id.entity)]?[id.storedPrimaryKey] else { return }
            change(&snapshot.values)
            snapshot.version += 1
            state.objects[ObjectIdentifier(id.entity)]?[id.storedPrimaryKey] = snapshot
        }
    }
}

/// The object graph over a store behind the seam (``DictionaryStore``):
/// saves, fetches, relationships, children, uniqueness and conflicts
/// behave as on the log store; what such a store does not do is a typed error.
@Suite struct ExternalStoreTests {
    func coordinator(_ model: ManagedObjectModel = makeModel()) throws -> (PersistentStoreCoordinator, DictionaryStore) {
        let coordinator = PersistentStoreCoordinator(model: model)
        let store = DictionaryStore()
        try coordinator.addPersistentStore(store)
        return (coordinator, store)
    }

    @Test func savesFetchesAndRelationships() throws {
        let (coordinator, store) = try coordinator()
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try writer.performAndWait {
            for (name, servings) in [("Soup", 4), ("Salad", 2), ("Stew", 6), ("Bread", 8)] {
                let recipe = Recipe(context: writer)
                recipe.name = name
                recipe.servings = servings
                let salt = Ingredient(context: writer)
                salt.name = "Salt for \(name)"
                salt.recipe = recipe
            }
            try writer.save()
        }
        #expect(store.saves.load(ordering: .relaxed) == 1)
        let reader = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try reader.performAndWait {
            var request = FetchRequest<Recipe>(predicate: #Predicate { $0.servings > 3 }, sortBy: [SortDescriptor(\.name)])
            request.fetchLimit = 2
            #expect(try reader.fetch(request).map(\.name) == ["Bread", "Soup"])
            #expect(try reader.count(for: FetchRequest<Recipe>(predicate: #Predicate { $0.servings > 3 })) == 3)
            let soup = try #require(try Recipe.first(in: reader, where: \.name, equals: "Soup"))
            #expect(soup.ingredients.map(\.name) == ["Salt for Soup"])
            #expect(soup.ingredients.first?.recipe === soup)
            // An update and a delete, through a child.
            let child = ManagedObjectContext(.privateQueue, parent: reader)
            try child.performAndWait {
                let stew = try #require(try Recipe.first(in: child, where: \.name, equals: "Stew"))
                stew.servings = 1
                let bread = try #require(try Recipe.first(in: child, where: \.name, equals: "Bread"))
                child.delete(bread)
                try child.save()
            }
            try reader.save()
        }
        let fresh = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try fresh.performAndWait {
            let all = try fresh.fetch(FetchRequest<Recipe>(sortBy: [SortDescriptor(\.name)]))
            #expect(all.map(\.name) == ["Salad", "Soup", "Stew"])
            #expect(all.last?.servings == 1)
            // The cascade took Bread's ingredient with it.
            #expect(try fresh.count(for: FetchRequest<Ingredient>()) == 3)
        }
    }

    @Test func uniquenessIsCheckedThroughTheStore() throws {
        let (coordinator, _) = try coordinator(makeModel(authorUniqueness: [["name"]]))
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            Author(context: context).name = "Ada"
            try context.save()
        }
        let other = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let refused = #expect(throws: StrataError.self) {
            try other.performAndWait {
                Author(context: other).name = "Ada"
                try other.save()
            }
        }
        #expect(refused?.code == .constraintConflict)
    }

    /// A re-import through an upsert reads the stored objects it merges
    /// into in one call — on a store over a network, one round trip, not
    /// one an object.
    @Test func anUpsertReadsTheObjectsItMergesIntoInOneCall() throws {
        let (coordinator, store) = try coordinator(makeModel(authorUniqueness: [["name"]]))
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            for n in 0..<50 { Author(context: context).name = "author \(n)" }
            try context.save()
        }
        let importer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        importer.mergePolicy = .mergeByPropertyObjectTrump
        let before = store.snapshotReads.load(ordering: .relaxed)
        try importer.performAndWait {
            // Half stored, half new, mixed.
            for n in 0..<100 { Author(context: importer).name = "author \(n % 2 == 0 ? n / 2 : 50 + n / 2)" }
            try importer.save()
        }
        #expect(store.snapshotReads.load(ordering: .relaxed) - before == 1)
        let count = try importer.performAndWait { () throws in try importer.count(for: FetchRequest<Author>()) }
        #expect(count == 100)
    }

    @Test func aChangeBehindTheCoordinatorIsAConflict() throws {
        let (coordinator, store) = try coordinator()
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let id = try context.performAndWait {
            let recipe = Recipe(context: context)
            recipe.name = "Soup"
            try context.save()
            return recipe.objectID
        }
        // Another process renames it; this context still holds version 1.
        let name = id.entity.properties.firstIndex { $0.name == "name" }!
        store.changeBehindTheCoordinator(id) { $0[name] = .string("Potage") }
        let refused = #expect(throws: StrataError.self) {
            try context.performAndWait {
                let soup = try #require(try context.existingObject(with: id) as? Recipe)
                soup.servings = 10
                try context.save()
            }
        }
        #expect(refused?.code == .mergeConflict)
        #expect(refused?.conflicts.map(\.objectID) == [id])
        // Read again, the other process's values are there.
        let fresh = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let name2 = try fresh.performAndWait { () throws in (try fresh.existingObject(with: id) as? Recipe)?.name }
        #expect(name2 == "Potage")
    }

    /// Another process's save between this save's read of the versions and
    /// its write: the store refuses the write, and the save decides again on
    /// what that process wrote — by the merge policy, as if it had seen it first.
    @Test func aSaveRacedByAnotherProcessDecidesAgainByItsPolicy() throws {
        let (coordinator, store) = try coordinator()
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        context.mergePolicy = .mergeByPropertyObjectTrump
        let id = try context.performAndWait {
            let recipe = Recipe(context: context)
            recipe.name = "Soup"
            recipe.servings = 4
            try context.save()
            return recipe.objectID
        }
        let name = id.entity.properties.firstIndex { $0.name == "name" }!
        store.changeBeforeTheNextSaves(id) { $0[name] = .string("Potage") }
        try context.performAndWait {
            let soup = try #require(try context.existingObject(with: id) as? Recipe)
            soup.servings = 10
            try context.save()
            // The other process's name, this context's servings.
            #expect(soup.name == "Potage")
        }
        #expect(store.saves.load(ordering: .relaxed) == 2)
        let stored = try #require(try store.snapshots(of: [id])[0])
        #expect(stored.values[name] == .string("Potage"))
        #expect(stored.version == 3)

        // With the error policy, the conflict the second decision sees is
        // thrown with its properties; nothing is written.
        context.mergePolicy = .error
        store.changeBeforeTheNextSaves(id) { $0[name] = .string("Bisque") }
        let refused = #expect(throws: StrataError.self) {
            try context.performAndWait {
                let soup = try #require(try context.existingObject(with: id) as? Recipe)
                soup.servings = 12
                try context.save()
            }
        }
        #expect(refused?.code == .mergeConflict)
        #expect(refused?.conflicts.map(\.objectID) == [id])
        #expect(refused?.conflicts.first?.properties.isEmpty == false)
        #expect(store.saves.load(ordering: .relaxed) == 2)

        // Raced at every attempt: it gives up, saying so.
        context.performAndWait { context.rollback() }
        context.mergePolicy = .mergeByPropertyObjectTrump
        store.changeBeforeTheNextSaves(id, times: PersistentStoreCoordinator.storeRaceRounds) { $0[name] = .string("Broth") }
        let exhausted = #expect(throws: StrataError.self) {
            try context.performAndWait {
                let soup = try #require(try context.existingObject(with: id) as? Recipe)
                soup.servings = 14
                try context.save()
            }
        }
        #expect(exhausted?.code == .mergeConflict)
        #expect(exhausted?.message.contains("\(PersistentStoreCoordinator.storeRaceRounds) times in a row") == true)
        #expect(store.saves.load(ordering: .relaxed) == 2)
    }

    @Test func whatTheLogStoreAloneDoesIsATypedError() throws {
        let (coordinator, _) = try coordinator()
        try coordinator.compactStore()  // nothing to compact
        let history = #expect(throws: StrataError.self) { _ = try coordinator.currentHistoryToken() }
        #expect(history?.code == .invalidArgument)
        #expect(history?.message.contains("log store") == true)
        let batch = #expect(throws: StrataError.self) {
            try coordinator.execute(BatchInsertRequest<Tag>(objects: [["label": .string("x")]]))
        }
        #expect(batch?.code == .invalidArgument)
    }

    @Test func aNarrowedScanStillMeetsWhatChangedAboveTheStore() throws {
        let (coordinator, store) = try coordinator()
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let (small, large) = try parent.performAndWait {
            let small = Recipe(context: parent), large = Recipe(context: parent)
            small.name = "Small"
            small.servings = 2
            large.name = "Large"
            large.servings = 8
            try parent.save()
            return (small.objectID, large.objectID)
        }
        // Changed in the parent, not saved: the store still holds 2 and 8.
        try parent.performAndWait {
            (try parent.existingObject(with: small) as? Recipe)?.servings = 10
            (try parent.existingObject(with: large) as? Recipe)?.servings = 1
        }
        let child = ManagedObjectContext(.privateQueue, parent: parent)
        let inChild = try child.performAndWait {
            try child.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.servings > 5 })).map(\.name)
        }
        #expect(inChild == ["Small"])
        // The store was asked for the narrowed scan.
        #expect(store.narrowings.withLock { $0 }.last??.evaluate([.string("x"), .integer(9)] + Array(repeating: .null, count: 10)) == true)
        // In the parent itself, its own changes count.
        let inParent = try parent.performAndWait {
            try parent.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.servings > 5 })).map(\.name)
        }
        #expect(inParent == ["Small"])
        let counted = try parent.performAndWait { try parent.count(for: FetchRequest<Recipe>(predicate: #Predicate { $0.servings > 5 })) }
        #expect(counted == 1)
    }
}
