/// Decompressed segment blocks, kept up to a byte budget.
///
/// Eviction is CLOCK (second chance): a hit only sets a flag, so the hot read
/// path takes the lock for a dictionary lookup and nothing else; the hand
/// sweeps when an insertion needs room. Keys are (file number, block index),
/// which never name different contents: files are immutable and their numbers
/// are never reused.
package final class BlockCache: @unchecked Sendable {
    // Sendable because: every mutable property is guarded by `lock`.
    package struct Key: Hashable, Sendable {
        package var file: UInt32
        package var block: UInt32
    }

    private struct Slot {
        var key: Key
        var block: DecodedBlock?
        var referenced: Bool
    }

    private let lock = Lock()
    package let capacity: Int
    // Guarded by `lock`.
    private var slots: [Slot] = []
    private var positions: [Key: Int] = [:]
    private var free: [Int] = []
    private var hand = 0
    private var used = 0
    /// Files whose blocks were dropped for good (deleted by compaction); a
    /// reader still holding one must not bring its blocks back. Guarded by `lock`.
    private var retired: Set<UInt32> = []
    private var hits = 0
    private var misses = 0

    package init(capacity: Int) { self.capacity = capacity }

    package func get(_ key: Key) -> DecodedBlock? {
        lock.withLock {
            if let i = positions[key] {
                slots[i].referenced = true
                hits += 1
                return slots[i].block
            }
            misses += 1
            return nil
        }
    }

    package func insert(_ key: Key, _ block: DecodedBlock) {
        let cost = block.memoryCost
        guard cost <= capacity else { return }
        lock.withLock {
            if positions[key] != nil || retired.contains(key.file) { return }
            while used + cost > capacity, evictOne() {}
            let slot = Slot(key: key, block: block, referenced: false)
            if let i = free.popLast() {
                slots[i] = slot
                positions[key] = i
            } else {
                positions[key] = slots.count
                slots.append(slot)
            }
            used += cost
        }
    }

    /// Drops every block of a file for good (after compaction deleted it).
    package func removeFile(_ file: UInt32) {
        lock.withLock {
            retired.insert(file)
            for (i, slot) in slots.enumerated() where slot.block != nil && slot.key.file == file {
                remove(at: i)
            }
        }
    }

    private func evictOne() -> Bool {
        guard !positions.isEmpty else { return false }
        while true {
            if hand >= slots.count { hand = 0 }
            if slots[hand].block != nil {
                if slots[hand].referenced {
                    slots[hand].referenced = false
                } else {
                    remove(at: hand)
                    hand += 1
                    return true
                }
            }
            hand += 1
        }
    }

    private func remove(at i: Int) {
        guard let block = slots[i].block else { return }
        used -= block.memoryCost
        positions[slots[i].key] = nil
        slots[i].block = nil
        free.append(i)
    }

    package struct Counters: Sendable {
        package var hits: Int
        package var misses: Int
        package var bytes: Int
        package var blocks: Int
    }

    package var counters: Counters {
        lock.withLock { Counters(hits: hits, misses: misses, bytes: used, blocks: positions.count) }
    }
}
