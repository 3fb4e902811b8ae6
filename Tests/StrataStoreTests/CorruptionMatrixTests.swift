import CrashWorkload
import Dispatch
import Foundation
import Testing

@testable import StrataStore

/// The corruption matrix: every file of a small real store is truncated at
/// every offset and has a bit flipped at every offset, then opened and read
/// whole. Each case must end in exactly the outcome its file and offset call
/// for (see ``CorruptionMatrixTests/expectation(for:)``): a point-in-time state
/// `CrashWorkload.expected(through: k)` for the one right k, or a
/// `StoreError.corruption` naming the damaged file and an offset at or before
/// the damage. Never a trap, a hang (each case runs under a watchdog) or
/// contents that match no prefix of the batches. `StoreInspector.verify()`
/// (what `strata-dump verify` runs) must agree with the open on every case.
///
/// By default a dense deterministic sample of offsets is tried (every offset
/// near a file's ends and near each frame, block and footer boundary, and a
/// stride elsewhere); `STRATA_CORRUPTION_FULL=1` (`make corruption-long`)
/// tries every offset of every file.
@Suite(.serialized) struct CorruptionMatrixTests {
    enum Damage: Sendable, CustomStringConvertible {
        case truncate(at: Int)
        case flip(at: Int, bit: Int)

        var offset: Int {
            switch self {
            case .truncate(let x), .flip(let x, _): x
            }
        }

        var description: String {
            switch self {
            case .truncate(let x): "truncated at \(x)"
            case .flip(let x, let bit): "bit \(bit) flipped at \(x)"
            }
        }

        func apply(to bytes: [UInt8]) -> [UInt8] {
            switch self {
            case .truncate(let x): return Array(bytes[0..<x])
            case .flip(let x, let bit):
                var copy = bytes
                copy[x] ^= UInt8(1) << UInt8(bit)
                return copy
            }
        }
    }

    /// What one case must end in.
    enum Expected: Equatable {
        /// The open and a full read succeed with exactly the contents after
        /// batch `k`; `rebuilt` says whether a segment's keys must have been
        /// rebuilt by a scan (a damaged footer or trailer).
        case state(k: Int, rebuilt: Bool)
        /// A `.corruption` error naming the file, at or before the damage.
        case corruption
        /// Like `.state(k: last)`, but the damage sits in a block no live key
        /// points at, so only `verify` sees it (at that block's offset).
        case unseenDeadBlock(offset: UInt64)
    }

    /// What one case ended in.
    enum Outcome: Sendable, CustomStringConvertible {
        case state(k: Int, report: RecoveryReport)
        case wrongData(String)
        case failed(StoreError)
        case untyped(String)

        var description: String {
            switch self {
            case .state(let k, let report): "state through batch \(k) (\(report))"
            case .wrongData(let what): "WRONG DATA: \(what)"
            case .failed(let error): "\(error)"
            case .untyped(let error): "an error that is not a StoreError: \(error)"
            }
        }
    }

    /// What `StoreInspector` said about one damaged copy.
    struct Verdict: Sendable {
        /// Nil when the inspector could not even be made (a damaged manifest).
        var report: VerificationReport?
        var error: StoreError?
        var isClean: Bool { report?.problems.isEmpty ?? false }
    }

    struct Observation: Sendable {
        var verdict: Verdict
        var outcome: Outcome
        /// The same copy opened with `recovery: .salvage`, when the normal open failed on a log.
        var salvaged: Outcome?
        /// For a damaged log: the copy opened read-only first, and whether
        /// that left every file as it was.
        var readOnly: Outcome?
        var readOnlyChangedFiles = false
    }

    static var full: Bool { ProcessInfo.processInfo.environment["STRATA_CORRUPTION_FULL"] == "1" }

