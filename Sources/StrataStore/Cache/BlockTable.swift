/// A block-cache shard's table from a block's (file, block) to its decoded
/// block: open addressing with linear probing, at most half full, deletion
/// by backward shift (no tombstones).
///
/// A `Dictionary` hashes every key through Swift's seeded SipHash, a
/// noticeable part of a warm point get. These keys are numbers the store
/// hands out itself, never chosen by an outside party, so a multiplicative
/// (Fibonacci) hash of the packed key is enough to spread them.
///
/// Not thread-safe: the shard's lock guards it.
struct BlockTable {
    /// The packed key of each slot; meaningful where `values` holds a block.
    private var keys: [UInt64] = Array(repeating: 0, count: Self.minimumCapacity)
    private var values: [DecodedBlock?] = Array(repeating: nil, count: Self.minimumCapacity)
    private(set) var count = 0

    static let minimumCapacity = 16

    @inline(__always)
    private static func pack(_ key: BlockCache.Key) -> UInt64 { UInt64(key.file) << 32 | UInt64(key.block) }

    /// A key's home slot: the top log₂(capacity) bits of its product.
    @inline(__always)
    private func home(_ packed: UInt64) -> Int {
        Int(truncatingIfNeeded: (packed &* 0x9E37_79B9_7F4A_7C15) >> UInt64(64 - values.count.trailingZeroBitCount))
    }

    /// The slot holding `packed`, or else the empty slot where its probe ends.
    @inline(__always)
    private func probe(_ packed: UInt64) -> Int {
        let mask = values.count - 1
        var i = home(packed)
        while values[i] != nil, keys[i] != packed { i = (i &+ 1) & mask }
        return i
    }

    subscript(key: BlockCache.Key) -> DecodedBlock? {
        @inline(__always) get { values[probe(Self.pack(key))] }
    }

    /// Stores `block` for `key`, replacing any block it had.
    mutating func insert(_ block: DecodedBlock, for key: BlockCache.Key) { store(block, packed: Self.pack(key)) }

    private mutating func store(_ block: DecodedBlock, packed: UInt64) {
        if (count + 1) * 2 > values.count { rebuild(capacity: values.count * 2, keeping: { _ in true }) }
        let i = probe(packed)
        if values[i] == nil {
            keys[i] = packed
            count += 1
        }
        values[i] = block
    }

    /// Removes `key`'s block and returns it (nil when it had none).
    @discardableResult
    mutating func remove(_ key: BlockCache.Key) -> DecodedBlock? {
        var hole = probe(Self.pack(key))
        guard let removed = values[hole] else { return nil }
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
        rebuild(capacity: values.count) { key in
            !matches(BlockCache.Key(file: UInt32(truncatingIfNeeded: key >> 32), block: UInt32(truncatingIfNeeded: key)))
        }
    }

    /// Lays the table out afresh at `capacity` with the entries `keeps`
    /// accepts (by packed key); returns the others.
    @discardableResult
    private mutating func rebuild(capacity: Int, keeping keeps: (UInt64) -> Bool) -> [DecodedBlock] {
        let (oldKeys, oldValues) = (keys, values)
        keys = Array(repeating: 0, count: capacity)
        values = Array(repeating: nil, count: capacity)
        count = 0
        var dropped: [DecodedBlock] = []
        for (packed, block) in zip(oldKeys, oldValues) {
            guard let block else { continue }
            if keeps(packed) { store(block, packed: packed) } else { dropped.append(block) }
        }
        return dropped
    }
}
