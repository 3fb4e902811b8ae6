import ArgumentParser
import Dispatch
import Foundation
import StrataStore

/// `strata-bench engine`: StrataStore's own figures — bulk writes, group
/// commit, point gets, opening, index memory — against the targets of the
/// engine's design.
struct EngineCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "engine",
        abstract: "Storage-engine figures: writes, group commit, gets, open time, index memory."
    )

    @Option(help: "Records per run.") var records = 1_000_000
    @Option(help: "Records per batch.") var batchSize = 1000
    @Option(help: "Value size in bytes (keys are 16 bytes).") var valueSize = 100
    @Option(help: "Runs per measurement; the table shows the median.") var repeats = 3
    @Option(help: "Concurrent writers for the group-commit run.") var writers = 4
    @Option(help: "Directory for the stores (default: a fresh temporary one, removed after).") var store: String?
    @Flag(name: .customLong("no-peers"), help: "Skip the same workloads on LMDB and LevelDB.") var noPeers = false
    @Option(help: "Records of each durable run beside the peers (each batch waits for a sync).") var durableRecords = 200_000
    @Option(help: ArgumentHelp("Only open this existing store, read-only, --repeats times, and print the times (nothing is written).",
                               discussion: "For profiling an open: under callgrind, the difference between --repeats 3 and --repeats 1, halved, is what one open and close costs."))
    var openOnly: String?
    @Option(help: ArgumentHelp("With --open-only: after the first open, this many warm point gets of keys read from the store, at random.",
                               discussion: "For profiling a get: under callgrind, the difference between two counts, divided by theirs, is what one get costs."))
    var gets = 0
    @Option(help: ArgumentHelp("With --open-only: the block cache's capacity in MiB (default: StoreOptions' default).",
                               discussion: "A cache far smaller than the keys' blocks makes --gets measure misses: each get reads, checks and decompresses a block."))
    var blockCacheMib: Int?
    @Option(help: ArgumentHelp("With --gets: how many of the store's keys (the first ones in order) the gets choose from.",
                               discussion: "The default, 100,000, keeps their index nodes and blocks in the CPU's caches; a million puts each get at the mercy of memory latency, as in the peer comparison."))
    var getKeys = 100_000
    @Option(help: ArgumentHelp("Only fill a fresh store in this directory (it must not exist) with --records records, --writers writers at once, and print records/s.",
                               discussion: "For profiling the write path: under callgrind, the difference between two --records counts, divided by theirs, is what one record costs."))
    var fillOnly: String?
    @Flag(help: "With --fill-only: random keys (default: sequential).") var randomKeys = false
    @Flag(help: "With --fill-only: every batch durable before its write returns (grouped sync; default: no sync).") var durable = false

    func run() throws {
        if let fillOnly {
            try fillStore(fillOnly)
            return
        }
        if let openOnly {
            var options = StoreOptions()
            if let blockCacheMib { options.blockCacheCapacity = blockCacheMib << 20 }
            options.readOnly = true
            options.createIfMissing = false
            var times: [Double] = []
            var keys = 0
            for round in 0..<max(1, repeats) {
                var opened: StrataStore?
                times.append(try seconds { opened = try StrataStore(directory: openOnly, options: options) } * 1000)
                // Counted once (statistics walks the index), so that it
                // cancels out of a difference between two repeat counts.
                if round == 0 {
                    keys = opened!.statistics.keys
                    if gets > 0 { try measureGets(opened!) }
                }
                try opened!.close()
            }
            print("open of \(openOnly) (\(thousands(Double(keys))) keys): " + times.map { fixed($0, 1) }.joined(separator: ", ")
                  + " ms; median \(fixed(median(times), 1)) ms")
            return
        }
        let work = try WorkDirectory(store, scenario: "bench")
        defer { work.cleanUp() }
        let root = work.path
        let bench = EngineBenchmark(root: root, records: records, batchSize: batchSize, valueSize: valueSize, repeats: max(1, repeats), writers: writers)
        let results = try bench.run()
        print(results.render(records: records, valueSize: valueSize, batchSize: batchSize, repeats: repeats))
        guard !noPeers else { return }
        let durable = max(writers * batchSize, min(durableRecords, records))
        let peers = PeerComparison(root: root, records: records, batchSize: batchSize, repeats: max(1, repeats), writers: writers, durableRecords: durable)
        let figures = try peers.run(values: (0..<64).map(bench.value), sequentialKeys: bench.sequentialKeys, randomKeys: bench.randomKeys,
                                    order: bench.readOrder)
        print("\n" + PeerComparison.render(figures, records: records, batchSize: batchSize, writers: writers, durableRecords: durable))
    }
}

