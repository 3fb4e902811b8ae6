import Foundation
import Testing

@testable import StrataStore

/// Every step of write, flush, compaction and open made to fail in turn.
///
/// A clean run of the workload counts each kind of system call; then, for
/// every call of each kind, the workload runs again with that call failing
/// (EIO, ENOSPC, a short write). Each run must end in a typed `StoreError`
/// (never a crash), refuse writes after a failed write or fsync, and — reopened
/// with a healthy file system — hold every batch acknowledged before the fault,
/// and no batch in part.
@Suite(.serialized) struct FaultInjectionTests {
    /// What one batch writes: keys `b<batch>/<j>` and `last`.
    static func batch(_ b: Int) -> WriteBatch {
        var batch = WriteBatch()
        for j in 0..<(1 + b % 4) {
            batch.put(bytes("b\(b)/\(j)"), Array(repeating: UInt8(b % 251), count: 60 + (b % 5) * 40))
        }
        batch.put(bytes("last"), bytes("\(b)"))
        if b >= 4 && b % 4 == 0 { batch.delete(bytes("b\(b - 4)/0")) }
        return batch
    }

    /// The keys and values the store must hold once batches 0...last are in.
    static func expected(through last: Int) -> [[UInt8]: [UInt8]] {
        var model: [[UInt8]: [UInt8]] = [:]
        guard last >= 0 else { return model }
        for b in 0...last {
            for j in 0..<(1 + b % 4) { model[bytes("b\(b)/\(j)")] = Array(repeating: UInt8(b % 251), count: 60 + (b % 5) * 40) }
            model[bytes("last")] = bytes("\(b)")
            if b >= 4 && b % 4 == 0 { model[bytes("b\(b - 4)/0")] = nil }
        }
        return model
    }

    static let batches = 40

    struct Outcome {
        var acknowledged = -1
        var error: StoreError?
    }

    /// Opens, writes `batches` batches with a flush every 8 and a compaction
    /// every 20, closes. Stops at the first error.
    static func workload(_ dir: String, _ fs: any FileSystem) -> Outcome {
        var outcome = Outcome()
        var options = smallOptions(sync: .always)
        options.fileSystem = fs
        options.automaticCompaction = false
        let store: StrataStore
        do { store = try StrataStore(directory: dir, options: options) } catch {
            outcome.error = error as? StoreError
            return outcome
        }
        do throws(StoreError) {
            for b in 0..<batches {
                try store.write(batch(b))
                outcome.acknowledged = b
                if b % 8 == 7 { try store.flush() }
                if b % 20 == 19 { try store.compact() }
            }
            try store.close()
        } catch {
            outcome.error = error
            // After a failed write, fsync or flush the store must refuse
            // writes. Only a compaction that failed before its manifest switch
            // leaves the store as it was, and writable.
            do {
                try store.write(batch(outcome.acknowledged + 1))
                if error.message.contains("compaction stopped before its manifest switch") {
                    outcome.acknowledged += 1
                } else {
                    Issue.record("after \(error) the store still accepted a write")
                }
            } catch let again {
                // A store whose close failed is closed all the same.
                let closedByClose = again.code == .closed && error.message.contains("close")
                if again.code != .storeFailed && !closedByClose {
                    Issue.record("after \(error) a write failed with \(again.code), not storeFailed")
                }
            }
            try? store.close()
        }
        return outcome
    }

    /// Reopens with a healthy file system and checks the contents.
    static func verify(_ dir: String, _ outcome: Outcome, _ label: String) {
        var options = smallOptions()
        options.automaticCompaction = false
        let store: StrataStore
        do { store = try StrataStore(directory: dir, options: options) } catch {
            // Only possible if nothing was ever created or acknowledged.
            if outcome.acknowledged >= 0 {
                let files = (try? FileManager.default.contentsOfDirectory(atPath: dir))?.sorted() ?? []
                Issue.record("\(label): reopening failed: \(error); the workload ended with \(outcome.error.map { "\($0)" } ?? "no error") after acknowledging batch \(outcome.acknowledged); files: \(files)")
            }
            return
        }
        defer { try? store.close() }
        do {
            let all = try store.scan(prefix: [])
            let contents = Dictionary(uniqueKeysWithValues: all.map { ($0.key, $0.value) })
            let last = contents[bytes("last")].flatMap { Int(String(decoding: $0, as: UTF8.self)) } ?? -1
            if last < outcome.acknowledged {
                Issue.record("\(label): acknowledged batch \(outcome.acknowledged) lost (store has up to \(last))")
            }
            if last > outcome.acknowledged + 1 {
                Issue.record("\(label): batch \(last) present but only \(outcome.acknowledged) was written")
            }
            if contents != expected(through: last) {
                Issue.record("\(label): contents are not exactly batches 0...\(last) (a partial batch?)")
            }
        } catch {
            Issue.record("\(label): reading after reopen failed: \(error)")
        }
    }

