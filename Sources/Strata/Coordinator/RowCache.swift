/// The coordinator's cache of committed snapshots, by object, within a byte
/// budget: what a fault or an object loaded by ID reads before it goes to the
/// store. A fetch that returns faults adds the rows it read while there is
/// room, never pushing anything out (a scan touches far more rows than
/// anyone reads again); saves replace what they change.
///
/// Sizes are estimates (the snapshot's values and their payloads, plus the
/// table's own overhead), close enough to bound the memory. Past the budget
/// the cache drops its oldest entries, first in first out, until it is at
/// three quarters of it: O(what it drops), no bookkeeping per read. (Dropping
/// entries in the table's own bucket order instead left long probe runs in
/// the hash table: filling a million faults spent two thirds of its time in
/// lookups.)
///
/// Not thread-safe: the coordinator guards it with its `cacheLock`.
struct RowCache {
    let budget: Int
    private var entries: [ObjectID: (snapshot: Snapshot, bytes: Int, serial: UInt64)] = [:]
    /// Insertion order: (ID, the serial of that insertion). An entry replaced
    /// or removed since leaves its old pair behind, skipped when reached.
    private var order: [(id: ObjectID, serial: UInt64)] = []
    private var orderStart = 0
    private var nextSerial: UInt64 = 0
    private(set) var bytes = 0
    /// Bumped by every save and by closing, so a read that raced one does
    /// not cache a stale snapshot.
    private(set) var epoch: UInt64 = 0

    init(budget: Int) { self.budget = max(0, budget) }

    var count: Int { entries.count }

    subscript(id: ObjectID) -> Snapshot? { entries[id]?.snapshot }

    func contains(_ id: ObjectID) -> Bool { entries.index(forKey: id) != nil }

    /// Whether an offered row for `id` would be taken: the cache has room
    /// for a row the size of those it holds, and does not hold this one.
    /// Room below the budget is not enough: an offer that does not fit is
    /// refused (``insertIfRoom(_:for:)``), and a cache filled by offers
    /// stops just short of its budget, where asking only `bytes < budget`
    /// had every fetch read and decode each row it met for nothing.
    func wants(_ id: ObjectID) -> Bool {
        // The size of a row as those held go; holding none, any room will do.
        let typical = entries.isEmpty ? 1 : bytes / entries.count
        return bytes &+ typical <= budget && !contains(id)
    }

    /// Caches `snapshot`, dropping the oldest entries if that passes the budget.
    mutating func insert(_ snapshot: Snapshot, for id: ObjectID) {
        let size = Self.estimatedBytes(of: snapshot)
        guard size <= budget / 4 else { remove(id); return }
        store(snapshot, size, for: id)
        if bytes > budget { shrink(to: budget / 4 * 3) }
    }

    /// Caches `snapshot` only if it fits without dropping anything: what a
    /// scan offers, which must not push out what faults and loads use.
    mutating func insertIfRoom(_ snapshot: Snapshot, for id: ObjectID) {
        let size = Self.estimatedBytes(of: snapshot)
        guard bytes + size <= budget else { return }
        store(snapshot, size, for: id)
    }

    /// Replaces `id`'s entry with `snapshot` if the cache holds one.
    mutating func refresh(_ snapshot: Snapshot, for id: ObjectID) {
        guard contains(id) else { return }
        insert(snapshot, for: id)
    }

    mutating func remove(_ id: ObjectID) {
        if let old = entries.removeValue(forKey: id) { bytes -= old.bytes }
    }

    mutating func removeAll() {
        entries.removeAll()
        order.removeAll()
        orderStart = 0
        bytes = 0
    }

    mutating func advanceEpoch() { epoch &+= 1 }

    private mutating func store(_ snapshot: Snapshot, _ size: Int, for id: ObjectID) {
        nextSerial &+= 1
        if let old = entries.updateValue((snapshot, size, nextSerial), forKey: id) { bytes -= old.bytes }
        bytes += size
        order.append((id, nextSerial))
        // Entries replaced over and over (an object saved again and again)
        // leave stale pairs: drop them once they outnumber the live ones.
        if order.count - orderStart > 2 * entries.count + 1024 {
            order = order[orderStart...].filter { entries[$0.id]?.serial == $0.serial }
            orderStart = 0
        }
    }

    private mutating func shrink(to target: Int) {
        while bytes > target && orderStart < order.count {
            let (id, serial) = order[orderStart]
            orderStart += 1
            if entries[id]?.serial == serial { remove(id) }
        }
        // Let go of the consumed front now and then: O(1) amortized.
        if orderStart > 1024 && orderStart * 2 > order.count {
            order.removeFirst(orderStart)
            orderStart = 0
        }
    }

    /// The table entry, the snapshot and its values array, and each value's
    /// payload beyond what fits inline. The fixed part counts what an
    /// entry costs around its values as the heap sees it: the table's
    /// bucket at its load factor, the insertion-order pair, the array's
    /// header and the allocator's own (`strata-bench server` compares the
    /// count with the heap).
    static func estimatedBytes(of snapshot: Snapshot) -> Int {
        var size = 256 + snapshot.values.count * MemoryLayout<PropertyValue>.stride
        for value in snapshot.values {
            switch value {
            case .string(let s): size += s.utf8.count > 15 ? 32 + s.utf8.count : 0
            case .data(let d): size += 32 + d.count
            case .objects(let ids): size += 64 + ids.count * 2 * MemoryLayout<ObjectID>.stride
            default: break
            }
        }
        return size
    }
}

/// What the coordinator's row cache holds (``PersistentStoreCoordinator/rowCacheStatistics``).
public struct RowCacheStatistics: Sendable, Equatable {
    /// Snapshots held.
    public var entries: Int
    /// Their estimated size in bytes.
    public var bytes: Int
    /// The budget `bytes` stays within.
    public var budget: Int
}
