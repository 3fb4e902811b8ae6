import CLMDB
import Foundation

/// LMDB through liblmdb: one environment, its unnamed database, default
/// flags but `MDB_NOTLS` (a reader's transaction is not bound to a thread)
/// and, when not durable, `MDB_NOSYNC`. A write is one write transaction
/// (LMDB lets one writer in at a time); a durable one syncs at commit.
///
/// `@unchecked Sendable`: `env` and `dbi` are set in `init` and `env` cleared
/// in `close()`, which the benchmark calls when no other thread uses the
/// engine; between the two, LMDB's environment is thread-safe (writers
/// serialize on its lock, each reader has its own transaction).
final class LMDBEngine: PeerEngine, @unchecked Sendable {
    static let name = "LMDB"
    private var env: OpaquePointer?
    private var dbi = MDB_dbi()

    init(directory: String, durable: Bool) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Self.check(mdb_env_create(&env), "mdb_env_create")
        // A sparse file: room for far more than the benchmark writes.
        try Self.check(mdb_env_set_mapsize(env, 16 << 30), "mdb_env_set_mapsize")
        try Self.check(mdb_env_set_maxreaders(env, 126), "mdb_env_set_maxreaders")
        let flags = UInt32(MDB_NOTLS) | (durable ? 0 : UInt32(MDB_NOSYNC))
        try Self.check(mdb_env_open(env, directory, flags, 0o644), "mdb_env_open \(directory)")
        var txn: OpaquePointer?
        try Self.check(mdb_txn_begin(env, nil, 0, &txn), "mdb_txn_begin")
        try Self.check(mdb_dbi_open(txn, nil, 0, &dbi), "mdb_dbi_open")
        try Self.check(mdb_txn_commit(txn), "mdb_txn_commit")
    }

    static func check(_ code: Int32, _ what: String) throws {
        guard code == 0 else { throw PeerEngineError(description: "\(what): \(String(cString: mdb_strerror(code)))") }
    }

    func write(_ keys: ArraySlice<[UInt8]>, values: [[UInt8]]) throws {
        var txn: OpaquePointer?
        try Self.check(mdb_txn_begin(env, nil, 0, &txn), "mdb_txn_begin")
        for (i, key) in zip(keys.indices, keys) {
            // Lent, not copied: LMDB reads a key and a value through its
            // `MDB_val`s and never writes them (a `var` copy and its mutable
            // bytes would cost each put two allocations and copies).
            let code = key.withUnsafeBytes { kb in
                values[i & 63].withUnsafeBytes { vb in
                    var kv = MDB_val(mv_size: kb.count, mv_data: UnsafeMutableRawPointer(mutating: kb.baseAddress))
                    var vv = MDB_val(mv_size: vb.count, mv_data: UnsafeMutableRawPointer(mutating: vb.baseAddress))
                    return mdb_put(txn, dbi, &kv, &vv, 0)
                }
            }
            if code != 0 {
                mdb_txn_abort(txn)
                try Self.check(code, "mdb_put")
            }
        }
        try Self.check(mdb_txn_commit(txn), "mdb_txn_commit")
    }

    func makeReader() throws -> any PeerReader { try Reader(env: env, dbi: dbi) }

    /// A read-only transaction, reset after each get and renewed for the
    /// next: each get sees the latest commit, without a transaction's
    /// allocation per get (LMDB's own advice).
    final class Reader: PeerReader {
        private let txn: OpaquePointer?
        private let dbi: MDB_dbi
        /// The last value read (kept, so the copy is not optimized away).
        private(set) var lastValue: [UInt8] = []

        init(env: OpaquePointer?, dbi: MDB_dbi) throws {
            var txn: OpaquePointer?
            try LMDBEngine.check(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn), "mdb_txn_begin (read)")
            mdb_txn_reset(txn)
            self.txn = txn
            self.dbi = dbi
        }

        deinit { mdb_txn_abort(txn) }

        func get(_ key: [UInt8]) throws -> Bool {
            try LMDBEngine.check(mdb_txn_renew(txn), "mdb_txn_renew")
            defer { mdb_txn_reset(txn) }
            var value = MDB_val()
            let code = key.withUnsafeBytes { kb in  // lent, as in `write`
                var kv = MDB_val(mv_size: kb.count, mv_data: UnsafeMutableRawPointer(mutating: kb.baseAddress))
                return mdb_get(txn, dbi, &kv, &value)
            }
            if code == MDB_NOTFOUND { return false }
            try LMDBEngine.check(code, "mdb_get")
            // Copied out, as the other engines hand a value over (LMDB's
            // points into the map only until the transaction is reset).
            lastValue = Array(UnsafeRawBufferPointer(start: value.mv_data, count: value.mv_size))
            return true
        }
    }

    func close() throws {
        mdb_env_close(env)
        env = nil
    }
}
