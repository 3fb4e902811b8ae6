import Foundation
@_spi(StoreImplementation) import Strata
import PostgresNIO

/// One save as the history keeps it: its number (the history token's, in
/// commit order), the identifier its save took, when it committed, who
/// saved, and each object it inserted, updated (with the names of the
/// properties it changed) or deleted.
struct StoredTransaction: Equatable {
    struct Change: Equatable {
        enum Kind: String { case insert, update, delete }
        var entity: String
        var key: UInt64
        var kind: Kind
        /// An update's changed properties (empty for the others).
        var properties: [String]
    }

    var number: UInt64
    var saveIdentifier: UInt64
    var committedAt: Date
    var author: String?
    var contextName: String?
    var changes: [Change]
}

/// The store's history in PostgreSQL: what lets every process learn what
/// the others saved.
///
/// A save writes its transaction in its own database transaction, so the
/// two commit together or not at all: its last statement before `COMMIT`
/// writes the transaction's rows under an identifier of the save's own,
/// and the commit itself numbers it, from the `history.next` row of
/// `strata_meta` (``StoreSchema/recordingCreation``). That row stays
/// locked from the numbering to the commit's end — after the deferred
/// checks of the save's rows, which may wait for another transaction, and
/// with no round trip to a client in between, so other saves wait for it
/// only as long as the server takes — and saves commit in number order:
/// a reader that has seen number N never meets a later commit numbered
/// below it ("after N" misses nothing). The numbering sends `NOTIFY
/// strata_changes` with the number and the save's identifier, which PostgreSQL delivers to
/// every listening connection when the save commits
/// (``PostgresChangeListener``); a notification is only a wake-up — the
/// history rows are the truth, read from the last number seen.
///
/// A save does not learn its number (`COMMIT` answers nothing): the
/// process knows its own saves by their identifiers, which the rows and
/// the notifications carry.
enum PostgresHistory {
    static let recordAction = "recording the save in the history"

    /// Records the transaction of a save of `changes` (their versions
    /// checked already) as the last statement of the save's database
    /// transaction — which also makes the save's inserts left in `folded` —
    /// and commits it: the two sent together, one wait for both. The
    /// commit numbers the transaction and notifies listeners. Returns the
    /// save's identifier.
    static func recordAndCommit(
        _ changes: StoreChanges, after folded: RowWriter.FoldedInserts, on session: PostgresSession
    ) throws(StrataError) -> UInt64 {
        // A failed insert is reported as the save's, not the history's.
        let action = folded.parts.isEmpty ? recordAction : "saving"
        let rows = try session.query(statement(recording: changes, after: folded), action, thenSending: "COMMIT", "saving")
        return UInt64(try SchemaInstallation.decode(rows.first, as: Int64.self, action))
    }

    /// The statement that records a save of `changes`: the call of
    /// ``StoreSchema/recordTransactionFunction``, which returns the save's
    /// identifier, and the inserts of `folded` — parts of its
    /// `WITH`, which PostgreSQL runs to completion after the call, since
    /// nothing reads them.
    private static func statement(recording changes: StoreChanges, after folded: RowWriter.FoldedInserts) -> PostgresQuery {
        var bindings = folded.bindings
        /// A parameter's placeholder, numbered after the inserts'.
        func bind(_ value: some PostgresDynamicTypeEncodable, as type: String) -> String {
            bindings.append(value)
            return "$\(bindings.count)::\(type)"
        }
        var groups = ChangeGroups()
        for (id, _) in changes.inserted { groups.add(id, .insert, []) }
        for update in changes.updated { groups.add(update.id, .update, update.changedProperties) }
        for delete in changes.deleted { groups.add(delete.id, .delete, []) }
        bindings.append(changes.author)
        let author = "$\(bindings.count)::text"
        bindings.append(changes.contextName)
        let contextName = "$\(bindings.count)::text"
        let arguments = [
            author, contextName, bind(groups.entities, as: "text[]"), bind(groups.kinds, as: "text[]"),
            bind(groups.objectCounts, as: "integer[]"), bind(groups.nameCounts, as: "integer[]"),
            bind(groups.objectIDs, as: "bigint[]"), bind(groups.propertyCounts, as: "integer[]"),
            bind(groups.propertyNames, as: "text[]"),
        ]
        let inserts = folded.parts.enumerated().map { "i\($0.offset) AS (\($0.element))" }
        return PostgresQuery(unsafeSQL: """
            \(inserts.isEmpty ? "" : "WITH " + inserts.joined(separator: ", ") + " ")\
            SELECT \(SQLIdentifier.quoted(StoreSchema.recordTransactionFunction))(\(arguments.joined(separator: ", ")))
            """, binds: bindings)
    }

    /// A save's changes as the recording function takes them: a group for
    /// each entity and kind, in the order first met, its objects' keys one
    /// group after another, and an update's changed names one object after
    /// another (``StoreSchema/recordTransactionFunction``).
    struct ChangeGroups {
        private struct Group {
            var entity: String
            var kind: StoredTransaction.Change.Kind
            var keys: [Int64] = []
            /// How many of `names` are each object's (0 but for updates).
            var nameCounts: [Int32] = []
            var names: [String] = []
        }

        private var groups: [Group] = []
        /// Each group's position in `groups`, by entity and kind.
        private var positions: [GroupKey: Int] = [:]

        private struct GroupKey: Hashable {
            var entity: ObjectIdentifier
            var kind: StoredTransaction.Change.Kind
        }

