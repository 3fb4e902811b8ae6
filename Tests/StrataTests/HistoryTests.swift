import Foundation
import SharedTestSupport
@_spi(StoreImplementation) @testable import Strata
import StrataStore
import Testing

/// Persistent history: every save that reaches the store is a transaction
/// written in the save's own batch — its author, its context, what it did
/// to which object — fetched after a token, narrowed, merged into a
/// context, and pruned behind named cursors and within limits.
@Suite struct HistoryTests {
    static func container(_ directory: TemporaryDirectory, history: PersistentHistory = .default, readOnly: Bool = false) throws -> PersistentContainer {
        var options = testStoreOptions()
        options.readOnly = readOnly
        return try PersistentContainer(name: readOnly ? "Reader" : "App", model: makeModel(), directory: directory.path + "/store",
                                       options: options, viewContext: .privateQueue, history: history)
    }

    /// Saves one recipe called `name`, serving `servings`, to disk, by `author`.
    @discardableResult
    static func insert(_ name: String, servings: Int = 1, author: String? = nil, in container: PersistentContainer) throws -> ObjectID {
        var id: ObjectID?
        try container.saveAndWait { context in
            context.transactionAuthor = author
            let recipe = Recipe(context: context)
            recipe.name = name
            recipe.servings = servings
            id = recipe.objectID
        }
        return id!
    }

    static func setServings(_ servings: Int, of id: ObjectID, author: String? = nil, in container: PersistentContainer) throws {
        try container.saveAndWait { context in
            context.transactionAuthor = author
            (try context.existingObject(with: id) as! Recipe).servings = servings
        }
    }

    @Test func eachSaveToTheStoreIsOneTransaction() throws {
        let directory = TemporaryDirectory()
        let container = try Self.container(directory)
        #expect(try container.coordinator.currentHistoryToken() == nil)
        // Three recipes from an importer, through the view context and the writer.
        let importer = container.newBackgroundContext()
        importer.transactionAuthor = "import"
        let ids = try importer.performAndWait { () throws -> [ObjectID] in
            let recipes = (0..<3).map { i in
                let recipe = Recipe(context: importer)
                recipe.name = "R\(i)"
                return recipe
            }
            try importer.save()
            return recipes.map(\.objectID)
        }
        try container.saveAndWait()
        // An edit of one property, and a delete, each by its own author.
        try Self.setServings(4, of: ids[0], author: "ui", in: container)
        try container.saveAndWait { context in
            context.transactionAuthor = "cleanup"
            context.delete(try context.existingObject(with: ids[2]))
        }

        let history = try container.coordinator.fetchHistory()
        #expect(history.map(\.token.transactionNumber) == [1, 2, 3])
        #expect(history.map(\.author) == ["import", "ui", "cleanup"])
        #expect(history.allSatisfy { $0.contextName == "App.writer" })
        #expect(history[0].changes.map(\.kind) == [.insert, .insert, .insert])
        #expect(Set(history[0].changes.map(\.objectID)) == Set(ids))
        #expect(history[1].changes == [HistoryChange(objectID: ids[0], kind: .update, updatedProperties: ["servings"])])
        #expect(history[2].changes == [HistoryChange(objectID: ids[2], kind: .delete, updatedProperties: [])])
        #expect(history[1].timestamp >= history[0].timestamp)
        #expect(try container.coordinator.currentHistoryToken() == history[2].token)
        #expect(history[2].token.storeIdentifier == container.coordinator.storeIdentifier)

        // A save that changes nothing writes no transaction.
        try container.saveAndWait { context in
            (try context.existingObject(with: ids[0]) as! Recipe).servings = 4
        }
        #expect(try container.coordinator.fetchHistory().count == 3)
        try container.close()
    }