    /// Runs the clean workload, then one run per (operation, call, fault).
    static func sweep(operations: [(FaultInjectingFileSystem.Operation, FaultInjectingFileSystem.Fault)], maximumPerOperation: Int) -> Int {
        let clean = FaultInjectingFileSystem()
        let base = ScratchDirectory("faults-clean", inMemory: true)
        let cleanOutcome = workload(base.store, clean)
        #expect(cleanOutcome.error == nil && cleanOutcome.acknowledged == batches - 1)
        var cases = 0
        for (operation, fault) in operations {
            let calls = clean.callCount(operation)
            #expect(calls > 0, "the workload never calls \(operation)")
            let step = max(1, calls / maximumPerOperation)
            for n in stride(from: 1, through: calls, by: step) {
                let dir = ScratchDirectory("faults", inMemory: true)
                let fs = FaultInjectingFileSystem()
                fs.inject(fault, on: operation, atCall: n)
                let outcome = workload(dir.store, fs)
                let label = "\(operation) call \(n)/\(calls) \(fault)"
                if fs.injectedFaultCount > 0 && outcome.error == nil && operation != .remove && operation != .close {
                    // Failures of best-effort cleanup (old logs, compaction inputs) need not surface.
                    if ![FaultInjectingFileSystem.Operation.listDirectory, .syncDirectory].contains(operation) {
                        Issue.record("\(label): the fault fired but no error surfaced")
                    }
                }
                verify(dir.store, outcome, label)
                cases += 1
            }
        }
        return cases
    }

    @Test func everyWriteSyncAndRenameFailingInTurn() {
        let cases = Self.sweep(operations: [
            (.write, .error(28 /* ENOSPC */)),
            (.write, .shortWrite),
            (.sync, .error(5 /* EIO */)),
            (.rename, .error(5)),
        ], maximumPerOperation: 120)
        print("fault injection: \(cases) cases")
    }

    @Test func openAndDirectoryCallsFailingInTurn() {
        let cases = Self.sweep(operations: [
            (.open, .error(24 /* EMFILE */)),
            (.syncDirectory, .error(5)),
            (.makeDirectory, .error(13 /* EACCES */)),
            (.lock, .error(5)),
            (.read, .error(5)),
        ], maximumPerOperation: 80)
        print("fault injection (open paths): \(cases) cases")
    }

    /// Writes 6 MiB in 60 batches of 100 records of 1 KiB under `sync`, with
    /// room for all of it in one log, flushes and closes.
    static func writeSixMebibytes(_ dir: String, _ fs: FaultInjectingFileSystem, sync: StoreOptions.SyncMode) throws {
        var options = StoreOptions()
        options.syncMode = sync
        options.logSizeLimit = 16 << 20
        options.fileSystem = fs
        let store = try StrataStore(directory: dir, options: options)
        for b in 0..<60 {
            var batch = WriteBatch()
            for j in 0..<100 { batch.put(bytes("k\(b)/\(j)"), Array(repeating: UInt8(truncatingIfNeeded: b &+ j), count: 1_024)) }
            try store.write(batch)
        }
        try store.flush()
        try store.close()
    }

    /// A log left to the OS starts the writeback of what it wrote as it goes,
    /// and so does a segment; a failing start (a hint) fails no write and
    /// loses nothing.
    @Test func aFailingWritebackHintFailsNothing() throws {
        let dir = ScratchDirectory(inMemory: true)
        let fs = FaultInjectingFileSystem()
        fs.injectAlways(.error(5 /* EIO */), on: .startWriteback)
        try Self.writeSixMebibytes(dir.store, fs, sync: .none)
        #expect(fs.callCount(.startWriteback, pathContains: ".wal") >= 1)
        #expect(fs.callCount(.startWriteback, pathContains: ".seg") >= 1)
        #expect(fs.injectedFaultCount >= 2)
        let reopened = try StrataStore(directory: dir.store, options: smallOptions())
        defer { try? reopened.close() }
        for b in [0, 31, 59] {
            for j in [0, 99] {
                #expect(try reopened.get(bytes("k\(b)/\(j)")) == Array(repeating: UInt8(truncatingIfNeeded: b &+ j), count: 1_024))
            }
        }
    }

    /// A durable log syncs each group itself: it starts no writeback of its own.
    @Test func aDurableLogStartsNoWriteback() throws {
        let dir = ScratchDirectory(inMemory: true)
        let fs = FaultInjectingFileSystem()
        try Self.writeSixMebibytes(dir.store, fs, sync: .grouped)
        #expect(fs.callCount(.startWriteback, pathContains: ".wal") == 0)
        #expect(fs.callCount(.sync, pathContains: ".wal") >= 60)
    }

    /// A flush opens the segment it wrote with its writer's block table: it
    /// reads nothing of it back (an open from the footer made five reads
    /// here: header, trailer and the footer with every key).
    @Test func aFlushReadsNothingOfItsSegmentBack() throws {
        let dir = ScratchDirectory(inMemory: true)
        let fs = FaultInjectingFileSystem()
        var options = smallOptions()
        options.fileSystem = fs
        options.logSizeLimit = 16 << 20
        let store = try StrataStore(directory: dir.store, options: options)
        defer { try? store.close() }
        for i in 0..<2_000 { try store.put("key\(i)", "value \(i)") }
        try store.flush()
        #expect(fs.callCount(.write, pathContains: ".seg") >= 1)
        #expect(fs.callCount(.read, pathContains: ".seg") == 0)
        #expect(try string(store.get(bytes("key1234"))) == "value 1234")
    }
}