        mutating func add(_ id: ObjectID, _ kind: StoredTransaction.Change.Kind, _ changed: [String]) {
            let key = GroupKey(entity: ObjectIdentifier(id.entity), kind: kind)
            let position = positions[key] ?? groups.count
            if position == groups.count {
                positions[key] = position
                groups.append(Group(entity: id.entity.name, kind: kind))
            }
            groups[position].keys.append(Int64(bitPattern: id.storedPrimaryKey))
            groups[position].nameCounts.append(Int32(changed.count))
            groups[position].names += changed
        }

        var entities: [String] { groups.map(\.entity) }
        var kinds: [String] { groups.map(\.kind.rawValue) }
        /// How many of `objectIDs` (and of `propertyCounts`) are each group's.
        var objectCounts: [Int32] { groups.map { Int32($0.keys.count) } }
        /// How many of `propertyNames` are each group's.
        var nameCounts: [Int32] { groups.map { Int32($0.names.count) } }
        var objectIDs: [Int64] { groups.flatMap(\.keys) }
        var propertyCounts: [Int32] { groups.flatMap(\.nameCounts) }
        var propertyNames: [String] { groups.flatMap(\.names) }
    }

    /// The number of the newest transaction committed (0: none yet): one
    /// below the next number, which a save being numbered at its commit
    /// holds locked until the commit ends — so following from here misses
    /// no save.
    static func latestNumber(on session: PostgresSession) throws(StrataError) -> UInt64 {
        let q = SQLIdentifier.quoted
        let action = "reading the history"
        let rows = try session.query("""
            SELECT value::bigint - 1 FROM \(unescaped: q(StoreSchema.metaTable)) WHERE key = 'history.next'
            """, action)
        return UInt64(max(0, try SchemaInstallation.decode(rows.first, as: Int64.self, action)))
    }

    /// The transactions numbered after `number`, oldest first, at most
    /// `limit`, with their changes: one statement, so one state of the
    /// database without a transaction around it, and one round trip.
    static func transactions(after number: UInt64, limit: Int, on session: PostgresSession) throws(StrataError) -> [StoredTransaction] {
        let action = "reading the history"
        let rows = try session.query(statement(after: number, limit: limit), action)
        var transactions: [StoredTransaction] = []
        for row in rows {
            let (n, save, at, author, context, entity, kind, keys, names, counts) = try SchemaInstallation.decode(
                row, as: (Int64, Int64, Date, String?, String?, String?, String?, [Int64]?, [String]?, [Int32]?).self, action)
            if transactions.last?.number != UInt64(n) {
                transactions.append(StoredTransaction(
                    number: UInt64(n), saveIdentifier: UInt64(bitPattern: save), committedAt: at, author: author, contextName: context,
                    changes: []))
            }
            // A transaction without changes comes as one row without any.
            guard let entity, let kind, let keys else { continue }
            guard let kind = StoredTransaction.Change.Kind(rawValue: kind) else {
                throw StrataError(code: .corruptRecord, message: "\(action): a change of transaction \(n) is of kind \(kind)")
            }
            var group = keys.map { StoredTransaction.Change(entity: entity, key: UInt64(bitPattern: $0), kind: kind, properties: []) }
            if kind == .update {
                guard let names, let counts, counts.count == keys.count, counts.allSatisfy({ $0 >= 0 }),
                      counts.reduce(0, { $0 + Int($1) }) == names.count else {
                    throw StrataError(code: .corruptRecord, message: """
                        \(action): the updates of \(entity) in transaction \(n) do not name as many properties as they count
                        """)
                }
                var next = 0
                for (i, count) in counts.enumerated() {
                    group[i].properties = Array(names[next ..< next + Int(count)])
                    next += Int(count)
                }
            }
            transactions[transactions.count - 1].changes += group.sorted { $0.key < $1.key }
        }
        return transactions
    }

    /// The statement of ``transactions(after:limit:on:)``.
    ///
    /// Its numbers are asked for as a range closed at both ends (up to
    /// `Int64.max`): a planner without statistics of the table — a new
    /// store's, until autovacuum's first `ANALYZE` — guesses that such a
    /// range holds a two-hundredth of the rows and reads them through the
    /// numbers' index, where it guesses a third for `number > $1` alone
    /// and reads the whole history at every read.
    ///
    /// Their changes are asked for by the transactions' identifiers as an
    /// array too (`= ANY`), not by the join alone: for a join the planner
    /// reads every change (a hash of the whole table) unless it knows the
    /// transactions are few — always without statistics, and with them
    /// for a page of many.
    static func statement(after number: UInt64, limit: Int) -> PostgresQuery {
        let q = SQLIdentifier.quoted
        return """
            WITH h AS (
                SELECT number, save_id, committed_at, author, context_name FROM \(unescaped: q(StoreSchema.historyTable)) \
                WHERE number > \(Int64(bitPattern: number)) AND number <= \(Int64.max) ORDER BY number LIMIT \(Int64(limit))
            )
            SELECT h.number, h.save_id, h.committed_at, h.author, h.context_name, \
            c.entity, c.kind, c.object_ids, c.property_names, c.property_counts \
            FROM h LEFT JOIN \(unescaped: q(StoreSchema.historyChangesTable)) AS c \
            ON c.save_id = h.save_id AND c.save_id = ANY(ARRAY(SELECT save_id FROM h)) \
            ORDER BY h.number, c.kind, c.entity
            """
    }
}
