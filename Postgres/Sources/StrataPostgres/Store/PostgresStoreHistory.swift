import Foundation
@_spi(StoreImplementation) import Strata
import PostgresNIO

/// The PostgreSQL store's history as Strata's history API reads it
/// (``Strata/PersistentStoreCoordinator/fetchHistory(_:)``, the cursors,
/// pruning, the summary): the transactions every process's saves write
/// (``PostgresHistory``), the named cursors in `strata_history_cursors`,
/// and the last number pruned in `strata_meta` (`history.pruned`).
///
/// Pruning goes by the store's limits (``Strata/PersistentHistory``: a
/// week and 100,000 transactions by default), run by the save whose
/// identifier is a multiple of ``pruneEvery`` — one process among all, in
/// turn — and by ``Strata/PersistentStoreCoordinator/pruneHistory(through:)``.
/// Unlike the log store's, it does not go by the cursors: here the history
/// is also how every process learns of the others' saves, and a process
/// that follows them reads it a moment after each commit, which no cursor
/// says.
struct PostgresStoreHistory: StoreHistory {
    let store: PostgresStore

    /// Every this many transactions, a save prunes the history to its limits.
    static let pruneEvery: UInt64 = 100

    private static let q = SQLIdentifier.quoted

    func transactions(after number: UInt64, limit: Int) throws(StrataError) -> [HistoryTransaction] {
        let model = store.model
        let identifier = store.identifier
        return try store.transactions(after: number, limit: limit).map { stored in
            var changes: [HistoryChange] = []
            for kind in [StoredTransaction.Change.Kind.insert, .update, .delete] {
                for change in stored.changes where change.kind == kind {
                    // An object of an entity the model no longer has is left out.
                    guard let entity = model.entity(named: change.entity) else { continue }
                    changes.append(HistoryChange(
                        objectID: ObjectID(entity: entity, storedPrimaryKey: change.key), kind: Self.kind(kind), updatedProperties: change.properties))
                }
            }
            return HistoryTransaction(
                token: HistoryToken(storeIdentifier: identifier, transactionNumber: stored.number), timestamp: stored.committedAt,
                author: stored.author, contextName: stored.contextName, changes: changes)
        }
    }

    func bounds() throws(StrataError) -> (newest: UInt64?, pruned: UInt64) {
        try store.reading("reading the history's bounds") { (session) throws(StrataError) in
            let action = "reading the history's bounds"
            let rows = try session.query("""
                SELECT (SELECT max(number) FROM \(unescaped: Self.q(StoreSchema.historyTable))), \
                (SELECT coalesce(max(value::bigint), 0) FROM \(unescaped: Self.q(StoreSchema.metaTable)) WHERE key = 'history.pruned')
                """, action)
            guard let row = rows.first else { throw StrataError(code: .storage, message: "\(action): PostgreSQL returned no row") }
            let (newest, pruned) = try SchemaInstallation.decode(row, as: (Int64?, Int64).self, action)
            return (newest.map { UInt64($0) }, UInt64(max(0, pruned)))
        }
    }

    func cursor(_ name: String) throws(StrataError) -> UInt64? {
        try store.pool.withSession { (session) throws(StrataError) in
            let rows = try session.query(
                "SELECT number FROM \(unescaped: Self.q(StoreSchema.historyCursorsTable)) WHERE name = \(name)", "reading a history cursor")
            return try rows.first.map { row throws(StrataError) in UInt64(try SchemaInstallation.decode(row, as: Int64.self, "reading a history cursor")) }
        }
    }

    func setCursor(_ name: String, to number: UInt64?) throws(StrataError) {
        try store.pool.withSession { (session) throws(StrataError) in
            let table = Self.q(StoreSchema.historyCursorsTable)
            if let number {
                try session.query("""
                    INSERT INTO \(unescaped: table) (name, number) VALUES (\(name), \(Int64(number))) \
                    ON CONFLICT (name) DO UPDATE SET number = EXCLUDED.number
                    """, "setting a history cursor")
            } else {
                try session.query("DELETE FROM \(unescaped: table) WHERE name = \(name)", "removing a history cursor")
            }
        }
    }

    func prune(through number: UInt64) throws(StrataError) -> Int {
        try store.pool.withSession { (session) throws(StrataError) in
            try session.transaction("pruning the history") { () throws(StrataError) in
                try prune(through: number, on: session)
            }
        }
    }