    /// A transaction's author is the one name that covers every change it
    /// writes: a context's author names its own changes and its unnamed
    /// children's; changes nobody named, or two names, leave it nil.
    @Test func theAuthorIsTheOneNameForEveryChange() throws {
        let directory = TemporaryDirectory()
        let container = try Self.container(directory)
        let view = container.viewContext
        func importerSave(_ name: String, author: String?) throws {
            let importer = container.newBackgroundContext()  // a child of the view context
            importer.transactionAuthor = author
            try importer.performAndWait { () throws in
                Recipe(context: importer).name = name
                try importer.save()
            }
        }
        // The importer's save alone, through the view context and the writer.
        try importerSave("a", author: "sync")
        try container.saveAndWait()
        // The importer's, and an edit made in the view context, which names no one.
        try importerSave("b", author: "sync")
        try view.performAndWait { () throws in Tag(context: view).label = "mine" }
        try container.saveAndWait()
        // The view context's author names its own change and an unnamed child's.
        view.transactionAuthor = "app"
        try importerSave("c", author: nil)
        try view.performAndWait { () throws in Tag(context: view).label = "mine too" }
        try container.saveAndWait()
        // Two names: nil.
        try importerSave("d", author: "sync")
        try container.saveAndWait()
        // Changes thrown away take their author with them.
        let writer = container.writerContext
        let writerChild = container.newBackgroundContext(childOfWriter: true)
        writerChild.transactionAuthor = "import"
        try writerChild.performAndWait { () throws in
            Recipe(context: writerChild).name = "dropped"
            try writerChild.save()
        }
        writer.performAndWait { writer.rollback() }
        view.transactionAuthor = nil
        try view.performAndWait { () throws in Tag(context: view).label = "after the rollback" }
        try container.saveAndWait()

        let authors = try container.coordinator.fetchHistory().map(\.author)
        #expect(authors == ["sync", nil, "app", "sync", nil])
        try container.close()
    }

    @Test func aDeleteOfAnObjectGoneAlreadyIsNotRecordedTwice() throws {
        let directory = TemporaryDirectory()
        let container = try Self.container(directory)
        let doomed = try Self.insert("doomed", in: container)
        // Two contexts delete it; the second save finds it gone.
        let first = ManagedObjectContext(.privateQueue, coordinator: container.coordinator)
        let second = ManagedObjectContext(.privateQueue, coordinator: container.coordinator)
        for context in [first, second] {
            try context.performAndWait { () throws in context.delete(try context.existingObject(with: doomed)) }
        }
        try first.performAndWait { () throws in try first.save() }
        try second.performAndWait { () throws in try second.save() }
        let deletes = try container.coordinator.fetchHistory().flatMap(\.changes).filter { $0.kind == .delete }
        #expect(deletes.map(\.objectID) == [doomed])
        try container.close()
    }

    @Test func aPageSaysHowFarItLookedAndTokensStayMeaningful() throws {
        let directory = TemporaryDirectory()
        var container = try Self.container(directory)
        for i in 0..<6 { try Self.insert("R\(i)", author: i == 1 ? "sync" : "app", in: container) }
        // A consumer that leaves out the app's transactions still moves on past them.
        var request = HistoryRequest()
        request.excludedAuthors = ["app"]
        let page = try container.coordinator.fetchHistoryPage(request)
        #expect(page.transactions.map(\.token.transactionNumber) == [2])
        #expect(page.scannedThrough?.transactionNumber == 6)
        let next = try container.coordinator.fetchHistoryPage(HistoryRequest(after: page.scannedThrough))
        #expect(next.transactions.isEmpty && next.scannedThrough == nil)
        // A token newer than any transaction (a store restored from an older copy) is refused.
        let future = HistoryToken(storeIdentifier: container.coordinator.storeIdentifier!, transactionNumber: 7)
        #expect(Self.code(of: { try container.coordinator.fetchHistory(HistoryRequest(after: future)) }) == .invalidArgument)
        try container.close()
        // With nothing kept, the current token is the last pruned: what comes
        // after it is everything from then on.
        container = try Self.container(directory, history: .off)
        try container.close()
        container = try Self.container(directory)
        let current = try #require(try container.coordinator.currentHistoryToken())
        #expect(current.transactionNumber == 7)
        try Self.insert("later", in: container)
        #expect(try container.coordinator.fetchHistory(HistoryRequest(after: current)).map(\.token.transactionNumber) == [8])
        try container.close()
    }

