import Foundation
internal import StrataStore

extension PersistentStoreCoordinator {
    /// What opening a store found: its key counters, identity and schemas.
    struct PreparedStore {
        var keys: [UInt64]
        var identifier: UUID
        var schemas: StoredSchemas
    }

    /// Checks (or writes) the model, migrating the store to it when its
    /// model changed in a way that can be inferred; reads the key counters
    /// and the store's identity. A migration is ONE atomic batch: the new
    /// schema generation, the model record, the key counters, the index
    /// entries of indexes added or changed, and the deletion of removed
    /// entities' objects. A crash leaves the store at the old model or the new.
    func prepare(_ store: any RecordStore, readOnly: Bool) throws(StrataError) -> PreparedStore {
        guard let record = try store.get(RecordCoding.modelKey) else { return try create(store, readOnly: readOnly) }
        guard let hash = RecordCoding.hash(inModelRecord: record) else {
            throw StrataError(.corruptRecord, "the store's model record is damaged")
        }
        let storedSchema = Array(record.dropFirst(16))
        var generations: [StoredSchemas.Generation]
        if let history = try store.get(StoredSchemas.historyKey) {
            guard let decoded = StoredSchemas.decodeHistory(history), decoded.last?.schema == storedSchema else {
                throw StrataError(.corruptRecord, "the store's schema history is damaged, or does not end with its model")
            }
            generations = decoded
        } else {
            let storedModel = try ModelSchema.decodeCached(storedSchema)
            generations = [.init(schema: storedSchema, numbers: (0..<storedModel.entities.count).map(UInt16.init))]
        }
        var keys = Array(repeating: UInt64(1), count: model.entities.count)
        if hash == model.versionHash && storedSchema == model.schema {
            if let bytes = try store.get(RecordCoding.keysKey) {
                guard let stored = RecordCoding.decodeKeys(bytes), stored.count == keys.count else {
                    throw StrataError(.corruptRecord, "the store's key counters are damaged")
                }
                keys = stored
            }
            return PreparedStore(keys: keys, identifier: try identity(of: store),
                                 schemas: try StoredSchemas(generations: generations, model: model))
        }

        let storedModel = try ModelSchema.decodeCached(storedSchema)
        guard storedModel.versionHash == hash else {
            throw StrataError(.corruptRecord, "the stored schema hashes to \(storedModel.versionHash) but the model record says \(hash)")
        }
        if generations.dropLast().contains(where: { $0.schema == model.schema }) {
            throw StrataError(.modelMismatch, "the store was migrated past this model (to \(hash)) by a newer version of the application")
        }
        let mapping = SchemaMapping.infer(from: storedModel, to: model)
        guard mapping.unresolved.isEmpty else {
            var error = StrataError(.modelMismatch, "the store's model (\(hash)) cannot be migrated to this one (\(model.versionHash)) by inference")
            error.modelDifferences = mapping.differences
            throw error
        }
        if let bytes = try store.get(RecordCoding.keysKey) {
            guard let stored = RecordCoding.decodeKeys(bytes), stored.count == storedModel.entities.count else {
                throw StrataError(.corruptRecord, "the store's key counters are damaged")
            }
            for (position, entityMapping) in mapping.entities.enumerated() {
                if let old = entityMapping.old { keys[position] = stored[Int(old.index)] }
            }
        }

        let needsGeneration = !mapping.keepsEveryRecord || mapping.entities.contains { $0.indexesChanged } || storedModel.versionHash != model.versionHash
        if readOnly {
            // Only what no stored byte depends on changed: the store reads
            // as it is, without recording the new schema.
            guard needsGeneration || !mapping.mustHoldValues.isEmpty else {
                return PreparedStore(keys: keys, identifier: try identity(of: store),
                                     schemas: try StoredSchemas(generations: generations, model: model))
            }
            var error = StrataError(.modelMismatch, "the store's model (\(hash)) must be migrated to this one (\(model.versionHash)): open it read-write once")
            error.modelDifferences = mapping.differences
            throw error
        }
        let last = generations.removeLast()
        if needsGeneration {
            generations.append(last)
            var unused = (generations.flatMap(\.numbers).max() ?? 0) + 1
            var numbers: [UInt16] = []
            for entityMapping in mapping.entities {
                if let old = entityMapping.old {
                    numbers.append(last.numbers[Int(old.index)])
                } else {
                    guard unused < UInt16.max else { throw StrataError(.invalidModel, "the store has used up its entity numbers") }
                    numbers.append(unused)
                    unused += 1
                }
            }
            generations.append(.init(schema: model.schema, numbers: numbers))
        } else {
            // Only what no stored byte depends on changed (optionality,
            // delete rules, defaults, renaming identifiers): the records and
            // keys read as they are.
            generations.append(.init(schema: model.schema, numbers: last.numbers))
        }
        let schemas = try StoredSchemas(generations: generations, model: model)
        let reader = MigratedRecordStore(store, schemas: schemas)
        try checkValuesHeld(mapping, reading: reader)

        var batch = WriteBatch()
        batch.put(RecordCoding.modelKey, RecordCoding.modelRecord(model))
        batch.put(StoredSchemas.historyKey, schemas.historyRecord())
        batch.put(RecordCoding.keysKey, RecordCoding.keysRecord(keys))
        // Objects of removed entities, and their index entries, go.
        for old in storedModel.entities where mapping.newPosition[Int(old.index)] == nil {
            try deleteAll(storedNumber: last.numbers[Int(old.index)], in: store, into: &batch)
        }
        for (position, entityMapping) in mapping.entities.enumerated() where entityMapping.indexesChanged {
            let entity = model.entities[position]
            if let old = entityMapping.old {
                try deleteAll(storedNumber: last.numbers[Int(old.index)], in: store, into: &batch, indexEntriesOnly: true)
            }
            if entityMapping.old != nil && !entity.indexes.isEmpty {
                try buildIndexes(of: entity, reading: reader, schemas: schemas, into: &batch)
            }
        }
        try store.write(batch)
        return PreparedStore(keys: keys, identifier: try identity(of: store), schemas: schemas)
    }