    @Test(arguments: [StoreFileReport.Kind.manifest, .segment, .log])
    func everyTruncationAndBitFlipEndsInAPointInTimeStateOrATypedError(kind: StoreFileReport.Kind) throws {
        let fixture = try CorruptionFixture.shared.get()
        let scratch = ScratchDirectory("matrix\(kind.rawValue)", inMemory: true)
        let caseDirectory = scratch.path + "/case"
        let started = DispatchTime.now().uptimeNanoseconds
        var cases = 0, truncations = 0, flips = 0
        var failures: [String] = []
        files: for file in fixture.files where file.kind == kind {
            for damage in Self.damages(of: file, full: Self.full) {
                cases += 1
                if case .truncate = damage { truncations += 1 } else { flips += 1 }
                let expected = fixture.expectation(for: file, damage)
                guard let observed = Self.withWatchdog(seconds: 30, { Self.observe(fixture, file, damage, in: caseDirectory, salvaging: file.kind == .log) }) else {
                    Issue.record("\(file.name) \(damage): the case did not finish within 30 s (a hang); the matrix stops here")
                    break files
                }
                failures += Self.check(observed, expected, fixture: fixture, file: file, damage: damage, directory: caseDirectory)
                if failures.count > 200 { break files }
            }
        }
        for failure in failures.prefix(25) { Issue.record(Comment(rawValue: failure)) }
        if failures.count > 25 { Issue.record("… and \(failures.count - 25) more wrong outcomes") }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        print("corruption matrix, \(kind.rawValue) files (\(fixture.files.filter { $0.kind == kind }.map(\.name).joined(separator: ", "))): "
              + "\(cases) cases (\(truncations) truncations, \(flips) bit flips\(Self.full ? ", every offset" : ", sampled")) in \(String(format: "%.1f", seconds)) s")
        #expect(cases > 0)
    }

    // MARK: Running a case