extension EngineCommand {
    /// `--fill-only`: one fill of a fresh store, timed, then a close.
    func fillStore(_ directory: String) throws {
        guard !FileManager.default.fileExists(atPath: directory) else { throw ValidationError("\(directory) exists: --fill-only fills a fresh store") }
        let bench = EngineBenchmark(root: directory, records: records, batchSize: batchSize, valueSize: valueSize, repeats: 1, writers: writers)
        let keys = randomKeys ? bench.randomKeys : bench.sequentialKeys
        let store = try StrataStore(directory: directory, options: bench.options(durable ? .grouped : .none))
        let perWriter = (keys.count + max(1, writers) - 1) / max(1, writers)
        let failures = LockedCounter()
        let elapsed = seconds {
            let done = DispatchGroup()
            for w in 0..<max(1, writers) {
                done.enter()
                Thread {
                    let slice = Array(keys[min(keys.count, w * perWriter)..<min(keys.count, (w + 1) * perWriter)])
                    if (try? bench.fill(store, keys: slice)) == nil { failures.add() }
                    done.leave()
                }.start()
            }
            done.wait()
        }
        let syncs = store.statistics.logSyncs
        try store.close()
        guard failures.value == 0 else { throw ValidationError("a writer failed") }
        print("fill of \(thousands(Double(keys.count))) \(randomKeys ? "random" : "sequential") keys, \(max(1, writers)) writer(s), "
              + "\(durable ? "durable" : "no sync"): \(thousands(Double(keys.count) / elapsed)) records/s, \(thousands(Double(syncs))) log syncs")
    }

    /// Up to ``getKeys`` of the store's keys, each read once (the blocks they
    /// live in are cached then), then ``gets`` gets of them at random.
    func measureGets(_ store: StrataStore) throws {
        let keys = try store.scan(prefix: [], limit: getKeys).map(\.key)
        guard !keys.isEmpty else { return }
        for key in keys { _ = try store.get(key) }
        var generator = SplitMix64(seed: 7)
        var found = 0
        let before = store.statistics
        let elapsed = try seconds {
            for _ in 0..<gets where try store.get(keys[Int(generator.next() % UInt64(keys.count))]) != nil { found += 1 }
        }
        let after = store.statistics
        guard found == gets else { throw ValidationError("\(gets - found) of \(gets) gets found nothing") }
        let misses = after.cacheMisses - before.cacheMisses
        print("\(thousands(Double(gets))) warm point gets of \(thousands(Double(keys.count))) keys: \(thousands(Double(gets) / elapsed)) gets/s"
              + " (\(fixed(100 * Double(misses) / Double(gets), 1))% block-cache misses; \(thousands(Double(after.cacheBytes >> 20))) MiB of blocks cached)")
    }
}

/// The measurements. Each figure is the median of `repeats` runs on fresh stores.
struct EngineBenchmark {
    let root: String
    let records: Int
    let batchSize: Int
    let valueSize: Int
    let repeats: Int
    let writers: Int

