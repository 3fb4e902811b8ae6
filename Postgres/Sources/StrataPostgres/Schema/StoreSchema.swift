@_spi(StoreImplementation) import Strata

/// The tables a model becomes in PostgreSQL, as plain SQL that another
/// service can read and write:
///
/// - **a table per entity**, named as the entity, with `strata_id` (the
///   object's primary key within its entity, `bigint PRIMARY KEY`),
///   `strata_version` (the version a save checks: `UPDATE … WHERE
///   strata_version = $n`), and a typed column per attribute, `NOT NULL`
///   unless the attribute is optional;
/// - **a to-one relationship** is a `bigint` column named as the
///   relationship, a foreign key to its destination's `strata_id`, indexed;
///   a to-many whose inverse is to-one has no column of its own (its
///   destinations are the rows whose column names the object), and a
///   one-to-one keeps the column on one side only (the first of the two by
///   entity and relationship name);
/// - **a to-many relationship whose inverse is to-many, or that has none**,
///   is a join table `Entity_relationship (source_id, target_id)`: each row
///   says the source's relationship holds the target;
/// - **the model's indexes** are indexes, its uniqueness constraints
///   PostgreSQL's own `UNIQUE` constraints, checked at commit (so a row
///   another service writes is held to them too, one save may swap two
///   objects' values, and a null value never collides, as in Strata);
/// - **`strata_meta`**, **`strata_keys`**, **`strata_history`**,
///   **`strata_history_changes`** and **`strata_history_cursors`**,
///   Strata's own: the store's identity and model; the next primary key of
///   each entity; each save's transaction and the objects it changed (see
///   ``PostgresHistory``); the history's named cursors.
///
/// Strata applies delete rules itself, in the object graph; the foreign keys
/// are checked at commit (`DEFERRABLE INITIALLY DEFERRED`), so one save can
/// write its rows in any order. Strings sort as Swift sorts them (`COLLATE
/// "C"`: by Unicode scalar, for text in NFC), so an index gives the order a
/// fetch's sort asks for. A date is a `timestamp with time zone`, which
/// PostgreSQL keeps to the microsecond.
struct StoreSchema: Equatable {
    /// A column: its name, its type as PostgreSQL's catalog spells it
    /// (`information_schema.columns.data_type`), whether it may be null, and
    /// the destination table of a foreign key.
    struct Column: Equatable {
        var name: String
        var type: String
        var isNullable: Bool
        var references: String? = nil

        /// Whether it holds text (and is collated as Swift sorts strings).
        var isText: Bool { type == "text" }
    }

    /// An index of a table (a uniqueness constraint's when `isUnique`).
    struct Index: Equatable {
        var name: String
        var columns: [String]
        var isUnique: Bool

        /// For a uniqueness constraint with text: the name of the index of
        /// its columns in NFC that fetches use (the constraint's own index
        /// compares bytes).
        func normalizedName(in table: Table) -> String? {
            guard isUnique, columns.contains(where: { name in table.columns.first { $0.name == name }?.isText == true }) else { return nil }
            return SQLIdentifier.made([name, "nfc"])
        }
    }

    /// A table: its columns, the columns of its primary key, its indexes,
    /// and the entity it holds (nil for a join table).
    struct Table: Equatable {
        var name: String
        var columns: [Column]
        var primaryKey: [String]
        var indexes: [Index]
        var entity: String?

        /// The name of its primary key's constraint (and index).
        var primaryKeyName: String { SQLIdentifier.made([name, "pkey"]) }
        /// The name of the foreign key on `column`.
        func foreignKeyName(_ column: String) -> String { SQLIdentifier.made([name, column, "fkey"]) }
    }