    @Test func historySurvivesReopeningAndCompaction() throws {
        let directory = TemporaryDirectory()
        var container = try Self.container(directory)
        for i in 0..<40 { try Self.insert("R\(i)", author: i % 2 == 0 ? "even" : "odd", in: container) }
        let before = try container.coordinator.fetchHistory()
        #expect(before.count == 40)
        // Object IDs of two opens name entities of two models: compared by name.
        func described(_ history: [HistoryTransaction]) -> [String] {
            history.map { t in "\(t.token) \(t.timestamp.timeIntervalSince1970) \(t.author ?? "-") " + t.changes.map { "\($0.kind)\($0.objectID)\($0.updatedProperties)" }.joined() }
        }
        try container.close()

        container = try Self.container(directory)
        try container.coordinator.compactStore()
        #expect(described(try container.coordinator.fetchHistory()) == described(before))
        // Numbering goes on from the newest.
        try Self.insert("after", in: container)
        let after = try container.coordinator.fetchHistory(HistoryRequest(after: before.last!.token))
        #expect(after.map(\.token.transactionNumber) == [41])
        // The store verifies with its history in it.
        try container.close()
        let verified = try ObjectStoreInspector(directory: directory.path + "/store").verifyRecords()
        #expect(verified.problems.isEmpty, "\(verified.problems)")
    }

    @Test func aRequestNarrowsByTokenAuthorEntityAndPredicate() throws {
        let directory = TemporaryDirectory()
        let container = try Self.container(directory)
        var ids: [ObjectID] = []
        for i in 0..<10 { ids.append(try Self.insert("R\(i)", servings: i, author: i < 5 ? "import" : "sync", in: container)) }
        try container.saveAndWait { context in
            context.transactionAuthor = "ui"
            let tag = Tag(context: context)
            tag.label = "soup"
        }
        let all = try container.coordinator.fetchHistory()
        #expect(all.count == 11)

        #expect(try container.coordinator.fetchHistory(HistoryRequest(after: all[7].token)).map(\.token) == Array(all[8...].map(\.token)))
        var request = HistoryRequest()
        request.authors = ["sync"]
        #expect(try container.coordinator.fetchHistory(request).map(\.author) == Array(repeating: "sync", count: 5))
        request = HistoryRequest()
        request.excludedAuthors = ["import", "sync"]
        #expect(try container.coordinator.fetchHistory(request).map(\.author) == ["ui"])
        request = HistoryRequest()
        request.entityNames = ["Tag"]
        let tags = try container.coordinator.fetchHistory(request)
        #expect(tags.count == 1 && tags[0].changes.allSatisfy { $0.objectID.entity.name == "Tag" })
        request = HistoryRequest()
        request.predicate = #Predicate<HistoryTransaction> { $0.author == "import" && $0.token.transactionNumber > 2 }
        #expect(try container.coordinator.fetchHistory(request).map(\.token.transactionNumber) == [3, 4, 5])

        // Pages: each page's last token starts the next.
        var pages: [[UInt64]] = []
        var after: HistoryToken?
        while true {
            let page = try container.coordinator.fetchHistory(HistoryRequest(after: after, limit: 4))
            guard let last = page.last else { break }
            pages.append(page.map(\.token.transactionNumber))
            after = last.token
        }
        #expect(pages == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11]])

        // A token of another store is refused.
        let foreign = HistoryToken(storeIdentifier: UUID(), transactionNumber: 3)
        #expect(Self.code(of: { try container.coordinator.fetchHistory(HistoryRequest(after: foreign)) }) == .invalidArgument)
        try container.close()
    }

