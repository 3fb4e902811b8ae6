import StrataStore

/// A key-value engine `strata-bench engine` runs the same workloads on, side
/// by side: StrataStore itself, LMDB and LevelDB (through their C libraries,
/// which only strata-bench links).
///
/// ```swift
/// let engine = try LMDBEngine(directory: dir, durable: false)
/// try engine.write(keys[0..<1000], values: values)
/// let found = try engine.makeReader().get(keys[0])
/// ```
protocol PeerEngine: AnyObject, Sendable {
    /// The name the tables show.
    static var name: String { get }
    /// Opens the store in `directory`, creating it when missing. `durable`:
    /// each batch is on disk (synced) before ``write(_:values:)`` returns;
    /// otherwise nothing is synced.
    init(directory: String, durable: Bool) throws
    /// Writes one atomic batch: `keys[i]` gets `values[i & 63]`. Safe to
    /// call from several threads at once.
    func write(_ keys: ArraySlice<[UInt8]>, values: [[UInt8]]) throws
    /// A reader for one thread: whatever per-thread state the engine's reads
    /// want (LMDB's read transaction) lives in it.
    func makeReader() throws -> any PeerReader
    func close() throws
}

/// Point reads from one thread, each seeing the store as it is at the time.
protocol PeerReader {
    /// Whether `key` is stored; its value is read in full.
    func get(_ key: [UInt8]) throws -> Bool
}

/// What a peer's C library reported.
struct PeerEngineError: Error, CustomStringConvertible {
    let description: String
}

/// StrataStore, behind the same interface as its peers.
final class StrataPeer: PeerEngine, PeerReader {  // (its one property is a Sendable store)
    static let name = "StrataStore"
    private let store: StrataStore

    init(directory: String, durable: Bool) throws {
        var options = StoreOptions()
        // Grouped: concurrent writers share fsyncs, as LevelDB's do; a lone
        // writer syncs each batch.
        options.syncMode = durable ? .grouped : .none
        options.blockCacheCapacity = 512 << 20
        store = try StrataStore(directory: directory, options: options)
    }

    func write(_ keys: ArraySlice<[UInt8]>, values: [[UInt8]]) throws {
        var batch = WriteBatch()
        for (i, key) in zip(keys.indices, keys) { batch.put(key, values[i & 63]) }
        try store.write(batch)
    }

    func makeReader() throws -> any PeerReader { self }
    func get(_ key: [UInt8]) throws -> Bool { try store.get(key) != nil }
    func close() throws { try store.close() }
}