    /// Writes the template with `file` damaged into `directory`, asks the
    /// inspector, then opens and reads everything.
    static func observe(_ fixture: CorruptionFixture, _ file: CorruptionFixture.File, _ damage: Damage, in directory: String, salvaging: Bool) -> Observation {
        fixture.materialize(in: directory, damaging: file.name, with: damage.apply(to: file.bytes))
        // The inspector first: a writable open cuts tails and removes files.
        var verdict = Verdict()
        do {
            verdict.report = try StoreInspector(directory: directory).verify()
        } catch {
            verdict.error = error
        }
        var options = CorruptionFixture.options
        // A read-only open must see what a writable one does, and cut or
        // remove nothing (logs are where an open repairs things).
        var readOnly: Outcome? = nil
        var readOnlyChangedFiles = false
        if file.kind == .log {
            var readOnlyOptions = options
            readOnlyOptions.readOnly = true
            readOnly = openAndRead(directory, options: readOnlyOptions, fixture: fixture)
            let names = Set((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            readOnlyChangedFiles = names != Set(fixture.files.map(\.name))
                || readFileBytes(directory + "/" + file.name).count != damage.apply(to: file.bytes).count
        }
        let outcome = openAndRead(directory, options: options, fixture: fixture)
        var salvaged: Outcome? = nil
        if salvaging, case .failed = outcome {
            fixture.materialize(in: directory, damaging: file.name, with: damage.apply(to: file.bytes))
            options.recovery = .salvage
            salvaged = openAndRead(directory, options: options, fixture: fixture)
        }
        return Observation(verdict: verdict, outcome: outcome, salvaged: salvaged, readOnly: readOnly, readOnlyChangedFiles: readOnlyChangedFiles)
    }

    /// Opens the store and reads every live record, by a full scan and by a
    /// get of every key the workload ever wrote.
    static func openAndRead(_ directory: String, options: StoreOptions, fixture: CorruptionFixture) -> Outcome {
        do {
            let store = try StrataStore(directory: directory, options: options)
            defer { try? store.close() }
            var seen: [[UInt8]: [UInt8]] = [:]
            try store.readView().forEach(from: []) { key, value in
                seen[key] = value
                return true
            }
            let k = seen[CrashWorkload.lastKey].flatMap { Int(String(decoding: $0, as: UTF8.self)) } ?? 0
            guard fixture.expected.indices.contains(k), seen == fixture.expected[k] else {
                let wanted = fixture.expected.indices.contains(k) ? fixture.expected[k] : [:]
                let wrong = seen.keys.filter { seen[$0] != wanted[$0] } + wanted.keys.filter { seen[$0] == nil }
                return .wrongData("the scan matches no batch prefix (meta/last says \(k)); differing keys: "
                                  + wrong.prefix(5).map { String(decoding: $0, as: UTF8.self) }.joined(separator: ", "))
            }
            for key in fixture.universe {
                let value = try store.get(key)
                if value != seen[key] {
                    return .wrongData("get(\(String(decoding: key, as: UTF8.self))) disagrees with the scan")
                }
            }
            return .state(k: k, report: store.recoveryReport)
        } catch let error as StoreError {
            return .failed(error)
        } catch {
            return .untyped("\(error)")
        }
    }

    /// Checks one case; returns what was wrong with it, one line each.
    static func check(_ observed: Observation, _ expected: Expected, fixture: CorruptionFixture, file: CorruptionFixture.File,
                      damage: Damage, directory: String) -> [String] {
        var wrong: [String] = []
        let path = directory + "/" + file.name
        let label = "\(file.name) \(damage)"
        func expectCorruption(_ outcome: Outcome, _ what: String) {
            guard case .failed(let error) = outcome else {
                wrong.append("\(label): \(what) should fail with a corruption error naming the file, but got \(outcome)")
                return
            }
            if error.code != .corruption || error.path != path || (error.offset ?? .max) > UInt64(damage.offset) {
                wrong.append("\(label): \(what) failed, but not with .corruption naming \(file.name) at or before offset \(damage.offset): \(error)")
            }
        }
        func expectState(_ outcome: Outcome, k: Int, rebuilt: Bool, _ what: String) {
            guard case .state(let got, let report) = outcome, got == k else {
                wrong.append("\(label): \(what) should give the state after batch \(k), but got \(outcome)")
                return
            }
            if report.segmentsRebuiltByScan != (rebuilt ? [file.name] : []) {
                wrong.append("\(label): \(what) should \(rebuilt ? "" : "not ")rebuild \(file.name) by a scan: \(report)")
            }
        }

        // The open.
        switch expected {
        case .state(let k, let rebuilt):
            expectState(observed.outcome, k: k, rebuilt: rebuilt, "the open")
        case .unseenDeadBlock:
            expectState(observed.outcome, k: fixture.lastBatch, rebuilt: false, "the open")
        case .corruption:
            expectCorruption(observed.outcome, "the open")
            if file.kind == .log {
                // Salvage keeps every batch before the damage.
                if let salvaged = observed.salvaged {
                    expectState(salvaged, k: fixture.surviving(file, damage), rebuilt: false, "a salvaging open")
                    if case .state(_, let report) = salvaged, report.salvagedCorruption == nil {
                        wrong.append("\(label): a salvaging open should report what it salvaged")
                    }
                }
            }
        }

        // A read-only open ends the same way, and changes nothing.
        if let readOnly = observed.readOnly {
            let same: Bool
            switch (readOnly, observed.outcome) {
            case (.state(let a, _), .state(let b, _)): same = a == b
            case (.failed(let a), .failed(let b)): same = a.code == b.code && a.path == b.path && a.offset == b.offset
            default: same = false
            }
            if !same { wrong.append("\(label): a read-only open gave \(readOnly), a writable one \(observed.outcome)") }
            if observed.readOnlyChangedFiles { wrong.append("\(label): a read-only open changed the store's files") }
        }

        // verify agrees: no problem exactly when the open and the read succeed
        // and rebuild nothing; a warning exactly when the open cuts a torn tail.
        let verdict = observed.verdict
        let openClean: Bool
        var cutTail = false
        if case .state(_, let report) = observed.outcome {
            openClean = report.segmentsRebuiltByScan.isEmpty && report.salvagedCorruption == nil
            cutTail = report.tornBytesDiscarded > 0
        } else {
            openClean = false
        }
        if case .unseenDeadBlock(let offset) = expected {
            let problems = verdict.report?.problems ?? []
            if problems.isEmpty || problems.contains(where: { $0.path != path || $0.offset != offset }) {
                wrong.append("\(label): verify should report the damaged dead block at \(offset) of \(file.name), but said \(verdict.report.map { "\($0.problems)" } ?? "\(verdict.error!)")")
            }
        } else if verdict.isClean != openClean {
            wrong.append("\(label): verify says \(verdict.isClean ? "clean" : "damaged: \(verdict.report.map { "\($0.problems)" } ?? "\(verdict.error!)")") but the open gave \(observed.outcome)")
        } else if verdict.isClean, (verdict.report?.warnings.isEmpty == false) != cutTail {
            wrong.append("\(label): verify's warnings (\(verdict.report?.warnings ?? [])) disagree with the torn tail the open cut (\(observed.outcome))")
        }
        if let problems = verdict.report?.problems, !problems.isEmpty, !problems.contains(where: { $0.path == path }) {
            wrong.append("\(label): verify's problems do not name \(file.name): \(problems)")
        }
        return wrong
    }

    /// Runs `body` on a thread of its own; nil when it has not finished after
    /// `seconds` (the thread is then left behind: a hung case cannot be stopped).
    static func withWatchdog<T: Sendable>(seconds: Double, _ body: @escaping @Sendable () -> T) -> T? {
        let slot = WatchdogSlot<T>()
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            slot.value = body()
            done.signal()
        }
        thread.stackSize = 8 << 20
        thread.start()
        guard done.wait(timeout: .now() + seconds) == .success else { return nil }
        return slot.value
    }

    // MARK: Which offsets

    /// Every truncation and bit flip of `file`, or a dense deterministic sample.
    static func damages(of file: CorruptionFixture.File, full: Bool) -> [Damage] {
        let size = file.bytes.count
        let offsets: [Int]
        if full {
            offsets = Array(0..<size)
        } else {
            // Every offset within a few bytes of a file end or of a structure
            // boundary (where length, header and magic fields sit), and every
            // `stride`-th offset elsewhere, shifted per file.
            var chosen = Set<Int>()
            for b in file.boundaries + [0, size] {
                for x in (b - 4)...(b + 36) where x >= 0 && x < size { chosen.insert(x) }
            }
            let stride = 7
            var x = file.name.utf8.reduce(0) { ($0 + Int($1)) % stride }
            while x < size {
                chosen.insert(x)
                x += stride
            }
            offsets = chosen.sorted()
        }
        return offsets.map { .truncate(at: $0) } + offsets.map { .flip(at: $0, bit: $0 % 8) }
    }
}

/// The result a watchdog waits for.
final class WatchdogSlot<T: Sendable>: @unchecked Sendable {
    // Written once by the worker thread before it signals the semaphore the
    // waiter waits on; read only after that wait succeeded.
    var value: T?
}

/// The matrix's store: three segments (several blocks each, tombstones for
/// keys of older segments, a 20 kB value in a block of its own, a block
/// whose only records were since deleted), three live logs (each open starts
/// a log and leaves the replayed ones live until a flush) holding puts and
/// deletes, and the manifest. Built once per run; kept in memory, and written
/// into a fresh directory for each case.
final class CorruptionFixture: Sendable {
    /// One file of the store, with what the matrix needs to know of its layout.
    struct File: Sendable {
        var name: String
        var kind: StoreFileReport.Kind
        var bytes: [UInt8]
        /// Offsets where a structure starts: frames, blocks, footer, trailer.
        var boundaries: [Int] = []
        // Logs.
        /// The live log's position among the live logs; the last one may be cut.
        var isLastLog = false
        /// Per frame: its start, its end and its sequence (= its batch number).
        var frames: [(start: Int, end: Int, sequence: Int)] = []
        /// The batch before the log's first frame.
        var batchesBefore = 0
        // Segments.
        /// Per block: its byte range, and whether a live key points into it.
        var blocks: [(range: Range<Int>, live: Bool)] = []
        var footerOffset = 0
    }

