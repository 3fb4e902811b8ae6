internal import StrataStore

/// Where the coordinator keeps records: the StrataStore log store on disk,
/// or a dictionary in memory. Implementations are safe to call from any thread.
protocol RecordStore: AnyObject, Sendable {
    func get(_ key: [UInt8]) throws(StrataError) -> [UInt8]?
    /// Calls `body` with each record whose key starts with `prefix`, in key
    /// order, lending key and value for the call, until it returns false.
    func forEachWhile(prefix: [UInt8], _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws(StrataError) -> Bool) throws(StrataError)
    /// Calls `body` with each key in `ranges` (ascending and disjoint), in
    /// order — last first when `descending` — and a lookup of any other key
    /// at the same read view, until `body` returns false.
    func forEachKey(
        in ranges: KeyRanges, descending: Bool,
        _ body: (_ key: UnsafeRawBufferPointer, _ get: ([UInt8]) throws(StrataError) -> [UInt8]?) throws(StrataError) -> Bool
    ) throws(StrataError)
    /// Applies `batch` atomically (and durably, for the log store).
    func write(_ batch: WriteBatch) throws(StrataError)
    func close() throws(StrataError)
    var statistics: StoreStatistics? { get }
    /// Writes the log out to segments and reclaims the space of dead records.
    func compact() throws(StrataError)
    /// Makes what was written durable even when writes are not synced
    /// (`syncMode = .none`): after a migration, before any compaction can
    /// write records of the new schema generation into durable segments
    /// while the history naming it is still in an unsynced log.
    func makeDurable() throws(StrataError)
    /// For a store opened read-only beside the process writing it: reads in
    /// what that process wrote since (``StrataStore/catchUp()``) and lists
    /// each key it changed that `keeping` keeps, with whether the key held
    /// a value before and holds one now.
    func catchUp(keeping: ([UInt8]) -> Bool) throws(StrataError) -> [CaughtUpKey]
    /// Moves on with every write a read can see (the engine's visible
    /// sequence): two reads at one version see the same keys.
    var readVersion: UInt64 { get }
}

/// A key a catch-up found changed (``RecordStore/catchUp(keeping:)``).
struct CaughtUpKey {
    var key: [UInt8]
    var existedBefore: Bool
    var existsNow: Bool
}

extension RecordStore {
    /// ``forEachKey(in:descending:_:)`` in ascending order.
    func forEachKey(
        in ranges: KeyRanges, _ body: (_ key: UnsafeRawBufferPointer, _ get: ([UInt8]) throws(StrataError) -> [UInt8]?) throws(StrataError) -> Bool
    ) throws(StrataError) {
        try forEachKey(in: ranges, descending: false, body)
    }

    /// Calls `body` with each record whose key starts with `prefix`, in key
    /// order, lending key and value for the call.
    func forEach(prefix: [UInt8], _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws(StrataError) -> Void) throws(StrataError) {
        try forEachWhile(prefix: prefix) { (key, value) throws(StrataError) -> Bool in
            try body(key, value)
            return true
        }
    }
}

/// Keys from `start` (inclusive) to `end` (exclusive; nil: no end).
struct KeyRange: Hashable, Sendable {
    var start: [UInt8]
    var end: [UInt8]?

    /// Every key that starts with `prefix`.
    init(prefix: [UInt8]) {
        start = prefix
        end = endOfPrefix(prefix)
    }

    init(start: [UInt8], end: [UInt8]?) {
        self.start = start
        self.end = end
    }

    func contains(_ key: [UInt8]) -> Bool {
        !key.lexicographicallyPrecedes(start) && (end.map { key.lexicographicallyPrecedes($0) } ?? true)
    }
}

/// The first key after every key that starts with `prefix` (nil: no end).
func endOfPrefix(_ prefix: [UInt8]) -> [UInt8]? { ReadView.end(ofPrefix: prefix) }

/// The default store: one `StrataStore` directory. Each coordinator save is
/// one `write`, so one atomic, durable log batch.
final class LogRecordStore: RecordStore {
    let engine: StrataStore

    init(directory: String, options: StoreOptions) throws(StrataError) {
        do {
            engine = try StrataStore(directory: directory, options: options)
        } catch let error as StoreError {
            throw StrataError.storage(error)
        } catch {
            throw StrataError(.storage, "\(error)")
        }
    }

