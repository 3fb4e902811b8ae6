import Foundation
@_spi(StoreImplementation) import Strata
import PostgresNIO
import Synchronization

/// A Strata store in a PostgreSQL database that several processes share:
/// what the coordinator will ask of it through the store seam (issue 45),
/// in PostgreSQL's terms — opening (the tables made or checked), primary
/// keys, objects by ID, every object of an entity, the holders of unique
/// values, and a save as one transaction guarded by the versions it read.
///
/// Reads that take several statements run in one `REPEATABLE READ READ
/// ONLY` transaction, so they see one state of the database; a save runs
/// in a `READ COMMITTED` transaction, its updates and deletes checked
/// against the versions the saving context read. Sessions come from a pool
/// of its own (``PostgresSessionPool``); every method may be called from
/// any thread, and blocks it for the round trips.
///
/// `Sendable`: its state is immutable but for the pool, which guards its
/// own, and a counter, which is atomic.
final class PostgresStore: Sendable {
    let model: ManagedObjectModel
    let schema: StoreSchema
    /// Each entity's select list and `FROM` (``StoredRows/select(_:)``),
    /// by entity name: made once, not at every fetch.
    let selects: [String: String]
    /// The store's identity, made with its tables.
    let identifier: UUID
    /// Whether this open made the tables.
    let created: Bool
    let pool: PostgresSessionPool

    /// Objects a scan reads per statement: its memory is bounded by this,
    /// whatever the entity's size.
    let scanPageSize: Int
    /// Whether saves record their transactions (``PostgresHistory``):
    /// other processes learn of a save through them.
    var recordsHistory: Bool { historyLimits.isEnabled }
    /// How long the history is kept (``PostgresStoreHistory/pruneToLimits(on:)``).
    let historyLimits: PersistentHistory

    /// Opens the store of `model` in the database `configuration` names,
    /// making its tables if the database has none (see
    /// ``SchemaInstallation``), with at most `sessions` connections.
    init(
        _ configuration: PostgresConfiguration, model: ManagedObjectModel, sessions: Int = 8, scanPageSize: Int = 1_000,
        history: PersistentHistory = .default
    ) throws(StrataError) {
        let schema = try StoreSchema(model)
        let pool = PostgresSessionPool(configuration, capacity: sessions)
        let installed: InstalledSchema
        do {
            installed = try pool.withSession { (session) throws(StrataError) in
                try SchemaInstallation.prepare(schema, of: model, on: session)
            }
        } catch {
            pool.close()
            throw error
        }
        self.model = model
        self.schema = schema
        selects = schema.layouts.mapValues(StoredRows.select)
        self.pool = pool
        self.identifier = installed.storeIdentifier
        self.created = installed.created
        self.scanPageSize = scanPageSize
        self.historyLimits = history
    }

    /// Closes the store: waits for the calls under way, then closes every
    /// connection. Calls after it throw ``Strata/StrataError/Code/noPersistentStore``.
    func close() { pool.close() }

    /// `count` new primary keys of `entity`, no process's but this call's.
    func reservePrimaryKeys(for entity: EntityDescription, count: UInt64) throws(StrataError) -> Range<UInt64> {
        try pool.withSession { (session) throws(StrataError) in
            try PrimaryKeyReservation.reserve(count, of: entity.name, on: session)
        }
    }

    /// The stored values and versions of `ids`, in their order (nil: not
    /// stored), read at one state of the database.
    func snapshots(of ids: [ObjectID]) throws(StrataError) -> [StoredSnapshot?] {
        guard !ids.isEmpty else { return [] }
        var byEntity: [ObjectIdentifier: [ObjectID]] = [:]
        for id in ids { byEntity[ObjectIdentifier(id.entity), default: []].append(id) }
        let read = { (session: PostgresSession) throws(StrataError) -> [StoredSnapshot?] in
            var found: [ObjectID: StoredSnapshot] = [:]
            for group in byEntity.values {
                found.merge(try StoredRows.read(
                    group, of: group[0].entity, in: self.model, schema: self.schema, select: self.selects[group[0].entity.name], on: session)) { $1 }
            }
            return ids.map { found[$0] }
        }
        // One entity's objects are one statement, at one state already.
        guard byEntity.count > 1 else { return try pool.withSession(read) }
        return try reading("reading objects", read)
    }

