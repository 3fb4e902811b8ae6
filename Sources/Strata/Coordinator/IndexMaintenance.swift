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
    /// Every entry's key, one after the other, each encoded in place (not
    /// into a buffer of its own and copied here).
    private var keys: [UInt8] = []
    /// Each entry: where its key starts in `keys`, its length, put or delete.
    private var entries: [(start: Int, count: Int, isPut: Bool)] = []
    /// Where each entry of an index of one attribute starts in `keys`, and
    /// its length: the entries a point lookup reads (``touchedKeyHashes``).
    private var pointEntries: [(start: Int, count: Int)] = []

    mutating func insert(_ values: [PropertyValue], of id: ObjectID) {
        let entity = id.entity
        for index in entity.indexes.indices {
            let start = keys.count
            IndexKeyCoding.appendKey(values, of: entity, index: index, primaryKey: id.primaryKey, to: &keys)
            addEntry(start..<keys.count, isPut: true, of: entity, index: index)
        }
    }

    /// `old`: the values stored before the update (nil: none, then every
    /// entry is written as new).
    mutating func update(from old: [PropertyValue]?, to new: [PropertyValue], of id: ObjectID) {
        let entity = id.entity
        for index in entity.indexes.indices {
            // An entry whose values did not change stays: no key to encode.
            if let old, entity.indexedProperties[index].allSatisfy({ old[$0] == new[$0] }) { continue }
            let start = keys.count
            IndexKeyCoding.appendKey(new, of: entity, index: index, primaryKey: id.primaryKey, to: &keys)
            guard let old else {
                addEntry(start..<keys.count, isPut: true, of: entity, index: index)
                continue
            }
            let oldStart = keys.count
            IndexKeyCoding.appendKey(old, of: entity, index: index, primaryKey: id.primaryKey, to: &keys)
            // Values that differ but encode alike leave the entry as it is.
            if keys[start..<oldStart].elementsEqual(keys[oldStart...]) {
                keys.removeSubrange(start...)
                continue
            }
            addEntry(start..<oldStart, isPut: true, of: entity, index: index)
            addEntry(oldStart..<keys.count, isPut: false, of: entity, index: index)
        }
    }

    mutating func delete(_ values: [PropertyValue], of id: ObjectID) {
        let entity = id.entity
        for index in entity.indexes.indices {
            let start = keys.count
            IndexKeyCoding.appendKey(values, of: entity, index: index, primaryKey: id.primaryKey, to: &keys)
            addEntry(start..<keys.count, isPut: false, of: entity, index: index)
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

    /// Records the entry whose key was encoded into `keys` at `bytes`.
    private mutating func addEntry(_ bytes: Range<Int>, isPut: Bool, of entity: EntityDescription, index: Int) {
        if entity.indexedProperties[index].count == 1 { pointEntries.append((bytes.lowerBound, bytes.count)) }
        entries.append((bytes.lowerBound, bytes.count, isPut))
    }
}
