import Foundation
@_spi(StoreImplementation) import Strata
@testable import StrataPostgres
import Testing

final class Note: ManagedObject {
    @Attribute("title") var title: String
    @Attribute("visits") var visits: Int
    @Attribute("added") var added: Date?
    @Relationship("labels") var labels: Set<Label>
    @Relationship("shelf") var shelf: Shelf?
}

final class Label: ManagedObject {
    @Attribute("name") var name: String
    @Relationship("notes") var notes: Set<Note>
}

final class Shelf: ManagedObject {
    @Attribute("name") var name: String
    @Relationship("notes") var notes: Set<Note>
}

func notesModel() throws -> ManagedObjectModel {
    try ManagedObjectModel(entities: [
        EntityDescription(name: "Note", managedObjectClass: Note.self, properties: [
            .attribute("title", .string),
            .attribute("visits", .integer64, defaultValue: .integer(0)),
            .attribute("added", .date, optional: true),
            .toMany("labels", "Label", inverse: "notes"),
            .toOne("shelf", "Shelf", inverse: "notes"),
        ]),
        EntityDescription(name: "Label", managedObjectClass: Label.self, properties: [
            .attribute("name", .string),
            .toMany("notes", "Note", inverse: "labels"),
        ], uniquenessConstraints: [["name"]]),
        EntityDescription(name: "Shelf", managedObjectClass: Shelf.self, properties: [
            .attribute("name", .string),
            .toMany("notes", "Note", inverse: "shelf", deleteRule: .cascade),
        ]),
    ])
}

/// Strata's contexts over PostgreSQL, through the store seam: the same
/// saves, fetches, relationships, children, uniqueness and conflicts as
/// over the log store — and two coordinators (two processes) on one database.
@Suite("Contexts over PostgreSQL", .enabled(if: TestServer.isAvailable, "no PostgreSQL server (see the message above)"))
struct ObjectGraphTests {
    func makeCoordinator(_ configuration: PostgresConfiguration, _ model: ManagedObjectModel) throws -> PersistentStoreCoordinator {
        try makeCoordinatorAndStore(configuration, model).coordinator
    }

    /// A coordinator on a store of its own, and the store (for its counters).
    func makeCoordinatorAndStore(
        _ configuration: PostgresConfiguration, _ model: ManagedObjectModel
    ) throws -> (coordinator: PersistentStoreCoordinator, store: PostgresStore) {
        let coordinator = PersistentStoreCoordinator(model: model)
        let store = try PostgresStore(configuration, model: model)
        try coordinator.addPersistentStore(store)
        return (coordinator, store)
    }