    /// Prunes, in `session`'s transaction, every transaction up to `number`
    /// but the newest, and moves the pruned mark on.
    private func prune(through number: UInt64, on session: PostgresSession) throws(StrataError) -> Int {
        let action = "pruning the history"
        let history = Self.q(StoreSchema.historyTable)
        // The changes go with their transactions, in the same statement
        // (no foreign key does it: see `SchemaInstallation`).
        let rows = try session.query("""
            WITH d AS (DELETE FROM \(unescaped: history) WHERE number <= \(Int64(clamping: number)) \
            AND number < (SELECT max(number) FROM \(unescaped: history)) RETURNING number, save_id), \
            c AS (DELETE FROM \(unescaped: Self.q(StoreSchema.historyChangesTable)) WHERE save_id IN (SELECT save_id FROM d)) \
            SELECT count(*), coalesce(max(number), 0) FROM d
            """, action)
        guard let row = rows.first else { throw StrataError(code: .storage, message: "\(action): PostgreSQL returned no row") }
        let (count, through) = try SchemaInstallation.decode(row, as: (Int64, Int64).self, action)
        if count > 0 {
            try session.query("""
                INSERT INTO \(unescaped: Self.q(StoreSchema.metaTable)) (key, value) VALUES ('history.pruned', \(String(through))) \
                ON CONFLICT (key) DO UPDATE SET value = greatest(\(unescaped: Self.q(StoreSchema.metaTable)).value::bigint, EXCLUDED.value::bigint)::text
                """, action)
        }
        return Int(count)
    }

    /// Prunes what the store's limits no longer keep: transactions older
    /// than the age limit, and those past the count limit. Returns how many.
    @discardableResult
    func pruneToLimits(on session: PostgresSession) throws(StrataError) -> Int {
        let limits = store.historyLimits
        guard limits.maximumAge != nil || limits.maximumTransactions != nil else { return 0 }
        let action = "pruning the history"
        let history = Self.q(StoreSchema.historyTable)
        // A limit not set is a null, which cuts nothing.
        let count = limits.maximumTransactions.map { Int64(max($0, 1)) }
        let age = limits.maximumAge
        return try session.transaction(action) { () throws(StrataError) -> Int in
            let rows = try session.query("""
                SELECT greatest(coalesce((SELECT max(number) FROM \(unescaped: history)) - \(count), 0), \
                coalesce((SELECT max(number) FROM \(unescaped: history) WHERE committed_at < now() - make_interval(secs => \(age))), 0))
                """, action)
            let through = try SchemaInstallation.decode(rows.first, as: Int64.self, action)
            guard through > 0 else { return 0 }
            return try prune(through: UInt64(through), on: session)
        }
    }

    func summary() throws(StrataError) -> HistorySummary {
        try store.reading("summing up the history") { (session) throws(StrataError) in
            let action = "summing up the history"
            let history = Self.q(StoreSchema.historyTable)
            let rows = try session.query("""
                SELECT count(*), coalesce(min(number), 0), coalesce(max(number), 0), \
                pg_total_relation_size(\(StoreSchema.historyTable)::regclass) + pg_total_relation_size(\(StoreSchema.historyChangesTable)::regclass), \
                (SELECT coalesce(max(value::bigint), 0) FROM \(unescaped: Self.q(StoreSchema.metaTable)) WHERE key = 'history.pruned') \
                FROM \(unescaped: history)
                """, action)
            guard let row = rows.first else { throw StrataError(code: .storage, message: "\(action): PostgreSQL returned no row") }
            let (count, oldest, newest, bytes, pruned) = try SchemaInstallation.decode(row, as: (Int64, Int64, Int64, Int64, Int64).self, action)
            var summary = HistorySummary()
            summary.isEnabled = store.recordsHistory
            summary.transactions = Int(count)
            summary.oldest = UInt64(oldest)
            summary.newest = UInt64(newest)
            summary.bytes = Int(bytes)
            summary.pruned = UInt64(max(0, pruned))
            for cursor in try session.query("SELECT name, number FROM \(unescaped: Self.q(StoreSchema.historyCursorsTable))", action) {
                let (name, number) = try SchemaInstallation.decode(cursor, as: (String, Int64).self, action)
                summary.cursors[name] = UInt64(number)
            }
            return summary
        }
    }

    private static func kind(_ kind: StoredTransaction.Change.Kind) -> HistoryChange.Kind {
        switch kind {
        case .insert: .insert
        case .update: .update
        case .delete: .delete
        }
    }
}
