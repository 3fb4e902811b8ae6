@_spi(StoreImplementation) import Strata

/// Brings a store of an earlier format of Strata's own tables to the one
/// this version writes (``SchemaInstallation/format``), in the opening's
/// transaction and under its advisory lock: a failure leaves the store as
/// it was, and processes opening it at once upgrade it once.
///
/// A process of format 1 or 2 still running against the store fails
/// loudly afterwards — its save calls a function that is gone, its
/// follower reads columns that are gone — and nothing it saved is lost;
/// one of format 3 goes on saving (its calls are this version's). An
/// earlier version refuses to open the upgraded store, so it cannot put
/// its own functions back. Only the tables' owner may upgrade
/// (``SchemaInstallation`` tells another role so).
enum FormatUpgrade {
    /// The first format: a row of `strata_history_changes` per object
    /// changed (`object_id`, and an update's names in `properties`).
    static let formatOne = "1"
    /// The second: a row of changes for each entity and kind of change in
    /// a transaction, found by the transaction's number, which a save took
    /// in its last statement and held locked until its commit.
    static let formatTwo = "2"
    /// The third: a save numbered at its commit, by a trigger that fired
    /// before the checks of the save's rows (a check that waited for
    /// another transaction held every other save back).
    static let formatThree = "3"

    static var action: String { "upgrading the store's history to format \(SchemaInstallation.format)" }
    /// The changes' index before format 3, on their transactions' number.
    private static let numberIndex = StoreSchema.historyChangesTable + "_number_idx"

    /// Format 1 to this one: the history's changes as a row for each
    /// entity and kind of a transaction (``StoreSchema/historyChangesCreation``),
    /// and what a format-1 store may lack (the cursors' table, made after
    /// the first format-1 stores); then as ``fromFormatTwo(on:)``. The
    /// changes table of format 1 goes with its foreign key to the
    /// transactions, which some format-1 stores have.
    static func fromFormatOne(on session: PostgresSession) throws(StrataError) {
        let q = SQLIdentifier.quoted
        let changes = q(StoreSchema.historyChangesTable)
        let earlier = q(StoreSchema.historyChangesTable + "_format1")
        try session.execute(StoreSchema.historyCursorsCreation, action)
        try session.execute("ALTER TABLE \(changes) RENAME TO \(earlier)", action)
        try session.execute("DROP INDEX IF EXISTS \(q(numberIndex))", action)
        try session.execute(StoreSchema.historyChangesCreation, action)
        // Each group's objects in key order, and an update's names in the
        // same order, each object's as it recorded them: the names of every
        // update group in one pass over the table, joined to the groups.
        try session.execute("""
            WITH names AS (SELECT o.number, o.entity, array_agg(u.p ORDER BY o.object_id, u.i) AS names \
            FROM \(earlier) AS o, unnest(o.properties) WITH ORDINALITY AS u(p, i) WHERE o.kind = 'update' GROUP BY o.number, o.entity) \
            INSERT INTO \(changes) (save_id, entity, kind, object_ids, property_names, property_counts) \
            SELECT g.number, g.entity, g.kind, array_agg(g.object_id ORDER BY g.object_id), \
            CASE WHEN g.kind = 'update' THEN coalesce(n.names, '{}') END, \
            CASE WHEN g.kind = 'update' THEN array_agg(coalesce(cardinality(g.properties), 0) ORDER BY g.object_id) END \
            FROM \(earlier) AS g LEFT JOIN names AS n ON g.kind = 'update' AND n.number = g.number AND n.entity = g.entity \
            GROUP BY g.number, g.entity, g.kind, n.names
            """, action)
        try session.execute("DROP TABLE \(earlier)", action)
        try session.execute(StoreSchema.historyChangesIndexCreation, action)
        try session.execute("""
            DROP FUNCTION IF EXISTS \(q(StoreSchema.recordTransactionFunction))(text, text, text[], bigint[], text[], text[], text)
            """, action)
        try numberAtCommit(on: session)
    }

    /// Format 2 to this one: saves numbered at their commit. The changes
    /// are found by their save's identifier, which for every transaction
    /// recorded before is its number; the recording function of format 2
    /// is dropped.
    static func fromFormatTwo(on session: PostgresSession) throws(StrataError) {
        let q = SQLIdentifier.quoted
        try session.execute("ALTER TABLE \(q(StoreSchema.historyChangesTable)) RENAME COLUMN number TO save_id", action)
        try session.execute("ALTER INDEX \(q(numberIndex)) RENAME TO \(q(StoreSchema.historyChangesIndex))", action)
        try session.execute("""
            DROP FUNCTION IF EXISTS \(q(StoreSchema.recordTransactionFunction))\
            (text, text, text[], text[], integer[], integer[], bigint[], integer[], text[], text)
            """, action)
        try numberAtCommit(on: session)
    }

    /// Format 3 to this one: the numbering trigger and its function as
    /// this version makes them.
    static func fromFormatThree(on session: PostgresSession) throws(StrataError) {
        try recordingAndFormat(on: session)
    }

    /// What format 3 added to the transactions' rows of either earlier one
    /// (the changes already found by `save_id`, each transaction's save
    /// identifier its number): the `save_id` column, the sequence of save
    /// identifiers, going on past every number taken; then the functions
    /// and the trigger, and the format.
    private static func numberAtCommit(on session: PostgresSession) throws(StrataError) {
        let q = SQLIdentifier.quoted
        let history = q(StoreSchema.historyTable)
        try session.execute("ALTER TABLE \(history) ADD COLUMN save_id bigint", action)
        try session.execute("UPDATE \(history) SET save_id = number", action)
        try session.execute("ALTER TABLE \(history) ALTER COLUMN save_id SET NOT NULL", action)
        try session.execute(StoreSchema.saveIdentifierSequenceCreation, action)
        // Every number taken is below `history.next`, pruned or not.
        try session.query("""
            SELECT setval(\(q(StoreSchema.saveIdentifierSequence))::regclass, greatest(value::bigint - 1, 1), value::bigint > 1) \
            FROM \(unescaped: q(StoreSchema.metaTable)) WHERE key = 'history.next'
            """, action)
        try recordingAndFormat(on: session)
    }

    /// The functions and the trigger as this version makes them
    /// (``StoreSchema/recordingCreation``), and this version's format.
    private static func recordingAndFormat(on session: PostgresSession) throws(StrataError) {
        for statement in StoreSchema.recordingCreation { try session.execute(statement, action) }
        try session.query("""
            UPDATE \(unescaped: SQLIdentifier.quoted(StoreSchema.metaTable)) SET value = \(SchemaInstallation.format) WHERE key = 'format'
            """, action)
    }
}
