import Foundation
internal import StrataStore

extension LogObjectStore {
    /// Calls `body` with each stored object holding one of `keys`
    /// (distinct and ascending) and that key's position, in key order,
    /// at one read view of the store. Each value encodes self-delimited,
    /// so an entry holds exactly the values of the key it starts with: the
    /// range of a key is its prefix, and as the walk meets entries in key
    /// order, each belongs to the first key, at or after the last one
    /// matched, that it starts with — no key is copied to find it.
    func forEachUniqueHolder(
        of keys: [UniqueKey], _ body: (Int, ObjectID) throws(StrataError) -> Void
    ) throws(StrataError) {
        guard !keys.isEmpty else { return }
        var ranges = KeyRanges()
        for key in keys { ranges.appendPrefix { $0 += key.bytes } }
        var k = 0
        try records.forEachKey(in: ranges) { entry, _ throws(StrataError) in
            let id = try holder(ofEntry: entry)  // (checks the entry's length first)
            let key = UnsafeRawBufferPointer(rebasing: entry[..<(entry.count - 8)])
            while k < keys.count, !keys[k].bytes.withUnsafeBytes({ $0.count == key.count && memcmp($0.baseAddress!, key.baseAddress!, key.count) == 0 }) {
                k += 1
            }
            guard k < keys.count else { throw StrataError(.corruptRecord, "a unique index entry is out of order") }
            try body(k, id)
            return true
        }
    }

    /// The object a unique index entry names.
    private func holder(ofEntry entry: UnsafeRawBufferPointer) throws(StrataError) -> ObjectID {
        guard let primaryKey = IndexKeyCoding.primaryKey(ofEntry: entry),
              let entity = model.entity(at: UInt16(entry[1]) << 8 | UInt16(entry[2])) else {
            throw StrataError(.corruptRecord, "a unique index entry is malformed")
        }
        return ObjectID(entity: entity, primaryKey: primaryKey, isTemporary: false)
    }

    /// Under the save lock, from ``save(_:)``: puts the stored record of
    /// each object of `updates` with its attributes set into `batch` and
    /// returns the objects it changed. A record is patched where it lies
    /// (read and rewritten as bytes, no value decoded) unless the patch
    /// changes a value an index holds: then it is decoded and written
    /// whole, and its index entries move (into `indexEntries`). An object
    /// that holds the values already is left as it is. Throws
    /// ``StrataError/Code/corruptRecord`` for a record that does not read
    /// as its entity's, or one the request requires that is not stored.
    func applyPartialUpdates(
        _ updates: PartialUpdates, generation: UInt64, into batch: inout WriteBatch, indexEntries: inout IndexMaintenance
    ) throws(StrataError) -> [StoreSaveResult.PartialUpdate] {
        // A batch update gives every object the same attributes: one patch.
        let shared: RecordCoding.RecordPatch? = if case .same(let values) = updates.settings { RecordCoding.RecordPatch(values) } else { nil }
        var result: [StoreSaveResult.PartialUpdate] = []
        result.reserveCapacity(updates.ids.count)
        var site = RecordCoding.RecordPatch.Site()
        var indexed: (entity: EntityDescription, properties: Set<Int>)?
        var yields = YieldPoints()
        for (i, id) in updates.ids.enumerated() {
            yields.pass()
            recordsRead.add()
            guard let record = try records.get(RecordCoding.key(id)) else {
                if updates.requiresStored { throw StrataError(.corruptRecord, "\(id.entity.name)'s unique index names \(id), which is not stored") }
                continue  // deleted since the request selected it
            }
            if indexed?.entity !== id.entity { indexed = (id.entity, Set(id.entity.indexedProperties.joined())) }
            let patch = shared ?? RecordCoding.RecordPatch(updates.values(i))
            try record.withBytes { (raw) throws(StrataError) in
                guard patch.locate(in: raw, entity: id.entity, site: &site) else { throw RecordCoding.undecodable(id, format: record.first) }
                let changed = patch.changedProperties(in: raw, at: site)
                if changed.isEmpty { return }
                if !changed.contains(where: indexed!.properties.contains) {
                    patch.put(raw, at: site, of: id, generation: generation, into: &batch)
                    result.append(StoreSaveResult.PartialUpdate(id: id, changedProperties: changed, written: nil))
                    return
                }
                guard let stored = RecordCoding.decode(raw, entity: id.entity) else { throw RecordCoding.undecodable(id, format: record.first) }
                var values = stored.values
                for (index, value) in updates.values(i) { values[index] = value }
                let written = Snapshot(values: values, version: stored.version + 1)
                RecordCoding.put(id, values, version: written.version, generation: generation, into: &batch)
                indexEntries.update(from: stored.values, to: values, of: id)
                result.append(StoreSaveResult.PartialUpdate(id: id, changedProperties: changed, written: written))
            }
        }
        return result
    }
}