    struct Results {
        var fillSequential: [Double] = []  // records/s
        var fillRandom: [Double] = []
        var grouped: [Double] = []
        var groupedBatches = 0
        var groupedSyncs = 0
        var gets: [Double] = []
        var getsTwoThreads: [Double] = []
        var openSegments: [Double] = []  // seconds
        var openFooters: [Double] = []  // seconds
        var firstGetAfterOpen: [Double] = []  // seconds
        var openAndWalk: [Double] = []  // seconds
        var openReplay: [Double] = []
        var replayedBatches = 0
        var indexBytesPerKeySequential = 0.0
        var indexBytesPerKeyRandom = 0.0
        var segmentBytes: UInt64 = 0
        var compactionSeconds: [Double] = []
        var compactionBytesBefore: UInt64 = 0
        var compactionBytesAfter: UInt64 = 0
        var longestGetDuringCompaction: [Double] = []  // seconds
        var longestWriteDuringCompaction: [Double] = []
        var largeBatchSeconds: [Double] = []
        var longestGetDuringLargeBatch: [Double] = []  // seconds
    }

    /// Writes one batch of a tenth as many new random keys as the store
    /// holds while a reader thread gets stored keys back to back, recording
    /// the longest get: a reader waits for the batch's swap into the index,
    /// not for its index update (an import's save of 100,000 objects is
    /// such a batch).
    func measureLargeBatch(_ store: StrataStore, keys: [[UInt8]], into r: inout Results) throws {
        var generator = SplitMix64(seed: 0xB16B)
        var batch = WriteBatch()
        for i in 0..<max(1, records / 10) {
            batch.put((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }, value(i))
        }
        let stop = LockedFlag(), longest = LockedMaximum(), done = DispatchGroup()
        done.enter()
        Thread {
            var g = SplitMix64(seed: 3)
            while !stop.isSet {
                let key = keys[Int.random(in: 0..<keys.count, using: &g)]
                longest.record(seconds { _ = try? store.get(key) })
            }
            done.leave()
        }.start()
        Thread.sleep(forTimeInterval: 0.02)
        r.largeBatchSeconds.append(try seconds { try store.write(batch) })
        Thread.sleep(forTimeInterval: 0.02)
        stop.set()
        done.wait()
        r.longestGetDuringLargeBatch.append(longest.value)
    }

    /// Overwrites half the records (so half of the segment space is dead), then
    /// compacts while one thread reads and another writes, each once a
    /// millisecond (as an app would, rather than spinning three busy threads on
    /// two cores, which would measure the scheduler), recording the longest
    /// single get and write: compaction must not block them.
    func measureCompaction(_ store: StrataStore, keys: [[UInt8]], into r: inout Results) throws {
        var batch = WriteBatch()
        for (i, key) in keys.enumerated() where i % 2 == 0 {
            batch.put(key, value(i + 1))
            if batch.count == batchSize { try store.write(batch); batch.removeAll() }
        }
        if !batch.isEmpty { try store.write(batch) }
        try store.flush()
        r.compactionBytesBefore = store.statistics.segmentBytes
        let stop = LockedFlag()
        let longestGet = LockedMaximum(), longestWrite = LockedMaximum()
        let done = DispatchGroup()
        done.enter()
        Thread {
            var g = SplitMix64(seed: 1)
            while !stop.isSet {
                let key = keys[Int.random(in: 0..<keys.count, using: &g)]
                let t = seconds { _ = try? store.get(key) }
                longestGet.record(t)
                Thread.sleep(forTimeInterval: 0.001)
            }
            done.leave()
        }.start()
        done.enter()
        Thread { [self] in
            var g = SplitMix64(seed: 2)
            while !stop.isSet {
                var small = WriteBatch()
                for j in 0..<100 { small.put(keys[Int.random(in: 0..<keys.count, using: &g)], value(j)) }
                let t = seconds { _ = try? store.write(small) }
                longestWrite.record(t)
                Thread.sleep(forTimeInterval: 0.001)
            }
            done.leave()
        }.start()
        Thread.sleep(forTimeInterval: 0.05)
        r.compactionSeconds.append(try seconds { try store.compact() })
        stop.set()
        done.wait()
        r.compactionBytesAfter = store.statistics.segmentBytes
        r.longestGetDuringCompaction.append(longestGet.value)
        r.longestWriteDuringCompaction.append(longestWrite.value)
        try store.flush()  // so that the open measured next reads segments only
    }

