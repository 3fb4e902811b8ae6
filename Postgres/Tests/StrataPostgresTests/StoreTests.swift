import Foundation
import PostgresNIO
@_spi(StoreImplementation) import Strata
@testable import StrataPostgres
import Synchronization
import Testing

/// The store as the coordinator will use it: opened by several processes,
/// saving whole or not at all, reading at one state.
@Suite("PostgreSQL store", .enabled(if: TestServer.isAvailable, "no PostgreSQL server (see the message above)"))
struct StoreTests {
    let model: ManagedObjectModel
    init() throws { model = try bookmarksModel() }

    func tag(_ key: UInt64) -> ObjectID { ObjectID(entity: model.entity(named: "Tag")!, storedPrimaryKey: key) }
    func tagValues(_ name: PropertyValue) -> [PropertyValue] { [name, .objects([])] }

    @Test func openedByOneThenAnother() throws {
        let configuration = try TestServer.freshDatabase()
        let first = try PostgresStore(configuration, model: model)
        let second = try PostgresStore(configuration, model: model)
        #expect(first.created && !second.created)
        #expect(first.identifier == second.identifier)
        first.close()
        let closed = #expect(throws: StrataError.self) { _ = try first.reservePrimaryKeys(for: model.entity(named: "Tag")!, count: 1) }
        #expect(closed?.code == .noPersistentStore)
        #expect(try second.reservePrimaryKeys(for: model.entity(named: "Tag")!, count: 3) == 1..<4)
        second.close()
    }

    @Test func aScanReadsEveryObjectInPagesAtOneState() throws {
        let store = try PostgresStore(try TestServer.freshDatabase(), model: model, scanPageSize: 7)
        defer { store.close() }
        let keys = try store.reservePrimaryKeys(for: model.entity(named: "Tag")!, count: 50)
        var changes = StoreChanges()
        for key in keys { changes.inserted.append((tag(key), tagValues(.string("tag \(key)")))) }
        #expect(try store.write(changes) == .written(1))
        var seen: [UInt64] = []
        _ = try store.forEachStored(of: model.entity(named: "Tag")!, matching: nil) { (id, row) throws(StrataError) -> Bool in
            seen.append(id.storedPrimaryKey)
            #expect(row == StoredSnapshot(values: tagValues(.string("tag \(id.storedPrimaryKey)")), version: 1))
            return true
        }
        #expect(seen == Array(keys))
        var firstTen = 0
        _ = try store.forEachStored(of: model.entity(named: "Tag")!, matching: nil) { (_, _) throws(StrataError) -> Bool in
            firstTen += 1
            return firstTen < 10
        }
        #expect(firstTen == 10)
        // Narrowed by PostgreSQL, across pages of seven: the matches only.
        let wanted = StorePredicate.isIn(.property(index: 0, nullReadsAs: .string("")), [.string("tag 3"), .string("tag 20"), .string("tag 49")])
        var matched: [UInt64] = []
        let isExact = try store.forEachStored(of: model.entity(named: "Tag")!, matching: wanted) { (id, _) throws(StrataError) -> Bool in
            matched.append(id.storedPrimaryKey)
            return true
        }
        #expect(isExact && matched == [3, 20, 49])
        let folder = ObjectID(entity: model.entity(named: "Folder")!, storedPrimaryKey: 1)
        #expect(try store.snapshots(of: [tag(3), folder, tag(49)]).map { $0?.values.first } == [.string("tag 3"), nil, .string("tag 49")])
    }

    @Test func aStaleUpdateLeavesTheWholeSaveUnwritten() throws {
        let store = try PostgresStore(try TestServer.freshDatabase(), model: model)
        defer { store.close() }
        #expect(try store.write(StoreChanges(inserted: [(tag(1), tagValues(.string("swift")))])) == .written(1))
        #expect(try store.write(StoreChanges(updated: [.init(id: tag(1), values: tagValues(.string("Swift")), expectedVersion: 1)])) == .written(2))
        let stale = StoreChanges(inserted: [(tag(2), tagValues(.string("rust")))],
                               updated: [.init(id: tag(1), values: tagValues(.string("SWIFT")), expectedVersion: 1)])
        #expect(try store.write(stale) == .conflicts([tag(1)]))
        #expect(try store.snapshots(of: [tag(1), tag(2)]) == [StoredSnapshot(values: tagValues(.string("Swift")), version: 2), nil])
    }

