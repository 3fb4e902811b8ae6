import Foundation
internal import StrataStore

/// Opens a log store (or its in-memory twin) for a coordinator's model:
/// checks the model the store records, or records it in a new store, and
/// migrates the store to it (see ``prepare(_:readOnly:plan:progress:)``).
struct LogStoreOpening {
    let model: ManagedObjectModel
    /// The objects per batch of a migration's index builds (``StagedIndexBuild``).
    let indexBuildBatchSize: Int

    /// What opening a store found: its key counters, identity and schemas.
    struct PreparedStore {
        var keys: [UInt64]
        var identifier: UUID
        var schemas: StoredSchemas
    }

    /// Checks (or writes) the model, migrating the store to it when its
    /// model changed in a way that can be inferred, or through the steps of
    /// `plan`; reads the key counters and the store's identity. Each step
    /// switches with ONE small atomic batch: the new schema generation, the
    /// model record, the key counters. What the step writes in proportion
    /// to the store — the entries of indexes an inferred step adds or
    /// changes (``StagedIndexBuild``), every object a custom stage rewrites
    /// and its entries — is written before it, in batches, under numbers no
    /// generation names yet, where no reader looks; the switch makes them
    /// the ones read. A crash leaves the store at one of the versions; what
    /// no version reads — those keys after a crash, the ones they replaced,
    /// a removed entity's objects — is deleted after each step and at every
    /// read-write open (``UnreadKeyRemoval``).
    func prepare(
        _ store: any RecordStore, readOnly: Bool, plan: MigrationPlan? = nil, progress: MigrationProgressHandler? = nil
    ) throws(StrataError) -> PreparedStore {
        guard let record = try store.get(RecordCoding.modelKey) else { return try create(store, readOnly: readOnly) }
        guard let hash = RecordCoding.hash(inModelRecord: record) else {
            throw StrataError(.corruptRecord, "the store's model record is damaged")
        }
        let storedSchema = Array(record.dropFirst(16))
        var generations: [StoredSchemas.Generation]
        if let history = try store.get(StoredSchemas.historyKey) {
            generations = try StoredSchemas.generations(fromHistory: history, endingWith: storedSchema)
        } else {
            let storedModel = try ModelSchema.decodeCached(storedSchema)
            generations = [.init(schema: storedSchema, numbers: (0..<storedModel.entities.count).map(UInt16.init))]
        }
        // What a step or a build left when a crash or a refusal cut it short.
        if !readOnly { try UnreadKeyRemoval.run(in: store, generations: generations) }
        if hash != model.versionHash || storedSchema != model.schema {
            let storedModel = try ModelSchema.decodeCached(storedSchema)
            guard storedModel.versionHash == hash else {
                throw StrataError(.corruptRecord, "the stored schema hashes to \(storedModel.versionHash) but the model record says \(hash)")
            }
            if generations.dropLast().contains(where: { $0.schema == model.schema }) {
                throw StrataError(.modelMismatch, "the store was migrated past this model (to \(hash)) by a newer version of the application")
            }
            // The versions still to go through: from the plan's version the
            // store is at, or straight to this model by inference.
            var steps: [(model: ManagedObjectModel, stage: MigrationStage?)] = [(model, nil)]
            if let plan {
                guard plan.versions.last?.model.schema == model.schema else {
                    throw StrataError(.invalidArgument, "the migration plan's last version is not the coordinator's model")
                }
                if let at = plan.versions.firstIndex(where: { $0.model.schema == storedSchema }) {
                    steps = plan.versions[(at + 1)...].enumerated().map { offset, version in
                        let from = plan.versions[at + offset].identifier
                        return (version.model, plan.customStage(from: from, to: version.identifier))
                    }
                }
            }
            for (target, stage) in steps {
                guard let next = try migrate(store, generations: generations, to: target, stage: stage, readOnly: readOnly, progress: progress) else {
                    break  // read-only, and nothing stored depends on the change
                }
                generations = next
            }
            if generations.count > 1 && !readOnly { try store.makeDurable() }
        }
        var keys = Array(repeating: UInt64(1), count: model.entities.count)
        if let bytes = try store.get(RecordCoding.keysKey) {
            guard let stored = RecordCoding.decodeKeys(bytes), stored.count == keys.count else {
                throw StrataError(.corruptRecord, "the store's key counters are damaged")
            }
            keys = stored
        }
        return PreparedStore(keys: keys, identifier: try identity(of: store),
                             schemas: try StoredSchemas(generations: generations, model: model))
    }

