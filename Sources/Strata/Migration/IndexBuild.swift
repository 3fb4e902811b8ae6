internal import StrataStore

/// The entries of every index of one entity, made object by object by a
/// custom migration stage — whose rewritten objects go in the switch batch
/// with them — checking its unique indexes as it goes.
struct IndexBuilder {
    let entity: EntityDescription
    let schemas: StoredSchemas
    private var entries: [[UInt8]] = []
    /// Per unique index's values: the first object met holding them.
    private var holders: [[UInt8]: ObjectID] = [:]
    private var conflicts: [ConstraintConflict] = []

    init(entity: EntityDescription, schemas: StoredSchemas) {
        self.entity = entity
        self.schemas = schemas
    }

    mutating func add(_ values: [PropertyValue], primaryKey: UInt64) {
        let id = ObjectID(entity: entity, primaryKey: primaryKey, isTemporary: false)
        for number in entity.indexes.indices {
            var entry = IndexKeyCoding.key(values, of: entity, index: number, primaryKey: primaryKey)
            if entity.indexes[number].isUnique {
                let held = entity.indexedProperties[number].map { values[$0] }
                if !held.contains(.null), let holder = holders.updateValue(id, forKey: Array(entry.dropLast(8))) {
                    conflicts.append(ConstraintConflict(
                        objectID: id, constraint: entity.indexes[number].attributeNames, values: held, conflictingObjectIDs: [holder]))
                }
            }
            schemas.translate(&entry, toStored: true)
            entries.append(entry)
        }
    }

    /// Puts the entries; throws ``StrataError/Code/constraintConflict``
    /// listing the objects that share a unique index's values, if any do.
    func finish(into batch: inout WriteBatch) throws(StrataError) {
        guard conflicts.isEmpty else {
            var error = StrataError(
                .constraintConflict,
                "\(conflicts.count) stored \(entity.name) objects share the values of a uniqueness constraint of the new model; the store was not migrated")
            error.constraintConflicts = conflicts
            throw error
        }
        for entry in entries { batch.put(entry, []) }
    }
}


/// Builds every index of one entity for an inferred migration, before the
/// switch to the new schema generation, under the index number the new
/// generation gives the entity — one no earlier generation used, so no
/// reader of the store as it is sees the entries, and a crash leaves only
/// entries that the next read-write open deletes (``IndexEntryRemoval``).
///
/// Streamed: it reads each object once and writes its entries
/// `batchSize` objects at a time, so memory stays bounded by a batch
/// whatever the store holds (the migration batch used to carry every entry
/// and a map of every unique value). The unique indexes are checked after,
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
    /// throws ``StrataError/Code/constraintConflict`` listing the objects
    /// that share a unique index's values, if any do (the caller deletes
    /// what the step built).
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

        let conflicts = try uniquenessConflicts(in: store, entries: done)
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

/// Deletes index entries no reader looks at: those of a replaced index
/// set (the number the current generation moved the entity's entries
/// from) and those of a build a crash or a refusal cut short (a number no
/// generation names yet). Runs after each migration and at every
/// read-write open; a crash in the middle leaves entries the next run
/// deletes, and the store reads the same meanwhile.
enum IndexEntryRemoval {
    /// Removes the unread entries of a store with these schema generations.
    static func run(in store: any RecordStore, generations: [StoredSchemas.Generation]) throws(StrataError) {
        let everyNumber = generations.reduce(into: Set<UInt16>()) { $0.formUnion($1.allNumbers) }
        let unread = everyNumber.subtracting(generations.last!.indexNumbers)
        var ranges = unread.sorted().map { KeyRange(prefix: RecordCoding.entityPrefix(IndexKeyCoding.indexTag, $0)) }
        // Builds cut short used the numbers after every one named.
        let firstUnnamed = Int(everyNumber.max() ?? 0) + 1
        if firstUnnamed <= Int(UInt16.max) {
            ranges.append(KeyRange(start: RecordCoding.entityPrefix(IndexKeyCoding.indexTag, UInt16(firstUnnamed)), end: [IndexKeyCoding.indexTag + 1]))
        }
        try remove(in: ranges, from: store)
    }

    /// Removes every entry stored under these index numbers.
    static func remove(numbers: [UInt16], from store: any RecordStore) throws(StrataError) {
        try remove(in: numbers.map { KeyRange(prefix: RecordCoding.entityPrefix(IndexKeyCoding.indexTag, $0)) }, from: store)
    }

    /// Deletes the keys in `ranges` (sorted, disjoint), `batchSize` per
    /// batch, until none is left, each scan starting after the last key
    /// the one before deleted.
    private static func remove(in ranges: [KeyRange], from store: any RecordStore, batchSize: Int = 16_384) throws(StrataError) {
        var ranges = ranges
        while !ranges.isEmpty {
            var batch = WriteBatch(), count = 0, last: [UInt8] = []
            try store.forEachKey(in: ranges) { key, _ throws(StrataError) -> Bool in
                last = Array(key)
                batch.delete(last)
                count += 1
                return count < batchSize
            }
            guard count > 0 else { return }
            try store.write(batch)
            let resume = last + [0]
            ranges = ranges.compactMap { range in
                if let end = range.end, !resume.lexicographicallyPrecedes(end) { return nil }
                return range.start.lexicographicallyPrecedes(resume) ? KeyRange(start: resume, end: range.end) : range
            }
        }
    }
}
