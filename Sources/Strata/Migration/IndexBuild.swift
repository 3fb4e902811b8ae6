internal import StrataStore

/// Builds every index of one entity for an inferred migration, before the
/// switch to the new schema generation, under the index number the new
/// generation gives the entity — one no earlier generation used, so no
/// reader of the store as it is sees the entries, and a crash leaves only
/// entries that the next read-write open deletes (``UnreadKeyRemoval``).
///
/// Streamed: it reads each object once and writes its entries
/// `batchSize` objects at a time, so memory stays bounded by a batch
/// whatever the store holds, rather than with every entry and a map of
/// every unique value held at once. The unique indexes are checked after,
/// by reading their entries back in order: objects sharing values are
/// neighbours there.
struct StagedIndexBuild {
    /// The entity, as the model being migrated to describes it.
    let entity: EntityDescription
    /// The generation being switched to (its index number for `entity` is the new one).
    let schemas: StoredSchemas
    let batchSize: Int
    let progress: MigrationProgressHandler?

    init(entity: EntityDescription, schemas: StoredSchemas, batchSize: Int = 16_384, progress: MigrationProgressHandler?) {
        self.entity = entity
        self.schemas = schemas
        self.batchSize = batchSize
        self.progress = progress
    }

    /// Writes the entries of every object `reader` holds into `store`, then
    /// checks its unique indexes (``checkUniqueness(in:entries:)``); the
    /// caller deletes what the step built if it throws.
    func run(reading reader: MigratedRecordStore, into store: any RecordStore) throws(StrataError) {
        let prefix = RecordCoding.prefix(of: entity)
        var total = 0
        try reader.forEachKey(in: [KeyRange(prefix: prefix)]) { _, _ throws(StrataError) -> Bool in
            total += 1
            return true
        }
        var batch = WriteBatch()
        var inBatch = 0, done = 0
        try reader.forEach(prefix: prefix) { key, value throws(StrataError) in
            guard let primaryKey = RecordCoding.primaryKey(fromKey: key, prefix: prefix),
                  let snapshot = RecordCoding.decode(value, entity: entity) else {
                throw RecordCoding.undecodable("a record of \(entity.name)", format: value.first)
            }
            for number in entity.indexes.indices {
                var entry = IndexKeyCoding.key(snapshot.values, of: entity, index: number, primaryKey: primaryKey)
                schemas.translate(&entry, toStored: true)
                batch.put(entry, [])
            }
            inBatch += 1
            // The read view the scan holds is a snapshot: writing under it is safe.
            if inBatch == batchSize {
                try store.write(batch)
                batch = WriteBatch()
                done += inBatch
                inBatch = 0
                progress?(MigrationProgress(step: .buildingIndexes(entity: entity.name), done: done, total: max(total, done)))
            }
        }
        if !batch.isEmpty { try store.write(batch) }
        done += inBatch
        progress?(MigrationProgress(step: .buildingIndexes(entity: entity.name), done: done, total: max(total, done)))

        try checkUniqueness(in: store, entries: done)
    }

    /// Throws ``StrataError/Code/constraintConflict`` listing the objects
    /// whose entries, under the new index number, share a unique index's
    /// values (`entries` sizes the progress reports).
    func checkUniqueness(in store: any RecordStore, entries: Int) throws(StrataError) {
        let conflicts = try uniquenessConflicts(in: store, entries: entries)
        guard conflicts.isEmpty else {
            var error = StrataError(
                .constraintConflict,
                "\(conflicts.count) stored \(entity.name) objects share the values of a uniqueness constraint of the new model; the store was not migrated")
            error.constraintConflicts = conflicts
            throw error
        }
    }

    /// Each object whose entry in a unique index holds no null and the same
    /// values as the entry before it, with the first object of that run.
    private func uniquenessConflicts(in store: any RecordStore, entries: Int) throws(StrataError) -> [ConstraintConflict] {
        var conflicts: [ConstraintConflict] = []
        for number in entity.indexes.indices where entity.indexes[number].isUnique {
            let prefix = schemas.key(IndexKeyCoding.prefix(of: entity, index: number), toStored: true)
            let types = entity.indexedProperties[number].map { entity.attributeTypes[$0]! }
            func malformed() -> StrataError {
                StrataError(.corruptRecord, "an entry of \(entity.name)'s index \(entity.indexes[number]) is malformed")
            }
            var runValues: [UInt8] = [], runHolder: ObjectID?
            var checked = 0
            try store.forEachKey(in: [KeyRange(prefix: prefix)]) { entry, _ throws(StrataError) -> Bool in
                var end = prefix.count, holdsNull = false
                for type in types {
                    guard let next = IndexKeyCoding.end(ofValueAt: end, in: entry, type: type) else { throw malformed() }
                    if entry[end] == 0 { holdsNull = true }
                    end = next
                }
                guard let primaryKey = IndexKeyCoding.primaryKey(ofEntry: entry), end + 8 == entry.count else { throw malformed() }
                let id = ObjectID(entity: entity, primaryKey: primaryKey, isTemporary: false)
                let values = UnsafeRawBufferPointer(rebasing: entry[prefix.count..<end])
                if !holdsNull, let holder = runHolder, runValues.withUnsafeBytes({ $0.elementsEqual(values) }) {
                    var decoded: [PropertyValue] = [], offset = 0
                    for type in types {
                        guard let (value, next) = IndexKeyCoding.value(at: offset, in: values, type: type) else { throw malformed() }
                        decoded.append(value)
                        offset = next
                    }
                    conflicts.append(ConstraintConflict(
                        objectID: id, constraint: entity.indexes[number].attributeNames, values: decoded, conflictingObjectIDs: [holder]))
                } else {
                    runValues = Array(values)
                    runHolder = holdsNull ? nil : id
                }
                checked += 1
                if checked % 65_536 == 0 {
                    progress?(MigrationProgress(step: .checkingUniqueness(entity: entity.name), done: checked, total: max(entries, checked)))
                }
                return true
            }
        }
        return conflicts
    }
}
