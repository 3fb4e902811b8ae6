import Foundation
@_spi(StoreImplementation) import Strata
import PostgresNIO

/// Moves a store's tables from the model they were made for to the model
/// the store is opened with, by inference (``Strata/InferredMigration``:
/// Core Data's rules for a lightweight migration, as the log store
/// migrates), as DDL in the opening's transaction — so a migration that
/// fails at any step leaves the database as it was.
///
/// What it does, in order:
/// 1. drops what the model no longer has: join tables, columns (with their
///    indexes and foreign keys), indexes and uniqueness constraints, then
///    the tables of removed entities;
/// 2. renames tables (entities, join tables), then columns, then the
///    constraints and indexes Strata named after them — each through a
///    temporary name, so that two names may swap;
/// 3. widens integer columns; makes the tables, columns, foreign keys,
///    indexes and uniqueness constraints the model adds (a new column with
///    its default, added as the column's default and then dropped, which
///    writes no row);
///    fills the nulls of an attribute that became required with its default,
///    or checks that there are none;
/// 4. carries each renamed entity's next primary key over, renames entities
///    and properties in the history, and records the new model;
/// 5. checks the tables against the new model as an open does, so a
///    migration that left them otherwise does not commit.
///
/// A many-to-many relationship whose join table now belongs to its inverse
/// (the pair's order of names changed with a rename) keeps its rows: the
/// table is renamed and its two columns swapped. What it refuses
/// (``Strata/StrataError/Code/modelMismatch``, naming the property), though
/// inference allows it, because rows would have to move between tables: a
/// to-one relationship that became to-many, and a relationship whose
/// targets now lie on the other side of the pair (a one-to-one whose column
/// moves with a rename, an inverse added or taken away that changes where
/// the targets are kept). Custom migration stages are the log store's only.
///
/// Other processes must not have the store open with the earlier model
/// while it migrates: their statements wait for the migration's locks, and
/// then name columns that are gone.
enum SchemaMigration {
    private static let action = "migrating the store's tables to the model"

    /// Migrates the tables `session` holds (in a transaction: the opening's)
    /// from `storedModel`'s to `schema`, the schema of `model`. `place`
    /// names the database in errors.
    static func migrate(
        from storedModel: ManagedObjectModel, to model: ManagedObjectModel, schema: StoreSchema, on session: PostgresSession, place: String
    ) throws(StrataError) {
        let migration = model.inferredMigration(from: storedModel)
        guard migration.unresolved.isEmpty else {
            var error = StrataError(code: .modelMismatch, message: """
                \(place) holds a store of another model (\(storedModel.versionHash)), which cannot be migrated to this one \
                (\(model.versionHash)) by inference
                """)
            error.modelDifferences = migration.differences
            throw error
        }
        let plan = try Plan(migration, from: try StoreSchema(storedModel), to: schema, place: place)
        do {
            try plan.run(on: session)
        } catch where error.code == .constraintConflict {
            var refusal = StrataError(code: .modelMismatch, message: """
                \(place): stored objects break a uniqueness constraint the model adds (\(error.message)): make their values \
                unique with the earlier model, then open the store with this one
                """)
            refusal.cause = error
            throw refusal
        }
        let differences = try SchemaInstallation.differences(from: schema, on: session)
        guard differences.isEmpty else {
            throw StrataError(code: .storage, message: """
                \(place): the migrated tables still differ from what the model makes (\(differences.prefix(3).joined(separator: "; "))); \
                nothing was changed
                """)
        }
    }

    /// Where the old tables' contents go, worked out before any statement runs.
    private struct Plan {
        let migration: InferredMigration
        let old: StoreSchema
        let new: StoreSchema
        let place: String