    /// 16-byte keys: "key:" and a 12-digit decimal counter (ascending order).
    static func sequentialKey(_ i: Int) -> [UInt8] {
        var key = Array("key:".utf8)
        let digits = String(i)
        key += Array(repeating: UInt8(ascii: "0"), count: 12 - digits.count) + Array(digits.utf8)
        return key
    }

    func options(_ sync: StoreOptions.SyncMode) -> StoreOptions {
        var o = StoreOptions()
        o.syncMode = sync
        o.blockCacheCapacity = 512 << 20  // "warm": every block fits
        o.indexCheckpointMinimumKeys = 1  // the open from a checkpoint is measured at any --records
        return o
    }

    func value(_ i: Int) -> [UInt8] {
        (0..<valueSize).map { UInt8(truncatingIfNeeded: i &* 31 &+ $0) }
    }

    /// Writes `keys` in batches with one writer; returns records/s.
    func fill(_ store: StrataStore, keys: [[UInt8]]) throws -> Double {
        let values = (0..<64).map(value)
        var batch = WriteBatch()
        let t = try seconds {
            var i = 0
            while i < keys.count {
                batch.removeAll()
                for j in i..<min(i + batchSize, keys.count) { batch.put(keys[j], values[j & 63]) }
                try store.write(batch)
                i += batchSize
            }
        }
        return Double(keys.count) / t
    }