    @Test func pruningKeepsTheLimitsAndWaitsForTheSlowestCursor() throws {
        let directory = TemporaryDirectory()
        var container = try Self.container(directory, history: PersistentHistory(maximumAge: nil, maximumTransactions: 10))
        for i in 0..<30 { try Self.insert("R\(i)", in: container) }
        var kept = try container.coordinator.fetchHistory()
        #expect(kept.map(\.token.transactionNumber) == Array(21...30))
        let summary = try container.coordinator.historySummary()
        #expect(summary.transactions == 10 && summary.pruned == 20 && summary.oldest == 21 && summary.newest == 30)
        // A token whose next transactions are gone: a typed error, not a silent skip.
        let stale = HistoryToken(storeIdentifier: container.coordinator.storeIdentifier!, transactionNumber: 19)
        #expect(Self.code(of: { try container.coordinator.fetchHistory(HistoryRequest(after: stale)) }) == .historyExpired)
        let current = HistoryToken(storeIdentifier: stale.storeIdentifier, transactionNumber: 20)
        #expect(try container.coordinator.fetchHistory(HistoryRequest(after: current)).count == 10)
        try container.close()

        // No count limit: only the cursors prune — up to the slowest.
        container = try Self.container(directory, history: PersistentHistory(maximumAge: nil, maximumTransactions: nil))
        for i in 30..<40 { try Self.insert("R\(i)", in: container) }
        let id = container.coordinator.storeIdentifier!
        try container.coordinator.setHistoryCursor("search", to: HistoryToken(storeIdentifier: id, transactionNumber: 35))
        try container.coordinator.setHistoryCursor("export", to: HistoryToken(storeIdentifier: id, transactionNumber: 25))
        #expect(try container.coordinator.historyCursor("search")?.transactionNumber == 35)
        try Self.insert("R40", in: container)
        kept = try container.coordinator.fetchHistory()
        #expect(kept.first?.token.transactionNumber == 26, "the export cursor has read through 25 only")
        try container.coordinator.removeHistoryCursor("export")
        #expect(try container.coordinator.historyCursor("export") == nil)
        try Self.insert("R41", in: container)
        #expect(try container.coordinator.fetchHistory().first?.token.transactionNumber == 36)
        try container.close()

        // Cursors are in the store: a reopen keeps them.
        container = try Self.container(directory, history: PersistentHistory(maximumAge: nil, maximumTransactions: nil))
        #expect(try container.coordinator.historySummary().cursors == ["search": 35])
        // Pruning by hand (Core Data's deleteHistory(before:)), never the newest.
        let newest = try #require(try container.coordinator.currentHistoryToken())
        #expect(try container.coordinator.pruneHistory(through: newest) == 6)
        #expect(try container.coordinator.fetchHistory().map(\.token) == [newest])
        #expect(Self.code(of: { try container.coordinator.setHistoryCursor("", to: newest) }) == .invalidArgument)
        try container.close()
    }

    @Test func pruningDropsWhatIsOlderThanTheAgeLimit() throws {
        let directory = TemporaryDirectory()
        let container = try Self.container(directory, history: PersistentHistory(maximumAge: 0.2, maximumTransactions: nil))
        for i in 0..<5 { try Self.insert("R\(i)", in: container) }
        Thread.sleep(forTimeInterval: 0.3)
        for i in 5..<7 { try Self.insert("R\(i)", in: container) }
        // Saves 1–5 were past the limit when save 6 pruned; 6 was not when 7 did.
        #expect(try container.coordinator.fetchHistory().map(\.token.transactionNumber) == [6, 7])
        try container.close()
    }

