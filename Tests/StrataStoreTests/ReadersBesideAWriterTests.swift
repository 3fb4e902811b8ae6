import Foundation
import SharedTestSupport
@testable import StrataStore
import Testing

/// Read-only opens take no lock: they open beside a store open for writing
/// and see it as it was at that moment, whole batches only, while the
/// writer flushes, compacts and rotates its log under them.
@Suite struct ReadersBesideAWriterTests {
    static let keys = 300

    /// The value key `k` holds after batch `last`: batch `i` writes key
    /// `i % keys` and "last" together; nil when no batch up to `last` wrote it.
    static func expected(_ k: Int, after last: Int) -> String? {
        let i = last - ((last - k) % keys + keys) % keys
        return i >= 0 ? "v\(i)" : nil
    }

    @Test func aReadOnlyOpenNeitherTakesNorWaitsForTheLock() throws {
        let dir = ScratchDirectory()
        var readOnly = smallOptions()
        readOnly.readOnly = true
        let writer = try StrataStore(directory: dir.store, options: smallOptions())
        try writer.put("k", "1")
        let reader = try StrataStore(directory: dir.store, options: readOnly)
        #expect(try reader.string("k") == "1")
        // A second writer is still refused, a reader open or not.
        #expect { try StrataStore(directory: dir.store, options: smallOptions()) } throws: { ($0 as? StoreError)?.code == .locked }
        try writer.put("k", "2")
        #expect(try reader.string("k") == "1", "a reader sees the store as it was when it opened")
        try writer.close()
        // A writer opens while the reader is open.
        let next = try StrataStore(directory: dir.store, options: smallOptions())
        #expect(try next.string("k") == "2")
        try next.close()
        try reader.close()
    }

    /// A writer commits batches, each writing one key and "last" together,
    /// flushing every 25 and compacting every 200, while this thread opens
    /// the store read-only again and again: every open sees every key as of
    /// its "last" (never part of a batch, never a key from a later batch),
    /// and "last" never goes back from one open to the next.
    @Test func readersBesideAFlushingCompactingWriterSeeWholeBatchesAsOfTheirOpen() throws {
        let dir = ScratchDirectory()
        let (options, readOnly) = Self.busyWriterOptions()
        let writer = try StrataStore(directory: dir.store, options: options)
        try writer.put("last", "-1")
        let batches = Self.batches
        let (done, failure) = Self.write(batches, to: writer) { i, batch in
            batch.put(Array("k\(i % Self.keys)".utf8), Array("v\(i)".utf8))
            batch.put(Array("last".utf8), Array("\(i)".utf8))
        }
        var opens = 0, restarts = 0, previous = -1
        var problems: [String] = []
        // At most 200 opens: under ThreadSanitizer each one takes long, and
        // the writer is usually done well before.
        while (!done.isRaised || opens < 5) && opens < 200 {
            let reader: StrataStore
            do { reader = try StrataStore(directory: dir.store, options: readOnly) } catch {
                problems.append("open \(opens): \(error)")
                break
            }
            opens += 1
            restarts += reader.recoveryReport.restartsBesideWriter
            let last = Int(try reader.string("last") ?? "") ?? -2
            if last < previous { problems.append("open \(opens): last went back from \(previous) to \(last)") }
            previous = last
            for k in 0..<Self.keys where try reader.string("k\(k)") != Self.expected(k, after: last) {
                problems.append("open \(opens) at batch \(last): k\(k) is \(String(describing: try reader.string("k\(k)"))), not \(String(describing: Self.expected(k, after: last)))")
            }
            try reader.close()
            if problems.count > 5 { break }
        }
        while !done.isRaised { usleep(1_000) }
        try writer.close()
        #expect(failure.error == nil, "the writer failed: \(String(describing: failure.error))")
        print("readers beside a writer: \(opens) read-only opens over \(batches) batches, \(restarts) restarted by a flush or compaction under them")
        #expect(problems.isEmpty, "\(problems.prefix(5))")
        #expect(opens >= 5)
    }
}

extension ReadersBesideAWriterTests {
    /// Batches a busy writer commits: fewer under ThreadSanitizer (`make
    /// test-tsan` sets it), where each batch, flush and open is many times slower.
    static var batches: Int { Int(ProcessInfo.processInfo.environment["STRATA_READER_BATCHES"] ?? "") ?? 1_500 }