    /// The error of a save of a new label named `name` in `context`, which must fail.
    func failingLabelSave(_ name: String, in context: ManagedObjectContext) -> StrataError? {
        #expect(throws: StrataError.self) {
            try context.performAndWait {
                Label(context: context).name = name
                try context.save()
            }
        }
    }

    /// Saves a new label named `name` in `context`, on its queue; returns its ID.
    func saveLabel(_ name: String, in context: ManagedObjectContext) throws -> ObjectID {
        try context.performAndWait {
            let label = Label(context: context)
            label.name = name
            try context.save()
            return label.objectID
        }
    }

    @Test func savesFetchesRelationshipsAndChildren() throws {
        let model = try notesModel()
        let configuration = try TestServer.freshDatabase()
        let coordinator = try makeCoordinator(configuration, model)
        defer { try? coordinator.close() }
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try writer.performAndWait {
            let shelf = Shelf(context: writer)
            shelf.name = "Inbox"
            let swift = Label(context: writer)
            swift.name = "swift"
            let sql = Label(context: writer)
            sql.name = "it's SQL; --"
            for (title, visits) in [("Soup", 4), ("Salad", 2), ("Stew", 6), ("Bread", 8)] {
                let note = Note(context: writer)
                note.title = title
                note.visits = visits
                note.shelf = shelf
                note.labels = visits > 3 ? [swift, sql] : [sql]
            }
            try writer.save()
        }
        let reader = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try reader.performAndWait {
            var request = FetchRequest<Note>(predicate: #Predicate { $0.visits > 3 }, sortBy: [SortDescriptor(\.title)])
            request.fetchLimit = 2
            #expect(try reader.fetch(request).map(\.title) == ["Bread", "Soup"])
            #expect(try reader.count(for: FetchRequest<Note>(predicate: #Predicate { $0.visits > 3 })) == 3)
            let swift = try #require(try Label.first(in: reader, where: \.name, equals: "swift"))
            #expect(Set(swift.notes.map(\.title)) == ["Soup", "Stew", "Bread"])
            let soup = try #require(try Note.first(in: reader, where: \.title, equals: "Soup"))
            #expect(Set(soup.labels.map(\.name)) == ["swift", "it's SQL; --"])
            #expect(soup.shelf?.notes.count == 4)
            let child = ManagedObjectContext(.privateQueue, parent: reader)
            try child.performAndWait {
                let stew = try #require(try Note.first(in: child, where: \.title, equals: "Stew"))
                stew.visits = 1
                stew.labels = []
                try child.save()
            }
            try reader.save()
        }
        // A second coordinator — another process — reads what the first saved.
        let other = try makeCoordinator(configuration, model)
        defer { try? other.close() }
        let context = ManagedObjectContext(.privateQueue, coordinator: other)
        try context.performAndWait {
            let stew = try #require(try Note.first(in: context, where: \.title, equals: "Stew"))
            #expect(stew.visits == 1)
            #expect(stew.labels.isEmpty)
            // The cascade: the shelf goes, its notes with it.
            let shelf = try #require(try Shelf.first(in: context, where: \.name, equals: "Inbox"))
            context.delete(shelf)
            try context.save()
            #expect(try context.count(for: FetchRequest<Note>()) == 0)
            #expect(try context.count(for: FetchRequest<Label>()) == 2)
        }
    }

    /// A list page ("the 20 most visited", "the next 20 by title") is read
    /// from PostgreSQL in its order, 20 rows and those changed above the
    /// store, and a count is PostgreSQL's `count(*)`: the answers are those
    /// of the whole fetch sorted and cut in Swift, with changes in the
    /// context and its parent.
    @Test func listPagesAndCountsReadWhatTheyAnswer() throws {
        let model = try notesModel()
        let (coordinator, store) = try makeCoordinatorAndStore(try TestServer.freshDatabase(), model)
        defer { try? coordinator.close() }
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        var random = FetchTests.SplitMix(state: 7)
        let words = ["éclair", "eclair", "Zebra", "zebra", "apple", "Äpfel", "e\u{301}clair", "K", "\u{212A}elvin", "kelvin"]
        try parent.performAndWait {
            for i in 0..<1_000 {
                let note = Note(context: parent)
                note.title = words.randomElement(using: &random)! + " \(i % 37)"
                note.visits = Int.random(in: 0..<100, using: &random)
            }
            try parent.save()
        }
        var top = FetchRequest<Note>(sortBy: [SortDescriptor(\.visits, order: .reverse)])
        top.fetchLimit = 20
        var byTitle = FetchRequest<Note>(predicate: #Predicate { $0.visits >= 10 }, sortBy: [SortDescriptor(\.title)])
        byTitle.fetchLimit = 20
        byTitle.fetchOffset = 20
        let counted = [FetchRequest<Note>(), FetchRequest<Note>(predicate: #Predicate { $0.visits >= 50 })]
        func check(_ context: ManagedObjectContext, _ label: String, readsAtMost: Int) throws {
            try context.performAndWait {
                for request in [top, byTitle] {
                    let before = store.scannedRows.load(ordering: .relaxed)
                    let page = try context.fetch(request).map(\.objectID)
                    let read = store.scannedRows.load(ordering: .relaxed) - before
                    var whole = request
                    (whole.fetchLimit, whole.fetchOffset) = (0, 0)
                    let cut = try context.fetch(whole).map(\.objectID).dropFirst(request.fetchOffset).prefix(request.fetchLimit)
                    #expect(page == Array(cut), "\(label)")
                    #expect(read <= readsAtMost + request.fetchOffset, "\(label): \(read) rows read for a page of \(request.fetchLimit)")
                }
                for request in counted {
                    let before = store.scannedRows.load(ordering: .relaxed)
                    let count = try context.count(for: request)
                    #expect(store.scannedRows.load(ordering: .relaxed) == before, "\(label): a count reads no row")
                    #expect(count == (try context.fetch(request).count), "\(label)")
                }
                try countsPerTitleReadNoRow(context, store, label)
            }
        }
        try check(parent, "saved", readsAtMost: 20)
        // explain shows the statement: in the page's order, or sorted in memory after.
        try parent.performAndWait {
            let plan = try parent.explain(top).description
            #expect(plan.contains(#"ORDER BY t."visits" DESC, t."strata_id" ASC LIMIT $1 OFFSET $2"#) && !plan.contains("IN MEMORY"), "\(plan)")
            var localized = FetchRequest<Note>(sortBy: [SortDescriptor(\.title, comparator: .lexical)])
            localized.fetchLimit = 20
            let sorted = try parent.explain(localized).description
            #expect(sorted.contains(#"ORDER BY t."strata_id" LIMIT"#) && sorted.hasSuffix("THEN SORT IN MEMORY BY title"), "\(sorted)")
        }
        let child = ManagedObjectContext(.privateQueue, parent: parent)
        try parent.performAndWait {
            let all = try parent.fetch(FetchRequest<Note>(sortBy: [SortDescriptor(\.visits, order: .reverse)]))
            all.last!.visits = 1_000          // to the top from the bottom
            all.first!.visits = 0             // out of the top
            parent.delete(all[1])
            let made = Note(context: parent)
            made.title = "apple 0"
            made.visits = 99
        }
        try child.performAndWait {
            let all = try child.fetch(FetchRequest<Note>(sortBy: [SortDescriptor(\.title)]))
            all[3].title = "zzz"
            all[500].visits = 500
        }
        // Objects changed above the store are judged apart from the stream: a few more rows at most.
        try check(parent, "changes in the context", readsAtMost: 24)
        try check(child, "changes in the child and its parent", readsAtMost: 26)
    }

    /// Counts per title in `context` (on its queue): one `GROUP BY`, titles
    /// equal by canonical equivalence one group, as the notes the context
    /// sees group — and no row read.
    func countsPerTitleReadNoRow(_ context: ManagedObjectContext, _ store: PostgresStore, _ label: String) throws {
        let visited = FetchRequest<Note>(predicate: #Predicate { $0.visits >= 20 })
        let before = store.scannedRows.load(ordering: .relaxed)
        let perTitle = try context.fetch(DictionaryFetchRequest<Note>(predicate: visited.predicate, propertiesToFetch: ["title", .count()], groupBy: ["title"]))
        #expect(store.scannedRows.load(ordering: .relaxed) == before, "\(label): a count per group reads no row")
        var expected: [String: Int] = [:]
        for note in try context.fetch(visited) { expected[note.title, default: 0] += 1 }
        var found: [String: Int] = [:]
        for row in perTitle { found[row.value("title", as: String.self) ?? "-", default: 0] += row.value("count", as: Int.self) ?? -1 }
        #expect(found == expected, "\(label)")
        #expect(perTitle.count == expected.count, "\(label)")
    }

    @Test func uniquenessAndConflictsAcrossProcesses() throws {
        let model = try notesModel()
        let configuration = try TestServer.freshDatabase()
        let first = try makeCoordinator(configuration, model), second = try makeCoordinator(configuration, model)
        defer { try? first.close(); try? second.close() }
        let a = ManagedObjectContext(.privateQueue, coordinator: first)
        let id = try saveLabel("swift", in: a)
        // The other process claims the same name: PostgreSQL's UNIQUE refuses it.
        let duplicate = failingLabelSave("swift", in: ManagedObjectContext(.privateQueue, coordinator: second))
        #expect(duplicate?.code == .constraintConflict)
        // It renames the label; then the first process, which read the old version, edits it too.
        let c = ManagedObjectContext(.privateQueue, coordinator: second)
        try c.performAndWait {
            let label = try #require(try c.existingObject(with: id) as? Label)
            label.name = "Swift"
            try c.save()
        }
        let stale = #expect(throws: StrataError.self) {
            try a.performAndWait {
                let label = try #require(try a.existingObject(with: id) as? Label)
                label.name = "SWIFT"
                try a.save()
            }
        }
        #expect(stale?.code == .mergeConflict)
        #expect(stale?.conflicts.map(\.objectID) == [id])
        let fresh = ManagedObjectContext(.privateQueue, coordinator: first)
        let name = try fresh.performAndWait { () throws in (try fresh.existingObject(with: id) as? Label)?.name }
        #expect(name == "Swift")
    }
    /// A save that a conflict fails (merge policy `.error`) is written
    /// without its unique values looked up: PostgreSQL's `UNIQUE` refuses a
    /// duplicate at the commit, and only then are they looked up, to name
    /// the conflict as a look-up first would. A save that merges a conflict
    /// (an upsert) still looks them up before it writes.
    @Test func aSaveThatAConflictFailsLooksUpItsValuesOnlyWhenRefused() throws {
        let model = try notesModel()
        let configuration = try TestServer.freshDatabase()
        let (first, firstStore) = try makeCoordinatorAndStore(configuration, model)
        let (second, secondStore) = try makeCoordinatorAndStore(configuration, model)
        defer { try? first.close(); try? second.close() }
        let id = try saveLabel("swift", in: ManagedObjectContext(.privateQueue, coordinator: first))
        #expect(firstStore.holderLookups.load(ordering: .relaxed) == 0, "a clean save looks nothing up")

        let duplicate = failingLabelSave("swift", in: ManagedObjectContext(.privateQueue, coordinator: second))
        #expect(duplicate?.code == .constraintConflict)
        #expect(duplicate?.constraintConflicts.map(\.conflictingObjectIDs) == [[id]], "the refusal names the holder")
        #expect(duplicate?.constraintConflicts.map(\.constraint) == [["name"]])
        #expect(secondStore.holderLookups.load(ordering: .relaxed) == 1, "looked up once refused")

        let upsert = ManagedObjectContext(.privateQueue, coordinator: second)
        upsert.mergePolicy = .mergeByPropertyObjectTrump
        try upsert.performAndWait {
            Label(context: upsert).name = "swift"
            Label(context: upsert).name = "rust"
            try upsert.save()
        }
        #expect(secondStore.holderLookups.load(ordering: .relaxed) >= 2, "an upsert looks its values up first")
        let fresh = ManagedObjectContext(.privateQueue, coordinator: first)
        let labels = try fresh.performAndWait { () throws in
            try fresh.fetch(FetchRequest<Label>(sortBy: [SortDescriptor(\.name)])).map { ($0.name, $0.objectID) }
        }
        #expect(labels.map(\.0) == ["rust", "swift"], "the refused save wrote nothing; the upsert merged into the holder")
        #expect(labels.last?.1 == id)

        // Two spellings of one name in one save: one key to Strata (NFC),
        // two to PostgreSQL's UNIQUE (bytes) — refused before it is written.
        let spellings = ManagedObjectContext(.privateQueue, coordinator: second)
        let canonical = #expect(throws: StrataError.self) {
            try spellings.performAndWait {
                Label(context: spellings).name = "caf\u{E9}"
                Label(context: spellings).name = "cafe\u{301}"
                try spellings.save()
            }
        }
        #expect(canonical?.code == .constraintConflict)
        #expect(canonical?.constraintConflicts.count == 1)
        let stored = try fresh.performAndWait { () throws in try fresh.count(for: FetchRequest<Label>()) }
        #expect(stored == 2, "nothing of the refused save was written")
    }

    /// Another process's saves reach this one's contexts as a local save's
    /// would: a held object refreshed, a deleted one let go of, the
    /// notification posted with what changed — and a coordinator's own saves
    /// are not delivered back to it.
    @Test func otherProcessesSavesReachContexts() throws {
        let model = try notesModel()
        let configuration = try TestServer.freshDatabase()
        let saving = try makeCoordinator(configuration, model), following = try makeCoordinator(configuration, model)
        defer { try? saving.close(); try? following.close() }
        let heardBySaving = Heard(saving), heardByFollowing = Heard(following)

        let writer = ManagedObjectContext(.privateQueue, coordinator: saving)
        let (soupID, breadID) = try writer.performAndWait {
            let soup = Note(context: writer), bread = Note(context: writer)
            soup.title = "Soup"
            bread.title = "Bread"
            try writer.save()
            return (soup.objectID, bread.objectID)
        }
        try heardByFollowing.wait { $0.inserted.contains(soupID) }

        // The other process holds both, in a context that merges what comes in.
        let view = ManagedObjectContext(.privateQueue, coordinator: following)
        view.automaticallyMergesChangesFromParent = true
        let (soup, bread) = try view.performAndWait {
            (try #require(try view.existingObject(with: soupID) as? Note), try #require(try view.existingObject(with: breadID) as? Note))
        }
        #expect(view.performAndWait { soup.title } == "Soup")

        let stewID = try writer.performAndWait {
            let held = try #require(try writer.existingObject(with: soupID) as? Note)
            held.title = "Soup of the day"
            held.visits = 3
            writer.delete(try writer.existingObject(with: breadID))
            let stew = Note(context: writer)
            stew.title = "Stew"
            try writer.save()
            return stew.objectID
        }
        let changes = try heardByFollowing.wait { $0.updated.contains(soupID) }
        #expect(changes.inserted == [stewID])
        #expect(changes.deleted == [breadID])
        // The merge is queued before the notification is posted.
        view.performAndWait {
            #expect(soup.title == "Soup of the day")
            #expect(soup.visits == 3)
            #expect(bread.isDeleted)
        }

        // The follower's save comes back to the saver, and after it in the
        // store's order — so by then the saver would have heard its own.
        let labelID = try saveLabel("soups", in: view)
        try heardBySaving.wait { $0.inserted.contains(labelID) }
        #expect(heardBySaving.all.map(\.inserted) == [[labelID]])
        #expect(heardByFollowing.all.allSatisfy { !$0.inserted.contains(labelID) })
    }

    /// A process saving alone reads no history for its own saves: its
    /// following hears their numbers and passes over them.
    @Test func ownSavesCostTheFollowingNoRead() throws {
        let model = try notesModel()
        let configuration = try TestServer.freshDatabase()
        let (coordinator, store) = try makeCoordinatorAndStore(configuration, model)
        defer { try? coordinator.close() }
        let heard = Heard(coordinator)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        // The following reads once as it starts; wait for that read.
        let deadline = Date(timeIntervalSinceNow: 10)
        while store.historyReads.load(ordering: .relaxed) == 0 && Date() < deadline { usleep(1_000) }
        let before = store.historyReads.load(ordering: .relaxed)
        for n in 0..<20 {
            try context.performAndWait {
                let note = Note(context: context)
                note.title = "note \(n)"
                try context.save()
            }
        }
        // Another process's save, heard after all of them (numbers are in commit order).
        let other = try makeCoordinator(configuration, model)
        defer { try? other.close() }
        let writer = ManagedObjectContext(.privateQueue, coordinator: other)
        let id = try saveLabel("other", in: writer)
        try heard.wait { $0.inserted.contains(id) }
        // That one save took a read or two; the twenty took none.
        #expect(store.historyReads.load(ordering: .relaxed) - before <= 2)
        #expect(heard.all.map(\.inserted) == [[id]])
    }

    /// The seed stack in two processes on one database: a block save in one
    /// reaches the other's view context; both increment one counter at once,
    /// each conflict retried on fresh values, and no increment is lost.
    @Test func twoContainersShareOneDatabase() throws {
        let model = try notesModel()
        let configuration = try TestServer.freshDatabase()
        let first = try PersistentContainer(name: "first", model: model, postgres: configuration, viewContext: .privateQueue)
        let second = try PersistentContainer(name: "second", model: model, postgres: configuration, viewContext: .privateQueue)
        defer { try? first.close(); try? second.close() }
        let heard = Heard(second.coordinator)
        try first.saveAndWait { context in
            let counter = Note(context: context)
            counter.title = "counter"
        }
        try heard.wait { !$0.inserted.isEmpty }
        let view = second.viewContext
        let counter = try view.performAndWait { () throws in
            try #require(try Note.first(in: view, where: #Predicate { $0.title == "counter" }))
        }

        let rounds = 15
        DispatchQueue.concurrentPerform(iterations: 2) { i in
            let container = i == 0 ? first : second
            for _ in 0..<rounds {
                do {
                    try container.saveAndWait(retryingConflicts: 50) { context in
                        let note = try #require(try Note.first(in: context, where: #Predicate { $0.title == "counter" }))
                        note.visits += 1
                    }
                } catch {
                    Issue.record("an increment failed: \(error)")
                }
            }
        }
        // No increment lost: the database holds all of them.
        let session = try PostgresSession.connect(configuration)
        defer { session.close() }
        let stored = try session.query(#"SELECT visits FROM "Note" WHERE title = 'counter'"#, "checking")
            .map { (row) throws(StrataError) in try SchemaInstallation.decode(row, as: Int64.self, "checking") }
        #expect(stored == [Int64(2 * rounds)])
        // Each process's stack has them once the other's last saves are
        // delivered (a context of the stack reads through its writer).
        for container in [first, second] {
            let context = container.newBackgroundContext()
            func visits() throws -> Int {
                try context.performAndWait { () throws in
                    context.reset()
                    return try #require(try Note.first(in: context, where: #Predicate { $0.title == "counter" })).visits
                }
            }
            let deadline = Date(timeIntervalSinceNow: 10)
            while try visits() != 2 * rounds && Date() < deadline { usleep(10_000) }
            #expect(try visits() == 2 * rounds)
        }
        // The view context that held the counter merged the other process's increments.
        let deadline = Date(timeIntervalSinceNow: 10)
        while view.performAndWait({ counter.visits }) != 2 * rounds && Date() < deadline { usleep(10_000) }
        #expect(view.performAndWait { counter.visits } == 2 * rounds)
    }
}

/// The ``PersistentStoreCoordinator/storeDidChangeRemotely`` notifications
/// one coordinator posts, collected.
final class Heard: @unchecked Sendable {
    // `@unchecked Sendable`: `changes` is guarded by `condition`.
    private let condition = NSCondition()
    private var changes: [ObjectChanges] = []
    private var observer: (any NSObjectProtocol)?

    init(_ coordinator: PersistentStoreCoordinator) {
        observer = NotificationCenter.default.addObserver(
            forName: PersistentStoreCoordinator.storeDidChangeRemotely, object: coordinator, queue: nil
        ) { [weak self] note in
            guard let self, let changes = ObjectChanges(note) else { return }
            condition.lock()
            self.changes.append(changes)
            condition.broadcast()
            condition.unlock()
        }
    }

    deinit { observer.map(NotificationCenter.default.removeObserver) }

    var all: [ObjectChanges] {
        condition.lock()
        defer { condition.unlock() }
        return changes
    }

    /// The first notification heard that passes `test`, waiting up to 10 s for it.
    @discardableResult
    func wait(for test: (ObjectChanges) -> Bool) throws -> ObjectChanges {
        let deadline = Date(timeIntervalSinceNow: 10)
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let found = changes.first(where: test) { return found }
            guard condition.wait(until: deadline) else { break }
        }
        throw StrataError(code: .storage, message: "no storeDidChangeRemotely notification passing the test within 10 s: heard \(changes)")
    }
}