        /// Per new entity table's name: the old table it is.
        var entityTables: [String: StoreSchema.Table] = [:]
        /// Per new join table's name: the old join table holding its rows,
        /// and whether its source and target columns swap.
        var joinTables: [String: (old: StoreSchema.Table, swapped: Bool)] = [:]
        /// Per new entity table's name: its columns that are an old one, new name → old.
        var keptColumns: [String: [String: String]] = [:]
        /// Per new entity table's name: attribute columns whose integer type widens.
        var widened: [String: [StoreSchema.Column]] = [:]
        /// Per new entity table's name, the attributes whose optionality changed, and what nulls get.
        var nullability: [String: [(column: StoreSchema.Column, fill: PropertyValue?, property: PropertyDescription, entity: EntityDescription)]] = [:]
        /// New attribute columns of kept tables and the value stored objects get.
        var addedValues: [String: [(column: String, value: PropertyValue, property: PropertyDescription, entity: EntityDescription)]] = [:]
        /// Required to-one relationships that every stored object must hold: which, and the check's SQL.
        var mustHold: [(what: String, sql: String)] = []

        init(_ migration: InferredMigration, from old: StoreSchema, to new: StoreSchema, place: String) throws(StrataError) {
            self.migration = migration
            self.old = old
            self.new = new
            self.place = place
            // Old relationships whose rows something must carry: (entity, relationship) in old names.
            var carried = Set<[String]>()
            for entity in migration.model.entities {
                guard let stored = migration.storedEntity(for: entity) else { continue }
                let table = new.table(entity.name)
                entityTables[entity.name] = old.table(stored.name)
                var kept: [String: String] = [:]
                for (j, property) in entity.properties.enumerated() {
                    let storedProperty = migration.storedProperty(j, of: entity)
                    switch (property, storedProperty) {
                    case (.attribute(let attribute), .attribute(let was)?):
                        kept[attribute.name] = was.name
                        let column = table.column(attribute.name)
                        if was.type != attribute.type { widened[entity.name, default: []].append(column) }
                        if was.isOptional != attribute.isOptional || migration.valueForStoredNulls(j, of: entity) != nil {
                            nullability[entity.name, default: []].append(
                                (column, migration.valueForStoredNulls(j, of: entity), property, entity))
                        }
                    case (.attribute(let attribute), nil):
                        let value = migration.initialValue(j, of: entity)
                        if value != .null { addedValues[entity.name, default: []].append((attribute.name, value, property, entity)) }
                    case (.relationship(let relationship), _):
                        try planRelationship(
                            relationship, j, of: entity, stored: stored, storedProperty: storedProperty, kept: &kept, carried: &carried)
                    default:
                        break  // An attribute that became a relationship is not inferable.
                    }
                }
                keptColumns[entity.name] = kept
            }
            // Every stored relationship that lives on must have its rows carried.
            for entity in migration.model.entities {
                guard let stored = migration.storedEntity(for: entity) else { continue }
                for j in entity.properties.indices {
                    guard case .relationship(let was)? = migration.storedProperty(j, of: entity) else { continue }
                    let storage = Self.storage(was, of: stored, in: migration.storedModel)
                    guard storage != .derived, !carried.contains([stored.name, was.name]) else { continue }
                    throw Self.movesSides(entity, entity.properties[j].name, place)
                }
            }
        }

