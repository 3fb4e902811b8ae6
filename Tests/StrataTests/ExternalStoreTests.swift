import Foundation
import SharedTestSupport
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
    /// Objects its scans gave, ordered or not, and counts and aggregates it computed (for tests).
    let rowsGiven = Atomic<Int>(0)
    let counts = Atomic<Int>(0)
    /// Whether it reads in an order and counts (as PostgreSQL does), or
    /// leaves both to the coordinator (the protocol's defaults); and
    /// whether it declines for now (a test's other answer).
    let ordersAndCounts: Bool
    let declines = Atomic<Bool>(false)
    private var computes: Bool { ordersAndCounts && !declines.load(ordering: .relaxed) }

    init(ordersAndCounts: Bool = true) {
        self.ordersAndCounts = ordersAndCounts
    }

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
            rowsGiven.add(1, ordering: .relaxed)
            guard try body(ObjectID(entity: entity, storedPrimaryKey: key), snapshot) else { break }
        }
        return true
    }

    func forEachStored(
        of entity: EntityDescription, matching predicate: StorePredicate?, orderedBy order: [StoreSortKey], expecting: Int,
        _ body: (ObjectID, StoredSnapshot) throws(StrataError) -> Bool
    ) throws(StrataError) -> Bool? {
        guard computes else { return nil }
        let rows = try open { (state) throws(StrataError) in
            (state.objects[ObjectIdentifier(entity)] ?? [:]).filter { predicate?.evaluate($0.value.values) ?? true }
        }.sorted { a, b in
            for key in order {
                let (x, y) = (a.value.values[key.property], b.value.values[key.property])
                switch key.descending ? PropertyValue.compare(y, x) : PropertyValue.compare(x, y) {
                case .orderedAscending: return true
                case .orderedDescending: return false
                case .orderedSame: continue
                }
            }
            return a.key < b.key
        }
        for (key, snapshot) in rows {
            rowsGiven.add(1, ordering: .relaxed)
            guard try body(ObjectID(entity: entity, storedPrimaryKey: key), snapshot) else { break }
        }
        return true
    }

    func statement(of entity: EntityDescription, matching predicate: StorePredicate?, orderedBy order: [StoreSortKey]?) throws(StrataError) -> String? {
        guard let order else { return "every \(entity.name)" + (predicate == nil ? "" : " that may pass") }
        guard computes else { return nil }
        return "every \(entity.name) in the order " + order.map { "\(entity.properties[$0.property].name)\($0.descending ? " DESC" : "")" }.joined(separator: ", ")
    }

    func aggregates(
        of entity: EntityDescription, matching predicate: StorePredicate?, groupedBy properties: [Int],
        computing columns: [StoreAggregate], excluding: [ObjectID]
    ) throws(StrataError) -> [StoreGroup]? {
        guard computes else { return nil }
        counts.add(1, ordering: .relaxed)
        let left = Set(excluding.map(\.storedPrimaryKey))
        let rows = try open { (state) throws(StrataError) in state.objects[ObjectIdentifier(entity)] ?? [:] }
        var groups: [[PropertyValue]: [[PropertyValue]]] = properties.isEmpty ? [[]: []] : [:]
        for (key, row) in rows where !left.contains(key) && (predicate?.evaluate(row.values) ?? true) {
            groups[properties.map { row.values[$0] }, default: []].append(row.values)
        }
        return groups.map { key, members in
            StoreGroup(values: key, results: columns.map { column in
                switch column {
                case .count:
                    return StoreGroup.Result(value: .integer(Int64(members.count)), values: members.count)
                case .sum(let p):
                    let held = members.map { $0[p] }.filter { $0 != .null }
                    var sum: PropertyValue = .null
                    for value in held {
                        switch (sum, value) {
                        case (.null, _): sum = value
                        case (.integer(let a), .integer(let b)): sum = .integer(a + b)
                        case (.double(let a), .double(let b)): sum = .double(a + b)
                        default: break
                        }
                    }
                    return StoreGroup.Result(value: sum, values: held.count)
                case .minimum(let p), .maximum(let p):
                    let held = members.map { $0[p] }.filter { $0 != .null }
                    let isMinimum = if case .minimum = column { true } else { false }
                    let extreme = held.dropFirst().reduce(held.first ?? .null) { best, value in
                        (isMinimum ? PropertyValue.precedes(value, best) : PropertyValue.precedes(best, value)) ? value : best
                    }
                    return StoreGroup.Result(value: extreme, values: held.count)
                }
            })
        }
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
            return .written(saveIdentifier: nil)
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
        // (A store behind the seam may keep a history, as PostgreSQL's does; this one keeps none.)
        let history = #expect(throws: StrataError.self) { _ = try coordinator.currentHistoryToken() }
        #expect(history?.code == .invalidArgument)
        #expect(history?.message.contains("keeps no persistent history") == true)
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

    /// A fetch with a sort and a limit reads its page from a store that
    /// reads in order, not every object: the objects given are the page
    /// and the ones changed above the store, and the answer is the one the
    /// whole fetch, sorted and cut, gives — with changes in the context and
    /// its parent (an update that moves an object in, one that moves an
    /// object out, a delete, an insert), an offset, ties and two keys.
    @Test func aSortedPageIsReadInTheStoresOrder() throws {
        for ordersAndCounts in [true, false] {
            let coordinator = PersistentStoreCoordinator(model: makeModel())
            let store = DictionaryStore(ordersAndCounts: ordersAndCounts)
            try coordinator.addPersistentStore(store)
            let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator)
            var random = SeededGenerator(seed: testSeed())
            try parent.performAndWait {
                for i in 0..<300 {
                    let recipe = Recipe(context: parent)
                    recipe.name = "R\(i)"
                    recipe.servings = Int.random(in: 0..<40, using: &random)
                    recipe.rating = Double(Int.random(in: 0..<5, using: &random))
                }
                try parent.save()
            }
            let child = ManagedObjectContext(.privateQueue, parent: parent)
            func page(_ request: FetchRequest<Recipe>, in context: ManagedObjectContext) throws -> (page: [String], whole: [String], given: Int) {
                try context.performAndWait {
                    let before = store.rowsGiven.load(ordering: .relaxed)
                    let page = try context.fetch(request).map(\.name)
                    let given = store.rowsGiven.load(ordering: .relaxed) - before
                    var all = request
                    (all.fetchLimit, all.fetchOffset) = (0, 0)
                    let whole = try context.fetch(all).map(\.name).dropFirst(request.fetchOffset).prefix(request.fetchLimit)
                    return (page, Array(whole), given)
                }
            }
            var top = FetchRequest<Recipe>(sortBy: [SortDescriptor(\.servings, order: .reverse)])
            top.fetchLimit = 10
            var twoKeys = FetchRequest<Recipe>(predicate: #Predicate { $0.servings > 5 }, sortBy: [SortDescriptor(\.rating), SortDescriptor(\.name, order: .reverse)])
            twoKeys.fetchLimit = 7
            twoKeys.fetchOffset = 3
            for request in [top, twoKeys] {
                let (found, whole, given) = try page(request, in: parent)
                #expect(found == whole && found.count == request.fetchLimit)
                // The page, and no more: a store that cannot order gives every object.
                if ordersAndCounts { #expect(given == request.fetchOffset + request.fetchLimit) } else { #expect(given > 200) }
            }
            // Changes above the store and in the context itself.
            try parent.performAndWait {
                let all = try parent.fetch(FetchRequest<Recipe>(sortBy: [SortDescriptor(\.servings, order: .reverse)]))
                all.last!.servings = 100                    // in from the bottom
                all.first!.servings = -1                    // out from the top
                parent.delete(all[1])
                let made = Recipe(context: parent)
                made.name = "Made"
                made.servings = 50
            }
            try child.performAndWait {
                let all = try child.fetch(FetchRequest<Recipe>(sortBy: [SortDescriptor(\.servings, order: .reverse)]))
                all[2].servings = 99
                all[3].rating = 9
            }
            for context in [parent, child] {
                for request in [top, twoKeys] {
                    let (found, whole, _) = try page(request, in: context)
                    #expect(found == whole, "\(found) against \(whole)")
                }
            }
            // explain says which: the store's order, or a sort in memory.
            let plan = try parent.performAndWait { try parent.explain(top).description }
            #expect(plan == (ordersAndCounts ? "SCAN Recipe VIA every Recipe in the order servings DESC"
                                             : "SCAN Recipe VIA every Recipe, THEN SORT IN MEMORY BY servings DESC"), "\(plan)")
            // The object moved in from the bottom leads; the insert is third.
            let changedTop = try page(top, in: child).page
            #expect(changedTop[2] == "Made" && changedTop.count == 10)
        }
    }

    /// A count is the store's count, corrected for what this context and
    /// its parent changed: no object is read for it.
    @Test func aCountIsTheStoresCountCorrectedForChanges() throws {
        let (coordinator, store) = try coordinator()
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try parent.performAndWait {
            for i in 0..<100 {
                let recipe = Recipe(context: parent)
                recipe.name = "R\(i)"
                recipe.servings = i % 10
            }
            try parent.save()
        }
        let child = ManagedObjectContext(.privateQueue, parent: parent)
        let requests = [FetchRequest<Recipe>(), FetchRequest<Recipe>(predicate: #Predicate { $0.servings >= 5 }),
                        FetchRequest<Recipe>(predicate: #Predicate { $0.name.starts(with: "R1") && $0.servings < 3 })]
        func check(_ context: ManagedObjectContext, _ label: String) throws {
            try context.performAndWait {
                for request in requests {
                    let (counts, given) = (store.counts.load(ordering: .relaxed), store.rowsGiven.load(ordering: .relaxed))
                    let counted = try context.count(for: request)
                    #expect(store.counts.load(ordering: .relaxed) == counts + 1, "\(label): counted by the store")
                    #expect(store.rowsGiven.load(ordering: .relaxed) == given, "\(label): no object read")
                    #expect(counted == (try context.fetch(request).count), "\(label)")
                    var limited = request
                    (limited.fetchOffset, limited.fetchLimit) = (4, 3)
                    #expect(try context.count(for: limited) == min(3, max(0, counted - 4)), "\(label)")
                }
            }
        }
        try check(parent, "saved")
        try parent.performAndWait {
            let all = try parent.fetch(FetchRequest<Recipe>(sortBy: [SortDescriptor(\.name)]))
            all[0].servings = 7      // R0: 0 → 7
            all[15].servings = 1     // R18 (sorted by name): 8 → 1
            parent.delete(all[20])
            let made = Recipe(context: parent)
            made.name = "R1x"
            made.servings = 2
        }
        try check(parent, "changes in the context")
        try child.performAndWait {
            let all = try child.fetch(FetchRequest<Recipe>(sortBy: [SortDescriptor(\.name)]))
            all[5].servings = 9
            child.delete(all[6])
            let made = Recipe(context: child)
            made.name = "R1y"
            made.servings = 8
        }
        try check(child, "changes in the child and its parent")
    }

    /// Groups and aggregates (a dictionary fetch) are the store's, with the
    /// objects this context and its parent changed left out of them and
    /// judged as they see them: no object read, and the results those of
    /// the objects read and judged here.
    @Test func aggregatesAreTheStoresCorrectedForChanges() throws {
        let (coordinator, store) = try coordinator()
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try parent.performAndWait {
            for i in 0..<120 {
                let recipe = Recipe(context: parent)
                recipe.name = ["Ré", "Re\u{301}", "Soup", "Stew"][i % 4]
                recipe.servings = i % 7
                recipe.vegetarian = i % 3 == 0
            }
            try parent.save()
        }
        let child = ManagedObjectContext(.privateQueue, parent: parent)
        let requests = [
            DictionaryFetchRequest<Recipe>(propertiesToFetch: ["servings", .count()], groupBy: ["servings"]),
            DictionaryFetchRequest<Recipe>(predicate: #Predicate { $0.servings > 2 }, propertiesToFetch: ["name", "vegetarian", .count(as: "n")],
                                           groupBy: ["name", "vegetarian"]),
            DictionaryFetchRequest<Recipe>(propertiesToFetch: ["name", .count(), .sum("servings"), .average("servings"), .min("rating"),
                                                               .max("servings"), .sum("rating")], groupBy: ["name"]),
            DictionaryFetchRequest<Recipe>(predicate: #Predicate { $0.vegetarian }, propertiesToFetch: [.count(), .sum("servings"), .max("name")]),
        ]
        func check(_ context: ManagedObjectContext, _ label: String) throws {
            try context.performAndWait {
                for request in requests {
                    let (counts, given) = (store.counts.load(ordering: .relaxed), store.rowsGiven.load(ordering: .relaxed))
                    let rows = try context.fetch(request)
                    #expect(store.counts.load(ordering: .relaxed) == counts + 1, "\(label): counted by the store")
                    #expect(store.rowsGiven.load(ordering: .relaxed) == given, "\(label): no object read")
                    // As the general path (the objects read and judged here) makes them.
                    store.declines.store(true, ordering: .relaxed)
                    let general = try context.fetch(request)
                    store.declines.store(false, ordering: .relaxed)
                    #expect(Set(rows) == Set(general), "\(label): \(rows) against \(general)")
                    #expect(!rows.isEmpty)
                }
            }
        }
        try check(parent, "saved")
        try parent.performAndWait {
            let all = try parent.fetch(FetchRequest<Recipe>(sortBy: [SortDescriptor(\.name), SortDescriptor(\.servings)]))
            all[0].servings = 6
            all[10].name = "Soup"
            parent.delete(all[20])
            let made = Recipe(context: parent)
            made.name = "New"
            made.servings = 3
        }
        try check(parent, "changes in the context")
        try child.performAndWait {
            let all = try child.fetch(FetchRequest<Recipe>(sortBy: [SortDescriptor(\.name), SortDescriptor(\.servings)]))
            all[30].vegetarian.toggle()
            child.delete(all[31])
        }
        try check(child, "changes in the child and its parent")
    }
}