    var sequentialKeys: [[UInt8]] { (0..<records).map(Self.sequentialKey) }
    /// 16 random bytes each, the same every run.
    var randomKeys: [[UInt8]] {
        var generator = SplitMix64(seed: 0x5EED)
        return (0..<records).map { _ in (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) } }
    }
    /// A random order of reads over the sequential keys, the same every run.
    var readOrder: [Int] {
        var generator = SplitMix64(seed: 0x0DE7)
        return (0..<records).map { _ in Int.random(in: 0..<records, using: &generator) }
    }

    func run() throws -> Results {
        var r = Results()
        let sequentialKeys = sequentialKeys
        let randomKeys = randomKeys
        let order = readOrder

        for run in 0..<repeats {
            progress("engine: run \(run + 1)/\(repeats): fill sequential")
            let dir = root + "/seq-\(run)"
            let store = try StrataStore(directory: dir, options: options(.none))
            r.fillSequential.append(try fill(store, keys: sequentialKeys))
            r.indexBytesPerKeySequential = store.statistics.indexBytesPerKey

            progress("engine: run \(run + 1)/\(repeats): point gets")
            try store.flush()  // every value in a compressed segment block: the harder case
            for key in sequentialKeys { _ = try store.get(key) }  // warm the block cache
            var found = 0
            let t = try seconds { for i in order where try store.get(sequentialKeys[i]) != nil { found += 1 } }
            precondition(found == records, "gets found \(found) of \(records)")
            r.gets.append(Double(records) / t)
            // The same gets split over two reader threads (one per core).
            let halves = [Array(order[..<(records / 2)]), Array(order[(records / 2)...])]
            let misses = LockedCounter()
            let t2 = seconds {
                let done = DispatchGroup()
                for half in halves {
                    done.enter()
                    Thread {
                        for i in half where (try? store.get(sequentialKeys[i])) == nil { misses.add() }
                        done.leave()
                    }.start()
                }
                done.wait()
            }
            precondition(misses.value == 0, "parallel gets missed \(misses.value)")
            r.getsTwoThreads.append(Double(records) / t2)
            r.segmentBytes = store.statistics.segmentBytes

            progress("engine: run \(run + 1)/\(repeats): compaction under load")
            try measureCompaction(store, keys: sequentialKeys, into: &r)
            try store.close()

            progress("engine: run \(run + 1)/\(repeats): open (segments)")
            var opened: StrataStore? = nil
            r.openSegments.append(try seconds { opened = try StrataStore(directory: dir, options: options(.none)) })
            precondition(opened!.statistics.keys == records && opened!.recoveryReport.indexCheckpoint == .loaded,
                         "the open did not load the index checkpoint: \(opened!.recoveryReport.indexCheckpoint)")
            // The open reads no leaf: the first get reads the chunk of the
            // checkpoint that holds its key's leaf, and a block of a segment.
            let probe = Self.sequentialKey(records / 2)
            var probed: [UInt8]?
            r.firstGetAfterOpen.append(try seconds { probed = try opened!.get(probe) })
            precondition(probed != nil, "the first get missed")
            try opened!.close()
            // The open and a walk of every key: every chunk read and checked.
            r.openAndWalk.append(try seconds {
                opened = try StrataStore(directory: dir, options: options(.none))
                var keys = 0
                try opened!.readView().forEachKey(from: []) { _ in
                    keys += 1
                    return true
                }
                precondition(keys == records, "the walk saw \(keys) keys")
            })
            try opened!.close()
            // The same open without the checkpoint: the index built from the segments' footers.
            try FileManager.default.removeItem(atPath: dir + "/" + IndexCheckpoint.fileName)
            r.openFooters.append(try seconds { opened = try StrataStore(directory: dir, options: options(.none)) })
            precondition(opened!.statistics.keys == records && opened!.recoveryReport.indexCheckpoint == .absent)
            try opened!.close()
            opened = nil
            try FileManager.default.removeItem(atPath: dir)

            progress("engine: run \(run + 1)/\(repeats): fill random")
            let randomDir = root + "/random-\(run)"
            let randomStore = try StrataStore(directory: randomDir, options: options(.none))
            r.fillRandom.append(try fill(randomStore, keys: randomKeys))
            r.indexBytesPerKeyRandom = randomStore.statistics.indexBytesPerKey
            try randomStore.close()

            progress("engine: run \(run + 1)/\(repeats): open (log replay)")
            r.openReplay.append(try seconds { opened = try StrataStore(directory: randomDir, options: options(.none)) })
            r.replayedBatches = opened!.recoveryReport.batchesReplayed
            progress("engine: run \(run + 1)/\(repeats): one large batch under gets")
            try measureLargeBatch(opened!, keys: randomKeys, into: &r)
            try opened!.close()
            opened = nil
            try FileManager.default.removeItem(atPath: randomDir)

            progress("engine: run \(run + 1)/\(repeats): group commit, \(writers) writers")
            let groupDir = root + "/grouped-\(run)"
            let groupStore = try StrataStore(directory: groupDir, options: options(.grouped))
            let perWriter = records / writers
            let failures = LockedCounter()
            // One thread per writer (concurrentPerform would use one per core).
            let slices = (0..<writers).map { w in Array(sequentialKeys[(w * perWriter)..<((w + 1) * perWriter)]) }
            let elapsed = seconds {
                let done = DispatchGroup()
                for w in 0..<writers {
                    done.enter()
                    Thread { [self] in
                        do { _ = try fill(groupStore, keys: slices[w]) } catch { failures.add() }
                        done.leave()
                    }.start()
                }
                done.wait()
            }
            precondition(failures.value == 0, "grouped writers failed")
            r.grouped.append(Double(perWriter * writers) / elapsed)
            let stats = groupStore.statistics
            r.groupedBatches = stats.batchesWritten
            r.groupedSyncs = stats.logSyncs
            try groupStore.close()
            try FileManager.default.removeItem(atPath: groupDir)
        }
        return r
    }
}

