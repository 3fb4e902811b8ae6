import Foundation
import SharedTestSupport
import Testing

@testable import StrataStore

/// Batches stay atomic to concurrent readers while writers, flushes and
/// compactions run: every batch sets the four keys of one group to the same
/// value, so a reader that ever sees two different values in one group has
/// seen part of a batch.
@Suite struct ConcurrencyTests {
    static let groups = 50
    static func keys(_ group: Int) -> [[UInt8]] { (0..<4).map { bytes("g\(group)/k\($0)") } }

    /// Thread-safe tallies, guarded by `lock`.
    final class Tally: @unchecked Sendable {
        private let lock = NSLock()
        private var torn: [String] = []
        private var reads = 0
        private var writes = 0
        private var stopped = false
        func tear(_ what: String) { lock.lock(); torn.append(what); lock.unlock() }
        func wrote() { lock.lock(); writes += 1; lock.unlock() }
        /// Counts a read; true when the readers are more than a few reads
        /// per batch ahead of the writers.
        func read() -> Bool { lock.lock(); defer { lock.unlock() }; reads += 1; return reads > 8 * (writes + 1) }
        func stop() { lock.lock(); stopped = true; lock.unlock() }
        var isStopped: Bool { lock.lock(); defer { lock.unlock() }; return stopped }
        var result: (torn: [String], reads: Int) { lock.lock(); defer { lock.unlock() }; return (torn, reads) }
    }

    /// `largeBatches`: one writer's every 40th batch also writes
    /// ``StrataStore/offLockApplyOperations`` padding keys, so that it is
    /// applied to a copy of the index and swapped in (``StrataStore/apply(_:)``)
    /// while flushes and compactions repoint the index. Under `.grouped`,
    /// every writer's every 10th batch does, and such a batch (about 60 KiB)
    /// passes the lead on once it is in the log
    /// (``StrataStore/pipelinedGroupBytes``): groups are synced and applied
    /// while the next is written, and still applied whole and in order.
    @Test(arguments: [(false, StoreOptions.SyncMode.none), (true, .none), (true, .grouped)])
    func readersNeverSeePartOfABatch(largeBatches: Bool, sync: StoreOptions.SyncMode) throws {
        let dir = ScratchDirectory()
        let store = try StrataStore(directory: dir.store, options: smallOptions(sync: sync))
        let paddedEvery = sync == .none ? 40 : 10
        let tally = Tally()
        let writers = 3, batchesPerWriter = 200
        let done = DispatchGroup()

        // Readers: whole-store views, and multi-gets of one group.
        for r in 0..<2 {
            done.enter()
            Thread {
                var g = SeededGenerator(seed: UInt64(r + 1))
                while !tally.isStopped {
                    do {
                        if Bool.random(using: &g) {
                            let view = store.readView()
                            for group in 0..<Self.groups {
                                let values = try view.get(Self.keys(group))
                                if Set(values.map { $0 ?? [] }).count > 1 { tally.tear("view at \(view.sequence), group \(group)") }
                            }
                        } else {
                            let group = Int.random(in: 0..<Self.groups, using: &g)
                            let values = try store.get(Self.keys(group))
                            if Set(values.map { $0 ?? [] }).count > 1 { tally.tear("multi-get, group \(group)") }
                        }
                        // Ahead of the writers: a pause, or readers that never
                        // pause starve the writers on two cores; a few reads
                        // per batch still land inside writes, flushes and swaps.
                        if tally.read() { usleep(200) }
                    } catch {
                        tally.tear("read failed: \(error)")
                    }
                }
                done.leave()
            }.start()
        }
        // Writers: each batch rewrites one group (and pads it out so that logs
        // rotate and segments flush), and now and then a compaction.
        let writing = DispatchGroup()
        for w in 0..<writers {
            writing.enter()
            Thread {
                var g = SeededGenerator(seed: UInt64(100 + w))
                for i in 0..<batchesPerWriter {
                    var batch = WriteBatch()
                    let group = Int.random(in: 0..<Self.groups, using: &g)
                    let value = Array("w\(w)-\(i)".utf8) + Array(repeating: UInt8(i % 251), count: 300)
                    for key in Self.keys(group) { batch.put(key, value) }
                    if largeBatches && (sync != .none || w == 0) && i % paddedEvery == paddedEvery - 1 {
                        for j in 0..<StrataStore.offLockApplyOperations { batch.put(bytes("pad/\(w)/\(i)/\(j)"), [UInt8(i % 251)]) }
                    }
                    do {
                        try store.write(batch)
                        tally.wrote()
                        if i % 75 == 74 { try store.compact() }
                    } catch {
                        tally.tear("write failed: \(error)")
                    }
                }
                writing.leave()
            }.start()
        }
        writing.wait()
        tally.stop()
        done.wait()
        let (torn, reads) = tally.result
        #expect(torn.isEmpty, "\(torn.count) torn reads, first: \(torn.prefix(3))")
        #expect(reads > 100, "the readers hardly ran (\(reads) reads)")
        let stats = store.statistics
        #expect(stats.flushes > 0 && stats.compactions > 0, "no flush or compaction happened under the readers")
        #expect(stats.batchesWritten == writers * batchesPerWriter)
        if largeBatches {
            let paddedBatches = (sync == .none ? 1 : writers) * (batchesPerWriter / paddedEvery)
            #expect(try store.scan(prefix: bytes("pad/")).count == paddedBatches * StrataStore.offLockApplyOperations)
        }
        try store.close()
    }

