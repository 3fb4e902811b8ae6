/// A block-cache shard's table from a block's (file, block) to its decoded
/// block: open addressing with linear probing, at most half full, deletion
/// by backward shift (no tombstones).
///
/// A `Dictionary` hashes every key through Swift's seeded SipHash: about
/// 250 instructions of a warm point get's 2,600 went to hashing one key
/// (callgrind). These keys are numbers the store hands out itself, never
/// chosen by an outside party, so a multiplicative (Fibonacci) hash of the
/// packed key is enough to spread them.
///
/// Not thread-safe: the shard's lock guards it.
struct BlockTable {
    /// The packed key of each slot; meaningful where `values` holds a block.
    private var keys: [UInt64]
    private var values: [DecodedBlock?]
    private(set) var count = 0
    /// 64 − log₂(capacity): a key's home slot is the top bits of its product.
    private var shift: UInt64

    init() {
        keys = Array(repeating: 0, count: Self.minimumCapacity)
        values = Array(repeating: nil, count: Self.minimumCapacity)
        shift = UInt64(64 - Self.minimumCapacity.trailingZeroBitCount)
    }

    static let minimumCapacity = 16

    @inline(__always)
    private static func pack(_ key: BlockCache.Key) -> UInt64 { UInt64(key.file) << 32 | UInt64(key.block) }

    @inline(__always)
    private func home(_ packed: UInt64) -> Int { Int(truncatingIfNeeded: (packed &* 0x9E37_79B9_7F4A_7C15) >> shift) }

    /// The slot holding `packed`, or nil.
    @inline(__always)
    private func slot(of packed: UInt64) -> Int? {
        let mask = values.count - 1
        var i = home(packed)
        while values[i] != nil {
            if keys[i] == packed { return i }
            i = (i &+ 1) & mask
        }
        return nil
    }

    subscript(key: BlockCache.Key) -> DecodedBlock? {
        @inline(__always) get { slot(of: Self.pack(key)).flatMap { values[$0] } }
    }

    /// Stores `block` for `key`, replacing any block it had.
    mutating func insert(_ block: DecodedBlock, for key: BlockCache.Key) {
        let packed = Self.pack(key)
        if let i = slot(of: packed) {
            values[i] = block
            return
        }
        if (count + 1) * 2 > values.count { grow() }
        let mask = values.count - 1
        var i = home(packed)
        while values[i] != nil { i = (i &+ 1) & mask }
        keys[i] = packed
        values[i] = block
        count += 1
    }

    /// Removes `key`'s block and returns it (nil when it had none).
    @discardableResult
    mutating func remove(_ key: BlockCache.Key) -> DecodedBlock? {
        guard var hole = slot(of: Self.pack(key)) else { return nil }
        let removed = values[hole]
        values[hole] = nil
        count -= 1
        // Backward shift: an entry after the hole moves into it unless its
        // home lies cyclically in (hole, j], where a probe still finds it.
        let mask = values.count - 1
        var j = hole
        while true {
            j = (j &+ 1) & mask
            guard values[j] != nil else { break }
            let h = home(keys[j])
            let stays = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j)
            if !stays {
                keys[hole] = keys[j]
                values[hole] = values[j]
                values[j] = nil
                hole = j
            }
        }
        return removed
    }

    /// Removes every block whose key matches, and returns them.
    mutating func removeAll(where matches: (BlockCache.Key) -> Bool) -> [DecodedBlock] {
        var removed: [DecodedBlock] = []
        var kept: [(UInt64, DecodedBlock)] = []
        for i in values.indices {
            guard let block = values[i] else { continue }
            let key = BlockCache.Key(file: UInt32(truncatingIfNeeded: keys[i] >> 32), block: UInt32(truncatingIfNeeded: keys[i]))
            if matches(key) { removed.append(block) } else { kept.append((keys[i], block)) }
        }
        guard !removed.isEmpty else { return [] }
        rebuild(capacity: values.count, from: kept)
        return removed
    }

    private mutating func grow() {
        var entries: [(UInt64, DecodedBlock)] = []
        entries.reserveCapacity(count)
        for i in values.indices { if let block = values[i] { entries.append((keys[i], block)) } }
        rebuild(capacity: values.count * 2, from: entries)
    }

    private mutating func rebuild(capacity: Int, from entries: [(UInt64, DecodedBlock)]) {
        keys = Array(repeating: 0, count: capacity)
        values = Array(repeating: nil, count: capacity)
        shift = UInt64(64 - capacity.trailingZeroBitCount)
        count = 0
        let mask = capacity - 1
        for (packed, block) in entries {
            var i = home(packed)
            while values[i] != nil { i = (i &+ 1) & mask }
            keys[i] = packed
            values[i] = block
            count += 1
        }
    }
}
