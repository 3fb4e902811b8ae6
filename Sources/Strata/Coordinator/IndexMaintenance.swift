internal import StrataStore

/// Keeps an entity's attribute indexes in step with its objects: the
/// entries a save adds and removes go into the save's own batch, so the
/// store holds both or neither, whatever happens to the process.
///
/// One per save: the entries are encoded into two buffers it reuses (the
/// batch copies each key), not into a fresh array per entry.
struct IndexMaintenance {
    private var key: [UInt8] = []
    private var oldKey: [UInt8] = []

    mutating func insert(_ values: [PropertyValue], of id: ObjectID, into batch: inout WriteBatch) {
        for index in id.entity.indexes.indices {
            IndexKeyCoding.writeKey(values, of: id.entity, index: index, primaryKey: id.primaryKey, into: &key)
            batch.put(key, Self.noValue)
        }
    }

    /// `old`: the values stored before the update (nil: none, then every
    /// entry is written as new).
    mutating func update(from old: [PropertyValue]?, to new: [PropertyValue], of id: ObjectID, into batch: inout WriteBatch) {
        for index in id.entity.indexes.indices {
            // An entry whose values did not change stays: no key to encode.
            if let old, id.entity.indexedProperties[index].allSatisfy({ old[$0] == new[$0] }) { continue }
            IndexKeyCoding.writeKey(new, of: id.entity, index: index, primaryKey: id.primaryKey, into: &key)
            if let old {
                IndexKeyCoding.writeKey(old, of: id.entity, index: index, primaryKey: id.primaryKey, into: &oldKey)
                if oldKey == key { continue }
                batch.delete(oldKey)
            }
            batch.put(key, Self.noValue)
        }
    }

    mutating func delete(_ values: [PropertyValue], of id: ObjectID, into batch: inout WriteBatch) {
        for index in id.entity.indexes.indices {
            IndexKeyCoding.writeKey(values, of: id.entity, index: index, primaryKey: id.primaryKey, into: &key)
            batch.delete(key)
        }
    }

    /// An index entry is a key alone.
    private static let noValue: [UInt8] = []
}