    func get(_ key: [UInt8]) throws(StrataError) -> [UInt8]? {
        do throws(StoreError) { return try engine.get(key) } catch { throw StrataError.storage(error) }
    }

    func catchUp(keeping: ([UInt8]) -> Bool) throws(StrataError) -> [CaughtUpKey] {
        do throws(StoreError) {
            let before = engine.readView()
            let caughtUp = try engine.catchUp()
            guard caughtUp.changed else { return [] }
            let after = engine.readView()
            var keys: [CaughtUpKey] = []
            for key in caughtUp.changedKeys where keeping(key) {
                keys.append(CaughtUpKey(key: key, existedBefore: try before.contains(key), existsNow: try after.contains(key)))
            }
            return keys
        } catch {
            throw StrataError.storage(error)
        }
    }

    func forEachWhile(prefix: [UInt8], _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws(StrataError) -> Bool) throws(StrataError) {
        try Self.scanning {
            try engine.readView().forEachBorrowed(from: prefix, to: endOfPrefix(prefix)) { key, value in try body(key, value) }
        }
    }

    func forEachKey(
        in ranges: KeyRanges, descending: Bool,
        _ body: (_ key: UnsafeRawBufferPointer, _ get: ([UInt8]) throws(StrataError) -> [UInt8]?) throws(StrataError) -> Bool
    ) throws(StrataError) {
        let view = engine.readView()
        func get(_ key: [UInt8]) throws(StrataError) -> [UInt8]? {
            do throws(StoreError) { return try view.get(key) } catch { throw StrataError.storage(error) }
        }
        try Self.scanning {
            var going = true
            // Index entries carry their meaning in the key: no value is read.
            if !descending && ranges.count > 1 {
                // Many ranges (an `IN`): one walk of the index, a merge.
                try ranges.withBounds { count, range in
                    try view.forEachKey(inRanges: count, bounds: range) { key in try body(key, get) }
                }
                return
            }
            try ranges.forEach(descending: descending) { start, end in
                if descending {
                    try view.forEachKeyDescending(fromBytes: start, toBytes: end) { key in
                        going = try body(key, get)
                        return going
                    }
                } else {
                    try view.forEachKey(fromBytes: start, toBytes: end) { key in
                        going = try body(key, get)
                        return going
                    }
                }
                return going
            }
        }
    }

    /// Runs an engine scan whose body throws ``StrataError``: the engine's
    /// untyped throw carries either that or its own ``StoreError``.
    private static func scanning(_ scan: () throws -> Void) throws(StrataError) {
        do {
            try scan()
        } catch let error as StrataError {
            throw error
        } catch let error as StoreError {
            throw StrataError.storage(error)
        } catch {
            throw StrataError(.storage, "\(error)")
        }
    }

    func write(_ batch: WriteBatch) throws(StrataError) {
        do throws(StoreError) { _ = try engine.write(batch) } catch { throw StrataError.storage(error) }
    }

    func close() throws(StrataError) {
        do throws(StoreError) { try engine.close() } catch { throw StrataError.storage(error) }
    }

    /// Closes the store, leaving its directory as the open found it when
    /// nothing was written since (``StrataStore/closeUntouched()``).
    func closeUntouched() throws(StrataError) {
        do throws(StoreError) { try engine.closeUntouched() } catch { throw StrataError.storage(error) }
    }

    var statistics: StoreStatistics? { engine.statistics }

    var readVersion: UInt64 { engine.sequence }

    func makeDurable() throws(StrataError) {
        guard engine.options.syncMode == .none, !engine.options.readOnly else { return }
        do throws(StoreError) { try engine.flush() } catch { throw StrataError.storage(error) }
    }

    func compact() throws(StrataError) {
        do throws(StoreError) {
            try engine.flush()
            try engine.compact()
        } catch {
            throw StrataError.storage(error)
        }
    }
}

