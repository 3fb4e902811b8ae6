import Foundation
@_spi(StoreImplementation) import Strata
@testable import StrataPostgres
import Synchronization
import Testing

/// Strata's history API over PostgreSQL: the transactions every process's
/// saves write, read after a token and filtered; named cursors kept in the
/// database; pruning by hand and by the store's limits, and what a reader
/// too far behind is told.
@Suite("History over PostgreSQL", .enabled(if: TestServer.isAvailable, "no PostgreSQL server (see the message above)"))
struct PostgresHistoryTests {
    func open(_ configuration: PostgresConfiguration, history: PersistentHistory = .default) throws -> PersistentStoreCoordinator {
        try openCoordinator(configuration, try notesModel(), history: history)
    }

    /// A context on `coordinator` whose saves `author` signs.
    func context(_ coordinator: PersistentStoreCoordinator, author: String) -> ManagedObjectContext {
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "\(author)'s context")
        context.performAndWait { context.transactionAuthor = author }
        return context
    }

    @Test func transactionsOfEveryProcessAfterAToken() throws {
        let configuration = try TestServer.freshDatabase()
        let importer = try open(configuration)
        defer { try? importer.close() }
        let web = try open(configuration)
        defer { try? web.close() }
        #expect(try web.currentHistoryToken() == nil)
        let a = context(importer, author: "importer")
        let (soupID, labelID) = try a.performAndWait {
            let label = Label(context: a)
            label.name = "swift"
            let soup = Note(context: a)
            soup.title = "Soup"
            soup.labels = [label]
            try a.save()
            return (soup.objectID, label.objectID)
        }
        let start = try #require(try web.currentHistoryToken())
        let b = context(web, author: "web")
        try b.performAndWait {
            let soup = try #require(try Note.first(in: b, where: \.title, equals: "Soup"))
            soup.visits = 3
            try b.save()
            b.delete(soup)
            try b.save()
        }
        // Every process's saves, in commit order, with who made them and what they did.
        let all = try web.fetchHistory()
        #expect(all.map(\.author) == ["importer", "web", "web"])
        #expect(all.map(\.contextName) == ["importer's context", "web's context", "web's context"])
        #expect(all.map(\.token.transactionNumber) == [1, 2, 3])
        // (Each coordinator here has a model of its own: IDs compare by entity name and key.)
        func key(_ id: ObjectID) -> String { "\(id.entity.name)/\(id.storedPrimaryKey)" }
        #expect(Set(all[0].changes.filter { $0.kind == .insert }.map { key($0.objectID) }) == [key(soupID), key(labelID)])
        #expect(all[1].changes.map(\.kind) == [.update])
        #expect(all[1].changes.first?.updatedProperties == ["visits"])
        #expect(all[2].changes.contains { $0.kind == .delete && key($0.objectID) == key(soupID) })
        #expect(all[0].token.storeIdentifier == web.storeIdentifier)
        // After a token, by author, by entity; a page that leaves some out still moves on.
        #expect(try importer.fetchHistory(HistoryRequest(after: start)).map(\.token.transactionNumber) == [2, 3])
        var byAuthor = HistoryRequest()
        byAuthor.authors = ["importer"]
        #expect(try importer.fetchHistory(byAuthor).count == 1)
        var labels = HistoryRequest()
        labels.entityNames = ["Label"]
        let labelTransactions = try importer.fetchHistory(labels)
        // The label's insert, and its notes emptied by the delete.
        #expect(labelTransactions.map(\.token.transactionNumber) == [1, 3])
        #expect(labelTransactions.allSatisfy { $0.changes.allSatisfy { $0.objectID.entity.name == "Label" } })
        var excluded = HistoryRequest()
        excluded.excludedAuthors = ["web"]
        let page = try web.fetchHistoryPage(excluded)
        #expect(page.transactions.count == 1 && page.scannedThrough?.transactionNumber == 3)
        // Merged into a context as a did-save would be.
        let reader = ManagedObjectContext(.privateQueue, coordinator: importer)
        try reader.performAndWait {
            let label = try #require(try Label.first(in: reader, where: \.name, equals: "swift"))
            _ = label.name
            reader.mergeChanges(fromHistory: all)
            #expect(label.notes.isEmpty)
        }
    }

    @Test func cursorsAreKeptInTheDatabase() throws {
        let configuration = try TestServer.freshDatabase()
        let first = try open(configuration)
        let writer = context(first, author: "app")
        for name in ["a", "b", "c"] { _ = try ObjectGraphTests().saveLabel(name, in: writer) }
        let token = try #require(try first.fetchHistory().dropLast().last?.token)
        try first.setHistoryCursor("search-index", to: token)
        try first.close()
        // Another process, later, reads it back.
        let second = try open(configuration)
        defer { try? second.close() }
        #expect(try second.historyCursor("search-index") == token)
        #expect(try second.fetchHistory(HistoryRequest(after: second.historyCursor("search-index"))).count == 1)
        #expect(try second.historySummary().cursors == ["search-index": 2])
        try second.removeHistoryCursor("search-index")
        #expect(try second.historyCursor("search-index") == nil)
    }

    @Test func prunedTransactionsAreGoneAndAnOlderTokenSaysSo() throws {
        let configuration = try TestServer.freshDatabase()
        let coordinator = try open(configuration)
        defer { try? coordinator.close() }
        let writer = context(coordinator, author: "app")
        for i in 0..<6 { _ = try ObjectGraphTests().saveLabel("label \(i)", in: writer) }
        let tokens = try coordinator.fetchHistory().map(\.token)
        #expect(try coordinator.pruneHistory(through: tokens[3]) == 4)
        #expect(try coordinator.fetchHistory().map(\.token) == Array(tokens[4...]))
        let expired = #expect(throws: StrataError.self) { try coordinator.fetchHistory(HistoryRequest(after: tokens[1])) }
        #expect(expired?.code == .historyExpired)
        #expect(try coordinator.fetchHistory(HistoryRequest(after: tokens[3])).count == 2)
        // The newest always stays, to number the next.
        #expect(try coordinator.pruneHistory(through: tokens[5]) == 1)
        #expect(try coordinator.currentHistoryToken() == tokens[5])
        let summary = try coordinator.historySummary()
        #expect(summary.isEnabled && summary.transactions == 1 && summary.oldest == 6 && summary.newest == 6 && summary.pruned == 5)
        #expect(summary.bytes > 0)
    }

    /// A save of several kinds of change to several entities reads back
    /// change for change: each object under its entity and kind, and each
    /// update with the names it changed (the rows keep a group's objects
    /// and names one after another, and count them) — names that SQL
    /// would quote or escape included.
    @Test func aSaveOfEveryKindOfChangeReadsBackChangeForChange() throws {
        let configuration = try TestServer.freshDatabase()
        let coordinator = try open(configuration)
        defer { try? coordinator.close() }
        let writer = context(coordinator, author: "app")
        let (notes, labels) = try writer.performAndWait {
            let labels = (0..<3).map { i in
                let label = Label(context: writer)
                label.name = "label \(i)"
                return label
            }
            let notes = (0..<4).map { i in
                let note = Note(context: writer)
                note.title = "note \(i)"
                return note
            }
            try writer.save()
            return (notes, labels)
        }
        let before = try #require(try coordinator.currentHistoryToken())
        let expected = try writer.performAndWait { () throws -> [String] in
            notes[0].title = "it's \"new\"; --"
            notes[1].visits = 2
            notes[1].added = Date(timeIntervalSince1970: 0)
            notes[2].labels = [labels[0], labels[1]]
            labels[2].name = "名前"
            writer.delete(notes[3])
            let fresh = Label(context: writer)
            fresh.name = "fresh"
            try writer.save()
            func key(_ object: ManagedObject) -> String { "\(object.objectID.entity.name)/\(object.objectID.storedPrimaryKey)" }
            return [
                "update \(key(notes[0])) title", "update \(key(notes[1])) added,visits", "update \(key(notes[2])) labels",
                "update \(key(labels[0])) notes", "update \(key(labels[1])) notes", "update \(key(labels[2])) name",
                "delete \(key(notes[3]))", "insert \(key(fresh))",
            ]
        }
        let transactions = try coordinator.fetchHistory(HistoryRequest(after: before))
        #expect(transactions.count == 1)
        let changes = transactions.flatMap(\.changes).map { change in
            let key = "\(change.objectID.entity.name)/\(change.objectID.storedPrimaryKey)"
            return "\(change.kind) \(key)" + (change.kind == .update ? " " + change.updatedProperties.sorted().joined(separator: ",") : "")
        }
        #expect(changes.sorted() == expected.sorted())
        // One row of changes for each entity and kind, not one for each object.
        let session = try PostgresSession.connect(configuration)
        defer { session.close() }
        let rows = try SchemaInstallation.decode(session.query(
            """
            SELECT count(*) FROM strata_history_changes AS c JOIN strata_history AS h ON h.save_id = c.save_id \
            WHERE h.number = \(Int64(before.transactionNumber + 1))
            """, "counting").first,
            as: Int64.self, "counting")
        #expect(rows == 4)
    }

    /// The changes are pruned with their transactions by the pruning's own
    /// statement, with no foreign key to cascade it.
    @Test func pruningTakesTheChangesWithTheirTransactions() throws {
        let configuration = try TestServer.freshDatabase()
        let session = try PostgresSession.connect(configuration)
        defer { session.close() }
        func changes(through number: UInt64) throws -> Int64 {
            try SchemaInstallation.decode(session.query(
                // Saves made one at a time: each save's identifier is its number.
                "SELECT count(*) FROM strata_history_changes WHERE save_id <= \(Int64(number))", "counting").first, as: Int64.self, "counting")
        }
        let coordinator = try open(configuration)
        defer { try? coordinator.close() }
        let writer = context(coordinator, author: "app")
        for i in 0..<4 { _ = try ObjectGraphTests().saveLabel("label \(i)", in: writer) }
        let tokens = try coordinator.fetchHistory().map(\.token)
        let third = try #require(tokens.dropFirst(2).first).transactionNumber
        #expect(try changes(through: third) == 3)
        #expect(try coordinator.pruneHistory(through: tokens[2]) == 3)
        #expect(try changes(through: third) == 0)
        #expect(try coordinator.fetchHistory().count == 1)
    }

    /// Two saves through a coordinator of its own: a label and three notes,
    /// then an update of two notes and a delete. Returns the history they
    /// leave, as read from the tables.
    func saveTwice(_ configuration: PostgresConfiguration, reading session: PostgresSession) throws -> [StoredTransaction] {
        let coordinator = try open(configuration)
        defer { try? coordinator.close() }
        let writer = context(coordinator, author: "app")
        try writer.performAndWait {
            let label = Label(context: writer)
            label.name = "swift"
            let notes = (0..<3).map { i in
                let note = Note(context: writer)
                note.title = "note \(i)"
                return note
            }
            try writer.save()
            notes[0].title = "first"
            notes[0].visits = 1
            notes[1].labels = [label]
            writer.delete(notes[2])
            try writer.save()
        }
        let history = try PostgresHistory.transactions(after: 0, limit: 100, on: session)
        #expect(history.count == 2 && history[1].changes.count == 4)
        return history
    }

    /// The signature of format 2's recording function.
    static let formatTwoRecording =
        "strata_record_transaction(text, text, text[], text[], integer[], integer[], bigint[], integer[], text[], text)"

    /// Turns the store `session` is connected to into format 2, as that
    /// version made it (the layout of its `CREATE TABLE`s; a stand-in for
    /// its recording function, which the upgrade must drop). Every save
    /// identifier in it must be its transaction's number (saves made one
    /// after another), as format 2 kept only the number.
    func makeFormatTwo(on session: PostgresSession) throws {
        let action = "making format 2"
        try session.execute("DROP TRIGGER \(StoreSchema.numberingTrigger) ON strata_history", action)
        try session.execute("DROP FUNCTION \(StoreSchema.numberTransactionSignature)", action)
        try session.execute("DROP FUNCTION \(StoreSchema.recordTransactionSignature)", action)
        try session.execute("DROP SEQUENCE \(StoreSchema.saveIdentifierSequence)", action)
        #expect(try SchemaInstallation.decode(session.query(
            "SELECT count(*) FROM strata_history WHERE save_id <> number", action).first, as: Int64.self, action) == 0)
        try session.execute("ALTER TABLE strata_history DROP COLUMN save_id", action)
        try session.execute("ALTER TABLE strata_history_changes RENAME COLUMN save_id TO number", action)
        try session.execute("ALTER INDEX \(StoreSchema.historyChangesIndex) RENAME TO strata_history_changes_number_idx", action)
        try session.execute("""
            CREATE FUNCTION strata_record_transaction(p_author text, p_context_name text, p_entities text[], p_kinds text[], \
            p_objects integer[], p_names integer[], p_object_ids bigint[], p_property_counts integer[], p_property_names text[], \
            p_channel text) RETURNS bigint LANGUAGE sql AS 'SELECT 0::bigint'
            """, action)
        try session.execute("UPDATE strata_meta SET value = '2' WHERE key = 'format'", action)
    }

    /// Strata's own objects that the upgrade must leave: the format, how
    /// many functions are named as the recording one, whether it is this
    /// version's, whether the numbering trigger is there, the foreign keys
    /// on the changes, the rows of changes, whether format 1's table is
    /// gone, and where the save identifiers go on from.
    func upgraded(_ session: PostgresSession) throws -> (String, Int64, Bool, Bool, Int64, Int64, Bool, Int64) {
        let found = try session.query("""
            SELECT (SELECT value FROM strata_meta WHERE key = 'format'), \
            (SELECT count(*) FROM pg_proc WHERE proname = 'strata_record_transaction'), \
            to_regprocedure(\(StoreSchema.recordTransactionSignature)) IS NOT NULL, \
            EXISTS (SELECT FROM pg_trigger WHERE tgname = \(StoreSchema.numberingTrigger)), \
            (SELECT count(*) FROM pg_constraint WHERE conrelid = 'strata_history_changes'::regclass AND contype = 'f'), \
            (SELECT count(*) FROM strata_history_changes), to_regclass('strata_history_changes_format1') IS NULL, \
            (SELECT last_value + CASE WHEN is_called THEN 1 ELSE 0 END FROM strata_history_save_id)
            """, "looking")
        return try SchemaInstallation.decode(
            try #require(found.first), as: (String, Int64, Bool, Bool, Int64, Int64, Bool, Int64).self, "looking")
    }

    /// A store of format 2 — transactions numbered when recorded, their
    /// changes found by number — is brought to this format when opened:
    /// the history reads back as it did (each save's identifier its
    /// number), the functions and the trigger are this version's, and the
    /// next save takes an identifier after every number and is numbered at
    /// its commit.
    @Test func aStoreOfFormatTwoIsUpgradedWhenOpened() throws {
        let configuration = try TestServer.freshDatabase()
        let session = try PostgresSession.connect(configuration)
        defer { session.close() }
        let history = try saveTwice(configuration, reading: session)
        try makeFormatTwo(on: session)

        let coordinator = try open(configuration)
        defer { try? coordinator.close() }
        #expect(try PostgresHistory.transactions(after: 0, limit: 100, on: session) == history)
        let (format, functions, hasFunction, hasTrigger, references, rows, _, nextSave) = try upgraded(session)
        #expect(format == SchemaInstallation.format && functions == 1 && hasFunction && hasTrigger && references == 0 && rows == 5)
        #expect(nextSave == 3)
        let id = try ObjectGraphTests().saveLabel("later", in: context(coordinator, author: "later"))
        let latest = try PostgresHistory.transactions(after: 2, limit: 100, on: session)
        #expect(latest.map(\.number) == [3] && latest.map(\.saveIdentifier) == [3] && latest.first?.author == "later")
        #expect(latest.first?.changes.map(\.key) == [id.storedPrimaryKey])
    }

    /// A store of format 1 — a row of changes per object, a foreign key
    /// from them to their transactions in some, the recording function of
    /// that layout or none — is brought to this format when opened: the
    /// history reads back as it did, the function is the new one, and the
    /// next save is recorded.
    @Test(arguments: [true, false])
    func aStoreOfFormatOneIsUpgradedWhenOpened(withReferenceAndFunction: Bool) throws {
        let configuration = try TestServer.freshDatabase()
        let session = try PostgresSession.connect(configuration)
        defer { session.close() }
        let history = try saveTwice(configuration, reading: session)
        // The store as format 1 left it (the layout of its `CREATE TABLE`
        // and its function, as that version made them).
        try makeFormatTwo(on: session)
        try session.execute("""
            CREATE TABLE strata_history_changes_rows (number bigint NOT NULL, entity text COLLATE "C" NOT NULL, object_id bigint NOT NULL, \
            kind text NOT NULL CHECK (kind IN ('insert', 'update', 'delete')), properties text[])
            """, "making format 1")
        try session.execute("""
            INSERT INTO strata_history_changes_rows SELECT c.number, c.entity, u.id, c.kind, \
            CASE WHEN c.kind = 'update' THEN c.property_names[(SELECT coalesce(sum(n), 0) FROM unnest(c.property_counts[1 : u.i - 1]) AS n) + 1 : \
            (SELECT sum(n) FROM unnest(c.property_counts[1 : u.i]) AS n)] ELSE '{}' END \
            FROM strata_history_changes AS c, unnest(c.object_ids) WITH ORDINALITY AS u(id, i) ORDER BY c.number, u.id DESC
            """, "making format 1")
        try session.execute("DROP TABLE strata_history_changes", "making format 1")
        try session.execute("ALTER TABLE strata_history_changes_rows RENAME TO strata_history_changes", "making format 1")
        try session.execute("CREATE INDEX strata_history_changes_number_idx ON strata_history_changes (number)", "making format 1")
        try session.execute("DROP FUNCTION \(Self.formatTwoRecording)", "making format 1")
        if withReferenceAndFunction {
            try session.execute("""
                ALTER TABLE strata_history_changes ADD FOREIGN KEY (number) REFERENCES strata_history (number) ON DELETE CASCADE
                """, "making format 1")
            try session.execute("""
                CREATE FUNCTION strata_record_transaction(p_author text, p_context_name text, p_entities text[], p_object_ids bigint[], \
                p_kinds text[], p_properties text[], p_channel text) RETURNS bigint LANGUAGE sql AS 'SELECT 0::bigint'
                """, "making format 1")
        }
        try session.execute("UPDATE strata_meta SET value = '1' WHERE key = 'format'", "making format 1")
        #expect(try SchemaInstallation.decode(session.query(
            "SELECT count(*) FROM strata_history_changes", "counting").first, as: Int64.self, "counting") == 8)

        let coordinator = try open(configuration)
        defer { try? coordinator.close() }
        #expect(try PostgresHistory.transactions(after: 0, limit: 100, on: session) == history)
        let (format, functions, hasFunction, hasTrigger, references, rows, earlierGone, nextSave) = try upgraded(session)
        #expect(format == SchemaInstallation.format && functions == 1 && hasFunction && hasTrigger && references == 0 && rows == 5)
        #expect(earlierGone && nextSave == 3)
        let writer = context(coordinator, author: "later")
        let id = try ObjectGraphTests().saveLabel("later", in: writer)
        let latest = try coordinator.fetchHistory()
        #expect(latest.map(\.author) == ["app", "app", "later"])
        #expect(latest.last?.changes.map(\.objectID) == [id])
        // A store of a format after this version's is refused, and left as it is.
        let later = String((Int(SchemaInstallation.format) ?? 0) + 1)
        try session.execute("UPDATE strata_meta SET value = '\(later)' WHERE key = 'format'", "making a later format")
        let refused = #expect(throws: StrataError.self) { _ = try open(configuration) }
        #expect(refused?.code == .modelMismatch && "\(refused.map { "\($0)" } ?? "")".contains("format \(later)"))
    }

    /// With history off, a save's statements go as they are (no history
    /// statement to carry its inserts): objects with relationships across
    /// join tables and to-ones are stored whole, an update and a delete
    /// land, a duplicate is refused at the commit and named — and no
    /// transaction is recorded.
    @Test func savesWithHistoryOffWriteTheirOwnStatements() throws {
        let configuration = try TestServer.freshDatabase()
        let model = try notesModel()
        let coordinator = try openCoordinator(configuration, model, history: .off)
        defer { try? coordinator.close() }
        let writer = context(coordinator, author: "app")
        let (noteID, labelID) = try writer.performAndWait {
            let shelf = Shelf(context: writer), note = Note(context: writer), label = Label(context: writer)
            shelf.name = "kitchen"
            note.title = "Soup"
            label.name = "swift"
            note.shelf = shelf
            note.labels = [label]
            try writer.save()
            note.visits = 3
            let gone = Note(context: writer)
            gone.title = "Gone"
            try writer.save()
            writer.delete(gone)
            try writer.save()
            return (note.objectID, label.objectID)
        }
        let duplicate = ObjectGraphTests().failingLabelSave("swift", in: context(coordinator, author: "app"))
        #expect(duplicate?.constraintConflicts.map(\.conflictingObjectIDs) == [[labelID]])

        // Another process (a coordinator of its own), which reads the rows.
        let reader = try openCoordinator(configuration, model, history: .off)
        defer { try? reader.close() }
        let fresh = ManagedObjectContext(.privateQueue, coordinator: reader)
        let (title, visits, shelf, labels, notes) = try fresh.performAndWait { () throws in
            let note = try #require(try fresh.existingObject(with: noteID) as? Note)
            return (note.title, note.visits, note.shelf?.name, note.labels.map(\.objectID), try fresh.count(for: FetchRequest<Note>()))
        }
        #expect(title == "Soup" && visits == 3 && shelf == "kitchen")
        #expect(labels == [labelID])
        #expect(notes == 1, "the deleted note is gone")
        let session = try PostgresSession.connect(configuration)
        defer { session.close() }
        let recorded = try SchemaInstallation.decode(
            session.query("SELECT count(*) FROM strata_history", "counting").first, as: Int64.self, "counting")
        #expect(recorded == 0)
    }

    /// A store made before saves called a function to record their
    /// transactions gets it when it is opened; its saves are then recorded
    /// as before, with their authors and changes. (Limited in time: a
    /// trigger of another condition left in place numbers the same row
    /// over and over at a commit.)
    @Test(.timeLimit(.minutes(1))) func anOlderStoreGetsTheRecordingFunctionWhenOpened() throws {
        let configuration = try TestServer.freshDatabase()
        let session = try PostgresSession.connect(configuration)
        defer { session.close() }
        func hasFunction() throws -> Bool {
            try SchemaInstallation.decode(session.query(
                "SELECT to_regprocedure(\(StoreSchema.recordTransactionSignature)) IS NOT NULL", "looking").first, as: Bool.self, "looking")
        }
        do {
            let coordinator = try open(configuration)
            defer { try? coordinator.close() }
            #expect(try hasFunction())
        }
        // As a store of the earlier schema has it.
        try session.execute("DROP FUNCTION \(StoreSchema.recordTransactionSignature)", "making the old schema")
        #expect(try !hasFunction())
        do {
            let coordinator = try open(configuration)
            defer { try? coordinator.close() }
            #expect(try hasFunction())
        }
        // Each of these is made again at the next open, alone: a function
        // made before its settings changed; a numbering trigger someone
        // disabled (saves would go unnumbered); the trigger of format 3,
        // which numbered a save before the checks of its rows, in a store
        // of format 3; a trigger of another condition.
        func recording() throws -> (settings: [String]?, enabled: String, type: Int16, definition: String, format: String) {
            let found = try session.query("""
                SELECT proconfig, t.tgenabled::text, t.tgtype, pg_get_triggerdef(t.oid), \
                (SELECT value FROM strata_meta WHERE key = 'format') FROM pg_proc, pg_trigger AS t \
                WHERE pg_proc.oid = to_regprocedure(\(StoreSchema.recordTransactionSignature)) AND t.tgname = \(StoreSchema.numberingTrigger)
                """, "looking")
            return try SchemaInstallation.decode(try #require(found.first), as: ([String]?, String, Int16, String, String).self, "looking")
        }
        let madeByThisVersion = try recording()
        #expect(madeByThisVersion.settings == StoreSchema.recordTransactionSettings && madeByThisVersion.enabled == "O")
        #expect(madeByThisVersion.type == Int16(StoreSchema.numberingTriggerType) && madeByThisVersion.format == SchemaInstallation.format)
        #expect(madeByThisVersion.definition.contains(StoreSchema.numberingTriggerCondition), "\(madeByThisVersion.definition)")
        func trigger(_ events: String, _ condition: String) -> [String] {
            [
                "DROP TRIGGER \(StoreSchema.numberingTrigger) ON strata_history",
                """
                CREATE CONSTRAINT TRIGGER \(StoreSchema.numberingTrigger) AFTER \(events) ON strata_history DEFERRABLE INITIALLY DEFERRED \
                FOR EACH ROW \(condition) EXECUTE FUNCTION \(StoreSchema.numberTransactionFunction)('strata_changes')
                """,
            ]
        }
        let changes = [
            ["ALTER FUNCTION \(StoreSchema.recordTransactionSignature) RESET plan_cache_mode"],
            ["ALTER TABLE strata_history DISABLE TRIGGER \(StoreSchema.numberingTrigger)"],
            trigger("INSERT", "") + ["UPDATE strata_meta SET value = '\(FormatUpgrade.formatThree)' WHERE key = 'format'"],
            trigger("INSERT OR UPDATE", "WHEN (NEW.number IS NOT NULL)"),
        ]
        for change in changes {
            for statement in change { try session.execute(statement, "making the old schema") }
            #expect(try recording() != madeByThisVersion, "\(change)")
            let coordinator = try open(configuration)
            try? coordinator.close()
            #expect(try recording() == madeByThisVersion, "\(change)")
        }
        let coordinator = try open(configuration)
        defer { try? coordinator.close() }
        let writer = context(coordinator, author: "app")
        let id = try ObjectGraphTests().saveLabel("label", in: writer)
        let transactions = try coordinator.fetchHistory()
        #expect(transactions.map(\.author) == ["app"])
        #expect(transactions.flatMap(\.changes).map(\.objectID) == [id])
    }

    /// A role that does not own the tables opens the store, saves and
    /// reads every process's history with the grants the docs give it
    /// (ChoosingAStore.md), and no more; a store of an earlier format it
    /// is told to have its owner open first.
    @Test func aRoleGivenTheDocumentedGrantsSavesAndReadsTheHistory() throws {
        let owner = try TestServer.freshDatabase()
        let ownerCoordinator = try open(owner)
        defer { try? ownerCoordinator.close() }
        let admin = try PostgresSession.connect(owner)
        defer { admin.close() }
        let role = "strata_app_\(getpid())_\(UInt32.random(in: 0 ... .max))"
        try admin.execute("CREATE ROLE \(SQLIdentifier.quoted(role)) LOGIN", "making the app's role")
        defer {
            try? admin.execute("DROP OWNED BY \(SQLIdentifier.quoted(role))", "dropping the app's role")
            try? admin.execute("DROP ROLE \(SQLIdentifier.quoted(role))", "dropping the app's role")
        }
        var app = owner
        app.username = role
        // Without the grants, the open says what is missing.
        let refused = #expect(throws: StrataError.self) { _ = try open(app) }
        #expect(refused?.message.contains("grant it the privilege") == true, "\(String(describing: refused))")
        for grant in [
            "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO \(SQLIdentifier.quoted(role))",
            "GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO \(SQLIdentifier.quoted(role))",
        ] { try admin.execute(grant, "granting") }
        // A store of an earlier format is upgraded by its owner's open only.
        try admin.execute("UPDATE strata_meta SET value = '\(FormatUpgrade.formatThree)' WHERE key = 'format'", "making the old schema")
        let notOwner = #expect(throws: StrataError.self) { _ = try open(app) }
        #expect(notOwner?.message.contains("only the role that owns them may do") == true, "\(String(describing: notOwner))")
        try open(owner).close()
        let appCoordinator = try open(app)
        defer { try? appCoordinator.close() }
        let saved = try ObjectGraphTests().saveLabel("by the app", in: context(appCoordinator, author: "app"))
        _ = try ObjectGraphTests().saveLabel("by the owner", in: context(ownerCoordinator, author: "owner"))
        var authors: [String?] = []
        for _ in 0..<500 {
            authors = try appCoordinator.fetchHistory().map(\.author)
            if authors.count == 2 { break }
            Thread.sleep(forTimeInterval: 0.01)
        }
        #expect(authors == ["app", "owner"])
        let first = try ownerCoordinator.fetchHistory().first?.changes.map(\.objectID)
        #expect(first?.map(\.storedPrimaryKey) == [saved.storedPrimaryKey] && first?.map(\.entity.name) == ["Label"])
    }

    /// The history is kept within the store's limits as saves go on (the
    /// save whose identifier is a multiple of 100 prunes), and a process
    /// that follows from before what is kept is told, then goes on.
    @Test func historyIsKeptWithinItsLimitsAndAReaderTooFarBehindIsTold() throws {
        let configuration = try TestServer.freshDatabase()
        let coordinator = try open(configuration, history: PersistentHistory(maximumAge: nil, maximumTransactions: 10))
        defer { try? coordinator.close() }
        let writer = context(coordinator, author: "app")
        for i in 0..<Int(PostgresStoreHistory.pruneEvery) + 5 { _ = try ObjectGraphTests().saveLabel("label \(i)", in: writer) }
        let summary = try coordinator.historySummary()
        #expect(summary.pruned == PostgresStoreHistory.pruneEvery - 10)
        #expect(summary.transactions == 15)
        #expect(summary.newest == PostgresStoreHistory.pruneEvery + 5)

        let store = try PostgresStore(configuration, model: try notesModel())
        defer { store.close() }
        let heard = Mutex<[StrataError.Code]>([])
        let delivered = Mutex<[UInt64]>([])
        let follower = PostgresChangeFollower(store, configuration, after: 0, deliver: { transactions in
            delivered.withLock { $0 += transactions.map(\.number) }
        }, onError: { error in heard.withLock { $0.append(error.code) } })
        defer { follower.stop() }
        let deadline = Date(timeIntervalSinceNow: 10)
        while delivered.withLock({ $0.last }) != summary.newest && Date() < deadline { usleep(10_000) }
        #expect(delivered.withLock { $0.first } == summary.oldest)
        #expect(delivered.withLock { $0.count } == 15)
        #expect(heard.withLock { $0 } == [.historyExpired])
    }
}