    @Test func historyTurnedOffIsRemovedAndOldTokensExpire() throws {
        let directory = TemporaryDirectory()
        var container = try Self.container(directory)
        for i in 0..<5 { try Self.insert("R\(i)", in: container) }
        let token = try #require(try container.coordinator.currentHistoryToken())
        try container.coordinator.setHistoryCursor("sync", to: token)
        try container.close()

        container = try Self.container(directory, history: .off)
        #expect(try container.coordinator.historySummary().transactions == 0)
        #expect(try container.coordinator.historySummary().cursors.isEmpty)
        try Self.insert("unrecorded", in: container)
        #expect(try container.coordinator.fetchHistory().isEmpty)
        try container.close()

        container = try Self.container(directory)
        try Self.insert("recorded", in: container)
        // The saves made while history was off are not in it: a token from
        // before says so instead of skipping them.
        #expect(Self.code(of: { try container.coordinator.fetchHistory(HistoryRequest(after: token)) }) == .historyExpired)
        let fresh = try container.coordinator.fetchHistory()
        #expect(fresh.count == 1 && fresh[0].token > token)
        try container.close()
    }

    @Test func aContextMergesTransactionsFromHistory() throws {
        let directory = TemporaryDirectory()
        let container = try Self.container(directory)
        let soup = try Self.insert("Soup", servings: 2, in: container)
        let stew = try Self.insert("Stew", in: container)
        let start = try #require(try container.coordinator.currentHistoryToken())
        // A context that does not merge by itself holds both recipes.
        let reader = ManagedObjectContext(.privateQueue, coordinator: container.coordinator)
        let (heldSoup, heldStew) = try reader.performAndWait { () throws -> (Recipe, Recipe) in
            let soup = try reader.existingObject(with: soup) as! Recipe
            let stew = try reader.existingObject(with: stew) as! Recipe
            _ = (soup.servings, stew.servings)
            return (soup, stew)
        }
        try Self.setServings(6, of: soup, in: container)
        try container.saveAndWait { context in context.delete(try context.existingObject(with: stew)) }
        #expect(reader.performAndWait { heldSoup.servings } == 2)

        let missed = try container.coordinator.fetchHistory(HistoryRequest(after: start))
        #expect(missed.count == 2)
        reader.performAndWait { reader.mergeChanges(fromHistory: missed) }
        #expect(reader.performAndWait { heldSoup.servings } == 6)
        #expect(reader.performAndWait { heldStew.managedObjectContext == nil || heldStew.isDeleted || reader.registeredObject(for: stew) == nil })
        try container.close()
    }