    /// Calls `body` with every stored object of `entity` that may pass
    /// `predicate` (every one when nil), in primary-key order, at one state
    /// of the database, a page of ``scanPageSize`` at a time (so memory is
    /// bounded whatever the entity's size), until it returns false. The
    /// predicate goes to PostgreSQL as far as it translates
    /// (``SQLPredicate``); returns whether every object given passes —
    /// where not, the caller judges each by ``Strata/StorePredicate/evaluate(_:)``.
    ///
    /// The first page is one statement on its own; only when it is full are
    /// the pages read again from the start in one `REPEATABLE READ`
    /// transaction — so a lookup, or any scan of one page, is one round trip.
    func forEachStored(
        of entity: EntityDescription, matching predicate: StorePredicate?, _ body: (ObjectID, StoredSnapshot) throws(StrataError) -> Bool
    ) throws(StrataError) -> Bool {
        let action = "reading \(entity.name) objects"
        let (page, isExact, layout) = try pageQuery(entity, matching: predicate)
        let readPage = { (session: PostgresSession, after: Int64) throws(StrataError) -> [(ObjectID, StoredSnapshot)] in
            var parameters = page.parameters
            parameters.append(after)
            parameters.append(Int64(self.scanPageSize))
            let rows = try session.read(page.sql, parameters, action)
            self.scannedRows.add(rows.count, ordering: .relaxed)
            return try StoredRows.decode(rows, of: entity, layout: layout, in: self.model, action)
        }
        let first = try pool.withSession { (session) throws(StrataError) in try readPage(session, 0) }
        guard first.count == scanPageSize else {
            for (id, row) in first {
                guard try body(id, row) else { break }
            }
            return isExact
        }
        try reading(action) { (session) throws(StrataError) in
            var after: Int64 = 0
            while true {
                let rows = try readPage(session, after)
                for (id, row) in rows {
                    guard try body(id, row) else { return }
                }
                guard rows.count == scanPageSize, let last = rows.last else { return }
                after = Int64(bitPattern: last.0.storedPrimaryKey)
            }
        }
        return isExact
    }

    /// The statement a scan of ``forEachStored(of:matching:_:)`` sends for
    /// each page, as `explain` shows it.
    func explain(_ entity: EntityDescription, matching predicate: StorePredicate?) throws(StrataError) -> String {
        let (page, isExact, _) = try pageQuery(entity, matching: predicate)
        return page.sql + (isExact ? "" : " -- then judged in Swift")
    }

    /// The page statement of a scan: the objects' rows (``StoredRows``)
    /// where the predicate's clause holds, its parameters, then the key to
    /// start after and the page's size as the last two parameters.
    private func pageQuery(
        _ entity: EntityDescription, matching predicate: StorePredicate?
    ) throws(StrataError) -> (page: (sql: String, parameters: StatementParameters), isExact: Bool, layout: StoreSchema.EntityLayout) {
        let layout = try self.layout(of: entity)
        var parameters = StatementParameters()
        let clause = SQLPredicate.clause(predicate, of: entity, layout: layout, into: &parameters)
        let id = "t." + SQLIdentifier.quoted(StoreSchema.idColumn)
        let sql = """
            \(selects[entity.name] ?? StoredRows.select(layout)) WHERE \(clause.sql) AND \(id) > $\(parameters.count + 1) \
            ORDER BY \(id) LIMIT $\(parameters.count + 2)
            """
        return ((sql, parameters), clause.isExact, layout)
    }

    /// Where `entity`'s objects are kept; throws for an entity of another model.
    func layout(of entity: EntityDescription) throws(StrataError) -> StoreSchema.EntityLayout {
        guard let layout = schema.layouts[entity.name] else {
            throw StrataError(code: .invalidArgument, message: "\(entity.name) is not an entity of the store's model")
        }
        return layout
    }

    /// The stored objects of `entity` holding each of `keys` in the
    /// attributes of uniqueness constraint `constraint` (its attribute
    /// names), in the order of `keys`, as PostgreSQL's `UNIQUE` constraint
    /// compares them: strings by their bytes (the log store's index
    /// compares them in NFC, so canonical equivalents are one key there
    /// and two here). A key with a null value has no holder (nulls never collide),
    /// nor one PostgreSQL cannot hold (a string with a NUL). One statement
    /// for all the keys: the keys go as one array per attribute, numbered,
    /// and are joined to the table.
    func holders(of keys: [[PropertyValue]], constraint: [String], of entity: EntityDescription) throws(StrataError) -> [[ObjectID]] {
        let q = SQLIdentifier.quoted
        let action = "looking up unique values of \(entity.name)"
        let attributes = try constraint.map { (name) throws(StrataError) -> AttributeDescription in
            guard let attribute = entity.attributes.first(where: { $0.name == name }) else {
                throw StrataError(code: .invalidArgument, message: "\(entity.name) has no attribute \(name)")
            }
            return attribute
        }
        let asked = keys.indices.filter { i in
            keys[i].count == attributes.count && !keys[i].contains { value in
                switch value {
                case .null: true
                case .string(let string): string.utf8.contains(0)
                case .date(let date): RowCoding.microseconds(date) == nil
                default: false
                }
            }
        }
        var holders = Array(repeating: [ObjectID](), count: keys.count)
        guard !asked.isEmpty else { return holders }
        holderLookups.add(1, ordering: .relaxed)
        var bindings = PostgresBindings()
        var arrays: [String] = []
        for (column, attribute) in attributes.enumerated() {
            let values = asked.map { keys[$0][column] }
            guard let type = RowCoding.appendArray(values, of: attribute.type, to: &bindings) else {
                throw StrataError(code: .invalidArgument, message: "a key of \(entity.name).\(attribute.name) is not a \(attribute.type)")
            }
            arrays.append("$\(bindings.count)::\(type)")
        }
        bindings.append(asked.map { Int64($0) })
        arrays.append("$\(bindings.count)::bigint[]")
        let names = attributes.indices.map { "k\($0)" } + ["position"]
        let matches = attributes.enumerated().map { "t.\(q($1.name)) = k.k\($0)" }.joined(separator: " AND ")
        let sql = """
            SELECT t.\(q(StoreSchema.idColumn)), k.position FROM \(q(entity.name)) AS t \
            JOIN unnest(\(arrays.joined(separator: ", "))) AS k(\(names.joined(separator: ", "))) ON \(matches) \
            ORDER BY k.position, t.\(q(StoreSchema.idColumn))
            """
        // One statement: one state of the database, without a transaction around it.
        let rows = try pool.withSession { (session) throws(StrataError) in
            try session.query(PostgresQuery(unsafeSQL: sql, binds: bindings), action)
        }
        for row in rows {
            let (key, position) = try SchemaInstallation.decode(row, as: (Int64, Int64).self, action)
            holders[Int(position)].append(ObjectID(entity: entity, storedPrimaryKey: UInt64(bitPattern: key)))
        }
        return holders
    }