    /// Options that make a writer flush and compact often, and the same read-only.
    static func busyWriterOptions(sync: StoreOptions.SyncMode = .none) -> (writer: StoreOptions, reader: StoreOptions) {
        var options = smallOptions(sync: sync)
        options.logSizeLimit = 8 << 10
        options.segmentSizeLimit = 16 << 10
        var readOnly = options
        readOnly.readOnly = true
        return (options, readOnly)
    }

    /// Commits `count` batches that `fill` makes to `writer`, flushing every
    /// 25 and compacting every 200, on a thread of its own: a reader loop
    /// that never suspends could otherwise keep a task waiting (behind it
    /// and other tests) for a thread. The flag rises when it is done.
    /// `manifestChanges` counts each flush as it begins and once it
    /// returned: each rewrites the manifest (the batch before it is in the
    /// memtable; a compaction may find nothing to do).
    static func write(
        _ count: Int, to writer: StrataStore, manifestChanges: ManifestChangeCount = ManifestChangeCount(),
        _ fill: @escaping @Sendable (Int, inout WriteBatch) -> Void
    ) -> (Flag, ErrorBox) {
        let done = Flag()
        let failure = ErrorBox()
        let writing = Thread {
            defer { done.raise() }
            do {
                for i in 0..<count {
                    var batch = WriteBatch()
                    fill(i, &batch)
                    _ = try writer.write(batch)
                    if i % 25 == 24 { try manifestChanges.counting { () throws(StoreError) in try writer.flush() } }
                    if i % 200 == 199 { try writer.compact() }
                }
            } catch {
                failure.record(error)
            }
        }
        writing.start()
        return (done, failure)
    }

    /// What batch `i` of the catch-up test writes: key `i % keys` and
    /// "last", and every fifth batch deletes another key.
    static func followedBatch(_ i: Int) -> (puts: [(String, String)], delete: String?) {
        ([("k\(i % keys)", "v\(i)"), ("last", "\(i)")], i % 5 == 0 ? "k\((i * 7 + 3) % keys)" : nil)
    }

    /// Every key's value after batches 0...last.
    static func followedState(after last: Int) -> [String: String] {
        var state = ["last": "-1"]
        if last >= 0 {
            for i in 0...last {
                let batch = followedBatch(i)
                for (key, value) in batch.puts { state[key] = value }
                if let delete = batch.delete { state[delete] = nil }
            }
        }
        return state
    }