    /// Strata's own table of the store's identity and model.
    static let metaTable = "strata_meta"
    /// Strata's own table of the next primary key of each entity.
    static let keysTable = "strata_keys"
    /// Strata's own tables of the saves' history: one row per save
    /// (``historyCreation``), one per entity and kind of change in it
    /// (``historyChangesCreation``).
    static let historyTable = "strata_history"
    static let historyChangesTable = "strata_history_changes"
    /// Strata's own sequence of save identifiers (``historyCreation``).
    static let saveIdentifierSequence = "strata_history_save_id"
    /// Strata's own table of the history's named cursors (``PostgresStoreHistory``).
    static let historyCursorsTable = "strata_history_cursors"
    /// The channel a save's `NOTIFY` goes out on, carrying its history
    /// number and its save identifier.
    static let changesChannel = "strata_changes"
    /// Strata's own tables and sequence, which no entity may be named as.
    static let ownTables = [metaTable, keysTable, historyTable, historyChangesTable, saveIdentifierSequence, historyCursorsTable]
    /// The column holding an object's primary key.
    static let idColumn = "strata_id"
    /// The column holding an object's version.
    static let versionColumn = "strata_version"

    var tables: [Table]
    /// Where each entity's properties are kept, by entity name.
    var layouts: [String: EntityLayout]

    /// Where one entity's objects and their properties are kept.
    struct EntityLayout: Equatable {
        /// The entity's table.
        var table: String
        /// Per property, in the entity's order.
        var properties: [PropertyLayout]
    }

    /// Where one property's values are kept.
    enum PropertyLayout: Equatable {
        /// A column of the entity's table: an attribute, or a to-one that keeps its column.
        case column(String)
        /// A join table in which the object is the source.
        case joinTable(String)
        /// The rows of `table` whose column `column` names the object (the
        /// inverse's column): a to-many's targets, or a one-to-one's second side.
        case inverseColumn(table: String, column: String)
        /// A join table in which the object is the target (the inverse's).
        case inverseJoinTable(String)
    }

    /// The schema of `model`; throws ``Strata/StrataError/Code/invalidModel``
    /// for a name PostgreSQL cannot keep (see ``SQLIdentifier``) or one that
    /// two tables, or two columns of one table, would share.
    init(_ model: ManagedObjectModel) throws(StrataError) {
        var tables: [Table] = []
        var joinTables: [Table] = []
        var layouts: [String: EntityLayout] = [:]
        for entity in model.entities {
            var layout = EntityLayout(table: entity.name, properties: [])
            try SQLIdentifier.check(entity.name, "entity")
            var table = Table(
                name: entity.name,
                columns: [
                    Column(name: Self.idColumn, type: "bigint", isNullable: false),
                    Column(name: Self.versionColumn, type: "bigint", isNullable: false),
                ],
                primaryKey: [Self.idColumn], indexes: [], entity: entity.name)
            for property in entity.properties {
                switch property {
                case .attribute(let attribute):
                    try SQLIdentifier.check(attribute.name, "\(entity.name)'s attribute")
                    table.columns.append(Column(name: attribute.name, type: Self.columnType(of: attribute.type),
                                                isNullable: attribute.isOptional))
                    layout.properties.append(.column(attribute.name))
                case .relationship(let relationship):
                    try SQLIdentifier.check(relationship.name, "\(entity.name)'s relationship")
                    guard let destination = model.entity(named: relationship.destinationEntityName) else {
                        throw StrataError(code: .invalidModel, message: """
                            \(entity.name).\(relationship.name) leads to \(relationship.destinationEntityName), \
                            which the model does not have
                            """)
                    }
                    let inverse = relationship.inverseName.flatMap { name in
                        destination.relationships.first { $0.name == name }
                    }
                    switch Self.storage(of: relationship, in: entity, inverse: inverse, destination: destination) {
                    case .column:
                        table.columns.append(Column(name: relationship.name, type: "bigint", isNullable: true,
                                                    references: destination.name))
                        table.indexes.append(Index(name: SQLIdentifier.made([entity.name, relationship.name, "idx"]),
                                                   columns: [relationship.name], isUnique: false))
                        layout.properties.append(.column(relationship.name))
                    case .joinTable:
                        let name = Self.joinTableName(entity.name, relationship.name)
                        try SQLIdentifier.check(name, "the join table of \(entity.name).\(relationship.name)")
                        joinTables.append(Table(
                            name: name,
                            columns: [
                                Column(name: "source_id", type: "bigint", isNullable: false, references: entity.name),
                                Column(name: "target_id", type: "bigint", isNullable: false, references: destination.name),
                            ],
                            primaryKey: ["source_id", "target_id"],
                            indexes: [Index(name: SQLIdentifier.made([name, "target", "idx"]), columns: ["target_id"], isUnique: false)],
                            entity: nil))
                        layout.properties.append(.joinTable(name))
                    case .derived:
                        // The inverse keeps it: its column, or its join table.
                        let inverse = inverse!
                        layout.properties.append(inverse.isToMany
                            ? .inverseJoinTable(Self.joinTableName(destination.name, inverse.name))
                            : .inverseColumn(table: destination.name, column: inverse.name))
                    }
                }
            }
            for index in entity.indexes {
                table.indexes.append(Index(
                    name: SQLIdentifier.made([entity.name] + index.attributeNames + [index.isUnique ? "key" : "idx"]),
                    columns: index.attributeNames, isUnique: index.isUnique))
            }
            try Self.checkDistinct(table.columns.map(\.name), "columns of table \(table.name)") { name in
                name == Self.idColumn || name == Self.versionColumn
                    ? "\(entity.name) has a property \(name), the name of Strata's own column: rename the property"
                    : "\(entity.name) has two properties named \(name)"
            }
            tables.append(table)
            layouts[entity.name] = layout
        }
        tables += joinTables
        // Tables, indexes and the constraints' indexes share one namespace
        // in PostgreSQL (a schema's relations).
        let relations = Self.ownTables + tables.flatMap { table in
            [table.name, table.primaryKeyName] + table.indexes.map(\.name) + table.indexes.compactMap { $0.normalizedName(in: table) }
        }
        try Self.checkDistinct(relations, "tables and indexes") { name in
            Self.ownTables.contains(name)
                ? "an entity is named \(name), the name of Strata's own table: rename the entity"
                : "two tables or indexes would be named \(name) (an entity, a join table, an index): rename an entity or a property"
        }
        self.tables = tables
        self.layouts = layouts
    }