    static let options: StoreOptions = {
        var options = CrashWorkload.options(sync: .none)
        options.logSizeLimit = 1 << 20  // no automatic flush: the fixture flushes where it wants
        options.automaticCompaction = false
        options.blockCacheCapacity = 1 << 20
        return options
    }()

    static let shared: Result<CorruptionFixture, StoreError> = {
        do { return .success(try CorruptionFixture()) } catch {
            return .failure(error as? StoreError ?? StoreError(.ioFailure, "cannot build the corruption fixture: \(error)"))
        }
    }()

    let files: [File]
    let lastBatch: Int
    /// `expected[k]`: the contents after batches 1...k.
    let expected: [[[UInt8]: [UInt8]]]
    /// Every key the workload wrote.
    let universe: [[UInt8]]

    private init() throws {
        let scratch = ScratchDirectory("corruptionFixture", inMemory: true)
        let directory = scratch.store
        var store = try StrataStore(directory: directory, options: Self.options)
        for b in 1...40 {
            try store.write(CrashWorkload.batch(b))
            if b % 12 == 0 { try store.flush() }  // segments of batches 1–12, 13–24 (batch 17's large value), 25–36
        }
        try store.close()
        let last = 46
        for range in [41...43, 44...last] {
            store = try StrataStore(directory: directory, options: Self.options)
            for b in range { try store.write(CrashWorkload.batch(b)) }
            try store.close()
        }
        lastBatch = last
        expected = (0...last).map { CrashWorkload.expected(through: $0) }
        universe = [CrashWorkload.lastKey] + (1...last).flatMap { b in (0..<CrashWorkload.count(b)).map { CrashWorkload.key(b, $0) } }

        // Where each segment block is, and which blocks a live key points into.
        let inspector = try StoreInspector(directory: directory)
        var liveBlocks = Set<[UInt32]>()
        do {
            var options = Self.options
            options.readOnly = true
            let reader = try StrataStore(directory: directory, options: options)
            let view = reader.readView()
            var cursor = view.index.makeCursor(from: nil)
            while let (_, entry) = cursor.next() {
                if case .segment? = view.files[entry.file] { liveBlocks.insert([entry.file, RecordLocation(packed: entry.block).block]) }
            }
            try reader.close()
        }
        let segments = Dictionary(uniqueKeysWithValues: try inspector.segments().map { ($0.file, $0) })
        let logs = Dictionary(uniqueKeysWithValues: try inspector.logs().map { ($0.file, $0) })
        let liveLogs = logs.values.filter(\.isLive).map(\.file).sorted()
        var files: [File] = []
        for report in try inspector.files() {  // LOCK too (empty, never damaged): a read-only open needs it
            let bytes = readFileBytes(directory + "/" + report.name)
            var file = File(name: report.name, kind: report.kind, bytes: bytes)
            if let log = logs[report.name] {
                file.isLastLog = report.name == liveLogs.last
                file.frames = log.frames.map { (Int($0.offset), Int($0.offset + $0.bytes), Int($0.sequence!)) }
                file.batchesBefore = file.frames[0].sequence - 1
                file.boundaries = [LogFormat.fileHeaderSize] + file.frames.map(\.start)
            } else if let segment = segments[report.name] {
                file.blocks = segment.blocks.map { block in
                    (Int(block.offset)..<Int(block.offset + block.storedBytes), liveBlocks.contains([segment.fileNumber, UInt32(block.index)]))
                }
                file.footerOffset = file.blocks.last!.range.upperBound
                file.boundaries = [SegmentFormat.headerSize] + file.blocks.map(\.range.lowerBound) + [file.footerOffset, bytes.count - SegmentFormat.trailerSize]
            }
            files.append(file)
        }
        self.files = files

        // The fixture has what the matrix means to test.
        let kinds = files.map(\.kind)
        guard kinds.filter({ $0 == .segment }).count == 3, kinds.filter({ $0 == .log }).count == 3, kinds.contains(.manifest),
              liveLogs.count == 3, files.filter({ $0.kind == .segment }).allSatisfy({ $0.blocks.count > 1 }),
              files.contains(where: { $0.blocks.contains { !$0.live } }),
              files.flatMap(\.frames).map(\.sequence).max() == last
        else {
            throw StoreError(.invalidArgument, "the corruption fixture does not have the files it should: \(files.map { "\($0.name) \($0.blocks.count) blocks \($0.frames.count) frames" })")
        }
    }