    ///     leader (writer thread)                     reader (this test)
    ///     write(large): logged, in the memtable;
    ///     applied to a copy of the index ───────▶  hook: paused before the swap
    ///                                              get, view, scan: return at once,
    ///                                              with the store before the batch
    ///     resumed: swap ────────────────────────▶  the whole batch, and the segment's
    ///                                              overwritten records counted dead
    @Test func aLargeBatchNeitherBlocksReadersNorShowsThemPartOfIt() throws {
        let dir = ScratchDirectory()
        let store = try StrataStore(directory: dir.store, options: smallOptions())
        let count = StrataStore.offLockApplyOperations
        var first = WriteBatch()
        for i in 0..<count { first.put(bytes("k\(i)"), bytes("old")) }
        try store.write(first)
        try store.flush()  // the old versions live in a segment now
        let deadBefore = store.statistics.deadRecords
        var large = WriteBatch()
        for i in 0..<count { large.put(bytes("k\(i)"), bytes("new")) }
        large.put(bytes("added"), bytes("new"))
        let applied = DispatchSemaphore(value: 0), resume = DispatchSemaphore(value: 0), written = DispatchSemaphore(value: 0)
        store.indexMutation.withLock {
            store.largeBatchAppliedHook = {
                applied.signal()
                _ = resume.wait(timeout: .now() + 20)
            }
        }
        let writeFailure = LockedBox<String?>(nil)
        let batch = large
        Thread {
            do { try store.write(batch) } catch { writeFailure.set("\(error)") }
            written.signal()
        }.start()
        #expect(applied.wait(timeout: .now() + 10) == .success, "the batch never reached the hook (applied under the lock?)")

        // On a thread of its own: a read that waited for the leader would
        // never return while it is paused.
        let seen = LockedBox<[String?]>([])
        let readDone = DispatchSemaphore(value: 0)
        Thread {
            let view = store.readView()
            let values = [try? store.string("k0"), try? store.string("added"), string(try? view.get(bytes("k\(count - 1)"))),
                          (try? view.scan(prefix: bytes("added")).count).map { "\($0)" }]
            seen.set(values)
            readDone.signal()
        }.start()
        let readInTime = readDone.wait(timeout: .now() + 5) == .success
        resume.signal()
        #expect(written.wait(timeout: .now() + 20) == .success)
        #expect(readInTime, "a read waited for the leader's index update")
        #expect(seen.value == ["old", nil, "old", "0"], "a read saw part of the batch, or not the store before it")
        #expect(writeFailure.value == nil)
        #expect(try store.string("k0") == "new")
        #expect(try store.string("k\(count - 1)") == "new")
        #expect(try store.string("added") == "new")
        #expect(store.statistics.deadRecords == deadBefore + count, "the segment's overwritten records were not counted dead")
        store.indexMutation.withLock { store.largeBatchAppliedHook = nil }
        try store.close()
    }
}

/// A value handed between threads. `@unchecked Sendable`: `stored` is guarded by `lock`.
final class LockedBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    func set(_ value: Value) { lock.withLock { stored = value } }
    func update(_ body: (inout Value) -> Void) { lock.withLock { body(&stored) } }
    var value: Value { lock.withLock { stored } }
}
