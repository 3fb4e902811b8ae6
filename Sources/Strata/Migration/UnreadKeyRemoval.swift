internal import StrataStore

/// Deletes what no reader looks at: records and index entries stored under
/// a number the current schema generation does not read them under — an
/// entity's records after a custom stage rewrote them under a new number, a
/// removed entity's, the entries of a replaced index set — and those of a
/// build or a stage a crash or a refusal cut short (numbers no generation
/// names yet). Runs after each migration step and at every read-write open;
/// a crash in the middle leaves keys the next run deletes, and the store
/// reads the same meanwhile.
enum UnreadKeyRemoval {
    /// Removes the unread keys of a store with these schema generations.
    static func run(in store: any RecordStore, generations: [StoredSchemas.Generation]) throws(StrataError) {
        let everyNumber = generations.reduce(into: Set<UInt16>()) { $0.formUnion($1.allNumbers) }
        // Steps cut short used the numbers after every one named.
        let firstUnnamed = Int(everyNumber.max() ?? 0) + 1
        var ranges: [KeyRange] = []
        for (tag, read) in [(RecordCoding.objectTag, generations.last!.numbers), (IndexKeyCoding.indexTag, generations.last!.indexNumbers)] {
            ranges += everyNumber.subtracting(read).sorted().map { KeyRange(prefix: RecordCoding.entityPrefix(tag, $0)) }
            if firstUnnamed <= Int(UInt16.max) {
                ranges.append(KeyRange(start: RecordCoding.entityPrefix(tag, UInt16(firstUnnamed)), end: [tag &+ 1]))
            }
        }
        try remove(in: ranges.sorted { $0.start.lexicographicallyPrecedes($1.start) }, from: store)
    }

    /// Removes every record stored under `recordNumbers` and every index
    /// entry stored under `indexNumbers`.
    static func remove(recordNumbers: [UInt16] = [], indexNumbers: [UInt16], from store: any RecordStore) throws(StrataError) {
        let ranges = indexNumbers.map { KeyRange(prefix: RecordCoding.entityPrefix(IndexKeyCoding.indexTag, $0)) }
            + recordNumbers.map { KeyRange(prefix: RecordCoding.entityPrefix(RecordCoding.objectTag, $0)) }
        try remove(in: ranges.sorted { $0.start.lexicographicallyPrecedes($1.start) }, from: store)
    }

    /// Deletes the keys in `ranges` (sorted, disjoint), `batchSize` per
    /// batch, until none is left, each scan starting after the last key
    /// the one before deleted.
    private static func remove(in ranges: [KeyRange], from store: any RecordStore, batchSize: Int = 16_384) throws(StrataError) {
        var ranges = ranges
        while !ranges.isEmpty {
            var batch = WriteBatch(), count = 0, last: [UInt8] = []
            try store.forEachKey(in: KeyRanges(ranges)) { key, _ throws(StrataError) -> Bool in
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
