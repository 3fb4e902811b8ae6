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
        private var stopped = false
        func tear(_ what: String) { lock.lock(); torn.append(what); lock.unlock() }
        func read() { lock.lock(); reads += 1; lock.unlock() }
        func stop() { lock.lock(); stopped = true; lock.unlock() }
        var isStopped: Bool { lock.lock(); defer { lock.unlock() }; return stopped }
        var result: (torn: [String], reads: Int) { lock.lock(); defer { lock.unlock() }; return (torn, reads) }
    }

    @Test func readersNeverSeePartOfABatch() throws {
        let dir = ScratchDirectory()
        let store = try StrataStore(directory: dir.store, options: smallOptions())
        let tally = Tally()
        let writers = 3, batchesPerWriter = 400
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
                        tally.read()
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
                    do {
                        try store.write(batch)
                        if i % 150 == 149 { try store.compact() }
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
        try store.close()
    }
}
