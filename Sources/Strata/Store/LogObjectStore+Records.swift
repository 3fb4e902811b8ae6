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

    /// Under the save lock, for a batch request's ``ChangeSet/patched``:
    /// puts the stored record of each of `ids` (in key order, for the
    /// store's sake) with `patch(i)` applied to the i-th into `batch` —
    /// read and rewritten as bytes, no value decoded — unless `decoding`
    /// asks for the values for what the patch changes. Throws
    /// ``StrataError/Code/corruptRecord`` for a record that does not read
    /// as its entity's.
    func patchRecords(
        of ids: [ObjectID], _ patch: (Int) -> RecordCoding.RecordPatch, decoding: ([Int]) -> Bool = { _ in false },
        into batch: inout WriteBatch
    ) throws(StrataError) -> [StoredPatch] {
        let generation = schemas.current
        var result: [StoredPatch] = []
        result.reserveCapacity(ids.count)
        var site = RecordCoding.RecordPatch.Site()
        var yields = YieldPoints()
        for (i, id) in ids.enumerated() {
            yields.pass()
            recordsRead.add()
            guard let record = try records.get(RecordCoding.key(id)) else {
                result.append(.gone)
                continue
            }
            let patch = patch(i)
            try record.withBytes { (raw) throws(StrataError) in
                guard patch.locate(in: raw, entity: id.entity, site: &site) else { throw RecordCoding.undecodable(id, format: record.first) }
                let changed = patch.changedProperties(in: raw, at: site)
                if changed.isEmpty {
                    result.append(.unchanged)
                } else if !decoding(changed) {
                    patch.put(raw, at: site, of: id, generation: generation, into: &batch)
                    result.append(.patched(changed: changed))
                } else if let snapshot = RecordCoding.decode(raw, entity: id.entity) {
                    result.append(.decoded(snapshot, changed: changed))
                } else {
                    throw RecordCoding.undecodable(id, format: record.first)
                }
            }
        }
        return result
    }
}