    /// Checks that every stored object holds a value in each property that
    /// became required without a default (Core Data's rule: such a change
    /// migrates when the data allows it). Throws
    /// ``StrataError/Code/modelMismatch`` naming the objects that do not.
    private func checkValuesHeld(_ mapping: SchemaMapping, reading reader: MigratedRecordStore) throws(StrataError) {
        var missing: [ModelDifference] = []
        var examples: [String] = []
        for (position, property) in mapping.mustHoldValues {
            let entity = model.entities[position]
            let prefix = RecordCoding.prefix(of: entity)
            var lacking = 0
            try reader.forEach(prefix: prefix) { key, value throws(StrataError) in
                guard let snapshot = RecordCoding.decode(value, entity: entity), let primaryKey = RecordCoding.primaryKey(fromKey: key, prefix: prefix) else {
                    throw StrataError(.corruptRecord, "a record of \(entity.name) does not decode under the model")
                }
                if snapshot.values[property] == .null {
                    lacking += 1
                    if examples.count < 5 { examples.append(ObjectID(entity: entity, primaryKey: primaryKey, isTemporary: false).description) }
                }
            }
            if lacking > 0 {
                missing.append(ModelDifference(
                    entity: entity.name, property: entity.properties[property].name, change: .becameRequired, isInferable: false,
                    reason: "\(lacking) stored objects hold no value; give it a default value, or fill them in first"))
            }
        }
        guard missing.isEmpty else {
            var error = StrataError(.modelMismatch, "stored objects lack values the new model requires (\(examples.joined(separator: ", ")))")
            error.modelDifferences = missing
            throw error
        }
    }

    /// A new store: records the model, key counters and a new identity.
    private func create(_ store: any RecordStore, readOnly: Bool) throws(StrataError) -> PreparedStore {
        var foreign = false
        try store.forEach(prefix: []) { _, _ throws(StrataError) in foreign = true }
        guard !foreign else {
            throw StrataError(.modelMismatch, "the store holds records but no Strata model: it is not an object store")
        }
        let identifier = UUID()
        let keys = Array(repeating: UInt64(1), count: model.entities.count)
        if !readOnly {
            var batch = WriteBatch()
            batch.put(RecordCoding.modelKey, RecordCoding.modelRecord(model))
            batch.put(RecordCoding.keysKey, RecordCoding.keysRecord(keys))
            batch.put(RecordCoding.storeKey, withUnsafeBytes(of: identifier.uuid) { Array($0) })
            try store.write(batch)
        }
        return PreparedStore(keys: keys, identifier: identifier, schemas: StoredSchemas(freshFor: model))
    }