/// A flag one thread sets and others poll.
final class LockedFlag: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var flag = false
    func set() { lock.lock(); flag = true; lock.unlock() }
    var isSet: Bool { lock.lock(); defer { lock.unlock() }; return flag }
}

/// The largest value recorded, from any thread.
final class LockedMaximum: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var maximum = 0.0
    func record(_ value: Double) { lock.lock(); maximum = max(maximum, value); lock.unlock() }
    var value: Double { lock.lock(); defer { lock.unlock() }; return maximum }
}

/// A counter shared by the writer threads.
final class LockedCounter: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var count = 0
    func add() { lock.lock(); count += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
}

extension EngineBenchmark.Results {
    func render(records: Int, valueSize: Int, batchSize: Int, repeats: Int) -> String {
        var t = Table("measurement", "median", "unit", "target")
        t.add("write, sequential keys, batches of \(batchSize), sync none", thousands(median(fillSequential)), "records/s", "≥ 1,000,000")
        t.add("write, random keys, batches of \(batchSize), sync none", thousands(median(fillRandom)), "records/s", "≥ 1,000,000")
        t.add("write, grouped sync, concurrent writers", thousands(median(grouped)), "records/s", "report")
        t.add("  batches written / log fsyncs (last run)", "\(groupedBatches) / \(groupedSyncs)", "", "fsyncs < batches")
        t.add("point get, warm, random order, 1 thread", thousands(median(gets)), "gets/s", "≥ 1,000,000")
        t.add("point get, warm, random order, 2 threads", thousands(median(getsTwoThreads)), "gets/s", "≥ 1,000,000")
        t.add("open, \(thousands(Double(records))) records in segments, from the index checkpoint", fixed(median(openSegments) * 1000, 1), "ms", "≤ 200")
        t.add("  the first get after it (reads one chunk of leaves)", fixed(median(firstGetAfterOpen) * 1000, 2), "ms", "report")
        t.add("  the open and a walk of every key (reads every chunk)", fixed(median(openAndWalk) * 1000, 1), "ms", "report")
        t.add("open, the same, index built from the segments' footers", fixed(median(openFooters) * 1000, 1), "ms", "report")
        t.add("open, replaying the log (\(replayedBatches) batches)", fixed(median(openReplay) * 1000, 1), "ms", "report")
        t.add("index memory, sequential keys", fixed(indexBytesPerKeySequential, 1), "bytes/key", "≤ 64")
        t.add("index memory, random keys", fixed(indexBytesPerKeyRandom, 1), "bytes/key", "≤ 64")
        t.add("segment bytes for the records", thousands(Double(segmentBytes)), "bytes", "report")
        t.add("compaction, half the records dead", fixed(median(compactionSeconds) * 1000, 0), "ms", "report")
        t.add("  segment bytes before / after (last run)", "\(thousands(Double(compactionBytesBefore))) / \(thousands(Double(compactionBytesAfter)))", "bytes", "report")
        t.add("  longest get while compacting", fixed(median(longestGetDuringCompaction) * 1000, 2), "ms", "a few ms")
        t.add("  longest 100-record write while compacting", fixed(median(longestWriteDuringCompaction) * 1000, 2), "ms", "a few ms")
        t.add("one batch of \(thousands(Double(max(1, records / 10)))) new random keys", fixed(median(largeBatchSeconds) * 1000, 1), "ms", "report")
        t.add("  longest get meanwhile", fixed(median(longestGetDuringLargeBatch) * 1000, 2), "ms", "≤ 2 ms")
        let date = ISO8601DateFormatter().string(from: Date()).prefix(10)
        let header = "StrataStore engine: \(thousands(Double(records))) records, 16-byte keys, \(valueSize)-byte values, median of \(repeats) runs (\(date), \(ProcessInfo.processInfo.activeProcessorCount) cores)"
        return header + "\n\n" + t.render()
    }
}

/// A fast seeded generator: `SystemRandomNumberGenerator` makes a system call
/// per number, which would dominate preparing a million keys.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
