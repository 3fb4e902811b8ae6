import CLevelDB
import Foundation

/// LevelDB through its C API: default options (Snappy compression, 4 MB
/// write buffer) with a 512 MB block cache, as StrataStore gets in this
/// benchmark; `sync` on every write when durable (concurrent writers share
/// a sync through LevelDB's write queue).
///
/// `@unchecked Sendable`: the handles are made in `init` and released in
/// `close()`, which the benchmark calls when no other thread uses the
/// engine; between the two, LevelDB's database and option handles are
/// thread-safe.
final class LevelDBEngine: PeerEngine, PeerReader, @unchecked Sendable {
    static let name = "LevelDB"
    private var db: OpaquePointer?
    private let options: OpaquePointer?
    private let cache: OpaquePointer?
    private let writeOptions: OpaquePointer?
    private let readOptions: OpaquePointer?

    init(directory: String, durable: Bool) throws {
        options = leveldb_options_create()
        cache = leveldb_cache_create_lru(512 << 20)
        leveldb_options_set_create_if_missing(options, 1)
        leveldb_options_set_cache(options, cache)
        writeOptions = leveldb_writeoptions_create()
        leveldb_writeoptions_set_sync(writeOptions, durable ? 1 : 0)
        readOptions = leveldb_readoptions_create()
        var error: UnsafeMutablePointer<CChar>?
        db = leveldb_open(options, directory, &error)
        try Self.check(error, "leveldb_open \(directory)")
    }

    static func check(_ error: UnsafeMutablePointer<CChar>?, _ what: String) throws {
        guard let error else { return }
        let message = String(cString: error)
        leveldb_free(error)
        throw PeerEngineError(description: "\(what): \(message)")
    }

    func write(_ keys: ArraySlice<[UInt8]>, values: [[UInt8]]) throws {
        let batch = leveldb_writebatch_create()
        defer { leveldb_writebatch_destroy(batch) }
        for (i, key) in zip(keys.indices, keys) {
            let value = values[i & 63]
            key.withUnsafeBufferPointer { k in
                value.withUnsafeBufferPointer { v in
                    k.withMemoryRebound(to: CChar.self) { kc in
                        v.withMemoryRebound(to: CChar.self) { vc in
                            leveldb_writebatch_put(batch, kc.baseAddress, kc.count, vc.baseAddress, vc.count)
                        }
                    }
                }
            }
        }
        var error: UnsafeMutablePointer<CChar>?
        leveldb_write(db, writeOptions, batch, &error)
        try Self.check(error, "leveldb_write")
    }

    func makeReader() throws -> any PeerReader { self }

    func get(_ key: [UInt8]) throws -> Bool {
        var length = 0
        var error: UnsafeMutablePointer<CChar>?
        let value = key.withUnsafeBufferPointer { k in
            k.withMemoryRebound(to: CChar.self) { leveldb_get(db, readOptions, $0.baseAddress, $0.count, &length, &error) }
        }
        try Self.check(error, "leveldb_get")
        guard let value else { return false }
        leveldb_free(value)  // the value was copied out in full
        return true
    }

    func close() throws {
        leveldb_close(db)
        db = nil
        leveldb_readoptions_destroy(readOptions)
        leveldb_writeoptions_destroy(writeOptions)
        leveldb_options_destroy(options)
        leveldb_cache_destroy(cache)
    }
}