        private mutating func planRelationship(
            _ relationship: RelationshipDescription, _ j: Int, of entity: EntityDescription, stored: EntityDescription,
            storedProperty: PropertyDescription?, kept: inout [String: String], carried: inout Set<[String]>
        ) throws(StrataError) {
            if migration.becomesSet(j, of: entity) {
                throw StrataError(code: .modelMismatch, message: """
                    \(place): \(entity.name).\(relationship.name) became to-many, which the PostgreSQL store does not migrate yet \
                    (its targets would move from a column to a join table): add a new to-many relationship and copy the targets \
                    in code, then remove the old one
                    """)
            }
            let model = migration.model
            let storedModel = migration.storedModel
            var was: RelationshipDescription?
            if case .relationship(let r)? = storedProperty { was = r }
            let storage = Self.storage(relationship, of: entity, in: model)
            switch storage {
            case .column:
                guard let was else { return }
                guard Self.storage(was, of: stored, in: storedModel) == .column else { throw Self.movesSides(entity, relationship.name, place) }
                kept[relationship.name] = was.name
                carried.insert([stored.name, was.name])
                if migration.mustHoldValue(j, of: entity) {
                    let q = SQLIdentifier.quoted
                    mustHold.append(("\(entity.name).\(relationship.name)",
                                     "SELECT EXISTS (SELECT 1 FROM \(q(entity.name)) WHERE \(q(relationship.name)) IS NULL)"))
                }
            case .joinTable:
                let name = StoreSchema.joinTableName(entity.name, relationship.name)
                var source: (old: StoreSchema.Table, swapped: Bool)?
                var carriedKey: [String]?
                if let was, Self.storage(was, of: stored, in: storedModel) == .joinTable {
                    source = (old.table(StoreSchema.joinTableName(stored.name, was.name)), false)
                    carriedKey = [stored.name, was.name]
                }
                // The pair's join table on the inverse's side before: the same rows, seen from the other end.
                let destination = model.entity(named: relationship.destinationEntityName)!
                if let inverseName = relationship.inverseName, let k = destination.properties.firstIndex(where: { $0.name == inverseName }),
                   let storedDestination = migration.storedEntity(for: destination),
                   case .relationship(let storedInverse)? = migration.storedProperty(k, of: destination),
                   Self.storage(storedInverse, of: storedDestination, in: storedModel) == .joinTable {
                    guard source == nil else {
                        throw StrataError(code: .modelMismatch, message: """
                            \(place): \(entity.name).\(relationship.name) and \(destination.name).\(inverseName) became inverses, \
                            and each kept targets of its own, which the PostgreSQL store does not merge: add the pair new and \
                            copy the targets in code
                            """)
                    }
                    source = (old.table(StoreSchema.joinTableName(storedDestination.name, storedInverse.name)), true)
                    carriedKey = [storedDestination.name, storedInverse.name]
                }
                if let source, let carriedKey {
                    joinTables[name] = source
                    carried.insert(carriedKey)
                } else if let was, Self.storage(was, of: stored, in: storedModel) != .derived {
                    throw Self.movesSides(entity, relationship.name, place)
                }
            case .derived:
                // Its inverse keeps the targets, and carries the stored rows (checked after).
                if was != nil, migration.mustHoldValue(j, of: entity), !relationship.isToMany, let inverse = relationship.inverseName {
                    let q = SQLIdentifier.quoted
                    let destination = model.entity(named: relationship.destinationEntityName)!
                    mustHold.append(("\(entity.name).\(relationship.name)", """
                        SELECT EXISTS (SELECT 1 FROM \(q(entity.name)) e WHERE NOT EXISTS \
                        (SELECT 1 FROM \(q(destination.name)) d WHERE d.\(q(inverse)) = e.\(q(StoreSchema.idColumn))))
                        """))
                }
            }
        }

        /// Where `relationship` of `entity` keeps its targets in `model`'s tables.
        static func storage(
            _ relationship: RelationshipDescription, of entity: EntityDescription, in model: ManagedObjectModel
        ) -> StoreSchema.RelationshipStorage {
            let destination = model.entity(named: relationship.destinationEntityName)!
            let inverse = relationship.inverseName.flatMap { name in destination.relationships.first { $0.name == name } }
            return StoreSchema.storage(of: relationship, in: entity, inverse: inverse, destination: destination)
        }

        static func movesSides(_ entity: EntityDescription, _ relationship: String, _ place: String) -> StrataError {
            StrataError(code: .modelMismatch, message: """
                \(place): the targets of \(entity.name).\(relationship) would move to the other side of the relationship (a \
                one-to-one renamed, or an inverse added or taken away), which the PostgreSQL store does not migrate yet: \
                add a new relationship and copy the targets in code, then remove the old one
                """)
        }

