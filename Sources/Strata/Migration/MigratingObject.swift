internal import StrataStore

/// One stored object during a custom migration stage: its values under the
/// old model version and under the new one, side by side (SwiftData splits
/// them between two callbacks, which is its users' complaint).
///
/// Relationship values, old and new, hold IDs of the *new* model's entities
/// (an object of a removed entity is left out).
public final class MigratingObject {
    /// The object, as the new model names it (its primary key is kept).
    public let objectID: ObjectID
    /// The entity in the new model.
    public var entity: EntityDescription { objectID.entity }
    /// The entity in the old model.
    public let oldEntity: EntityDescription
    let oldValues: [PropertyValue]
    var values: [PropertyValue]
    /// The record's version, kept.
    let version: UInt64

    init(objectID: ObjectID, oldEntity: EntityDescription, oldValues: [PropertyValue], values: [PropertyValue], version: UInt64) {
        self.objectID = objectID
        self.oldEntity = oldEntity
        self.oldValues = oldValues
        self.values = values
        self.version = version
    }

    /// The value the old version's property `key` holds; nil when the old
    /// entity has no such property.
    public func oldValue(forKey key: String) -> PropertyValue? {
        oldEntity.propertyIndex[key].map { oldValues[$0] }
    }

    /// The value the new version's property `key` holds so far; nil when
    /// the new entity has no such property.
    public func value(forKey key: String) -> PropertyValue? {
        entity.propertyIndex[key].map { values[$0] }
    }

    /// Sets the new version's property `key`. Throws
    /// ``StrataError/Code/invalidArgument`` for a property the new entity
    /// lacks or a value it cannot hold.
    public func setValue(_ value: PropertyValue, forKey key: String) throws(StrataError) {
        guard let i = entity.propertyIndex[key] else {
            throw StrataError(.invalidArgument, "\(entity.name) has no property \(key) in the new model")
        }
        guard entity.accepts(value, at: i) else {
            throw StrataError(.invalidArgument, "\(entity.name).\(key) cannot hold \(value)")
        }
        values[i] = value
    }
}

extension MigrationStage {
    /// Runs the stage over every stored object of `old` (the entity in the
    /// store's model), writing each as `entity` of the new generation, with
    /// its index entries, into `store` — a batch of the stage at a time,
    /// under the numbers `schemas` gives the entity, which no reader of the
    /// store as it is looks at until the migration switches to them.
    func rewrite(
        _ entity: EntityDescription, from old: EntityDescription, mapping: SchemaMapping.EntityMapping, newPosition: [Int?],
        reading reader: MigratedRecordStore, writing schemas: StoredSchemas, into store: any RecordStore,
        done: inout Int, total: Int
    ) throws(StrataError) {
        let model = schemas.model
        func converted(_ value: PropertyValue) -> PropertyValue {
            func id(_ old: ObjectID) -> ObjectID? {
                newPosition[Int(old.entity.index)].map { ObjectID(entity: model.entities[$0], primaryKey: old.primaryKey, isTemporary: false) }
            }
            switch value {
            case .object(let target): return id(target).map(PropertyValue.object) ?? .null
            case .objects(let targets): return .objects(Set(targets.compactMap(id)))
            default: return value
            }
        }
        var pending: [MigratingObject] = []
        var record: [UInt8] = []
        func flush() throws(StrataError) {
            guard !pending.isEmpty, let body else { return }
            do {
                try body(pending)
            } catch let error as StrataError {
                throw error
            } catch {
                throw StrataError(.invalidArgument, "the migration stage \(from) → \(to) threw: \(error)", cause: error)
            }
            var failures: [ValidationFailure] = []
            var batch = WriteBatch()
            for object in pending {
                for i in entity.requiredIndices where object.values[i] == .null {
                    failures.append(ValidationFailure(objectID: object.objectID, property: entity.properties[i].name, reason: .missingValue))
                }
                record.removeAll(keepingCapacity: true)
                RecordCoding.encode(object.values, version: object.version, generation: schemas.current, into: &record)
                var key = RecordCoding.key(object.objectID)
                schemas.translate(&key, toStored: true)
                batch.put(key, record)
                for number in entity.indexes.indices {
                    var entry = IndexKeyCoding.key(object.values, of: entity, index: number, primaryKey: object.objectID.primaryKey)
                    schemas.translate(&entry, toStored: true)
                    batch.put(entry, [])
                }
            }
            guard failures.isEmpty else {
                var error = StrataError(.validationFailed, "the migration stage \(from) → \(to) left values the new model requires unset; the store was not migrated")
                error.validationFailures = failures
                throw error
            }
            // The reader's scan holds a snapshot: writing under it is safe.
            try store.write(batch)
            done += pending.count
            pending.removeAll(keepingCapacity: true)
            progress?(done, total)
        }
        let prefix = RecordCoding.prefix(of: old)
        try reader.forEach(prefix: prefix) { key, value throws(StrataError) in
            guard let primaryKey = RecordCoding.primaryKey(fromKey: key, prefix: prefix), let snapshot = RecordCoding.decode(value, entity: old) else {
                throw RecordCoding.undecodable("a record of \(old.name)", format: value.first, under: "the schema it was written with")
            }
            let oldValues = snapshot.values.map(converted)
            let values = mapping.sources.map { source in source.old.map { source.value(from: oldValues[$0]) } ?? source.initial }
            pending.append(MigratingObject(
                objectID: ObjectID(entity: entity, primaryKey: primaryKey, isTemporary: false), oldEntity: old,
                oldValues: oldValues, values: values, version: snapshot.version))
            if pending.count >= batchSize { try flush() }
        }
        try flush()
    }
}