    private func identity(of store: any RecordStore) throws(StrataError) -> UUID {
        let identity = try store.get(RecordCoding.storeKey)
        return identity.flatMap { $0.count == 16 ? UUID(uuid: $0.withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) }) : nil } ?? UUID()
    }

    /// Deletes every object stored under entity number `number` and its
    /// index entries (only the entries, with `indexEntriesOnly`).
    private func deleteAll(
        storedNumber number: UInt16, in store: any RecordStore, into batch: inout WriteBatch, indexEntriesOnly: Bool = false
    ) throws(StrataError) {
        let bytes = [UInt8(number >> 8), UInt8(number & 0xFF)]
        var prefixes = [[IndexKeyCoding.indexTag] + bytes]
        if !indexEntriesOnly { prefixes.append([RecordCoding.objectTag] + bytes) }
        for prefix in prefixes {
            try store.forEachKey(in: [KeyRange(prefix: prefix)]) { key, _ throws(StrataError) -> Bool in
                batch.delete(Array(key))
                return true
            }
        }
    }

    /// Puts the entries of every index of `entity` for its stored objects,
    /// read (upgraded) through `reader`. Throws
    /// ``StrataError/Code/constraintConflict`` listing the objects that share
    /// the values of a unique index, when some do.
    private func buildIndexes(
        of entity: EntityDescription, reading reader: MigratedRecordStore, schemas: StoredSchemas, into batch: inout WriteBatch
    ) throws(StrataError) {
        let prefix = RecordCoding.prefix(of: entity)
        var holders: [[UInt8]: ObjectID] = [:]
        var conflicts: [ConstraintConflict] = []
        try reader.forEach(prefix: prefix) { key, value throws(StrataError) in
            guard let primaryKey = RecordCoding.primaryKey(fromKey: key, prefix: prefix),
                  let snapshot = RecordCoding.decode(value, entity: entity) else {
                throw StrataError(.corruptRecord, "a record of \(entity.name) does not decode under the model")
            }
            let id = ObjectID(entity: entity, primaryKey: primaryKey, isTemporary: false)
            for number in entity.indexes.indices {
                var entry = IndexKeyCoding.key(snapshot.values, of: entity, index: number, primaryKey: primaryKey)
                if entity.indexes[number].isUnique {
                    let values = entity.indexedProperties[number].map { snapshot.values[$0] }
                    if !values.contains(.null) {
                        let valueKey = Array(entry.dropLast(8))
                        if let holder = holders.updateValue(id, forKey: valueKey) {
                            conflicts.append(ConstraintConflict(
                                objectID: id, constraint: entity.indexes[number].attributeNames, values: values, conflictingObjectIDs: [holder]))
                        }
                    }
                }
                schemas.translate(&entry, toStored: true)
                batch.put(entry, [])
            }
        }
        guard conflicts.isEmpty else {
            var error = StrataError(
                .constraintConflict,
                "\(conflicts.count) stored \(entity.name) objects share the values of a uniqueness constraint the model adds; the store was not migrated")
            error.constraintConflicts = conflicts
            throw error
        }
    }
}

extension PersistentStoreCoordinator {
    /// Rewrites every record an older schema generation wrote as the
    /// current model writes it, `batchSize` records per atomic batch, and
    /// returns how many it rewrote. Reads never need it (old records are
    /// upgraded as they are read); it makes them as cheap as new ones and
    /// lets compaction drop the old bytes — ``compactStore()`` runs it first.
    ///
    /// Each batch is read and written under the save lock, so no save
    /// changes a record in between; saves wait at most one batch. The
    /// records keep their versions: contexts holding them see no change.
    /// `progress` gets the records rewritten so far after each batch.
    ///
    /// ```swift
    /// let rewritten = try coordinator.upgradeStoredRecords { done in print("\(done) records upgraded") }
    /// ```
    @discardableResult
    public func upgradeStoredRecords(batchSize: Int = 10_000, progress: ((Int) -> Void)? = nil) throws(StrataError) -> Int {
        guard batchSize > 0 else { throw StrataError(.invalidArgument, "batchSize must be positive, not \(batchSize)") }
        var total = 0
        for entity in model.entities {
            var start = RecordCoding.prefix(of: entity)
            while true {
                let (rewritten, next) = try saveLock.withLock { () throws(StrataError) -> (Int, [UInt8]?) in
                    guard let store = try currentStore() as? MigratedRecordStore else { return (0, nil) }
                    var batch = WriteBatch()
                    var upgraded: [UInt8] = [], offsets: [Int] = []
                    var count = 0, scanned = 0, next: [UInt8]?
                    var storedStart = start
                    store.schemas.translate(&storedStart, toStored: true)
                    let storedEnd = endOfPrefix(Array(storedStart.prefix(3)))
                    try store.base.forEachKey(in: [KeyRange(start: storedStart, end: storedEnd)]) { key, get throws(StrataError) -> Bool in
                        // Bounded in keys read as well as records written:
                        // a save waits for one batch, never for a whole entity.
                        scanned += 1
                        guard count < batchSize && scanned <= 4 * batchSize else {
                            var resume = Array(key)
                            store.schemas.translate(&resume, toStored: false)
                            next = resume
                            return false
                        }
                        let storedKey = Array(key)
                        guard let value = try get(storedKey) else { return true }
                        let upgrade = value.withUnsafeBytes { raw in store.schemas.upgrade(forRecord: raw, storedKey: key) }
                        guard let upgrade else { return true }
                        guard value.withUnsafeBytes({ upgrade.upgrade($0, into: &upgraded, offsets: &offsets) }) else {
                            throw StrataError(.corruptRecord, "a record of \(upgrade.oldEntity.name) does not decode under the schema it was written with")
                        }
                        batch.put(storedKey, upgraded)
                        count += 1
                        return true
                    }
                    if !batch.isEmpty { try store.base.write(batch) }
                    return (count, next)
                }
                total += rewritten
                if rewritten > 0 { progress?(total) }
                // `next` is where the batch stopped; nil when the entity is done.
                guard let next else { break }
                start = next
            }
        }
        return total
    }
}