        // MARK: Running it

        func run(on session: PostgresSession) throws(StrataError) {
            let q = SQLIdentifier.quoted
            func execute(_ sql: String) throws(StrataError) { try session.execute(sql, action) }
            let keptOldTables = Set(entityTables.values.map(\.name))
            let removedTables = old.tables.filter { $0.entity != nil && !keptOldTables.contains($0.name) }
            let carriedJoins = Set(joinTables.values.map(\.old.name))

            // 1. What goes away, by the old names.
            for table in old.tables where table.entity == nil && !carriedJoins.contains(table.name) {
                try execute("DROP TABLE IF EXISTS \(q(table.name))")
            }
            for (name, oldTable) in entityTables.sorted(by: { $0.key < $1.key }) {
                let keptOld = Set(keptColumns[name, default: [:]].values)
                for column in oldTable.columns where !Self.ownColumns.contains(column.name) && !keptOld.contains(column.name) {
                    try execute("ALTER TABLE \(q(oldTable.name)) DROP COLUMN IF EXISTS \(q(column.name))")
                }
                for index in oldTable.indexes where matchingIndex(index, of: oldTable, in: new.table(name)) == nil {
                    if index.isUnique {
                        try execute("ALTER TABLE \(q(oldTable.name)) DROP CONSTRAINT IF EXISTS \(q(index.name))")
                        if let nfc = index.normalizedName(in: oldTable) { try execute("DROP INDEX IF EXISTS \(q(nfc))") }
                    } else {
                        try execute("DROP INDEX IF EXISTS \(q(index.name))")
                    }
                }
            }
            for table in removedTables { try execute("DROP TABLE IF EXISTS \(q(table.name)) CASCADE") }
            if !removedTables.isEmpty {
                try session.query("DELETE FROM \(unescaped: q(StoreSchema.keysTable)) WHERE entity = ANY(\(removedTables.map(\.name)))", action)
            }

            // 2. Tables, by way of temporary names.
            var tableRenames = entityTables.filter { $0.key != $0.value.name }.map { ($0.value.name, $0.key) }
            tableRenames += joinTables.filter { $0.key != $0.value.old.name }.map { ($0.value.old.name, $0.key) }
            try renameInTwoSteps(tableRenames) { (_, from, to) throws(StrataError) in
                try execute("ALTER TABLE \(q(from)) RENAME TO \(q(to))")
            }
            // Columns, table by table (tables have their new names now).
            for (name, kept) in keptColumns.sorted(by: { $0.key < $1.key }) {
                try renameInTwoSteps(kept.filter { $0.key != $0.value }.map { ($0.value, $0.key) }) { (_, from, to) throws(StrataError) in
                    try execute("ALTER TABLE \(q(name)) RENAME COLUMN \(q(from)) TO \(q(to))")
                }
            }
            for (name, source) in joinTables.sorted(by: { $0.key < $1.key }) where source.swapped {
                // Its constraints are made again below, for the columns' new meaning.
                try execute("ALTER TABLE \(q(name)) DROP CONSTRAINT IF EXISTS \(q(source.old.primaryKeyName))")
                for column in source.old.columns {
                    try execute("ALTER TABLE \(q(name)) DROP CONSTRAINT IF EXISTS \(q(source.old.foreignKeyName(column.name)))")
                }
                for index in source.old.indexes { try execute("DROP INDEX IF EXISTS \(q(index.name))") }
                try renameInTwoSteps([("source_id", "target_id"), ("target_id", "source_id")]) { (_, from, to) throws(StrataError) in
                    try execute("ALTER TABLE \(q(name)) RENAME COLUMN \(q(from)) TO \(q(to))")
                }
            }
            // The constraints and indexes named after tables and columns.
            var constraintRenames: [(table: String, from: String, to: String)] = []
            var indexRenames: [(from: String, to: String)] = []
            for (name, oldTable) in entityTables {
                let table = new.table(name)
                constraintRenames.append((name, oldTable.primaryKeyName, table.primaryKeyName))
                for (column, was) in keptColumns[name, default: [:]] where table.column(column).references != nil {
                    constraintRenames.append((name, oldTable.foreignKeyName(was), table.foreignKeyName(column)))
                }
                for index in oldTable.indexes {
                    guard let now = matchingIndex(index, of: oldTable, in: table) else { continue }
                    if index.isUnique {
                        constraintRenames.append((name, index.name, now.name))
                        if let from = index.normalizedName(in: oldTable), let to = now.normalizedName(in: table) { indexRenames.append((from, to)) }
                    } else {
                        indexRenames.append((index.name, now.name))
                    }
                }
            }
            for (name, source) in joinTables where !source.swapped {
                let table = new.table(name)
                constraintRenames.append((name, source.old.primaryKeyName, table.primaryKeyName))
                for column in table.columns { constraintRenames.append((name, source.old.foreignKeyName(column.name), table.foreignKeyName(column.name))) }
                for (from, to) in zip(source.old.indexes, table.indexes) { indexRenames.append((from.name, to.name)) }
            }
            constraintRenames.removeAll { $0.from == $0.to }
            indexRenames.removeAll { $0.from == $0.to }
            try renameInTwoSteps(constraintRenames.map { ($0.from, $0.to) }) { (i, from, to) throws(StrataError) in
                try execute("ALTER TABLE \(q(constraintRenames[i].table)) RENAME CONSTRAINT \(q(from)) TO \(q(to))")
            }
            try renameInTwoSteps(indexRenames) { (_, from, to) throws(StrataError) in
                try execute("ALTER INDEX \(q(from)) RENAME TO \(q(to))")
            }

            // 3. What changes or comes new.
            for (name, columns) in widened.sorted(by: { $0.key < $1.key }) {
                for column in columns { try execute("ALTER TABLE \(q(name)) ALTER COLUMN \(q(column.name)) TYPE \(column.type)") }
            }
            let newTables = new.tables.filter { entityTables[$0.name] == nil && joinTables[$0.name] == nil }
            for table in newTables { try execute(StoreSchema.creation(of: table)) }
            var foreignKeys: [String] = newTables.flatMap(StoreSchema.foreignKeys(of:))
            var indexes: [String] = newTables.flatMap { table in table.indexes.flatMap { StoreSchema.creation(of: $0, in: table) } }
            for (name, source) in joinTables.sorted(by: { $0.key < $1.key }) where source.swapped {
                let table = new.table(name)
                try execute("""
                    ALTER TABLE \(q(name)) ADD CONSTRAINT \(q(table.primaryKeyName)) PRIMARY KEY (\(table.primaryKey.map(q).joined(separator: ", ")))
                    """)
                foreignKeys += StoreSchema.foreignKeys(of: table)
                indexes += table.indexes.flatMap { StoreSchema.creation(of: $0, in: table) }
            }
            for (name, oldTable) in entityTables.sorted(by: { $0.key < $1.key }) {
                let table = new.table(name)
                let kept = keptColumns[name, default: [:]]
                for column in table.columns where !Self.ownColumns.contains(column.name) && kept[column.name] == nil {
                    if let value = addedValues[name]?.first(where: { $0.column == column.name }) {
                        // Added with the value as its default, then the default
                        // dropped: PostgreSQL (11 and later) keeps a constant
                        // default in the catalog for the rows there, so this
                        // writes no row, where filling the column would rewrite
                        // the table.
                        let literal = try self.literal(value.value, as: column.type, of: value.property, value.entity, on: session)
                        try execute("ALTER TABLE \(q(name)) ADD COLUMN \(StoreSchema.columnDefinition(column)) DEFAULT \(literal)")
                        try execute("ALTER TABLE \(q(name)) ALTER COLUMN \(q(column.name)) DROP DEFAULT")
                    } else {
                        var added = column
                        added.isNullable = true
                        try execute("ALTER TABLE \(q(name)) ADD COLUMN \(StoreSchema.columnDefinition(added))")
                    }
                    if let foreignKey = StoreSchema.foreignKey(of: column, in: table) { foreignKeys.append(foreignKey) }
                }
                for change in nullability[name, default: []] {
                    if let value = change.fill { try fillNulls(name, change.column.name, with: value, of: change.property, change.entity, on: session) }
                    if change.column.isNullable {
                        try execute("ALTER TABLE \(q(name)) ALTER COLUMN \(q(change.column.name)) DROP NOT NULL")
                        continue
                    }
                    let nulls = try session.query(PostgresQuery(unsafeSQL: """
                        SELECT EXISTS (SELECT 1 FROM \(q(name)) WHERE \(q(change.column.name)) IS NULL)
                        """), action)
                    if try SchemaInstallation.decode(nulls.first, as: Bool.self, action) {
                        throw StrataError(code: .modelMismatch, message: """
                            \(place): \(name).\(change.column.name) became required without a default value, and stored \
                            objects hold none: give the attribute a default value, or set one on every object before migrating
                            """)
                    }
                    try execute("ALTER TABLE \(q(name)) ALTER COLUMN \(q(change.column.name)) SET NOT NULL")
                }
                for index in table.indexes where !oldTable.indexes.contains(where: { matchingIndex($0, of: oldTable, in: table) == index }) {
                    indexes += StoreSchema.creation(of: index, in: table)
                }
            }
            for check in mustHold {
                let rows = try session.query(PostgresQuery(unsafeSQL: check.sql), action)
                if try SchemaInstallation.decode(rows.first, as: Bool.self, action) {
                    throw StrataError(code: .modelMismatch, message: """
                        \(place): \(check.what) became required, and stored objects have no target: set one on every object \
                        before migrating
                        """)
                }
            }
            for statement in foreignKeys + indexes { try execute(statement) }

            // 4. Strata's own tables.
            let renamedEntities = entityTables.filter { $0.key != $0.value.name }.map { (from: $0.value.name, to: $0.key) }
            if !renamedEntities.isEmpty {
                let keys = q(StoreSchema.keysTable)
                let temporary = renamedEntities.indices.map { "\u{1}strata migrating \($0)" }
                // Through temporary names: the key is unique at every row.
                try session.query("""
                    UPDATE \(unescaped: keys) SET entity = m.t FROM unnest(\(renamedEntities.map(\.from))::text[], \(temporary)::text[]) AS m(o, t) \
                    WHERE \(unescaped: keys).entity = m.o
                    """, action)
                try session.query("""
                    UPDATE \(unescaped: keys) SET entity = m.n FROM unnest(\(temporary)::text[], \(renamedEntities.map(\.to))::text[]) AS m(t, n) \
                    WHERE \(unescaped: keys).entity = m.t
                    """, action)
                let changes = q(StoreSchema.historyChangesTable)
                try session.query("""
                    UPDATE \(unescaped: changes) SET entity = m.n FROM unnest(\(renamedEntities.map(\.from))::text[], \(renamedEntities.map(\.to))::text[]) \
                    AS m(o, n) WHERE \(unescaped: changes).entity = m.o
                    """, action)
            }
            for entity in migration.model.entities {
                var renamed: [(from: String, to: String)] = []
                for (j, property) in entity.properties.enumerated() {
                    if let was = migration.storedProperty(j, of: entity), was.name != property.name { renamed.append((was.name, property.name)) }
                }
                guard !renamed.isEmpty else { continue }
                let changes = q(StoreSchema.historyChangesTable)
                try session.query("""
                    UPDATE \(unescaped: changes) SET property_names = ARRAY(SELECT coalesce(m.n, u.p) FROM unnest(property_names) WITH ORDINALITY AS u(p, i) \
                    LEFT JOIN unnest(\(renamed.map(\.from))::text[], \(renamed.map(\.to))::text[]) AS m(o, n) ON m.o = u.p ORDER BY u.i) \
                    WHERE entity = \(entity.name) AND property_names IS NOT NULL
                    """, action)
            }
        }

