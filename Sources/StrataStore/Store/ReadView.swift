/// A consistent, unchanging view of a ``StrataStore`` at one sequence number.
///
/// A view is a copy-on-write snapshot of the index and the files it points
/// into: taking one costs a lock hold of a few nanoseconds; holding it never
/// blocks writers (their next changes copy the index nodes they touch instead
/// of changing them in place); compaction may delete files the view still
/// reads, which stay readable through the descriptors the view keeps open.
///
/// ```swift
/// let view = store.readView()
/// let recipes = try view.scan(prefix: Array("recipe/".utf8))
/// let count = view.count          // the same keys, whatever writers do meanwhile
/// ```
public struct ReadView: Sendable {
    /// The sequence number of the last batch this view sees.
    public let sequence: UInt64
    private let pin: IndexPin
    var index: KeyIndex { pin.index }
    let files: [UInt32: StrataStore.StoredFile]
    let cache: BlockCache

    /// Call with `state` held (for reading): the snapshot is taken under it.
    init(sequence: UInt64, index: KeyIndex, files: [UInt32: StrataStore.StoredFile], cache: BlockCache, state: ReadWriteLock) {
        self.sequence = sequence
        self.pin = IndexPin(index, state: state)
        self.files = files
        self.cache = cache
    }

    /// How many keys the view holds.
    public var count: Int { index.count }

    /// The value of `key`, or nil.
    public func get(_ key: [UInt8]) throws(StoreError) -> [UInt8]? {
        try key.withBytes { (k) throws(StoreError) -> [UInt8]? in
            guard let entry = index.lookup(k) else {
                if let why = index.damage { throw StoreError.damagedIndex(why) }
                return nil
            }
            return try ValueReader.read(key: k, entry: entry, file: files[entry.file], cache: cache)
        }
    }

    /// Whether the view holds `key`: its index says, no value is read.
    public func contains(_ key: [UInt8]) throws(StoreError) -> Bool {
        try key.withBytes { (k) throws(StoreError) -> Bool in
            if index.lookup(k) != nil { return true }
            if let why = index.damage { throw StoreError.damagedIndex(why) }
            return false
        }
    }

    /// The values of several keys, from this one view.
    public func get(_ keys: [[UInt8]]) throws(StoreError) -> [[UInt8]?] {
        var values: [[UInt8]?] = []
        values.reserveCapacity(keys.count)
        for key in keys { values.append(try get(key)) }
        return values
    }

    /// Calls `body` with each key and value from `start` (inclusive) to `end`
    /// (exclusive; nil for no end) in ascending key order, while it returns true.
    public func forEach(from start: [UInt8], to end: [UInt8]? = nil, _ body: (_ key: [UInt8], _ value: [UInt8]) throws -> Bool) throws {
        try forEachBorrowed(from: start, to: end) { key, value in try body(Array(key), Array(value)) }
    }

    /// Calls `body` with each key and value from `start` (inclusive) to `end`
    /// (exclusive; nil for no end) in ascending key order, while it returns
    /// true, lending their bytes: valid only during the call, never copied.
    ///
    /// The scan to use when most records are looked at and few are kept (a
    /// query without an index): it allocates nothing per record, and reads
    /// each segment block once, however many of its records follow.
    ///
    /// ```swift
    /// var total = 0
    /// try view.forEachBorrowed(from: Array("recipe/".utf8), to: Array("recipe0".utf8)) { _, value in
    ///     total += value.count
    ///     return true
    /// }
    /// ```
    public func forEachBorrowed(
        from start: [UInt8], to end: [UInt8]? = nil, _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        // The block the previous record came from: consecutive keys mostly
        // share one, and the cache's lookup (a lock and a hash) is skipped.
        var current: (key: BlockCache.Key, block: DecodedBlock)?
        var file: (number: UInt32, file: StrataStore.StoredFile?)?
        let end = end ?? []
        try end.withUnsafeBytes { endBytes in
            try index.forEach(from: start) { key, entry in
                if !endBytes.isEmpty, compareBytes(key, endBytes) >= 0 { return false }
                if file?.number != entry.file { file = (entry.file, files[entry.file]) }
                switch file!.file {
                case .memtable(let memtable):
                    return try body(key, memtable.record(at: entry.block).value)
                case .segment(let segment):
                    let location = RecordLocation(packed: entry.block)
                    let cacheKey = BlockCache.Key(file: entry.file, block: location.block)
                    let block: DecodedBlock
                    if let current, current.key == cacheKey {
                        block = current.block
                    } else {
                        block = try ValueReader.block(cacheKey, of: segment, cache: cache)
                        current = (cacheKey, block)
                    }
                    return try ValueReader.withValue(of: key, at: location, in: block, path: segment.path) { try body(key, $0) }
                case nil:
                    throw StoreError(.corruption, "the index points at file \(entry.file), which is not open")
                }
            }
        }
        if let why = index.damage { throw StoreError.damagedIndex(why) }
    }

