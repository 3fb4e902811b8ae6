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
        guard let n = position(of: entry.file) else { return false }
        return Self.holds(limits[n], entry)
    }

    /// Where segment `file` is in `numbers`, if it is one of them.
    @inline(__always)
    private func position(of file: UInt32) -> Int? {
        if numbers.count == 1 { return numbers[0] == file ? 0 : nil }  // a compacted store: one comparison
        var low = 0, high = numbers.count
        while low < high {
            let mid = (low &+ high) >> 1
            if numbers[mid] < file { low = mid &+ 1 } else { high = mid }
        }
        return low < numbers.count && numbers[low] == file ? low : nil
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
                guard let n = position(of: entry.file) else { return false }
                file = entry.file
                bounds = limits[n]
            }
            guard Self.holds(bounds, entry) else { return false }
        }
        return true
    }
}
