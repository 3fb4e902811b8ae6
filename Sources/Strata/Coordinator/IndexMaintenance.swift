internal import StrataStore

/// Keeps an entity's attribute indexes in step with its objects: the
/// entries a save adds and removes go into the save's own batch, so the
/// store holds both or neither, whatever happens to the process.
enum IndexMaintenance {
    static func insert(_ values: [PropertyValue], of id: ObjectID, into batch: inout WriteBatch) {
        for index in id.entity.indexes.indices {
            batch.put(IndexKeyCoding.key(values, of: id.entity, index: index, primaryKey: id.primaryKey), [])
        }
    }

    /// `old`: the values stored before the update (nil: none, then every
    /// entry is written as new).
    static func update(from old: [PropertyValue]?, to new: [PropertyValue], of id: ObjectID, into batch: inout WriteBatch) {
        for index in id.entity.indexes.indices {
            let newKey = IndexKeyCoding.key(new, of: id.entity, index: index, primaryKey: id.primaryKey)
            if let old {
                let oldKey = IndexKeyCoding.key(old, of: id.entity, index: index, primaryKey: id.primaryKey)
                if oldKey == newKey { continue }
                batch.delete(oldKey)
            }
            batch.put(newKey, [])
        }
    }

    static func delete(_ values: [PropertyValue], of id: ObjectID, into batch: inout WriteBatch) {
        for index in id.entity.indexes.indices {
            batch.delete(IndexKeyCoding.key(values, of: id.entity, index: index, primaryKey: id.primaryKey))
        }
    }
}