    /// What a save did: written whole, or nothing written because these
    /// objects' rows no longer held the versions the save read (another
    /// process changed or deleted them first).
    enum SaveOutcome: Equatable {
        /// Written; the save's identifier when the store records history.
        case written(UInt64?)
        case conflicts([ObjectID])
    }

    /// Writes `changes` as one transaction: all of it, or — when an update
    /// or a delete meets a row another writer changed first — none of it,
    /// and the objects concerned are returned, for the coordinator to read
    /// again and decide by its merge policy. Throws
    /// ``Strata/StrataError/Code/constraintConflict`` for a unique value
    /// another object holds (nothing written).
    func write(_ changes: StoreChanges) throws(StrataError) -> SaveOutcome {
        try pool.withSession { (session) throws(StrataError) in
            session.send("BEGIN", "saving")
            let conflicts: [ObjectID]
            // With history, the inserts are made by its statement.
            var folded: RowWriter.FoldedInserts? = recordsHistory ? RowWriter.FoldedInserts() : nil
            do throws(StrataError) {
                conflicts = try RowWriter.write(changes, schema: schema, on: session, folding: &folded)
            } catch {
                try? session.execute("ROLLBACK", "saving")
                throw error
            }
            guard conflicts.isEmpty else {
                try session.execute("ROLLBACK", "saving")
                return .conflicts(conflicts)
            }
            // The history, then the commit, in one wait; a failure of either
            // (or of a row's statement sent before) ends the transaction.
            var saveIdentifier: UInt64?
            if recordsHistory {
                saveIdentifier = try PostgresHistory.recordAndCommit(changes, after: folded ?? RowWriter.FoldedInserts(), on: session)
            } else {
                try session.execute("COMMIT", "saving")
            }
            // Every so many saves (by identifier, so one process among all
            // does it), the history is pruned to its limits; a failure is
            // tried again at the next turn, the save stands.
            if let saveIdentifier, saveIdentifier % PostgresStoreHistory.pruneEvery == 0 {
                _ = try? PostgresStoreHistory(store: self).pruneToLimits(on: session)
            }
            return .written(saveIdentifier)
        }
    }

    /// How many times the history was read (tests pin that a process's
    /// own saves cost its following no read).
    let historyReads = Atomic<Int>(0)
    /// How many objects scans, ordered or not, read (tests pin that a
    /// fetch of a page reads the page).
    let scannedRows = Atomic<Int>(0)
    /// How many statements looked up the holders of unique values (tests
    /// pin that a save a conflict would fail looks up none unless refused).
    let holderLookups = Atomic<Int>(0)

    /// The transactions numbered after `number`, oldest first, at most `limit`.
    func transactions(after number: UInt64, limit: Int = 1_000) throws(StrataError) -> [StoredTransaction] {
        historyReads.add(1, ordering: .relaxed)
        return try pool.withSession { (session) throws(StrataError) in
            try PostgresHistory.transactions(after: number, limit: limit, on: session)
        }
    }

    /// The number of the newest transaction committed (0: none yet).
    func latestTransactionNumber() throws(StrataError) -> UInt64 {
        try pool.withSession { (session) throws(StrataError) in try PostgresHistory.latestNumber(on: session) }
    }

    /// Runs `body` in a read-only transaction at one snapshot of the database.
    func reading<T>(_ action: String, _ body: (PostgresSession) throws(StrataError) -> T) throws(StrataError) -> T {
        try pool.withSession { (session) throws(StrataError) in
            try session.transaction(action, beginning: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") { () throws(StrataError) in
                try body(session)
            }
        }
    }
}
