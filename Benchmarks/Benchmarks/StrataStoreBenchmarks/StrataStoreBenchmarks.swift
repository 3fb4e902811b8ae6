// Micro-benchmarks of StrataStore's public API.
//
// Every benchmark works on a store of its own in a fresh temporary directory,
// with `syncMode = .none` (no fsync: the benchmarks measure the engine, not
// the disk) but for the one durable write, 16-byte keys and 100-byte values. Building the store and the
// inputs happens in `setup` or before `startMeasurement()`, never inside the
// measured part.

import Benchmark
import Foundation
import StrataStore

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        warmupIterations: 3,
        maxDuration: .seconds(2),
        maxIterations: 10_000
    )

    // One `write` of a 1,000-record batch per iteration, every batch with
    // new keys, into one store that keeps growing for the whole run (its
    // memtable is flushed to segments in the background as the log fills).
    writeBatchBenchmark("write batch of 1000", configuration: .init(maxIterations: 1_000),
                        fixture: StoreFixture()) { Records.key($0.nextRecord) }

    // The same with 16 random bytes for each key: each lands at a random
    // place in the in-memory index (a descent to a random leaf), where the
    // keys above mostly append at its right edge.
    writeBatchBenchmark("write batch of 1000 random keys", configuration: .init(maxIterations: 1_000),
                        fixture: StoreFixture()) { Records.randomKey(&$0.random) }

    // One durable `write` of a 1,000-record batch (`.grouped`, one writer):
    // the log frame, its `fdatasync`, memtable and index. Mostly the disk's
    // sync; the rest is what the rows above measure.
    writeBatchBenchmark("durable write batch of 1000", configuration: .init(maxDuration: .seconds(5), maxIterations: 500),
                        fixture: StoreFixture(syncMode: .grouped)) { Records.key($0.nextRecord) }

    // One `flush()` of 10,000 new records per iteration (written before the
    // measurement, in batches of 1,000) into one store that keeps growing:
    // the segment written (LZ4, no fsync), the manifest switched, and every
    // key repointed from the memtable to the segment in the index — in
    // chunks of 256, one walk of the index each (`KeyIndex.replaceAll`).
    let flusher = StoreFixture()
    Benchmark(
        "flush 10,000 records",
        configuration: .init(maxDuration: .seconds(5), maxIterations: 200)
    ) { benchmark in
        let store = try flusher.openStore()
        var batch = WriteBatch()
        for _ in 0 ..< Records.perFlush {
            batch.put(Records.key(flusher.nextRecord), Records.value(flusher.nextRecord))
            flusher.nextRecord += 1
            if batch.count == Records.perBatch {
                _ = try store.write(batch)
                batch.removeAll()
            }
        }
        benchmark.startMeasurement()
        try store.flush()
        benchmark.stopMeasurement()
    } setup: {
        try flusher.setUp { _ in }
    } teardown: {
        flusher.destroy()
    }

    // Point reads of random keys among 100,000 that are all still in the
    // memtable (never flushed). 1,000 gets per iteration; times are per get.
    let memtable = StoreFixture()
    Benchmark(
        "get (memtable)",
        configuration: .init(scalingFactor: .kilo)
    ) { benchmark in
        let store = try memtable.openStore()
        for _ in benchmark.scaledIterations {
            blackHole(try store.get(memtable.nextLookup()))
        }
    } setup: {
        try memtable.setUp {
            try $0.fill(Records.storeSize)
            try $0.requireAllInMemtable()
        }
    } teardown: {
        memtable.destroy()
    }

    // Point reads of random keys among 100,000 flushed to a segment, with
    // every block already in the block cache (read once in setup), so a get
    // is an index lookup plus a search of a cached, decompressed block.
    let segment = StoreFixture()
    Benchmark(
        "get (segment, warm cache)",
        configuration: .init(scalingFactor: .kilo)
    ) { benchmark in
        let store = try segment.openStore()
        for _ in benchmark.scaledIterations {
            blackHole(try store.get(segment.nextLookup()))
        }
    } setup: {
        try segment.setUp {
            try $0.fill(Records.storeSize)
            try $0.flushAndWarm()
        }
    } teardown: {
        defer { segment.destroy() }
        try segment.requireNoCacheMisses()
    }

    // A read view plus a scan of one prefix matching exactly 1,000 keys
    // (a random one of 100 prefixes per iteration), from a flushed segment
    // with a warm cache: keys, values and their copies into `KeyValue`s.
    let scanner = StoreFixture()
    Benchmark("scan prefix 1000 keys") { benchmark in
        let store = try scanner.openStore()
        let prefix = scanner.nextPrefix()
        benchmark.startMeasurement()
        let rows = try store.readView().scan(prefix: prefix)
        benchmark.stopMeasurement()
        guard rows.count == Records.perPrefix else {
            throw BenchmarkFailure("scan returned \(rows.count) rows, expected \(Records.perPrefix)")
        }
        blackHole(rows)
    } setup: {
        try scanner.setUp {
            try $0.fill(Records.storeSize)
            try $0.flushAndWarm()
        }
    } teardown: {
        defer { scanner.destroy() }
        try scanner.requireNoCacheMisses()
    }

    // Opening a closed store of 100,000 records in one segment (flushed, so
    // the open reads the segment's key table rather than replaying a log).
    // Only `StrataStore(directory:options:)` is measured; each iteration
    // starts from the same files (see `StoreFixture.restorePristineCopy`),
    // and the close after it is not measured.
    let opener = StoreFixture()
    Benchmark(
        "open 100,000-record store",
        configuration: .init(maxDuration: .seconds(5), maxIterations: 1_000)
    ) { benchmark in
        try opener.restorePristineCopy()
        benchmark.startMeasurement()
        let store = try StrataStore(directory: opener.directory, options: StoreFixture.options)
        benchmark.stopMeasurement()
        guard store.recoveryReport.segmentRecords == Records.storeSize else {
            throw BenchmarkFailure("the reopened store holds \(store.recoveryReport.segmentRecords) records")
        }
        try store.close()
    } setup: {
        try opener.setUp {
            try $0.fill(Records.storeSize)
            try $0.openStore().flush()
            try $0.closeStore()
            try $0.savePristineCopy()
        }
    } teardown: {
        opener.destroy()
    }
}

