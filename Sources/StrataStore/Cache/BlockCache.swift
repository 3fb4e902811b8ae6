/// Decompressed segment blocks, kept up to a byte budget.
///
/// Sixteen shards, each with its own lock and an equal share of the budget,
/// so that readers on different cores rarely meet on a lock (with one lock,
/// two reader threads read slower than one: the mutex is handed back and
/// forth on every get). Keys are (file number, block index), which never name
/// different contents: files are immutable and their numbers are never reused.
///
/// Eviction is CLOCK (second chance) per shard: a hit only sets a flag, so the
/// hot path takes a shard lock for a table lookup (``BlockTable``) and nothing else.
package final class BlockCache: Sendable {
    package struct Key: Hashable, Sendable {
        package var file: UInt32
        package var block: UInt32
    }

    private static let shardCount = 16
    private let shards: [Shard]
    package let capacity: Int
    /// Where the blocks read for the cache are decoded: frames of
    /// `frameSize` in huge pages (see ``BlockMemory``).
    package let memory: BlockMemory

    /// A cache of `capacity` bytes whose blocks are mostly `frameSize` bytes
    /// (the store's block size).
    package init(capacity: Int, frameSize: Int) {
        self.capacity = capacity
        memory = BlockMemory(capacity: capacity, frameSize: frameSize)
        shards = (0..<Self.shardCount).map { _ in Shard(capacity: capacity / Self.shardCount) }
    }

    @inline(__always)
    private func shard(_ key: Key) -> Shard {
        // Consecutive blocks of one file spread over the shards.
        shards[Int((key.block &+ key.file &* 0x9E37_79B9) & UInt32(Self.shardCount - 1))]
    }

    /// The cached block, or nil. `countingMiss: false` is for a probe that
    /// may not concern a segment at all (a get tries the cache before it
    /// knows whether the key lives in a memtable).
    package func get(_ key: Key, countingMiss: Bool = true) -> DecodedBlock? { shard(key).get(key, countingMiss: countingMiss) }

    package func insert(_ key: Key, _ block: DecodedBlock) { shard(key).insert(key, block) }

    /// Drops every block of a file for good (after compaction deleted it).
    package func removeFile(_ file: UInt32) { shards.forEach { $0.removeFile(file) } }

    package struct Counters: Sendable {
        package var hits = 0
        package var misses = 0
        package var bytes = 0
        package var blocks = 0
    }

    package var counters: Counters {
        shards.reduce(into: Counters()) { total, shard in
            let c = shard.counters
            total.hits += c.hits
            total.misses += c.misses
            total.bytes += c.bytes
            total.blocks += c.blocks
        }
    }

    private final class Shard: @unchecked Sendable {
        // Sendable because: every mutable property (and each cached block's
        // `referenced` flag) is guarded by `lock`. The lock is also why the
        // runtime exclusivity checks are off for them: with those of
        // `DecodedBlock.referenced`, the checks would be a noticeable share
        // of a warm get.
        private let lock = Lock()
        private let capacity: Int
        /// The cached blocks; a hit is one table lookup. Guarded by `lock`.
        @exclusivity(unchecked) private var blocks = BlockTable()
        /// The CLOCK ring: the keys in the order the hand visits them (keys
        /// evicted or dropped are skipped and removed as the hand meets them).
        /// Guarded by `lock`.
        @exclusivity(unchecked) private var ring: [Key] = []
        @exclusivity(unchecked) private var hand = 0
        @exclusivity(unchecked) private var used = 0
        @exclusivity(unchecked) private var hits = 0
        @exclusivity(unchecked) private var misses = 0
        /// Files whose blocks were dropped for good, so that a reader still
        /// holding one does not bring its blocks back. Only the most recent 64
        /// are kept: past them a re-admitted block merely waits for eviction
        /// (file numbers are never reused, so it is never wrong). Guarded by `lock`.
        @exclusivity(unchecked) private var retired: Set<UInt32> = []
        @exclusivity(unchecked) private var retiredOrder: [UInt32] = []

        init(capacity: Int) { self.capacity = capacity }

        func get(_ key: Key, countingMiss: Bool) -> DecodedBlock? {
            lock.withLock {
                if let block = blocks[key] {
                    block.referenced = true
                    hits += 1
                    return block
                }
                if countingMiss { misses += 1 }
                return nil
            }
        }

        func insert(_ key: Key, _ block: DecodedBlock) {
            let cost = block.memoryCost
            guard cost <= capacity else { return }
            lock.withLock {
                if blocks[key] != nil || retired.contains(key.file) { return }
                while used + cost > capacity, evictOne() {}
                blocks.insert(block, for: key)
                ring.append(key)
                used += cost
            }
        }

        func removeFile(_ file: UInt32) {
            lock.withLock {
                if retired.insert(file).inserted {
                    retiredOrder.append(file)
                    if retiredOrder.count > 64 { retired.remove(retiredOrder.removeFirst()) }
                }
                for block in blocks.removeAll(where: { $0.file == file }) { used -= block.memoryCost }
                ring.removeAll { $0.file == file }
                hand = min(hand, ring.count)
            }
        }

        /// Evicts one block the hand finds unreferenced since its last pass.
        private func evictOne() -> Bool {
            while !ring.isEmpty {
                if hand >= ring.count { hand = 0 }
                let key = ring[hand]
                guard let block = blocks[key] else {
                    removeFromRing(at: hand)  // already dropped
                    continue
                }
                if block.referenced {
                    block.referenced = false
                    hand += 1
                } else {
                    blocks.remove(key)
                    used -= block.memoryCost
                    removeFromRing(at: hand)
                    return true
                }
            }
            return false
        }

        private func removeFromRing(at i: Int) {
            ring[i] = ring[ring.count - 1]
            ring.removeLast()
        }

        var counters: Counters {
            lock.withLock { Counters(hits: hits, misses: misses, bytes: used, blocks: blocks.count) }
        }
    }
}
