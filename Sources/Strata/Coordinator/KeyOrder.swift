/// The order a save writes its new objects in: by record key, entity
/// number then primary key (``RecordCoding/KeyBytes``), so the
/// engine's index takes them as an ascending run. A context's change set
/// lists them in that order already (``forEach(in:_:)``); a change set made
/// otherwise is sorted.
///
/// A comparison sort is a visible share of an insert and save, paid per
/// object and growing with the save. Both parts of the key fit one
/// `UInt64` when the primary key is below 2⁴⁸ (the coordinator hands keys
/// out per entity, counting up), and a least-significant-digit radix sort
/// of that word touches each object once per byte in which the keys
/// differ — two or three for a save's dense primary keys of one entity.
enum KeyOrder {
    /// Below this many objects the comparison sort is used: the radix
    /// sort's fixed cost (a table of 2,048 counts, and 256 prefix sums per
    /// pass) is then spread over few objects. Chosen, not measured: saves
    /// this small are no measurable share of an insert.
    static let radixThreshold = 256

    /// The positions of `ids` in the order of their record keys.
    static func positions(of ids: [ObjectID]) -> [Int] {
        if ids.count >= radixThreshold, let (keys, ascending) = packedKeys(ids) {
            // A context's save lists its new objects in key order already.
            return ascending ? Array(ids.indices) : radixOrder(of: keys)
        }
        var keys = ids.enumerated().map { (entity: $1.entity.index, primaryKey: $1.primaryKey, position: $0) }
        keys.sort { ($0.entity, $0.primaryKey) < ($1.entity, $1.primaryKey) }
        return keys.map(\.position)
    }

    /// Calls `body` with each entry of `table` in key order. A context
    /// builds its change set with it: new objects in key order are in the
    /// order they were made, so about the order of their memory (changed
    /// ones too, when a fetch made them: it makes them in key order), and
    /// every pass over them after that — validation, the store's encoding,
    /// applying the outcome, letting go of them — walks memory forwards
    /// instead of in the hash table's order, which jumps across memory on
    /// every object once a save outgrows the caches, and makes a large save
    /// markedly slower. Only the table's own storage is read in hash order.
    static func forEach(in table: [ObjectID: ManagedObject], _ body: (ObjectID, ManagedObject) -> Void) {
        var slots: [Dictionary<ObjectID, ManagedObject>.Index] = []
        var ids: [ObjectID] = []
        slots.reserveCapacity(table.count)
        ids.reserveCapacity(table.count)
        for slot in table.indices {
            slots.append(slot)
            ids.append(table.keys[slot])
        }
        for i in positions(of: ids) { body(ids[i], table.values[slots[i]]) }
    }

    /// Each ID's entity number and primary key in one word, ordered as
    /// their record keys are, and whether they ascend already; nil when a
    /// primary key needs more than 48 bits.
    static func packedKeys(_ ids: [ObjectID]) -> (keys: [UInt64], ascending: Bool)? {
        var keys: [UInt64] = []
        keys.reserveCapacity(ids.count)
        var ascending = true
        var previous: UInt64 = 0
        for id in ids {
            guard id.primaryKey < 1 << 48 else { return nil }
            let key = UInt64(id.entity.index) << 48 | id.primaryKey
            ascending = ascending && key >= previous
            previous = key
            keys.append(key)
        }
        return (keys, ascending)
    }

    /// The positions of `keys` in ascending order (equal keys keep their
    /// order): one pass counts every byte's digits, then one stable
    /// scatter per byte in which the keys differ.
    static func radixOrder(of keys: [UInt64]) -> [Int] {
        let count = keys.count
        var order = Array(0..<count)
        guard count > 1 else { return order }
        var scratch = [Int](repeating: 0, count: count)
        var counts = [Int](repeating: 0, count: 8 * 256)
        keys.withUnsafeBufferPointer { keys in
            counts.withUnsafeMutableBufferPointer { counts in
                for key in keys {
                    for byte in 0..<8 { counts[byte << 8 | Int(truncatingIfNeeded: key >> (byte << 3)) & 0xFF] += 1 }
                }
                for byte in 0..<8 {
                    let shift = UInt64(byte << 3)
                    let table = UnsafeMutableBufferPointer(rebasing: counts[byte << 8 ..< (byte + 1) << 8])
                    // Every key has the same digit here: nothing moves.
                    if table[Int(truncatingIfNeeded: keys[0] >> shift) & 0xFF] == count { continue }
                    var start = 0
                    for digit in 0..<256 {
                        let n = table[digit]
                        table[digit] = start
                        start += n
                    }
                    order.withUnsafeBufferPointer { from in
                        scratch.withUnsafeMutableBufferPointer { to in
                            for position in from {
                                let digit = Int(truncatingIfNeeded: keys[position] >> shift) & 0xFF
                                to[table[digit]] = position
                                table[digit] += 1
                            }
                        }
                    }
                    swap(&order, &scratch)
                }
            }
        }
        return order
    }
}