    /// A read-only store follows a writer that flushes every 25 batches
    /// and compacts every 200, by `catchUp()` in a loop: after every call
    /// it holds exactly the store as of its "last" batch (never part of a
    /// batch, never a key from a later one, deleted keys gone), "last"
    /// never goes back, and the keys whose values changed are among the
    /// keys it reports (every key the batches touched, when it read on in
    /// the log rather than reopening); a call after a flush that began
    /// and ended since the last one reopens (the log it read is retired).
    /// Which way each call takes depends on the timing: each is then taken
    /// once more in a fixed order. Without catch-up the reader would stay
    /// at the batch it opened with. A durable writer's logs are made ahead
    /// of their frames (zeros follow them until each is closed), one left
    /// to the OS grows with its appends.
    @Test(arguments: [StoreOptions.SyncMode.none, .always])
    func aReaderCatchesUpWithAFlushingCompactingWriter(sync: StoreOptions.SyncMode) throws {
        let dir = ScratchDirectory(inMemory: sync != .none)
        let (options, readOnly) = Self.busyWriterOptions(sync: sync)
        let writer = try StrataStore(directory: dir.store, options: options)
        try writer.put("last", "-1")
        let reader = try StrataStore(directory: dir.store, options: readOnly)
        let batches = Self.batches
        let manifestChanges = ManifestChangeCount()
        let (done, failure) = Self.write(batches, to: writer, manifestChanges: manifestChanges) { i, batch in
            let planned = Self.followedBatch(i)
            for (key, value) in planned.puts { batch.put(Array(key.utf8), Array(value.utf8)) }
            if let delete = planned.delete { batch.delete(Array(delete.utf8)) }
        }
        var calls = 0, readOns = 0, reopens = 0, previous = -1
        var problems: [String] = []
        var finalRound = false
        // Manifest rewrites begun by the time the last catch-up returned:
        // one that began after it and ended before the next call began is
        // one the next call cannot read on past.
        var begunByLastReturn = 0
        while problems.count <= 5 {
            let caughtUp: StoreCatchUp
            let endedBeforeCall = manifestChanges.ended
            do { caughtUp = try reader.catchUp() } catch {
                problems.append("catch-up \(calls): \(error)")
                break
            }
            calls += 1
            if endedBeforeCall > begunByLastReturn && !caughtUp.reopened {
                problems.append("catch-up \(calls): read on in the log although the writer rewrote the manifest since the last one (\(endedBeforeCall - begunByLastReturn) flushes)")
            }
            begunByLastReturn = manifestChanges.begun
            if caughtUp.changed { if caughtUp.reopened { reopens += 1 } else { readOns += 1 } }
            let last = Int(try reader.string("last") ?? "") ?? -2
            if last < previous { problems.append("catch-up \(calls): last went back from \(previous) to \(last)") }
            let before = Self.followedState(after: previous), now = Self.followedState(after: last)
            let stored = try reader.scan(prefix: []).map { (String(decoding: $0.key, as: UTF8.self), String(decoding: $0.value, as: UTF8.self)) }
            if Dictionary(uniqueKeysWithValues: stored) != now {
                problems.append("catch-up \(calls) at batch \(last): the reader holds \(stored.count) keys, not the \(now.count) of that batch, or other values")
            }
            let reported = Set(caughtUp.changedKeys.map { String(decoding: $0, as: UTF8.self) })
            for key in Set(before.keys).union(now.keys) where before[key] != now[key] && !reported.contains(key) {
                problems.append("catch-up \(calls) from batch \(previous) to \(last): \(key) changed but was not reported")
            }
            if !caughtUp.reopened, last > previous {
                for i in (previous + 1)...last {
                    let batch = Self.followedBatch(i)
                    for key in batch.puts.map(\.0) + (batch.delete.map { [$0] } ?? []) where !reported.contains(key) {
                        problems.append("catch-up \(calls): batch \(i) wrote \(key), which the log's read-on did not report")
                    }
                }
            }
            previous = last
            if finalRound { break }
            if done.isRaised { finalRound = true }
        }
        while !done.isRaised { usleep(1_000) }
        #expect(failure.error == nil, "the writer failed: \(String(describing: failure.error))")
        print("a reader following a writer: \(calls) catch-ups over \(batches) batches, \(readOns) read on in the log, \(reopens) reopened")
        #expect(problems.isEmpty, "\(problems.prefix(5))")
        #expect(previous == batches - 1)
        // Each way once more, whatever the timing above took: a batch
        // alone is read on in the log; a batch and a flush (a manifest
        // rewritten) is a reopen.
        try writer.put("after", "1")
        let readOn = try reader.catchUp()
        #expect(!readOn.reopened && readOn.changedKeys == [Array("after".utf8)])
        try writer.put("after", "2")
        try writer.flush()
        let reopened = try reader.catchUp()
        #expect(reopened.reopened && reopened.changedKeys == [Array("after".utf8)])
        #expect(try reader.string("after") == "2")
        try writer.close()
        // One more after the writer closed (its close flushed): nothing new.
        _ = try reader.catchUp()
        #expect(try reader.string("last") == "\(batches - 1)")
        try reader.close()
    }

    /// `catchUp()` on a store open for writing is a typed error, not a no-op.
    /// A close while a catch-up is under way waits for it (a catch-up that
    /// went on after the close would lay a new index into a closed store),
    /// and the next catch-up finds the store closed. The interleaving,
    /// forced by a hook inside the catch-up:
    ///
    ///     reader thread                     closing thread
    ///     catchUp(): store open ──hook──▶   close() ··· waits
    ///     reads the writer's batch 2          ·
    ///     returns                           ◀ close() returns
    ///     catchUp() → .closed
    @Test func aCloseWaitsForACatchUpUnderWay() throws {
        let dir = ScratchDirectory()
        let (writerOptions, readerOptions) = Self.busyWriterOptions()
        let writer = try StrataStore(directory: dir.store, options: writerOptions)
        var first = WriteBatch()
        first.put(Array("k".utf8), Array("1".utf8))
        _ = try writer.write(first)
        let reader = try StrataStore(directory: dir.store, options: readerOptions)
        var second = WriteBatch()
        second.put(Array("k".utf8), Array("2".utf8))
        _ = try writer.write(second)
        let closed = Flag()
        let closedDuringCatchUp = Flag()
        let closeFailure = ErrorBox()
        reader.catchUpCheckedOpenHook = {
            Thread {
                do { try reader.close() } catch { closeFailure.record(error) }
                closed.raise()
            }.start()
            Thread.sleep(forTimeInterval: 0.2)
            if closed.isRaised { closedDuringCatchUp.raise() }
        }
        let caughtUp = try reader.catchUp()
        #expect(caughtUp.changedKeys == [Array("k".utf8)])
        while !closed.isRaised { Thread.sleep(forTimeInterval: 0.01) }
        #expect(!closedDuringCatchUp.isRaised, "close() returned while a catch-up was under way")
        #expect(closeFailure.error == nil)
        #expect { try reader.catchUp() } throws: { ($0 as? StoreError)?.code == .closed }
        try writer.close()
    }

