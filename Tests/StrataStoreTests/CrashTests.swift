import CrashWorkload
import SharedTestSupport
import Foundation
import Testing

@testable import StrataStore

/// A writer in a child process is SIGKILLed at random moments, cycle after
/// cycle, on one store. After every kill the store must reopen with every
/// batch the child acknowledged, and no batch in part.
///
/// CI runs `STRATA_CRASH_CYCLES` cycles (default 40); `make crash-long` runs thousands.
@Suite struct CrashTests {
    /// The child executable, built beside this test binary.
    static var childPath: String? { builtExecutable(named: "strata-crash-child") }

    /// A second process is refused the lock with a typed error naming the
    /// process that holds it.
    @Test func anotherProcessGetsTheLockedError() throws {
        guard let child = Self.childPath else {
            Issue.record("strata-crash-child was not built beside the tests")
            return
        }
        let dir = ScratchDirectory()
        let store = try StrataStore(directory: dir.store, options: CrashWorkload.options)
        let run = try runToCompletion(child, [dir.store, "1"])
        let output = run.stdout
        #expect(run.status == 1)
        #expect(output.contains("StoreError.locked"), "the child said: \(output)")
        #if os(Linux)
        #expect(output.contains("locked by process \(getpid()) ("), "the error names the holder: \(output)")
        #endif
        #expect(!output.split(separator: "\n").contains { $0.hasPrefix("ack ") }, "the child acknowledged a write: \(output)")
        try store.close()
    }

    /// A store that has run the process out of descriptors: the process's
    /// first global-queue worker (Swift's tasks, `DispatchQueue.global()`)
    /// must still start and a post to a self-drained main queue must still
    /// go through — libdispatch makes a descriptor for each on first use, and
    /// traps without, unless opening the store made them first — and the
    /// store, needing a new file, reports `EMFILE` as a typed error, keeping
    /// every batch it acknowledged.
    @Test func aStoreThatRanTheProcessOutOfDescriptorsFailsCleanly() throws {
        let child = try #require(Self.childPath, "strata-crash-child was not built beside the tests")
        let dir = ScratchDirectory()
        let deadline = Date().addingTimeInterval(60)
        let run = try runCrashChild(child, [dir.store, "exhaust-descriptors"]) { _ in Date() >= deadline }
        let said = run.said.joined(separator: "\n")
        #expect(!run.killed, "the child neither failed nor finished in 60 s: \(said)")
        #expect(run.status == 1, "exit \(run.status): \(said)")
        #expect(said.contains("worker started") && said.contains("posted to the main queue"), "\(said)")
        #expect(said.contains("StoreError.ioFailure") && said.contains("Too many open files"), "\(said)")
        #expect(run.highest >= 2, "no batch was written after the descriptors ran out")
        let store = try StrataStore(directory: dir.store, options: CrashWorkload.options)
        let last = (try store.get(CrashWorkload.lastKey)).flatMap { Int(String(decoding: $0, as: UTF8.self)) } ?? 0
        #expect(last >= run.highest, "batch \(run.highest) was acknowledged but the store ends at \(last)")
        try store.close()
    }

    /// `.grouped`: every acknowledged batch is durable, so it must survive.
    @Test func acknowledgedBatchesSurviveSIGKILL() throws {
        try killCycles(sync: "grouped", cycles: Int(ProcessInfo.processInfo.environment["STRATA_CRASH_CYCLES"] ?? "") ?? 40)
    }

    /// `.none`: nothing is fsynced, but a process crash (not a power loss)
    /// still loses nothing the process wrote: the kernel keeps its page cache.
    @Test func withoutSyncAProcessCrashLosesNothingAcknowledged() throws {
        try killCycles(sync: "none", cycles: max(5, (Int(ProcessInfo.processInfo.environment["STRATA_CRASH_CYCLES"] ?? "") ?? 40) / 4))
    }

    func killCycles(sync: String, cycles: Int) throws {
        guard let child = Self.childPath else {
            Issue.record("strata-crash-child was not built beside the tests")
            return
        }
        let seed = testSeed()
        var g = SeededGenerator(seed: seed)
        let dir = ScratchDirectory()
        var acknowledged = 0
        var killsDuringWork = 0
        var flushesSeen = 0

        for cycle in 0..<cycles {
            // Let it start and write for a random while (startup takes tens of ms).
            let deadline = Date().addingTimeInterval(Double.random(in: 0.03...0.35, using: &g))
            let run = try runCrashChild(child, [dir.store, String(g.next()), sync]) { _ in Date() >= deadline }
            let highest = run.highest
            #expect(run.said.isEmpty, "cycle \(cycle): the child reported \(run.said)")
            #expect(run.killed, "cycle \(cycle): the child exited by itself (\(run.status))")
            if highest > acknowledged { killsDuringWork += 1 }
            acknowledged = max(acknowledged, highest)

            // Reopen and check: every acknowledged batch, no partial batch.
            var options = CrashWorkload.options
            options.automaticCompaction = false
            let store = try StrataStore(directory: dir.store, options: options)
            let last = (try store.get(CrashWorkload.lastKey)).flatMap { Int(String(decoding: $0, as: UTF8.self)) } ?? 0
            #expect(last >= acknowledged, "cycle \(cycle): batch \(acknowledged) was acknowledged but the store ends at \(last) (seed \(seed))")
            let all = try store.scan(prefix: [])
            let contents = Dictionary(uniqueKeysWithValues: all.map { ($0.key, $0.value) })
            let expected = CrashWorkload.expected(through: last)
            if contents != expected {
                let missing = expected.keys.filter { contents[$0] != expected[$0] }.prefix(3).map { String(decoding: $0, as: UTF8.self) }
                let extra = contents.keys.filter { expected[$0] == nil }.prefix(3).map { String(decoding: $0, as: UTF8.self) }
                Issue.record("cycle \(cycle): store is not exactly batches 1...\(last): missing/different \(missing), extra \(extra) (seed \(seed))")
                try store.close()
                return
            }
            flushesSeen = max(flushesSeen, store.statistics.segments)
            acknowledged = last  // the batch in flight may have landed: the child continues from here
            try store.close()
        }
        print("crash test (\(sync)): \(cycles) kills, \(killsDuringWork) after new acknowledgements, \(acknowledged) batches in the end, up to \(flushesSeen) segments (seed \(seed))")
        #expect(acknowledged > cycles)  // the children did real work
    }
}