/// A benchmark of one `write` of a 1,000-record batch per iteration into
/// `fixture`'s store, which keeps growing for the whole run; `key` gives each
/// record's key (the record's number is `fixture.nextRecord`). Building the
/// batch is not measured.
func writeBatchBenchmark(_ name: String, configuration: Benchmark.Configuration, fixture: StoreFixture,
                         key: @escaping (StoreFixture) -> [UInt8]) {
    Benchmark(name, configuration: configuration) { benchmark in
        let store = try fixture.openStore()
        var batch = WriteBatch()
        for _ in 0 ..< Records.perBatch {
            batch.put(key(fixture), Records.value(fixture.nextRecord))
            fixture.nextRecord += 1
        }
        benchmark.startMeasurement()
        blackHole(try store.write(batch))
        benchmark.stopMeasurement()
    } setup: {
        try fixture.setUp { _ in }
    } teardown: {
        fixture.destroy()
    }
}

// MARK: - Records

/// The records the benchmarks write: record `i` has the 16-byte key
/// `bench/GGGGG/NNNN` (group `i / 1000`, number `i % 1000`), so the prefix
/// `bench/GGGGG/` matches exactly 1,000 keys, and a 100-byte value taken from
/// a pool of 1,024 pseudo-random values (so LZ4 has little to squeeze out).
enum Records {
    static let keySize = 16
    static let valueSize = 100
    static let perBatch = 1_000
    static let perFlush = 10_000
    static let perPrefix = 1_000
    static let storeSize = 100_000

