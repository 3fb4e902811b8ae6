@_spi(StoreImplementation) import Strata

/// Brings a store of an earlier format of Strata's own tables to the one
/// this version writes (``SchemaInstallation/format``), in the opening's
/// transaction and under its advisory lock: a failure leaves the store as
/// it was, and processes opening it at once upgrade it once.
///
/// A process of the earlier version still running against the store fails
/// loudly afterwards — its save calls a function that is gone, its
/// follower reads columns that are gone — and nothing it saved is lost;
/// the earlier version refuses to open the upgraded store.
enum FormatUpgrade {
    /// The first format: a row of `strata_history_changes` per object
    /// changed (`object_id`, and an update's names in `properties`).
    static let formatOne = "1"

    /// Format 1 to 2: the history's changes as a row for each entity and
    /// kind of a transaction (``StoreSchema/historyChangesCreation``), the
    /// recording function that writes them, and what a format-1 store may
    /// lack (the cursors' table, made after the first format-1 stores).
    /// The changes table of format 1 goes with its foreign key to the
    /// transactions, which some format-1 stores have.
    static func fromFormatOne(on session: PostgresSession) throws(StrataError) {
        let action = "upgrading the store's history to format \(SchemaInstallation.format)"
        let q = SQLIdentifier.quoted
        let changes = q(StoreSchema.historyChangesTable)
        let earlier = q(StoreSchema.historyChangesTable + "_format1")
        try session.execute(StoreSchema.historyCursorsCreation, action)
        try session.execute("ALTER TABLE \(changes) RENAME TO \(earlier)", action)
        try session.execute("DROP INDEX IF EXISTS \(q(StoreSchema.historyChangesTable + "_number_idx"))", action)
        try session.execute(StoreSchema.historyChangesCreation, action)
        // Each group's objects in key order, and an update's names in the
        // same order, each object's as it recorded them: the names of every
        // update group in one pass over the table, joined to the groups.
        try session.execute("""
            WITH names AS (SELECT o.number, o.entity, array_agg(u.p ORDER BY o.object_id, u.i) AS names \
            FROM \(earlier) AS o, unnest(o.properties) WITH ORDINALITY AS u(p, i) WHERE o.kind = 'update' GROUP BY o.number, o.entity) \
            INSERT INTO \(changes) (number, entity, kind, object_ids, property_names, property_counts) \
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
        try session.execute(StoreSchema.recordTransactionCreation, action)
        try session.query("UPDATE \(unescaped: q(StoreSchema.metaTable)) SET value = \(SchemaInstallation.format) WHERE key = 'format'", action)
    }
}
