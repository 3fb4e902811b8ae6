/// Which index entries can point into a checkpoint's segments: the file is
/// one of them, the sequence within its range, the block within its table.
struct SegmentBounds: IndexEntryCheck {
    private var numbers: [UInt32] = []
    private var limits: [(minimum: UInt64, maximum: UInt64, blocks: UInt32)] = []

    init(_ segments: [IndexCheckpoint.Segment]) {
        for s in segments.sorted(by: { $0.info.fileNumber < $1.info.fileNumber }) {
            numbers.append(s.info.fileNumber)
            limits.append((s.info.minimumSequence, s.info.maximumSequence, UInt32(s.blocks.count)))
        }
    }

    @inline(__always)
    func contains(_ entry: IndexEntry) -> Bool {
        if numbers.count == 1 {  // a compacted store: one comparison
            return entry.file == numbers[0] && Self.holds(limits[0], entry)
        }
        var low = 0, high = numbers.count
        while low < high {
            let mid = (low &+ high) >> 1
            if numbers[mid] < entry.file { low = mid &+ 1 } else { high = mid }
        }
        guard low < numbers.count, numbers[low] == entry.file else { return false }
        return Self.holds(limits[low], entry)
    }

    /// Whether a segment of these limits can hold the entry.
    @inline(__always)
    private static func holds(_ l: (minimum: UInt64, maximum: UInt64, blocks: UInt32), _ entry: IndexEntry) -> Bool {
        entry.sequence >= l.minimum && entry.sequence <= l.maximum && RecordLocation(packed: entry.block).block < l.blocks
    }

    /// A leaf's entries mostly point into one segment: its bounds are looked
    /// up again only when the file changes.
    @inline(__always)
    func containsAll(_ entries: UnsafeRawPointer, count: Int) -> Bool {
        var file = UInt32.max
        var bounds = (minimum: UInt64(1), maximum: UInt64(0), blocks: UInt32(0))  // holds nothing
        for i in 0..<count {
            let entry = entries.load(fromByteOffset: i &* 16, as: IndexEntry.self)
            if entry.file != file {
                guard let n = numbers.firstIndex(of: entry.file) else { return false }
                file = entry.file
                bounds = limits[n]
            }
            guard Self.holds(bounds, entry) else { return false }
        }
        return true
    }
}