    @Test func holdersOfUniqueValues() throws {
        let store = try PostgresStore(try TestServer.freshDatabase(), model: model)
        defer { store.close() }
        let tagEntity = model.entity(named: "Tag")!
        var changes = StoreChanges()
        for key in 1...3_000 as ClosedRange<UInt64> { changes.inserted.append((tag(key), tagValues(.string("tag \(key)")))) }
        changes.inserted.append((tag(3_001), tagValues(.string("it's"))))
        changes.inserted.append((tag(3_002), tagValues(.string("\u{E9}"))))  // é, one scalar
        _ = try store.write(changes)
        // 5,000 keys at once, about half held; canonical equivalents are other keys, as PostgreSQL's UNIQUE sees them.
        var keys: [[PropertyValue]] = (1...5_000).map { [.string("tag \($0 * 3 / 5 + ($0 % 2) * 10_000)")] }
        keys += [[.string("it's")], [.null], [.string("e\u{301}")], [.string("\u{E9}")], [.string("a\u{0}b")], []]
        let holders = try store.holders(of: keys, constraint: ["name"], of: tagEntity)
        #expect(holders.count == keys.count)
        for (i, key) in keys.enumerated() {
            guard case .string(let name)? = key.first, name.hasPrefix("tag ") else { continue }
            let number = UInt64(name.dropFirst(4))!
            #expect(holders[i] == (number <= 3_000 ? [tag(number)] : []), "\(name)")
        }
        #expect(Array(holders.suffix(6)) == [[tag(3_001)], [], [], [tag(3_002)], [], []])
    }

    @Test func holdersOfACompositeKey() throws {
        final class Person2: ManagedObject {}
        let people = try ManagedObjectModel(entities: [
            EntityDescription(name: "Person", managedObjectClass: Person2.self, properties: [
                .attribute("first", .string), .attribute("last", .string, optional: true), .attribute("born", .integer32),
            ], uniquenessConstraints: [["last", "born"]]),
        ])
        let entity = people.entity(named: "Person")!
        let store = try PostgresStore(try TestServer.freshDatabase(), model: people)
        defer { store.close() }
        func id(_ key: UInt64) -> ObjectID { ObjectID(entity: entity, storedPrimaryKey: key) }
        _ = try store.write(StoreChanges(inserted: [
            (id(1), [.string("Ada"), .string("Lovelace"), .integer(1815)]),
            (id(2), [.string("Byron"), .string("Lovelace"), .integer(1836)]),
            (id(3), [.string("Nobody"), .null, .integer(1815)]),
            (id(4), [.string("Nobody else"), .null, .integer(1815)]),  // nulls never collide
        ]))
        let holders = try store.holders(
            of: [[.string("Lovelace"), .integer(1836)], [.string("Lovelace"), .integer(1900)], [.null, .integer(1815)],
                 [.string("Lovelace"), .integer(1815)]],
            constraint: ["last", "born"], of: entity)
        #expect(holders == [[id(2)], [], [], [id(1)]])
    }