        /// Strata's own columns of an entity table, which every model has.
        private static let ownColumns: Set<String> = [StoreSchema.idColumn, StoreSchema.versionColumn]

        /// The index of `table` (new) that `index` of `oldTable` is: the
        /// same uniqueness over the same columns, by their new names.
        private func matchingIndex(_ index: StoreSchema.Index, of oldTable: StoreSchema.Table, in table: StoreSchema.Table) -> StoreSchema.Index? {
            let newNameOf = Dictionary((keptColumns[table.name] ?? [:]).map { ($0.value, $0.key) }, uniquingKeysWith: { a, _ in a })
            var columns: [String] = []
            for column in index.columns {
                guard let now = newNameOf[column] else { return nil }
                columns.append(now)
            }
            return table.indexes.first { $0.isUnique == index.isUnique && $0.columns == columns }
        }

        /// Sets `column` of the rows of `table` where it is null to `value`,
        /// a bind parameter.
        private func fillNulls(
            _ table: String, _ column: String, with value: PropertyValue, of property: PropertyDescription, _ entity: EntityDescription,
            on session: PostgresSession
        ) throws(StrataError) {
            let q = SQLIdentifier.quoted
            var bindings = PostgresBindings()
            try RowCoding.bind(value, of: property, for: ObjectID(entity: entity, storedPrimaryKey: 0), to: &bindings)
            try session.query(PostgresQuery(unsafeSQL: "UPDATE \(q(table)) SET \(q(column)) = $1 WHERE \(q(column)) IS NULL", binds: bindings), action)
        }