    @Test func aReaderProcessSeesTheWritersHistoryAndItsToken() throws {
        let directory = TemporaryDirectory()
        let writer = try Self.container(directory)
        try Self.insert("first", author: "import", in: writer)
        let reader = try Self.container(directory, readOnly: true)
        let start = try #require(try reader.coordinator.currentHistoryToken())
        #expect(start.transactionNumber == 1)

        let tokens = Recorded<HistoryToken>()
        let observer = NotificationCenter.default.addObserver(forName: PersistentStoreCoordinator.storeDidChangeRemotely, object: reader.coordinator, queue: nil) { note in
            if let token = note.userInfo?[HistoryToken.userInfoKey] as? HistoryToken { tokens.append(token) }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        for i in 0..<3 { try Self.insert("R\(i)", author: "import", in: writer) }
        try reader.coordinator.catchUpWithStore()
        #expect(tokens.values.map(\.transactionNumber) == [4])
        let caughtUp = try reader.coordinator.fetchHistory(HistoryRequest(after: start))
        #expect(caughtUp.map(\.token.transactionNumber) == [2, 3, 4])
        #expect(caughtUp.allSatisfy { $0.author == "import" })
        // A reader writes nothing: cursors are the writer's.
        #expect(Self.code(of: { try reader.coordinator.setHistoryCursor("reader", to: start) }) == .invalidArgument)
        try reader.close()
        try writer.close()
    }

    /// A damaged transaction record decodes to nil — cut short anywhere,
    /// or with any byte changed — and never traps.
    @Test func aDamagedTransactionRecordDoesNotDecode() throws {
        let model = makeModel()
        let recipe = try #require(model.entity(named: "Recipe"))
        let tag = try #require(model.entity(named: "Tag"))
        let record = HistoryCoding.encode(HistoryCoding.Written(
            timestamp: Date(), author: "import", contextName: "writer",
            inserted: [ObjectID(entity: recipe, primaryKey: 7, isTemporary: false)],
            updated: [(ObjectID(entity: tag, primaryKey: 300, isTemporary: false), [0])],
            deleted: [ObjectID(entity: recipe, primaryKey: 1 << 40, isTemporary: false)]))
        let store = UUID()
        let whole = record.withUnsafeBytes { HistoryCoding.decode($0, number: 3, store: store, model: model) }
        #expect(whole?.changes.map(\.kind) == [.insert, .update, .delete])
        #expect(whole?.changes[1].updatedProperties == ["label"])
        for length in 0..<record.count {
            #expect(Array(record.prefix(length)).withUnsafeBytes { HistoryCoding.decode($0, number: 3, store: store, model: model) } == nil)
        }
        var changedAndDecoded = 0
        for i in record.indices {
            for value in [UInt8(0), 1, 0x7F, 0x80, 0xFF] where record[i] != value {
                var damaged = record
                damaged[i] = value
                if damaged.withUnsafeBytes({ HistoryCoding.decode($0, number: 3, store: store, model: model) }) != nil { changedAndDecoded += 1 }
            }
        }
        // (Some changes still decode — another timestamp, another primary
        // key — which is why the engine checksums every frame and block.)
        #expect(changedAndDecoded < record.count * 5)
    }

    /// A transaction's updates name their changed properties through one
    /// table for the whole record: many updates of several entities, their
    /// properties in different subsets, put in different orders (two
    /// entities' "recipes" sharing one name), come back as each update
    /// listed them, in the entity's order.
    @Test func eachUpdateKeepsItsChangedPropertiesThroughTheNameTable() throws {
        let model = makeModel()
        let entities = try ["Recipe", "Tag", "Author"].map { try #require(model.entity(named: $0)) }
        var updated: [(ObjectID, PropertyIndexSet)] = []
        var expected: [[String]] = []
        for n in 0..<60 {
            let entity = entities[n % entities.count]
            let all = Array(entity.properties.indices)
            let changed = n % 4 == 0 ? all.reversed() : n % 4 == 1 ? all : n % 4 == 2 ? [all[all.count - 1]] : Array(all.prefix(1))
            updated.append((ObjectID(entity: entity, primaryKey: UInt64(n + 1), isTemporary: false), PropertyIndexSet(changed)))
            expected.append(changed.sorted().map { entity.properties[$0].name })
        }
        let record = HistoryCoding.encode(HistoryCoding.Written(timestamp: Date(), author: nil, contextName: nil, inserted: [], updated: updated, deleted: []))
        let decoded = try #require(record.withUnsafeBytes { HistoryCoding.decode($0, number: 1, store: UUID(), model: model) })
        #expect(decoded.changes.map(\.updatedProperties) == expected)
        #expect(decoded.changes.map(\.objectID) == updated.map(\.0))
    }

    /// An entity of more properties than a word of bits holds: the
    /// properties an update changed, on both sides of the 64th, are listed
    /// in the entity's order — those of a context's save, and those a
    /// batch update changed (not one it set to the value stored).
    @Test func anUpdateOfAWideEntityListsItsPropertiesPastTheSixtyFourth() throws {
        let directory = TemporaryDirectory()
        let model = try ManagedObjectModel(entities: [
            EntityDescription(name: "Wide", managedObjectClass: ManagedObject.self,
                              properties: (0..<100).map { .attribute("p\($0)", .integer64, defaultValue: .integer(0)) }),
        ])
        let container = try PersistentContainer(name: "Wide", model: model, directory: directory.path + "/store",
                                                options: testStoreOptions(), viewContext: .privateQueue)
        var id: ObjectID?
        try container.saveAndWait { context in
            id = ManagedObject(entity: model.entities[0], insertInto: context).objectID
        }
        let start = try container.coordinator.currentHistoryToken()
        try container.saveAndWait { context in
            let object = try context.existingObject(with: id!)
            for name in ["p99", "p3", "p64", "p63", "p70"] { object.setValue(Int64(7), forKey: name) }
        }
        try container.coordinator.execute(BatchUpdateRequest<ManagedObject>(set: ["p90": .integer(5), "p3": .integer(7), "p1": .integer(5)]))
        let history = try container.coordinator.fetchHistory(HistoryRequest(after: start))
        #expect(history.map { $0.changes.map(\.updatedProperties) } == [[["p3", "p63", "p64", "p70", "p99"]], [["p1", "p90"]]])
        try container.close()
    }

    /// A delete's history keeps the values of the attributes the model
    /// marks (a key a consumer finds its copy by) — from a context's save
    /// and a batch delete alike — and they survive reopening, the record's
    /// round trip and `strata-dump history`.
    @Test func aDeleteKeepsTheAttributesTheModelMarks() throws {
        let model = try ManagedObjectModel(entities: [
            EntityDescription(name: "Note", properties: [
                .attribute("remoteID", .string, preservesValueInHistoryOnDeletion: true),
                .attribute("version", .integer64, defaultValue: .integer(0), preservesValueInHistoryOnDeletion: true),
                .attribute("text", .string, optional: true),
            ]),
        ])
        let directory = TemporaryDirectory()
        let path = directory.path + "/store"
        var container: PersistentContainer? = try PersistentContainer(name: "Notes", model: model, directory: path, options: testStoreOptions(),
                                                                       viewContext: .privateQueue)
        let coordinator = container!.coordinator
        let note = try #require(model.entity(named: "Note"))
        var ids: [ObjectID] = []
        try container!.saveAndWait { context in
            for (remote, version) in [("r1", 3), ("r2", 5)] {
                let object = ManagedObject(entity: note, insertInto: context)
                try object.setPropertyValue(.string(remote), forKey: "remoteID")
                try object.setPropertyValue(.integer(Int64(version)), forKey: "version")
                try object.setPropertyValue(.string("secret"), forKey: "text")
                ids.append(object.objectID)
            }
        }
        try container!.saveAndWait { context in context.delete(try context.existingObject(with: ids[0])) }
        try coordinator.execute(BatchDeleteRequest<ManagedObject>(objectIDs: [ids[1]]))
        func deletes() throws -> [HistoryChange] { try coordinator.fetchHistory().flatMap(\.changes).filter { $0.kind == .delete } }
        let expected: [[String: PropertyValue]] = [
            ["remoteID": .string("r1"), "version": .integer(3)],
            ["remoteID": .string("r2"), "version": .integer(5)],
        ]
        #expect(try deletes().map(\.tombstone) == expected)
        #expect(try coordinator.fetchHistory().flatMap(\.changes).filter { $0.kind != .delete }.allSatisfy { $0.tombstone.isEmpty })
        try container!.close()
        container = nil
        let reopened = try PersistentContainer(name: "Notes", model: model, directory: path, options: testStoreOptions(), viewContext: .privateQueue)
        #expect(try reopened.coordinator.fetchHistory().flatMap(\.changes).filter { $0.kind == .delete }.map(\.tombstone) == expected)
        try reopened.close()
        let inspected = try ObjectStoreInspector(directory: path).history(after: 0, limit: .max)
        #expect(inspected.compactMap(\.tombstones).flatMap(\.values) == [["remoteID": "r1", "version": "3"], ["remoteID": "r2", "version": "5"]])
    }

    static func code(of body: () throws -> some Any) -> StrataError.Code? {
        do {
            _ = try body()
            return nil
        } catch let error as StrataError {
            return error.code
        } catch {
            return nil
        }
    }
}

/// Values appended from any thread.
final class Recorded<Value: Sendable>: @unchecked Sendable {
    // `@unchecked Sendable`: `storage` is guarded by `lock`.
    private let lock = NSLock()
    private var storage: [Value] = []
    func append(_ value: Value) { lock.lock(); storage.append(value); lock.unlock() }
    var values: [Value] { lock.lock(); defer { lock.unlock() }; return storage }
}