    /// Calls `body` with each key from `start` (inclusive) to `end`
    /// (exclusive; nil: to the last key), in order, until it returns false —
    /// reading no value, so no segment block: the keys are in the view's
    /// in-memory index. The key is lent for the call. For keys that carry
    /// their meaning themselves (a secondary index's entries, whose values
    /// are empty), this is the cheapest ordered read there is.
    ///
    /// ```swift
    /// var entries = 0
    /// try view.forEachKey(from: Array("i/".utf8), to: Array("i0".utf8)) { _ in entries += 1; return true }
    /// ```
    ///
    /// Throws ``StoreError/Code/corruption`` where the index cannot say it
    /// held every key the walk should have met (a chunk of its checkpoint
    /// could be neither read nor rebuilt), as a read of values does.
    public func forEachKey(from start: [UInt8], to end: [UInt8]? = nil, _ body: (_ key: UnsafeRawBufferPointer) throws -> Bool) throws {
        try Self.withBounds(start, end) { try forEachKey(fromBytes: $0, toBytes: $1, body) }
    }

    /// Lends `start` and `end` as bytes (an empty `end`: none).
    private static func withBounds(
        _ start: [UInt8], _ end: [UInt8]?, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer?) throws -> Void
    ) rethrows {
        try start.withUnsafeBytes { startBytes in
            try (end ?? []).withUnsafeBytes { endBytes in try body(startBytes, endBytes.isEmpty ? nil : endBytes) }
        }
    }

    /// ``forEachKey(from:to:_:)`` between lent bounds: a read of many
    /// ranges (an `IN` of thousands of keys) keeps them in one buffer.
    package func forEachKey(
        fromBytes start: UnsafeRawBufferPointer, toBytes end: UnsafeRawBufferPointer?, _ body: (_ key: UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        try index.forEach(fromBytes: start) { key, _ in
            if let end, compareBytes(key, end) >= 0 { return false }
            return try body(key)
        }
        try checkWhole()
    }

    /// ``forEachKey(from:to:_:)`` for each of `count` ranges, ascending and
    /// disjoint, their bounds lent by position for the whole call: one walk
    /// of the index (a merge), not a search from its root per range.
    package func forEachKey(
        inRanges count: Int, bounds: (Int) -> (start: UnsafeRawBufferPointer, end: UnsafeRawBufferPointer?),
        _ body: (_ key: UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        try index.forEach(inRanges: count, bounds: bounds) { key, _ in try body(key) }
        try checkWhole()
    }

    /// Throws when a walk that read keys alone may have missed some: the
    /// index lost a chunk it could neither read nor rebuild. A walk that
    /// reads values finds out as it goes; one that reads keys alone would
    /// answer without them.
    private func checkWhole() throws(StoreError) {
        if let why = index.damage { throw StoreError.damagedIndex(why) }
    }

    /// ``forEachKey(from:to:_:)`` backwards: each key from `start`
    /// (inclusive) to `end` (exclusive; nil: to the last key), last first,
    /// until `body` returns false. "The 20 largest" of an index reads 20
    /// entries from its end.
    ///
    /// ```swift
    /// var newest: [[UInt8]] = []
    /// try view.forEachKeyDescending(from: Array("i/".utf8), to: Array("i0".utf8)) { key in
    ///     newest.append(Array(key))
    ///     return newest.count < 20
    /// }
    /// ```
    public func forEachKeyDescending(from start: [UInt8], to end: [UInt8]? = nil, _ body: (_ key: UnsafeRawBufferPointer) throws -> Bool) throws {
        try Self.withBounds(start, end) { try forEachKeyDescending(fromBytes: $0, toBytes: $1, body) }
    }

    /// ``forEachKeyDescending(from:to:_:)`` between lent bounds.
    package func forEachKeyDescending(
        fromBytes start: UnsafeRawBufferPointer, toBytes end: UnsafeRawBufferPointer?, _ body: (_ key: UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        try index.forEachDescending(beforeBytes: end) { key, _ in
            if compareBytes(key, start) < 0 { return false }
            return try body(key)
        }
        try checkWhole()
    }

    /// The keys and values whose keys start with `prefix`, in order.
    public func scan(prefix: [UInt8], limit: Int = .max) throws -> [KeyValue] {
        try scan(from: prefix, to: Self.end(ofPrefix: prefix), limit: limit)
    }

    /// The keys and values from `start` (inclusive) to `end` (exclusive), in order.
    public func scan(from start: [UInt8], to end: [UInt8]?, limit: Int = .max) throws -> [KeyValue] {
        var result: [KeyValue] = []
        guard limit > 0 else { return result }
        try forEach(from: start, to: end) { key, value in
            result.append(KeyValue(key: key, value: value))
            return result.count < limit
        }
        return result
    }

    /// The keys that start with `prefix`, in order, without reading values.
    public func keys(prefix: [UInt8], limit: Int = .max) -> [[UInt8]] {
        var result: [[UInt8]] = []
        guard limit > 0 else { return result }
        let end = Self.end(ofPrefix: prefix)
        var cursor = index.makeCursor(from: prefix)
        while let (key, _) = cursor.next() {
            if let end, compareArrays(key, end) >= 0 { break }
            result.append(key)
            if result.count == limit { break }
        }
        return result
    }

    /// How many keys start with `prefix`.
    public func count(prefix: [UInt8]) -> Int {
        var n = 0
        let end = Self.end(ofPrefix: prefix)
        index.forEach(from: prefix) { key, _ in
            if let end, end.withUnsafeBytes({ compareBytes(key, $0) }) >= 0 { return false }
            n += 1
            return true
        }
        return n
    }

    /// The smallest key greater than every key with this prefix (nil: none).
    package static func end(ofPrefix prefix: [UInt8]) -> [UInt8]? {
        var end = prefix
        while let last = end.last {
            if last < 0xFF {
                end[end.count - 1] = last + 1
                return end
            }
            end.removeLast()
        }
        return nil
    }
}

/// A key and its value.
public struct KeyValue: Sendable, Hashable {
    /// The key's bytes.
    public var key: [UInt8]
    /// The value's bytes.
    public var value: [UInt8]
    /// The pair of `key` and `value`.
    public init(key: [UInt8], value: [UInt8]) {
        self.key = key
        self.value = value
    }
}

/// ``compareBytes(_:_:)`` of two arrays.
@inline(__always)
package func compareArrays(_ a: [UInt8], _ b: [UInt8]) -> Int {
    a.withUnsafeBytes { x in b.withUnsafeBytes { y in compareBytes(x, y) } }
}

/// Holds a view's index snapshot, and lets go of it under the store's state
/// lock. Once the last view of some nodes is gone, the writer (which mutates
/// under that lock) finds them unshared and writes them in place; the lock is
/// what orders those writes after the view's reads. The reference count
/// orders them too, but ThreadSanitizer cannot see inside the Swift runtime
/// and reports the in-place write as a race (as in the flush).
///
/// `@unchecked Sendable`: `index` is written only by `deinit`, under `state`.
final class IndexPin: @unchecked Sendable {
    private(set) var index: KeyIndex
    private let state: ReadWriteLock

    init(_ index: KeyIndex, state: ReadWriteLock) {
        self.index = index
        self.state = state
    }

    deinit {
        state.withLock { index = KeyIndex() }
    }
}

/// Turns an index entry into the value it points at.
enum ValueReader {
    @inline(__always)
    static func read(key: UnsafeRawBufferPointer, entry: IndexEntry, file: StrataStore.StoredFile?, cache: BlockCache) throws(StoreError) -> [UInt8] {
        switch file {
        case .memtable(let memtable):
            return Array(memtable.record(at: entry.block).value)
        case .segment(let segment):
            let location = RecordLocation(packed: entry.block)
            let block = try block(BlockCache.Key(file: entry.file, block: location.block), of: segment, cache: cache)
            return try value(of: key, at: location, in: block, path: segment.path)
        case nil:
            throw StoreError(.corruption, "the index points at file \(entry.file), which is not open")
        }
    }

    /// A segment's block, from the cache or else read (and cached).
    @inline(__always)
    static func block(_ cacheKey: BlockCache.Key, of segment: SegmentReader, cache: BlockCache) throws(StoreError) -> DecodedBlock {
        if let cached = cache.get(cacheKey) { return cached }
        let block = try segment.readBlock(cacheKey.block, memory: cache.memory)
        cache.insert(cacheKey, block)
        return block
    }

    /// The value from the block cache alone, or nil when the entry's block is
    /// not cached (or the entry points into a memtable, never cached).
    @inline(__always)
    static func cachedValue(key: UnsafeRawBufferPointer, entry: IndexEntry, cache: BlockCache) throws(StoreError) -> [UInt8]? {
        let location = RecordLocation(packed: entry.block)
        guard let block = cache.get(BlockCache.Key(file: entry.file, block: location.block), countingMiss: false) else { return nil }
        return try value(of: key, at: location, in: block, path: nil)
    }

    /// The value of the record at `location` in `block`, which must hold `key`.
    @inline(__always)
    private static func value(of key: UnsafeRawBufferPointer, at location: RecordLocation, in block: DecodedBlock, path: String?) throws(StoreError) -> [UInt8] {
        guard Int(location.slot) < block.count,
              let value = block.withRecord(Int(location.slot), { compareBytes($0.key, key) == 0 ? Array($0.value) : nil })
        else {
            throw StoreError(.corruption, "the index points at block \(location.block) slot \(location.slot), which does not hold the key", path: path)
        }
        return value
    }

    /// Calls `body` with the value of the record at `location` in `block`
    /// (which must hold `key`), lent for the call.
    @inline(__always)
    static func withValue<T>(
        of key: UnsafeRawBufferPointer, at location: RecordLocation, in block: DecodedBlock, path: String?, _ body: (UnsafeRawBufferPointer) throws -> T
    ) throws -> T {
        guard Int(location.slot) < block.count else { throw slotError(location, path) }
        return try block.withRecord(Int(location.slot)) { (record) throws -> T in
            guard compareBytes(record.key, key) == 0 else { throw slotError(location, path) }
            return try body(record.value)
        }
    }

    private static func slotError(_ location: RecordLocation, _ path: String?) -> StoreError {
        StoreError(.corruption, "the index points at block \(location.block) slot \(location.slot), which does not hold the key", path: path)
    }
}