        /// `value` as a literal of the column type `type` for DDL, which
        /// takes no parameters: PostgreSQL quotes it (`format('%L', $1)`,
        /// from the value bound as a parameter), so no value of the model's
        /// is ever spliced into SQL by Strata.
        private func literal(
            _ value: PropertyValue, as type: String, of property: PropertyDescription, _ entity: EntityDescription, on session: PostgresSession
        ) throws(StrataError) -> String {
            var bindings = PostgresBindings()
            try RowCoding.bind(value, of: property, for: ObjectID(entity: entity, storedPrimaryKey: 0), to: &bindings)
            let rows = try session.query(PostgresQuery(unsafeSQL: "SELECT format('%L', $1::\(type)) || '::\(type)'", binds: bindings), action)
            return try SchemaInstallation.decode(rows.first, as: String.self, action)
        }

        /// Runs `rename(i, from, to)` for each pair `i`, by way of a
        /// temporary name each, so that a pair may take a name another pair
        /// gives up (a swap).
        private func renameInTwoSteps(
            _ pairs: [(String, String)], _ rename: (Int, String, String) throws(StrataError) -> Void
        ) throws(StrataError) {
            guard pairs.count > 1 else {
                if let pair = pairs.first { try rename(0, pair.0, pair.1) }
                return
            }
            let temporary = pairs.indices.map { "strata_migrating_\($0)" }
            for (i, pair) in pairs.enumerated() { try rename(i, pair.0, temporary[i]) }
            for (i, pair) in pairs.enumerated() { try rename(i, temporary[i], pair.1) }
        }
    }
}

extension StoreSchema {
    /// The table named `name`, which the schema has.
    func table(_ name: String) -> Table { tables.first { $0.name == name }! }
}

extension StoreSchema.Table {
    /// The column named `name`, which the table has.
    func column(_ name: String) -> StoreSchema.Column { columns.first { $0.name == name }! }
}
