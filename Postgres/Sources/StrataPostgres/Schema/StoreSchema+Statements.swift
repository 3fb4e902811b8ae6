extension StoreSchema {
    /// The statements that make the schema in a database that has none of
    /// it, in order: the tables, then the foreign keys (two entities may
    /// point at each other), then the indexes. DDL takes no parameters:
    /// every name in it is quoted (``SQLIdentifier``) and no value appears.
    var creationStatements: [String] {
        let q = SQLIdentifier.quoted
        var statements = [
            "CREATE TABLE \(q(Self.metaTable)) (\(q("key")) text COLLATE \"C\" NOT NULL PRIMARY KEY, \(q("value")) text NOT NULL)",
            "CREATE TABLE \(q(Self.keysTable)) (\(q("entity")) text COLLATE \"C\" NOT NULL PRIMARY KEY, \(q("next")) bigint NOT NULL)",
            """
            CREATE TABLE \(q(Self.historyTable)) (number bigint NOT NULL PRIMARY KEY, save_id bigint NOT NULL, \
            committed_at timestamp with time zone NOT NULL, author text, context_name text)
            """,
            Self.saveIdentifierSequenceCreation,
            Self.historyChangesCreation,
            Self.historyChangesIndexCreation,
            Self.historyCursorsCreation,
        ]
        statements += Self.recordingCreation
        statements += tables.map(Self.creation(of:))
        statements += tables.flatMap(Self.foreignKeys(of:))
        statements += tables.flatMap { table in table.indexes.flatMap { Self.creation(of: $0, in: table) } }
        return statements
    }

    /// The history's cursors' table, made with the others or, in a store
    /// made before it existed, when the store is opened (`IF NOT EXISTS`).
    static let historyCursorsCreation = """
        CREATE TABLE IF NOT EXISTS \(SQLIdentifier.quoted(historyCursorsTable)) \
        (name text COLLATE "C" NOT NULL PRIMARY KEY, number bigint NOT NULL)
        """

    /// The history's changes: a row for each entity and kind of change in a
    /// save, found by the save's identifier (`save_id`, its transaction's
    /// in `strata_history`), with the objects' primary keys, and for
    /// updates the names of the properties each changed — every object's
    /// names one after another in `property_names`, and how many are each
    /// object's in `property_counts` (null for inserts and deletes). One
    /// row for a save's hundred inserts, not a hundred: the server writes a
    /// row and an index entry per row.
    static let historyChangesCreation = """
        CREATE TABLE \(SQLIdentifier.quoted(historyChangesTable)) (save_id bigint NOT NULL, \
        entity text COLLATE "C" NOT NULL, kind text NOT NULL CHECK (kind IN ('insert', 'update', 'delete')), \
        object_ids bigint[] NOT NULL, property_names text[], property_counts integer[])
        """
    static let historyChangesIndex = historyChangesTable + "_save_id_idx"
    static let historyChangesIndexCreation = """
        CREATE INDEX \(SQLIdentifier.quoted(historyChangesIndex)) ON \(SQLIdentifier.quoted(historyChangesTable)) (save_id)
        """
    static let saveIdentifierSequenceCreation = "CREATE SEQUENCE \(SQLIdentifier.quoted(saveIdentifierSequence))"

    /// How a save is recorded, in two steps, so that no save waits for
    /// another's client (``PostgresHistory``):
    ///
    /// 1. The save's last statement calls ``recordTransactionFunction``,
    ///    which takes the save's identifier from ``saveIdentifierSequence``,
    ///    writes the transaction's row — numbered for now by its
    ///    identifier, negated — and a row of changes for each group of
    ///    `p_entities` and `p_kinds`, and returns the identifier. A
    ///    group's objects are the next `p_objects[i]` of `p_object_ids`
    ///    (with as many of `p_property_counts`), its changed names the
    ///    next `p_names[i]` of `p_property_names`.
    /// 2. At the save's `COMMIT`, the deferred trigger
    ///    ``numberingTrigger`` on that row takes the next number from
    ///    `history.next` in `strata_meta`, gives it to the row with the
    ///    time of the commit, and notifies listeners on its argument's
    ///    channel with the number and the identifier. The `history.next`
    ///    row stays locked from there to the end of the commit, with no
    ///    round trip to a client in between: commits are numbered in the
    ///    order they become visible.
    ///
    ///    The trigger fires twice, so that the numbering comes after the
    ///    deferred checks of the save's rows (foreign keys, unique
    ///    values), which may wait for another transaction — and would
    ///    hold every other save back if they waited with the lock. A
    ///    commit fires the deferred events queued, in the order queued,
    ///    then those they queued, and so on; the recording's insert is
    ///    queued before the checks of the inserts its statement makes
    ///    (which run after the function, in the statement's `WITH`). So
    ///    the insert's firing only touches the row (`number = number`),
    ///    which queues the update's firing behind every check, and that
    ///    one numbers. The trigger's `WHEN` (a provisional, negative
    ///    number) keeps the numbering's own update from firing it again.
    ///
    /// Functions, so that the server plans these statements once per
    /// connection, not at every save (whatever the connection's
    /// `plan_cache_mode`: Strata's own is `force_custom_plan`). Made with
    /// the tables or, in a store made before they changed, when the store
    /// is opened.
    static let recordTransactionFunction = "strata_record_transaction"
    /// Its signature, as `to_regprocedure` finds it.
    static let recordTransactionSignature =
        "\(recordTransactionFunction)(text, text, text[], text[], integer[], integer[], bigint[], integer[], text[])"
    /// Its body, as `pg_proc.prosrc` keeps it, and its settings, as
    /// `pg_proc.proconfig` does: an open compares the function in the
    /// database with them (``SchemaInstallation``).
    static let recordTransactionBody = """

        DECLARE
            v_save bigint := nextval('\(SQLIdentifier.quoted(saveIdentifierSequence))');
            v_object integer := 1;
            v_name integer := 1;
        BEGIN
            INSERT INTO \(SQLIdentifier.quoted(historyTable)) (number, save_id, committed_at, author, context_name)
                VALUES (-v_save, v_save, now(), p_author, p_context_name);
            FOR i IN 1 .. coalesce(cardinality(p_entities), 0) LOOP
                INSERT INTO \(SQLIdentifier.quoted(historyChangesTable)) (save_id, entity, kind, object_ids, property_names, property_counts)
                    VALUES (v_save, p_entities[i], p_kinds[i], p_object_ids[v_object : v_object + p_objects[i] - 1],
                        CASE WHEN p_kinds[i] = 'update' THEN p_property_names[v_name : v_name + p_names[i] - 1] END,
                        CASE WHEN p_kinds[i] = 'update' THEN p_property_counts[v_object : v_object + p_objects[i] - 1] END);
                v_object := v_object + p_objects[i];
                v_name := v_name + p_names[i];
            END LOOP;
            RETURN v_save;
        END

        """
    static let recordTransactionSettings = ["plan_cache_mode=auto"]

    /// The trigger function that numbers a save's transaction at its commit.
    static let numberTransactionFunction = "strata_number_transaction"
    static let numberTransactionSignature = "\(numberTransactionFunction)()"
    static let numberTransactionBody = """

        DECLARE
            v_number bigint;
        BEGIN
            IF TG_OP = 'INSERT' THEN
                UPDATE \(SQLIdentifier.quoted(historyTable)) SET number = number WHERE number = NEW.number;
                RETURN NULL;
            END IF;
            -- Numbered already, at another update's firing: not again (a number would be lost).
            PERFORM FROM \(SQLIdentifier.quoted(historyTable)) WHERE number = NEW.number;
            IF NOT FOUND THEN
                RETURN NULL;
            END IF;
            UPDATE \(SQLIdentifier.quoted(metaTable)) SET value = (value::bigint + 1)::text WHERE key = 'history.next'
                RETURNING value::bigint - 1 INTO v_number;
            UPDATE \(SQLIdentifier.quoted(historyTable)) SET number = v_number, committed_at = clock_timestamp()
                WHERE number = NEW.number;
            PERFORM pg_notify(TG_ARGV[0], v_number::text || ' ' || NEW.save_id::text);
            RETURN NULL;
        END

        """
    /// The deferred constraint trigger that calls it, twice per
    /// transaction row inserted: at the insert and at the update the
    /// insert's call makes.
    static let numberingTrigger = "strata_number_at_commit"
    /// Its `pg_trigger.tgtype`: `AFTER INSERT OR UPDATE`, `FOR EACH ROW`.
    static let numberingTriggerType = 1 | 4 | 16
    /// Its condition and what follows, as `pg_get_triggerdef` spells them.
    static let numberingTriggerCondition = "WHEN ((new.number < 0)) EXECUTE"

    /// The statements that make the recording function, the numbering
    /// function and its trigger — or make them again as this version has
    /// them (`CREATE OR REPLACE`; the trigger dropped first if there).
    static let recordingCreation = [
        """
        CREATE OR REPLACE FUNCTION \(SQLIdentifier.quoted(recordTransactionFunction))(p_author text, p_context_name text, \
        p_entities text[], p_kinds text[], p_objects integer[], p_names integer[], \
        p_object_ids bigint[], p_property_counts integer[], p_property_names text[]) RETURNS bigint \
        LANGUAGE plpgsql SET plan_cache_mode = auto AS $strata$\(recordTransactionBody)$strata$
        """,
        """
        CREATE OR REPLACE FUNCTION \(SQLIdentifier.quoted(numberTransactionFunction))() RETURNS trigger \
        LANGUAGE plpgsql SET plan_cache_mode = auto AS $strata$\(numberTransactionBody)$strata$
        """,
        "DROP TRIGGER IF EXISTS \(SQLIdentifier.quoted(numberingTrigger)) ON \(SQLIdentifier.quoted(historyTable))",
        """
        CREATE CONSTRAINT TRIGGER \(SQLIdentifier.quoted(numberingTrigger)) AFTER INSERT OR UPDATE ON \(SQLIdentifier.quoted(historyTable)) \
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.number < 0) \
        EXECUTE FUNCTION \(SQLIdentifier.quoted(numberTransactionFunction))('\(changesChannel)')
        """,
    ]

    /// `CREATE TABLE` for `table`: its columns and its primary key, without
    /// foreign keys or indexes.
    static func creation(of table: Table) -> String {
        let q = SQLIdentifier.quoted
        var parts = table.columns.map(columnDefinition)
        parts.append("CONSTRAINT \(q(table.primaryKeyName)) PRIMARY KEY (\(table.primaryKey.map(q).joined(separator: ", ")))")
        return "CREATE TABLE \(q(table.name)) (\(parts.joined(separator: ", ")))"
    }

    /// A column as `CREATE TABLE` and `ADD COLUMN` spell it.
    static func columnDefinition(_ column: Column) -> String {
        SQLIdentifier.quoted(column.name) + " " + column.type + (column.isText ? " COLLATE \"C\"" : "") + (column.isNullable ? "" : " NOT NULL")
    }

    /// The foreign keys of `table`'s columns.
    static func foreignKeys(of table: Table) -> [String] {
        table.columns.compactMap { foreignKey(of: $0, in: table) }
    }

    /// The foreign key of `column` of `table`, if it refers to a table.
    static func foreignKey(of column: Column, in table: Table) -> String? {
        guard let destination = column.references else { return nil }
        let q = SQLIdentifier.quoted
        // A join table's rows go with either object; an entity's to-one is
        // nullified or cascaded by Strata's delete rules.
        let onDelete = table.entity == nil ? " ON DELETE CASCADE" : ""
        return """
            ALTER TABLE \(q(table.name)) ADD CONSTRAINT \(q(table.foreignKeyName(column.name))) \
            FOREIGN KEY (\(q(column.name))) REFERENCES \(q(destination)) (\(q(Self.idColumn)))\(onDelete) \
            DEFERRABLE INITIALLY DEFERRED
            """
    }

    /// The statements that make `index` of `table`: a uniqueness
    /// constraint and, with text, the index fetches use; or an index.
    static func creation(of index: Index, in table: Table) -> [String] {
        let q = SQLIdentifier.quoted
        let columns = index.columns.map(q).joined(separator: ", ")
        // A fetch compares strings in NFC (`normalize(column, NFC)`, as
        // Swift compares them by canonical equivalence): an index with text
        // is made on that expression, which such a clause can use.
        let expressions = index.columns.map { name in
            table.columns.first { $0.name == name }?.isText == true ? "normalize(\(q(name)), NFC)" : q(name)
        }.joined(separator: ", ")
        guard index.isUnique else { return ["CREATE INDEX \(q(index.name)) ON \(q(table.name)) (\(expressions))"] }
        // A uniqueness constraint is checked at commit, as Strata checks a
        // save whole: one save may swap two objects' values.
        var statements = ["ALTER TABLE \(q(table.name)) ADD CONSTRAINT \(q(index.name)) UNIQUE (\(columns)) DEFERRABLE INITIALLY DEFERRED"]
        if let name = index.normalizedName(in: table) {
            statements.append("CREATE INDEX \(q(name)) ON \(q(table.name)) (\(expressions))")
        }
        return statements
    }
}