    static func key(_ i: Int) -> [UInt8] {
        var key = [UInt8]()
        key.reserveCapacity(keySize)
        key.append(contentsOf: prefixHead)
        appendDigits(i / perPrefix, width: 5, to: &key)
        key.append(UInt8(ascii: "/"))
        appendDigits(i % perPrefix, width: 4, to: &key)
        return key
    }

    /// `bench/GGGGG/`: the keys of records `group * 1000 ..< (group + 1) * 1000`.
    static func prefix(group: Int) -> [UInt8] {
        var prefix = prefixHead
        appendDigits(group, width: 5, to: &prefix)
        prefix.append(UInt8(ascii: "/"))
        return prefix
    }

    static func value(_ i: Int) -> [UInt8] { valuePool[i % valuePool.count] }

    /// 16 random bytes from `random`.
    static func randomKey(_ random: inout SplitMix64) -> [UInt8] {
        (0 ..< keySize).map { _ in UInt8.random(in: .min ... .max, using: &random) }
    }

    private static let prefixHead = Array("bench/".utf8)

    private static let valuePool: [[UInt8]] = {
        var random = SplitMix64(seed: 0x5354_5241_5441)
        return (0 ..< 1_024).map { _ in (0 ..< valueSize).map { _ in UInt8.random(in: .min ... .max, using: &random) } }
    }()

    private static func appendDigits(_ n: Int, width: Int, to bytes: inout [UInt8]) {
        var divisor = 1
        for _ in 1 ..< width { divisor *= 10 }
        var rest = n % (divisor * 10)
        while divisor > 0 {
            bytes.append(UInt8(ascii: "0") + UInt8(rest / divisor))
            rest %= divisor
            divisor /= 10
        }
    }
}

/// A small, seeded generator, so every run reads the same keys.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

struct BenchmarkFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

// MARK: - Fixture

/// One benchmark's store, in a temporary directory of its own that `destroy()`
/// removes, plus the precomputed inputs its iterations use.
final class StoreFixture {
    static let options: StoreOptions = {
        var options = StoreOptions()
        options.syncMode = .none
        options.blockCacheCapacity = 64 << 20 // far more than the ~12 MB of blocks of 100,000 records
        return options
    }()

    /// `options` with this fixture's sync mode (`.none` unless told).
    private let storeOptions: StoreOptions

    init(syncMode: StoreOptions.SyncMode = .none) {
        var options = Self.options
        options.syncMode = syncMode
        storeOptions = options
    }

    private var root: String?
    private var store: StrataStore?
    /// The next record number "write batch of 1000" writes.
    var nextRecord = 0
    /// Where "write batch of 1000 random keys" takes its keys.
    var random = SplitMix64(seed: 0x5EED)
    private var lookups: [[UInt8]] = []
    private var lookupCursor = 0
    private var prefixes: [[UInt8]] = []
    private var prefixCursor = 0
    private var cacheMissesAfterWarming = 0

    var directory: String {
        guard let root else { preconditionFailure("the fixture has no directory: setup did not run") }
        return root + "/store"
    }

    private var pristineDirectory: String { directory + ".pristine" }

    /// Opens an empty store in a new temporary directory and runs `steps` on
    /// it; removes the directory again if any of it fails (a benchmark's
    /// teardown does not run when its setup failed).
    func setUp(_ steps: (StoreFixture) throws -> Void) throws {
        do {
            try create()
            try steps(self)
        } catch {
            destroy()
            throw error
        }
    }