    /// Writes the store into `directory` (emptied first), `damaged` in place of `name`'s bytes.
    func materialize(in directory: String, damaging name: String, with damaged: [UInt8]) {
        try? FileManager.default.removeItem(atPath: directory)
        try! FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for file in files {
            writeFileBytes(directory + "/" + file.name, file.name == name ? damaged : file.bytes)
        }
    }

    /// The last batch a log's damage leaves whole: every frame that ends at
    /// or before the damage survives (for a bit flip, the frame holding it is lost).
    func surviving(_ file: File, _ damage: CorruptionMatrixTests.Damage) -> Int {
        file.batchesBefore + file.frames.filter { $0.end <= damage.offset }.count
    }

    /// The one right outcome of `damage` to `file`.
    func expectation(for file: File, _ damage: CorruptionMatrixTests.Damage) -> CorruptionMatrixTests.Expected {
        switch file.kind {
        case .log:
            // Only the last log's tail may be lost, as a crash would: a
            // truncation anywhere in it, or a flipped bit in its last frame
            // (a torn write looks the same). A bad frame followed by good
            // ones, a damaged header, or any damage to an older log (fsynced
            // before the next was started) must fail the open.
            if file.isLastLog {
                switch damage {
                case .truncate: return .state(k: surviving(file, damage), rebuilt: false)
                case .flip(let x, _): if x >= file.frames.last!.start { return .state(k: lastBatch - 1, rebuilt: false) }
                }
            }
            return .corruption
        case .segment:
            // Segments are fsynced before the manifest names them (with their
            // size): nothing in one is ever legitimately torn.
            guard case .flip(let x, _) = damage, x >= SegmentFormat.headerSize else { return .corruption }
            if let block = file.blocks.first(where: { $0.range.contains(x) }) {
                return block.live ? .corruption : .unseenDeadBlock(offset: UInt64(block.range.lowerBound))
            }
            // The footer and trailer are derived data: the keys are rebuilt from the blocks.
            return .state(k: lastBatch, rebuilt: true)
        default:
            return .corruption  // the manifest: there is no store without it
        }
    }
}
