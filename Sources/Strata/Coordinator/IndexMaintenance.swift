import Foundation
@_spi(Coding) internal import StrataStore

/// Keeps an entity's attribute indexes in step with its objects: the
/// entries a save adds and removes go into the save's own batch, so the
/// store holds both or neither, whatever happens to the process.
///
/// One per save. The entries are gathered in one buffer and written to the
/// batch in key order by ``write(into:)``, after the save's records: the
/// engine then takes each as one ascending run (a walk down the index per
/// leaf, not per key) rather than an index entry between every two records.
struct IndexMaintenance {
    private var key: [UInt8] = []
    private var oldKey: [UInt8] = []
    /// Every entry's key, one after the other.
    private var keys: [UInt8] = []
    /// Each entry: where its key starts in `keys`, its length, put or delete.
    private var entries: [(start: Int, count: Int, isPut: Bool)] = []
    /// Where each entry of an index of one attribute starts in `keys`, and
    /// its length: the entries a point lookup reads (``touchedKeyHashes``).
    private var pointEntries: [(start: Int, count: Int)] = []

    mutating func insert(_ values: [PropertyValue], of id: ObjectID) {
        for index in id.entity.indexes.indices {
            IndexKeyCoding.writeKey(values, of: id.entity, index: index, primaryKey: id.primaryKey, into: &key)
            add(key, isPut: true, of: id.entity, index: index)
        }
    }

    /// `old`: the values stored before the update (nil: none, then every
    /// entry is written as new).
    mutating func update(from old: [PropertyValue]?, to new: [PropertyValue], of id: ObjectID) {
        for index in id.entity.indexes.indices {
            // An entry whose values did not change stays: no key to encode.
            if let old, id.entity.indexedProperties[index].allSatisfy({ old[$0] == new[$0] }) { continue }
            IndexKeyCoding.writeKey(new, of: id.entity, index: index, primaryKey: id.primaryKey, into: &key)
            if let old {
                IndexKeyCoding.writeKey(old, of: id.entity, index: index, primaryKey: id.primaryKey, into: &oldKey)
                if oldKey == key { continue }
                add(oldKey, isPut: false, of: id.entity, index: index)
            }
            add(key, isPut: true, of: id.entity, index: index)
        }
    }

    mutating func delete(_ values: [PropertyValue], of id: ObjectID) {
        for index in id.entity.indexes.indices {
            IndexKeyCoding.writeKey(values, of: id.entity, index: index, primaryKey: id.primaryKey, into: &key)
            add(key, isPut: false, of: id.entity, index: index)
        }
    }

    /// Writes the entries into `batch`, ordered by key. Every entry ends
    /// with its object's primary key, so no two name one key: the order
    /// changes nothing the batch does.
    func write(into batch: inout WriteBatch) {
        keys.withUnsafeBytes { all in
            func bytes(_ entry: (start: Int, count: Int, isPut: Bool)) -> UnsafeRawBufferPointer {
                UnsafeRawBufferPointer(rebasing: all[entry.start..<entry.start + entry.count])
            }
            let order = ByteStringOrder.order(of: entries.map { $0.start..<$0.start + $0.count }, in: all)
            let noValue = BorrowedBytes(UnsafeRawBufferPointer(start: nil, count: 0))  // an index entry is a key alone
            for entry in order.lazy.map({ entries[$0] }) {
                if entry.isPut { batch.put(BorrowedBytes(bytes(entry)), noValue) } else { batch.delete(bytes(entry)) }
            }
        }
    }

    /// How many keys ``touchedKeyHashes`` holds.
    var touchedKeyCount: Int { pointEntries.count }

    /// The keys without their primary keys, hashed as ``IndexKeyWrites``
    /// keeps them, of this batch's entries in indexes of one attribute:
    /// the keys whose point lookups the batch changes.
    var touchedKeyHashes: [UInt64] {
        keys.withUnsafeBytes { all in
            pointEntries.map { entry in
                IndexKeyWrites.hash(prefix: UnsafeRawBufferPointer(rebasing: all[entry.start..<entry.start + entry.count - 8]),
                                    key: UnsafeRawBufferPointer(start: nil, count: 0))
            }
        }
    }

    private mutating func add(_ key: [UInt8], isPut: Bool, of entity: EntityDescription, index: Int) {
        if entity.indexedProperties[index].count == 1 { pointEntries.append((keys.count, key.count)) }
        entries.append((keys.count, key.count, isPut))
        keys += key
    }
}