/// A store that lives and dies with the coordinator, for tests and caches.
///
/// `@unchecked Sendable`: `records` is guarded by `lock`.
final class InMemoryRecordStore: RecordStore, @unchecked Sendable {
    private let lock = Lock()
    private var records: [[UInt8]: [UInt8]] = [:]  // guarded by `lock`
    private var writes: UInt64 = 0                   // guarded by `lock`
    /// The keys of `records` in order, sorted when first read (nil until
    /// then) and kept in order by each write after, in proportion to what
    /// it wrote (``ChunkedKeyOrder``; sorting them again at the next read made
    /// each save cost in proportion to the store): a read of a few ranges
    /// — a lookup, an `IN` of thousands of keys — seeks them, rather than
    /// testing every key against every range. Guarded by `lock`.
    private var sortedKeys: ChunkedKeyOrder?

    func get(_ key: [UInt8]) throws(StrataError) -> [UInt8]? { lock.withLock { records[key] } }

    /// One state for a whole read: the records and their keys in order.
    private func readView() -> ([[UInt8]: [UInt8]], ChunkedKeyOrder) {
        lock.withLock {
            if sortedKeys == nil { sortedKeys = ChunkedKeyOrder(sorted: records.keys.sorted { compareArrays($0, $1) < 0 }) }
            return (records, sortedKeys!)
        }
    }

    func forEachWhile(prefix: [UInt8], _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws(StrataError) -> Bool) throws(StrataError) {
        let (view, keys) = readView()
        _ = try keys.forEach(in: keys.lowerBound(prefix)..<keys.count, descending: false) { (key) throws(StrataError) -> Bool in
            guard key.starts(with: prefix) else { return false }
            return try key.withBytes { (k) throws(StrataError) in try view[key]!.withBytes { (v) throws(StrataError) in try body(k, v) } }
        }
    }

    func forEachKey(
        in ranges: KeyRanges, descending: Bool,
        _ body: (_ key: UnsafeRawBufferPointer, _ get: ([UInt8]) throws(StrataError) -> [UInt8]?) throws(StrataError) -> Bool
    ) throws(StrataError) {
        let (view, keys) = readView()
        try ranges.forEach(descending: descending) { (start, end) throws(StrataError) -> Bool in
            let first = keys.lowerBound(start)
            let last = end.map { keys.lowerBound($0) } ?? keys.count
            guard first < last else { return true }
            return try keys.forEach(in: first..<last, descending: descending) { (key) throws(StrataError) -> Bool in
                try key.withBytes { (k) throws(StrataError) in try body(k) { view[$0] } }
            }
        }
    }

    func write(_ batch: WriteBatch) throws(StrataError) {
        var operations: [([UInt8], [UInt8]?)] = []
        batch.encoded.withUnsafeBytes { payload in
            BatchDecoder.forEach(payload) { op in
                operations.append((Array(op.key), op.kind == .put ? Array(op.value) : nil))
            }
        }
        lock.withLock {
            // Whether each key the batch writes was there before it and is
            // after it: one hash of the key in each dictionary an operation.
            var presence: [[UInt8]: (before: Bool, after: Bool)] = [:]
            presence.reserveCapacity(operations.count)
            for (key, value) in operations {
                let previous = if let value { records.updateValue(value, forKey: key) } else { records.removeValue(forKey: key) }
                presence[key, default: (previous != nil, false)].after = value != nil
            }
            writes += 1
            guard var keys = sortedKeys else { return }
            var added: [[UInt8]] = [], removed: [[UInt8]] = []
            for (key, state) in presence where state.before != state.after {
                if state.after { added.append(key) } else { removed.append(key) }
            }
            // A write of more than an eighth of the keys: sorted again at the next read.
            guard (added.count + removed.count) * 8 <= keys.count else {
                sortedKeys = nil
                return
            }
            sortedKeys = nil  // one reference to the keys while they change
            keys.update(removing: removed, inserting: added)
            sortedKeys = keys
        }
    }

    var readVersion: UInt64 { lock.withLock { writes } }

    func close() throws(StrataError) {}
    var statistics: StoreStatistics? { nil }
    func compact() throws(StrataError) {}
    func makeDurable() throws(StrataError) {}

    func catchUp(keeping: ([UInt8]) -> Bool) throws(StrataError) -> [CaughtUpKey] {
        throw StrataError(.invalidArgument, "an in-memory store belongs to this process alone: there is no other process's writing to catch up with")
    }
}