    /// A writer that opens and closes without writing removes the log its
    /// open started (`closeUntouched()`), and the next writer may start a
    /// log of the same number, with another salt. A reader that was
    /// reading on in the first must read the store again, not wait for
    /// frames with its old salt:
    ///
    ///     writer 1: open, put k=1, close      log A: k=1
    ///     writer 2: open (starts log B)       log B: header, salt 2
    ///     reader:   open — reads on in B from its header
    ///     writer 2: closeUntouched()          log B removed
    ///     writer 3: open (starts B again), put k=2
    ///                                         log B: header, salt 3, k=2
    ///     reader:   catchUp() → k=2
    @Test func aReaderCatchesUpWhenALogNumberComesBackWithAnotherSalt() throws {
        let dir = ScratchDirectory()
        var readOnly = smallOptions()
        readOnly.readOnly = true
        let first = try StrataStore(directory: dir.store, options: smallOptions())
        try first.put("k", "1")
        try first.close()
        let untouched = try StrataStore(directory: dir.store, options: smallOptions())
        let reader = try StrataStore(directory: dir.store, options: readOnly)
        #expect(try reader.string("k") == "1")
        let logsBefore = try Self.logNames(dir.store)
        try untouched.closeUntouched()
        let third = try StrataStore(directory: dir.store, options: smallOptions())
        try third.put("k", "2")
        // The interleaving this test is about: the same log name again.
        #expect(try Self.logNames(dir.store) == logsBefore)
        let caughtUp = try reader.catchUp()
        #expect(try reader.string("k") == "2", "the reader kept waiting on a log another writer started again")
        #expect(caughtUp.changedKeys == [Array("k".utf8)])
        #expect(caughtUp.reopened)
        let statistics = reader.statistics
        #expect(statistics.catchUps == 1 && statistics.catchUpsReopened == 1 && statistics.batchesCaughtUp == 1)
        try third.close()
        try reader.close()
    }

    static func logNames(_ directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".wal") }.sorted()
    }

    @Test func catchingUpIsForReadOnlyStores() throws {
        let dir = ScratchDirectory()
        let writer = try StrataStore(directory: dir.store, options: smallOptions())
        #expect { try writer.catchUp() } throws: { ($0 as? StoreError)?.code == .invalidArgument }
        try writer.close()
    }
}

/// The error a thread ran into, for the test to report.
/// `@unchecked Sendable`: `stored` is guarded by `lock`.
final class ErrorBox: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: (any Error)?
    func record(_ error: any Error) { lock.withLock { stored = error } }
    var error: (any Error)? { lock.withLock { stored } }
}

/// Counts a writer's flushes (each rewrites the manifest) as they begin and
/// once they returned. `@unchecked Sendable`: both counts are guarded
/// by `lock`.
final class ManifestChangeCount: @unchecked Sendable {
    private let lock = NSLock()
    private var begunCount = 0, endedCount = 0
    var begun: Int { lock.withLock { begunCount } }
    var ended: Int { lock.withLock { endedCount } }

    func counting(_ body: () throws(StoreError) -> Void) throws(StoreError) {
        lock.withLock { begunCount += 1 }
        defer { lock.withLock { endedCount += 1 } }
        try body()
    }
}

/// A flag one thread raises and another reads.
/// `@unchecked Sendable`: `raised` is guarded by `lock`.
final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var raised = false
    func raise() { lock.withLock { raised = true } }
    var isRaised: Bool { lock.withLock { raised } }
}
