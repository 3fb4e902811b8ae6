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
        var options = smallOptions()
        options.logSizeLimit = 8 << 10
        options.segmentSizeLimit = 16 << 10
        var readOnly = options
        readOnly.readOnly = true
        let writer = try StrataStore(directory: dir.store, options: options)
        try writer.put("last", "-1")
        // Fewer under ThreadSanitizer (`make test-tsan` sets it), where each
        // batch, flush and open is many times slower.
        let batches = Int(ProcessInfo.processInfo.environment["STRATA_READER_BATCHES"] ?? "") ?? 1_500
        let done = Flag()
        let failure = ErrorBox()
        // A thread of its own: the reader loop below never suspends, and a
        // task could wait behind it (and behind other tests) for a thread.
        let writing = Thread {
            defer { done.raise() }
            do {
                for i in 0..<batches {
                    var batch = WriteBatch()
                    batch.put(Array("k\(i % Self.keys)".utf8), Array("v\(i)".utf8))
                    batch.put(Array("last".utf8), Array("\(i)".utf8))
                    _ = try writer.write(batch)
                    if i % 25 == 24 { try writer.flush() }
                    if i % 200 == 199 { try writer.compact() }
                }
            } catch {
                failure.record(error)
            }
        }
        writing.start()
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

/// The error a thread ran into, for the test to report.
/// `@unchecked Sendable`: `stored` is guarded by `lock`.
private final class ErrorBox: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: (any Error)?
    func record(_ error: any Error) { lock.withLock { stored = error } }
    var error: (any Error)? { lock.withLock { stored } }
}

/// A flag one thread raises and another reads.
/// `@unchecked Sendable`: `raised` is guarded by `lock`.
private final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var raised = false
    func raise() { lock.withLock { raised = true } }
    var isRaised: Bool { lock.withLock { raised } }
}
