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
            CREATE TABLE \(q(Self.historyTable)) (number bigint NOT NULL PRIMARY KEY, committed_at timestamp with time zone NOT NULL, \
            author text, context_name text)
            """,
            """
            CREATE TABLE \(q(Self.historyChangesTable)) (number bigint NOT NULL REFERENCES \(q(Self.historyTable)) (number) \
            ON DELETE CASCADE, entity text COLLATE "C" NOT NULL, object_id bigint NOT NULL, kind text NOT NULL \
            CHECK (kind IN ('insert', 'update', 'delete')), properties text[])
            """,
            "CREATE INDEX \(q(Self.historyChangesTable + "_number_idx")) ON \(q(Self.historyChangesTable)) (number)",
        ]
        for table in tables {
            var parts = table.columns.map { column in
                q(column.name) + " " + column.type + (column.isText ? " COLLATE \"C\"" : "") + (column.isNullable ? "" : " NOT NULL")
            }
            parts.append("CONSTRAINT \(q(table.primaryKeyName)) PRIMARY KEY (\(table.primaryKey.map(q).joined(separator: ", ")))")
            statements.append("CREATE TABLE \(q(table.name)) (\(parts.joined(separator: ", ")))")
        }
        for table in tables {
            for column in table.columns {
                guard let destination = column.references else { continue }
                // A join table's rows go with either object; an entity's
                // to-one is nullified or cascaded by Strata's delete rules.
                let onDelete = table.entity == nil ? " ON DELETE CASCADE" : ""
                statements.append("""
                    ALTER TABLE \(q(table.name)) ADD CONSTRAINT \(q(table.foreignKeyName(column.name))) \
                    FOREIGN KEY (\(q(column.name))) REFERENCES \(q(destination)) (\(q(Self.idColumn)))\(onDelete) \
                    DEFERRABLE INITIALLY DEFERRED
                    """)
            }
        }
        for table in tables {
            for index in table.indexes {
                let columns = index.columns.map(q).joined(separator: ", ")
                // A fetch compares strings in NFC (`normalize(column, NFC)`,
                // as Swift compares them by canonical equivalence): an index
                // with text is made on that expression, which such a clause
                // can use.
                let expressions = index.columns.map { name in
                    table.columns.first { $0.name == name }?.isText == true ? "normalize(\(q(name)), NFC)" : q(name)
                }.joined(separator: ", ")
                if index.isUnique {
                    // A uniqueness constraint is checked at commit, as Strata
                    // checks a save whole: one save may swap two objects' values.
                    statements.append("ALTER TABLE \(q(table.name)) ADD CONSTRAINT \(q(index.name)) UNIQUE (\(columns)) DEFERRABLE INITIALLY DEFERRED")
                    if let name = index.normalizedName(in: table) {
                        statements.append("CREATE INDEX \(q(name)) ON \(q(table.name)) (\(expressions))")
                    }
                } else {
                    statements.append("CREATE INDEX \(q(index.name)) ON \(q(table.name)) (\(expressions))")
                }
            }
        }
        return statements
    }
}