    /// Migrates the store from its last generation to `target`, by
    /// inference or through a custom `stage`, in one batch; returns the
    /// generations after. Nil when `readOnly` and only what no stored byte
    /// depends on changed (the store reads as it is).
    private func migrate(
        _ store: any RecordStore, generations: [StoredSchemas.Generation], to target: ManagedObjectModel, stage: MigrationStage?,
        readOnly: Bool, progress: MigrationProgressHandler?
    ) throws(StrataError) -> [StoredSchemas.Generation]? {
        var generations = generations
        let storedModel = try ModelSchema.decodeCached(generations.last!.schema)
        var mapping = SchemaMapping.infer(from: storedModel, to: target)
        if stage != nil {
            // What inference cannot carry over, the stage fills in.
            mapping.acceptUnresolved()
        }
        guard mapping.unresolved.isEmpty else {
            var error = StrataError(.modelMismatch, "the store's model (\(storedModel.versionHash)) cannot be migrated to this one (\(target.versionHash)) by inference")
            error.modelDifferences = mapping.differences
            throw error
        }
        // A change only of what no stored byte depends on replaces the last
        // generation's schema — unless older generations exist: their
        // records are upgraded through it (defaults, required fills).
        let needsGeneration = stage != nil || !mapping.keepsEveryRecord || mapping.entities.contains { $0.indexesChanged }
            || storedModel.versionHash != target.versionHash || generations.count > 1
        if readOnly {
            guard needsGeneration || !mapping.mustHoldValues.isEmpty else { return nil }
            var error = StrataError(.modelMismatch, "the store's model (\(storedModel.versionHash)) must be migrated to this one (\(target.versionHash)): open it read-write once")
            error.modelDifferences = mapping.differences
            throw error
        }
        var keys = Array(repeating: UInt64(1), count: target.entities.count)
        if let bytes = try store.get(RecordCoding.keysKey) {
            guard let stored = RecordCoding.decodeKeys(bytes), stored.count == storedModel.entities.count else {
                throw StrataError(.corruptRecord, "the store's key counters are damaged")
            }
            for (position, entityMapping) in mapping.entities.enumerated() {
                if let old = entityMapping.old { keys[position] = stored[Int(old.index)] }
            }
        }
        let before = generations
        let last = generations.removeLast()
        // Entity positions (in `target`) whose index entries (and, under a
        // custom stage, records) are written before the switch, under new numbers.
        var staged: [Int] = []
        if needsGeneration {
            generations.append(last)
            var unused = (generations.reduce(into: Set<UInt16>()) { $0.formUnion($1.allNumbers) }.max() ?? 0) + 1
            func fresh() throws(StrataError) -> UInt16 {
                guard unused < UInt16.max else { throw StrataError(.invalidModel, "the store has used up its entity numbers") }
                defer { unused += 1 }
                return unused
            }
            var numbers: [UInt16] = [], indexNumbers: [UInt16] = []
            for (position, entityMapping) in mapping.entities.enumerated() {
                if let old = entityMapping.old {
                    if stage != nil {
                        // A custom stage rewrites every object: records and
                        // entries go anew, under one number (the tag tells
                        // them apart; the history stays in format 1 when
                        // nothing else moved).
                        numbers.append(try fresh())
                        indexNumbers.append(numbers.last!)
                        staged.append(position)
                    } else if entityMapping.indexesChanged {
                        numbers.append(last.numbers[Int(old.index)])
                        indexNumbers.append(try fresh())
                        staged.append(position)
                    } else {
                        numbers.append(last.numbers[Int(old.index)])
                        indexNumbers.append(last.indexNumbers[Int(old.index)])
                    }
                } else {
                    numbers.append(try fresh())
                    indexNumbers.append(numbers.last!)
                }
            }
            generations.append(.init(schema: target.schema, numbers: numbers, indexNumbers: indexNumbers))
        } else {
            // Only what no stored byte depends on changed (optionality,
            // delete rules, defaults, renaming identifiers): the records and
            // keys read as they are.
            generations.append(.init(schema: target.schema, numbers: last.numbers, indexNumbers: last.indexNumbers))
        }
        let schemas = try StoredSchemas(generations: generations, model: target)
        let reader = MigratedRecordStore(store, schemas: schemas)
        try checkValuesHeld(mapping, in: target, reading: reader)  // none under a stage: it fills them
        do throws(StrataError) {
            if let stage {
                // It reads the objects as the store had them, and reports
                // progress against their number.
                let oldReader = MigratedRecordStore(store, schemas: try StoredSchemas(generations: before, model: storedModel))
                var done = 0, total = 0
                for old in storedModel.entities where mapping.newPosition[Int(old.index)] != nil {
                    let prefix = RecordCoding.entityPrefix(RecordCoding.objectTag, last.numbers[Int(old.index)])
                    try store.forEachKey(in: [KeyRange(prefix: prefix)]) { _, _ throws(StrataError) -> Bool in
                        total += 1
                        return true
                    }
                }
                for position in staged {
                    let entity = target.entities[position], entityMapping = mapping.entities[position]
                    let before = done
                    try stage.rewrite(
                        entity, from: entityMapping.old!, mapping: entityMapping, newPosition: mapping.newPosition, reading: oldReader,
                        writing: schemas, into: store, done: &done, total: total)
                    try StagedIndexBuild(entity: entity, schemas: schemas, progress: progress).checkUniqueness(in: store, entries: done - before)
                }
            } else {
                for position in staged where !target.entities[position].indexes.isEmpty {
                    let build = StagedIndexBuild(
                        entity: target.entities[position], schemas: schemas, batchSize: indexBuildBatchSize, progress: progress)
                    try build.run(reading: reader, into: store)
                }
            }
        } catch {
            // A refusal leaves nothing of the step: what was written for
            // the entities before the one refused goes too. (What a failed
            // deletion leaves, the next read-write open deletes.)
            try? UnreadKeyRemoval.remove(
                recordNumbers: stage == nil ? [] : staged.map { schemas.storedNumbers[$0] },
                indexNumbers: staged.map { schemas.storedIndexNumbers[$0] }, from: store)
            throw error
        }

        // The switch. Removed entities' objects are left to the removal after it.
        var batch = WriteBatch()
        batch.put(RecordCoding.modelKey, RecordCoding.modelRecord(target))
        batch.put(StoredSchemas.historyKey, schemas.historyRecord())
        batch.put(RecordCoding.keysKey, RecordCoding.keysRecord(keys))
        try store.write(batch)
        // What the staged writes replaced, and removed entities' objects.
        try UnreadKeyRemoval.run(in: store, generations: generations)
        return generations
    }

    /// Checks that every stored object holds a value in each property that
    /// became required without a default (Core Data's rule: such a change
    /// migrates when the data allows it). Throws
    /// ``StrataError/Code/modelMismatch`` naming the objects that do not.
    private func checkValuesHeld(_ mapping: SchemaMapping, in model: ManagedObjectModel, reading reader: MigratedRecordStore) throws(StrataError) {
        var missing: [ModelDifference] = []
        var examples: [String] = []
        for (position, property) in mapping.mustHoldValues {
            let entity = model.entities[position]
            let prefix = RecordCoding.prefix(of: entity)
            var lacking = 0
            try reader.forEach(prefix: prefix) { key, value throws(StrataError) in
                guard let snapshot = RecordCoding.decode(value, entity: entity), let primaryKey = RecordCoding.primaryKey(fromKey: key, prefix: prefix) else {
                    throw RecordCoding.undecodable("a record of \(entity.name)", format: value.first)
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
}
