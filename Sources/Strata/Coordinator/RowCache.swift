/// The coordinator's cache of committed snapshots, by object, within a byte
/// budget: what a fault or an object loaded by ID reads before it goes to the
/// store. Scans leave it alone (they touch far more rows than anyone reads
/// again); saves replace what they change.
///
/// Sizes are estimates (the snapshot's values and their payloads, plus the
/// table's own overhead), close enough to bound the memory. Past the budget
/// the cache drops entries in the table's own order — about random — until
/// it is at three quarters of it: O(what it drops), no bookkeeping per read.
///
/// Not thread-safe: the coordinator guards it with its `cacheLock`.
struct RowCache {
    let budget: Int
    private var entries: [ObjectID: (snapshot: Snapshot, bytes: Int)] = [:]
    private(set) var bytes = 0
    /// Bumped by every save and by closing, so a read that raced one does
    /// not cache a stale snapshot.
    private(set) var epoch: UInt64 = 0

    init(budget: Int) { self.budget = max(0, budget) }

    var count: Int { entries.count }

    subscript(id: ObjectID) -> Snapshot? { entries[id]?.snapshot }

    mutating func insert(_ snapshot: Snapshot, for id: ObjectID) {
        let size = Self.estimatedBytes(of: snapshot)
        guard size <= budget / 4 else { remove(id); return }
        if let old = entries.updateValue((snapshot, size), forKey: id) { bytes -= old.bytes }
        bytes += size
        if bytes > budget { shrink(to: budget / 4 * 3) }
    }

    mutating func remove(_ id: ObjectID) {
        if let old = entries.removeValue(forKey: id) { bytes -= old.bytes }
    }

    mutating func removeAll() {
        entries.removeAll()
        bytes = 0
    }

    mutating func advanceEpoch() { epoch &+= 1 }

    private mutating func shrink(to target: Int) {
        var dropped: [ObjectID] = []
        var remaining = bytes
        for (id, entry) in entries {
            guard remaining > target else { break }
            dropped.append(id)
            remaining -= entry.bytes
        }
        for id in dropped { remove(id) }
    }

    /// The table entry, the snapshot and its values array, and each value's
    /// payload beyond what fits inline.
    static func estimatedBytes(of snapshot: Snapshot) -> Int {
        var size = 96 + snapshot.values.count * MemoryLayout<PropertyValue>.stride
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