    @Test func twoProcessesEditingOneObjectAtOnce() throws {
        let configuration = try TestServer.freshDatabase()
        let stores = [try PostgresStore(configuration, model: model), try PostgresStore(configuration, model: model)]
        defer { for store in stores { store.close() } }
        _ = try stores[0].write(StoreChanges(inserted: [(tag(1), tagValues(.string("swift")))]))
        for round in 0..<20 {
            let version = try #require(try stores[0].snapshots(of: [tag(1)])[0]?.version)
            let outcomes = Mutex<[PostgresStore.SaveOutcome]>([])
            DispatchQueue.concurrentPerform(iterations: 2) { i in
                let outcome = try? stores[i].write(StoreChanges(updated: [
                    .init(id: tag(1), values: tagValues(.string("round \(round) by \(i)")), expectedVersion: version),
                ]))
                outcomes.withLock { $0.append(outcome ?? .conflicts([])) }
            }
            // One wins; the other finds the version moved.
            #expect(outcomes.withLock { $0 }.filter { if case .written = $0 { true } else { false } }.count == 1)
            #expect(outcomes.withLock { $0 }.contains(.conflicts([tag(1)])))
            #expect(try stores[1].snapshots(of: [tag(1)])[0]?.version == version + 1)
        }
    }

    @Test func everySaveIsHeardByTheOtherProcessesAndReadFromTheHistory() throws {
        let configuration = try TestServer.freshDatabase()
        let writer = try PostgresStore(configuration, model: model)
        let reader = try PostgresStore(configuration, model: model)
        defer { writer.close(); reader.close() }
        let heard = Mutex<[PostgresChangeListener.HeardCommit?]>([])
        let arrived = DispatchSemaphore(value: 0)
        let listener = try PostgresChangeListener(configuration) { commit in
            heard.withLock { $0.append(commit) }
            arrived.signal()
        }
        defer { listener.close() }
        var changes = StoreChanges(inserted: [(tag(1), tagValues(.string("swift"))), (tag(2), tagValues(.string("rust")))])
        changes.author = "importer"
        changes.contextName = "import"
        #expect(try writer.write(changes) == .written(1))
        #expect(try writer.write(StoreChanges(
            updated: [.init(id: tag(1), values: tagValues(.string("Swift")), expectedVersion: 1, changedProperties: ["name"])],
            deleted: [.init(id: tag(2), expectedVersion: 1)])) == .written(2))
        // A save that meets a conflict is rolled back with its history: no number taken.
        #expect(try writer.write(StoreChanges(deleted: [.init(id: tag(1), expectedVersion: 1)])) == .conflicts([tag(1)]))
        for _ in 0..<2 { #expect(arrived.wait(timeout: .now() + 5) == .success) }
        #expect(heard.withLock { $0 } == [.init(number: 1, saveIdentifier: 1), .init(number: 2, saveIdentifier: 2)])
        let history = try reader.transactions(after: 0)
        #expect(history.map(\.number) == [1, 2] && history.map(\.saveIdentifier) == [1, 2])
        #expect(history[0].author == "importer" && history[0].contextName == "import")
        #expect(history[0].changes == [
            .init(entity: "Tag", key: 1, kind: .insert, properties: []), .init(entity: "Tag", key: 2, kind: .insert, properties: []),
        ])
        #expect(Set(history[1].changes.map(\.kind)) == [.update, .delete])
        #expect(history[1].changes.first { $0.kind == .update } == .init(entity: "Tag", key: 1, kind: .update, properties: ["name"]))
        #expect(try reader.transactions(after: 1).map(\.number) == [2])
        #expect(try reader.transactions(after: 2).isEmpty)
    }

    /// Four threads save at once while another process reads the history
    /// after the last number it has seen, again and again: every save is
    /// numbered once, and every read is the run of numbers right after
    /// the last — a commit is never numbered below one a reader has seen.
    @Test func everySaveIsNumberedOnceUnderManyWriters() throws {
        let configuration = try TestServer.freshDatabase()
        let store = try PostgresStore(configuration, model: model, sessions: 4)
        let reader = try PostgresStore(configuration, model: model)
        defer { store.close(); reader.close() }
        let keys = try store.reservePrimaryKeys(for: model.entity(named: "Tag")!, count: 100)
        let saves = Mutex<[UInt64: UInt64]>([:])  // key -> save identifier
        let reads = Mutex<Int>(0)
        let holes = Mutex<[String]>([])
        let readerDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            var last: UInt64 = 0
            for _ in 0..<20_000 where last < 100 {
                guard let numbers = try? reader.transactions(after: last).map(\.number) else { continue }
                if numbers != Array((last + 1) ..< (last + 1 + UInt64(numbers.count))) {
                    holes.withLock { $0.append("after \(last): \(numbers)") }
                }
                last = numbers.last ?? last
                reads.withLock { $0 += 1 }
            }
            readerDone.signal()
        }
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for key in keys where Int(key) % 4 == thread {
                if case .written(let save?)? = try? store.write(StoreChanges(inserted: [(tag(key), tagValues(.string("t\(key)")))])) {
                    saves.withLock { $0[key] = save }
                }
            }
        }
        #expect(readerDone.wait(timeout: .now() + 30) == .success)
        #expect(holes.withLock { $0 }.isEmpty)
        #expect(reads.withLock { $0 } >= 1)
        let recorded = saves.withLock { $0 }
        #expect(recorded.count == 100)
        #expect(Set(recorded.values) == Set(1...100))
        let history = try store.transactions(after: 0, limit: 1_000)
        #expect(history.map(\.number) == Array(1...100))
        for transaction in history { #expect(recorded[transaction.changes[0].key] == transaction.saveIdentifier) }
    }

    /// A save is numbered at its commit, not when it records its
    /// transaction: one that has recorded but not committed holds no other
    /// save back, and a reader that has read past the other's number still
    /// meets it, numbered after.
    ///
    ///     session A                        store's save (B)                reader
    ///     BEGIN; record → save 1
    ///                                      records save 2, COMMIT
    ///                                      → number 1 (A not waited for)
    ///                                                                      after 0: [1 (save 2)]
    ///     COMMIT → number 2
    ///                                                                      after 1: [2 (save 1)]
    @Test func aSaveIsNumberedAtItsCommitAndWaitsForNoOtherClient() throws {
        let configuration = try TestServer.freshDatabase()
        let store = try PostgresStore(configuration, model: model)
        defer { store.close() }
        let (a, recorded) = try sessionThatRecorded(StoreChanges(), store, configuration)
        defer { a.close() }
        #expect(recorded == 1)

        let written = DispatchSemaphore(value: 0)
        let outcome = Mutex<PostgresStore.SaveOutcome?>(nil)
        DispatchQueue.global().async {
            outcome.withLock { $0 = try? store.write(StoreChanges(inserted: [(tag(1), tagValues(.string("b")))])) }
            written.signal()
        }
        #expect(written.wait(timeout: .now() + 10) == .success, "the save waited for session A's commit")
        #expect(outcome.withLock { $0 } == .written(2))
        let first = try store.transactions(after: 0)
        #expect(first.map(\.number) == [1] && first.map(\.saveIdentifier) == [2])

        try a.execute("COMMIT", "saving")
        let second = try store.transactions(after: 1)
        #expect(second.map(\.number) == [2] && second.map(\.saveIdentifier) == [1] && second.first?.author == "a")
        #expect(try store.latestTransactionNumber() == 2)
        // The later commit's time is the later one.
        #expect(try #require(first.first).committedAt < (try #require(second.first)).committedAt)
    }

    /// A save whose inserted row's foreign key waits at the commit for
    /// another transaction holds no other save back: the checks of its
    /// inserted rows run before it is numbered, so it waits without the
    /// numbering's lock.
    ///
    ///     session X                 save A (Person → Folder 1)       save B (a Tag)
    ///     BEGIN; lock Folder 1
    ///                               COMMIT: foreign key check
    ///                               waits for X
    ///                                                                COMMIT → number 2
    ///                                                                (A not waited for)
    ///     COMMIT
    ///                               → number 3
    @Test func aSaveWhoseForeignKeyWaitsHoldsNoOtherSaveBack() throws {
        let configuration = try TestServer.freshDatabase()
        let store = try PostgresStore(configuration, model: model, sessions: 2)
        defer { store.close() }
        let folder = ObjectID(entity: model.entity(named: "Folder")!, storedPrimaryKey: 1)
        let person = ObjectID(entity: model.entity(named: "Person")!, storedPrimaryKey: 1)
        #expect(try store.write(StoreChanges(inserted: [(folder, [.string("inbox"), .objects([]), .null])])) == .written(1))

        let x = try PostgresSession.connect(configuration)
        defer { x.close() }
        let folders = try #require(store.schema.layouts["Folder"]).table
        try x.execute("BEGIN", "locking")
        try x.execute("SELECT 1 FROM \(SQLIdentifier.quoted(folders)) WHERE \(StoreSchema.idColumn) = 1 FOR UPDATE", "locking")

        let (aWritten, bWritten) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let outcomes = Mutex<[String: PostgresStore.SaveOutcome]>([:])
        DispatchQueue.global().async {
            let outcome = try? store.write(StoreChanges(inserted: [(person, [.string("ada"), .null, .object(folder)])]))
            outcomes.withLock { $0["A"] = outcome }
            aWritten.signal()
        }
        // A's commit waits for X's lock on the folder's row.
        #expect(try waitForALockWait(configuration), "save A never waited for session X")

        DispatchQueue.global().async {
            let outcome = try? store.write(StoreChanges(inserted: [(tag(1), tagValues(.string("b")))]))
            outcomes.withLock { $0["B"] = outcome }
            bWritten.signal()
        }
        #expect(bWritten.wait(timeout: .now() + 10) == .success, "save B waited for save A's foreign key check")
        #expect(aWritten.wait(timeout: .now()) == .timedOut)
        try x.execute("COMMIT", "locking")
        #expect(aWritten.wait(timeout: .now() + 10) == .success)
        #expect(outcomes.withLock { $0 } == ["B": .written(3), "A": .written(2)])
        let history = try store.transactions(after: 1)
        #expect(history.map(\.number) == [2, 3] && history.map(\.saveIdentifier) == [3, 2])
    }

    /// Two saves of one unique value from two processes, the later one's
    /// check waiting at its commit for the earlier's: the earlier commits
    /// and the later is refused as a constraint conflict — neither waits
    /// for the other's numbering (which would be a deadlock, one of them
    /// failed by the server after a second, for nothing).
    ///
    ///     session A (a Tag "swift")        save B (another Tag "swift")
    ///     BEGIN; insert; record
    ///                                      COMMIT: unique check waits for A
    ///     COMMIT → number 1
    ///                                      refused: constraintConflict
    @Test func twoSavesOfOneUniqueValueMeetAsAConflictNotADeadlock() throws {
        let configuration = try TestServer.freshDatabase()
        let store = try PostgresStore(configuration, model: model)
        defer { store.close() }
        let (a, _) = try sessionThatRecorded(
            StoreChanges(inserted: [(tag(100), tagValues(.string("swift")))]), store, configuration)
        defer { a.close() }

        let bFailed = DispatchSemaphore(value: 0)
        let bError = Mutex<StrataError?>(nil)
        DispatchQueue.global().async {
            do throws(StrataError) {
                _ = try store.write(StoreChanges(inserted: [(tag(1), tagValues(.string("swift")))]))
            } catch {
                bError.withLock { $0 = error }
            }
            bFailed.signal()
        }
        #expect(try waitForALockWait(configuration), "save B never waited for session A")
        try a.execute("COMMIT", "saving")
        #expect(bFailed.wait(timeout: .now() + 10) == .success)
        #expect(bError.withLock { $0?.code } == .constraintConflict, "\(String(describing: bError.withLock { $0 }))")
        let history = try store.transactions(after: 0)
        #expect(history.map(\.number) == [1] && history.first?.author == "a")
    }

    /// A store is not opened over connections whose
    /// `session_replication_role` is `replica` (where PostgreSQL fires no
    /// trigger): its saves would go unnumbered, seen by no other process,
    /// past unchecked foreign keys. The error says what to do.
    @Test func connectionsWhereTriggersDoNotFireAreRefused() throws {
        let configuration = try TestServer.freshDatabase()
        let admin = try PostgresSession.connect(configuration)
        defer { admin.close() }
        let name = try SchemaInstallation.decode(admin.query("SELECT current_database()", "looking").first, as: String.self, "looking")
        try admin.execute("ALTER DATABASE \(SQLIdentifier.quoted(name)) SET session_replication_role = replica", "setting")
        let refused = #expect(throws: StrataError.self) { _ = try PostgresStore(configuration, model: model) }
        #expect(refused?.message.contains("session_replication_role") == true, "\(String(describing: refused))")
        #expect(refused?.message.contains("Set it to origin") == true)
        try admin.execute("ALTER DATABASE \(SQLIdentifier.quoted(name)) RESET session_replication_role", "setting")
        let store = try PostgresStore(configuration, model: model)
        defer { store.close() }
        #expect(try store.write(StoreChanges(inserted: [(tag(1), tagValues(.string("swift")))])) == .written(1))
    }

    /// A transaction's row updated again before its commit (by SQL of an
    /// app's own) is numbered once, and no number is lost.
    @Test func aTransactionUpdatedBeforeItsCommitIsNumberedOnce() throws {
        let configuration = try TestServer.freshDatabase()
        let store = try PostgresStore(configuration, model: model)
        defer { store.close() }
        let (a, _) = try sessionThatRecorded(StoreChanges(), store, configuration)
        defer { a.close() }
        try a.execute("UPDATE strata_history SET author = 'b' WHERE number < 0", "updating")
        try a.execute("COMMIT", "saving")
        #expect(try store.write(StoreChanges(inserted: [(tag(1), tagValues(.string("swift")))])) == .written(2))
        let history = try store.transactions(after: 0)
        #expect(history.map(\.number) == [1, 2] && history.first?.author == "b")
    }

    /// A session of its own that has begun a transaction, written
    /// `changes` and recorded an insert of Tag 100 by author "a" — a save
    /// but for its `COMMIT`; and the save's identifier.
    func sessionThatRecorded(
        _ changes: StoreChanges, _ store: PostgresStore, _ configuration: PostgresConfiguration
    ) throws -> (PostgresSession, UInt64) {
        let session = try PostgresSession.connect(configuration)
        try session.execute("BEGIN", "saving")
        var sent: RowWriter.FoldedInserts? = nil
        #expect(try RowWriter.write(changes, schema: store.schema, on: session, folding: &sent).isEmpty)
        let recorded = try session.query("""
            SELECT \(unescaped: StoreSchema.recordTransactionFunction)('a', NULL, '{Tag}', '{insert}', '{1}', '{0}', '{100}', '{0}', '{}')
            """, "saving")
        return (session, UInt64(try SchemaInstallation.decode(recorded.first, as: Int64.self, "saving")))
    }

    /// Whether a session of the test's database waits for another's
    /// transaction within a few seconds (a save's check waiting for it).
    func waitForALockWait(_ configuration: PostgresConfiguration) throws -> Bool {
        let admin = try PostgresSession.connect(configuration)
        defer { admin.close() }
        for _ in 0..<1_000 {
            let rows = try admin.query("""
                SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' \
                AND wait_event = 'transactionid' AND cardinality(pg_blocking_pids(pid)) > 0
                """, "looking")
            if try SchemaInstallation.decode(rows.first, as: Int64.self, "looking") > 0 { return true }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return false
    }

    /// A read of the history costs what it reads, not the history's size,
    /// even before the server has statistics of its tables (a new store,
    /// until autovacuum's first `ANALYZE`): the read goes through the
    /// numbers' index and the changes' index.
    @Test func theHistoryIsReadThroughItsIndexesWithoutStatistics() throws {
        let configuration = try TestServer.freshDatabase()
        let store = try PostgresStore(configuration, model: model)
        defer { store.close() }
        let session = try PostgresSession.connect(configuration)
        defer { session.close() }
        // 5,000 transactions of a change each, as saves record them before
        // their commit numbers them; no ANALYZE of autovacuum's meanwhile.
        for table in ["strata_history", "strata_history_changes"] {
            try session.execute("ALTER TABLE \(table) SET (autovacuum_enabled = off)", "recording")
        }
        try session.execute("""
            INSERT INTO strata_history (number, save_id, committed_at) \
            SELECT -s, s, now() FROM (SELECT nextval('strata_history_save_id') AS s FROM generate_series(1, 5000)) AS saves
            """, "recording")
        try session.execute("""
            INSERT INTO strata_history_changes (save_id, entity, kind, object_ids) \
            SELECT save_id, 'Tag', 'insert', ARRAY[save_id] FROM strata_history
            """, "recording")
        let analyzed = try session.query("""
            SELECT bool_or(coalesce(last_analyze, last_autoanalyze) IS NOT NULL) FROM pg_stat_user_tables \
            WHERE relname IN ('strata_history', 'strata_history_changes')
            """, "looking")
        let statement = PostgresHistory.statement(after: 4_990, limit: 1_000)
        let plan = try session.query(PostgresQuery(unsafeSQL: "EXPLAIN " + statement.sql, binds: statement.binds), "explaining")
            .map { try $0.decode(String.self) }.joined(separator: "\n")
        #expect(plan.contains("strata_history_pkey") && !plan.contains("Seq Scan on strata_history "), "\(plan)")
        #expect(plan.contains(StoreSchema.historyChangesIndex) && !plan.contains("Seq Scan on strata_history_changes"), "\(plan)")
        #expect(try SchemaInstallation.decode(analyzed.first, as: Bool.self, "looking") == false, "autovacuum analyzed the table first")
        #expect(try store.transactions(after: 4_990).map(\.number) == Array(4_991...5_000))
    }

    @Test func aFollowerMissesNothingAcrossALostConnection() throws {
        let configuration = try TestServer.freshDatabase()
        let writer = try PostgresStore(configuration, model: model)
        let reader = try PostgresStore(configuration, model: model)
        defer { writer.close(); reader.close() }
        let delivered = Mutex<[UInt64]>([])
        let errors = Mutex<[StrataError]>([])
        let follower = PostgresChangeFollower(reader, configuration, after: 0, deliver: { transactions in
            delivered.withLock { $0 += transactions.map(\.number) }
        }, onError: { error in errors.withLock { $0.append(error) } })
        defer { follower.stop() }
        func waitFor(_ numbers: [UInt64]) -> Bool {
            for _ in 0..<500 {
                if delivered.withLock({ $0 }) == numbers { return true }
                Thread.sleep(forTimeInterval: 0.01)
            }
            return false
        }
        _ = try writer.write(StoreChanges(inserted: [(tag(1), tagValues(.string("a")))]))
        #expect(waitFor([1]))
        // The server ends the follower's listening connection; two saves commit before it listens again.
        let pid = try #require(follower.listenerBackendPID)
        let admin = try PostgresSession.connect(try TestServer.configuration())
        defer { admin.close() }
        _ = try admin.query("SELECT pg_terminate_backend(\(pid))", "ending the listener")
        _ = try writer.write(StoreChanges(inserted: [(tag(2), tagValues(.string("b")))]))
        _ = try writer.write(StoreChanges(inserted: [(tag(3), tagValues(.string("c")))]))
        #expect(waitFor([1, 2, 3]))
        for _ in 0..<500 where follower.listenerBackendPID == pid { Thread.sleep(forTimeInterval: 0.01) }
        #expect(follower.listenerBackendPID != pid)
        // Listening again: the next save is heard at once.
        _ = try writer.write(StoreChanges(inserted: [(tag(4), tagValues(.string("d")))]))
        #expect(waitFor([1, 2, 3, 4]))
    }
}