    private func create() throws {
        destroy()
        var template = Array((NSTemporaryDirectory() + "/strata-bench-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw BenchmarkFailure("mkdtemp failed: errno \(errno)")
        }
        root = String(cString: made)
        nextRecord = 0
        store = try StrataStore(directory: directory, options: storeOptions)
    }

    func openStore() throws -> StrataStore {
        guard let store else { throw BenchmarkFailure("the store is not open: setup did not run") }
        return store
    }

    func closeStore() throws {
        try store?.close()
        store = nil
    }

    /// Closes the store and removes its directory.
    func destroy() {
        try? closeStore()
        if let root { try? FileManager.default.removeItem(atPath: root) }
        root = nil
        lookups = []
        prefixes = []
    }

    /// Writes records `0 ..< count` in batches of 1,000, and precomputes the
    /// random keys and prefixes the read benchmarks go through.
    func fill(_ count: Int) throws {
        let store = try openStore()
        var batch = WriteBatch()
        for i in 0 ..< count {
            batch.put(Records.key(i), Records.value(i))
            if batch.count == Records.perBatch || i == count - 1 {
                _ = try store.write(batch)
                batch.removeAll()
            }
        }
        nextRecord = count
        var random = SplitMix64(seed: 42)
        lookups = (0 ..< count).map { _ in Records.key(Int.random(in: 0 ..< count, using: &random)) }
        lookupCursor = 0
        prefixes = (0 ..< 1_024).map { _ in Records.prefix(group: Int.random(in: 0 ..< count / Records.perPrefix, using: &random)) }
        prefixCursor = 0
    }

    /// A random key written by `fill`.
    func nextLookup() -> [UInt8] {
        defer { lookupCursor = lookupCursor + 1 == lookups.count ? 0 : lookupCursor + 1 }
        return lookups[lookupCursor]
    }

    /// A random prefix matching 1,000 keys written by `fill`.
    func nextPrefix() -> [UInt8] {
        defer { prefixCursor = prefixCursor + 1 == prefixes.count ? 0 : prefixCursor + 1 }
        return prefixes[prefixCursor]
    }

    func requireAllInMemtable() throws {
        let statistics = try openStore().statistics
        guard statistics.segments == 0, statistics.keys == nextRecord else {
            throw BenchmarkFailure("expected \(nextRecord) keys in the memtable, found \(statistics.segments) segments, \(statistics.keys) keys")
        }
    }

    /// Flushes the memtable to a segment and reads every key once, so that
    /// every block is in the block cache.
    func flushAndWarm() throws {
        let store = try openStore()
        try store.flush()
        let before = store.statistics
        for i in 0 ..< nextRecord {
            guard try store.get(Records.key(i)) != nil else { throw BenchmarkFailure("record \(i) is missing after flush") }
        }
        let after = store.statistics
        // Every one of those gets went through the block cache, so every key
        // now points into a segment, not into the flushed memtable.
        let blockReads = after.cacheHits + after.cacheMisses - before.cacheHits - before.cacheMisses
        guard after.segmentRecords == UInt64(nextRecord), blockReads == nextRecord else {
            throw BenchmarkFailure("expected \(nextRecord) records read from segments, found \(after.segmentRecords) in segments and \(blockReads) block reads")
        }
        cacheMissesAfterWarming = after.cacheMisses
    }

    /// Checks that the measured reads were all served from the block cache.
    func requireNoCacheMisses() throws {
        let misses = try openStore().statistics.cacheMisses - cacheMissesAfterWarming
        guard misses == 0 else { throw BenchmarkFailure("\(misses) block-cache misses after warming") }
    }

    /// Copies the closed store's files aside, for `restorePristineCopy`.
    func savePristineCopy() throws {
        try FileManager.default.copyItem(atPath: directory, toPath: pristineDirectory)
    }

    /// Puts the store's directory back as `savePristineCopy` found it: every
    /// open starts a new log file, so without this each iteration would open
    /// a store with one more (empty) log to replay than the one before.
    func restorePristineCopy() throws {
        try FileManager.default.removeItem(atPath: directory)
        try FileManager.default.copyItem(atPath: pristineDirectory, toPath: directory)
    }
}