    /// The join table of `entity`'s to-many `relationship` (the side of the pair that keeps it).
    static func joinTableName(_ entity: String, _ relationship: String) -> String { entity + "_" + relationship }

    /// Where a relationship's targets are kept.
    enum RelationshipStorage {
        /// A foreign-key column of the entity's table.
        case column
        /// A join table of its own.
        case joinTable
        /// Nowhere of its own: read from the inverse's column or join table.
        case derived
    }

    /// Where `relationship` (of `entity`, whose `inverse` of `destination`
    /// it has, if any) is kept. One side of a pair keeps it; the other reads
    /// the same rows.
    static func storage(
        of relationship: RelationshipDescription, in entity: EntityDescription,
        inverse: RelationshipDescription?, destination: EntityDescription
    ) -> RelationshipStorage {
        guard let inverse else { return relationship.isToMany ? .joinTable : .column }
        // The pair's first side by (entity, relationship) name keeps a pair
        // of like kinds; a to-one always keeps a one-to-many.
        let first = (entity.name, relationship.name) <= (destination.name, inverse.name)
        switch (relationship.isToMany, inverse.isToMany) {
        case (false, true): return .column
        case (true, false): return .derived
        case (false, false): return first ? .column : .derived
        case (true, true): return first ? .joinTable : .derived
        }
    }

    /// A column's type for an attribute's.
    static func columnType(of type: AttributeType) -> String {
        switch type {
        case .string: "text"
        case .integer16: "smallint"
        case .integer32: "integer"
        case .integer64: "bigint"
        case .double: "double precision"
        case .bool: "boolean"
        case .date: "timestamp with time zone"
        case .binaryData: "bytea"
        case .uuid: "uuid"
        }
    }

    /// Throws the error `explain` writes for the first name `names` holds twice.
    private static func checkDistinct(
        _ names: [String], _ what: String, _ explain: (String) -> String
    ) throws(StrataError) {
        var seen = Set<String>()
        for name in names where !seen.insert(name).inserted {
            throw StrataError(code: .invalidModel, message: explain(name) + " (PostgreSQL's \(what) must differ)")
        }
    }
}
