@testable import Strata
import SharedTestSupport
import StrataStore
import Testing

/// The in-memory store keeps its keys in order across writes (rather than
/// sorting them all again at the next read after each): random batches of
/// puts and deletes, small and large, with ordered reads between them,
/// against a dictionary's keys sorted.
@Suite struct InMemoryRecordStoreTests {
    @Test(arguments: [1, 2, 3])
    func keysStayInOrderAcrossWrites(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let store = InMemoryRecordStore()
        var model: [[UInt8]: [UInt8]] = [:]
        func key() -> [UInt8] { (0..<Int(random.next() % 2 + 2)).map { _ in UInt8(random.next() % 24) } }
        for round in 0..<250 {
            var batch = WriteBatch()
            // Mostly batches of a few keys (kept in order where they land, a
            // chunk split or emptied now and then), a large one now and then
            // (past an eighth of the keys: sorted again at the next read),
            // deletes often enough that chunks empty out.
            let size = round % 60 == 30 ? 900 : Int(random.next() % 40) + 1
            let deletes = round > 150 ? 2 : 4
            for _ in 0..<size {
                let key = key()
                if random.next() % UInt64(deletes) == 0 {
                    batch.delete(key)
                    model[key] = nil
                } else {
                    let value = [UInt8(round & 0xff)]
                    batch.put(key, value)
                    model[key] = value
                }
            }
            try store.write(batch)
            let expected = model.sorted { $0.key.lexicographicallyPrecedes($1.key) }
            var read: [([UInt8], [UInt8])] = []
            try store.forEachWhile(prefix: []) { (key, value) throws(StrataError) -> Bool in
                read.append((Array(key), Array(value)))
                return true
            }
            #expect(read.map(\.0) == expected.map(\.key), "round \(round)")
            #expect(read.map(\.1) == expected.map(\.value), "round \(round)")
            // A range, both ways.
            let (low, high) = (key(), key())
            let range = low.lexicographicallyPrecedes(high) ? KeyRange(start: low, end: high) : KeyRange(start: high, end: low)
            let inRange = expected.map(\.key).filter { range.contains($0) }
            for descending in [false, true] {
                var keys: [[UInt8]] = []
                try store.forEachKey(in: KeyRanges([range]), descending: descending) { (key, _) throws(StrataError) -> Bool in
                    keys.append(Array(key))
                    return true
                }
                #expect(keys == (descending ? inRange.reversed() : inRange), "round \(round), descending: \(descending)")
            }
        }
        #expect(model.count > 2 * ChunkedKeyOrder.chunkLimit, "the keys span several chunks")
    }
}

/// A write of scattered keys into a large in-memory store counts the
/// chunks' starts again once, not once a key: its cost is what it wrote.
@Suite struct ChunkedKeyOrderCostTests {
    @Test func anUpdateCountsTheStartsOnce() {
        let stored = (0..<100_000).map { i in Array("key \(String(i, radix: 10)) stored".utf8) }.sorted { $0.lexicographicallyPrecedes($1) }
        var order = ChunkedKeyOrder(sorted: stored)
        let chunks = (stored.count + ChunkedKeyOrder.chunkLimit / 2 - 1) / (ChunkedKeyOrder.chunkLimit / 2)
        // 100 keys spread over the whole order, as a save's index entries are.
        let inserted = (0..<100).map { i in Array("key \(i * 997) stored, then more".utf8) }
        let removed = stored.enumerated().filter { $0.offset % 1_000 == 1 }.map(\.element)
        order.update(removing: removed, inserting: inserted)
        #expect(order.count == stored.count + inserted.count - removed.count)
        #expect(order.startsCounted <= chunks, "counted \(order.startsCounted) starts for \(chunks) chunks")
        // The positions are right after it.
        let all = (stored.filter { !removed.contains($0) } + inserted).sorted { $0.lexicographicallyPrecedes($1) }
        for probe in [inserted[0], inserted[57], all[all.count / 2], all.last!] {
            #expect(order.lowerBound(probe) == all.firstIndex(of: probe))
        }
    }
}
