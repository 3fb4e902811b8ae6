import SharedTestSupport
import Testing

@testable import StrataStore

/// `BlockTable`, the block cache's open-addressing table: it must answer
/// exactly as a `Dictionary` does through growth, collisions, backward-shift
/// deletion and removal by file.
@Suite struct BlockTableTests {
    /// An empty block: a distinct object to tell entries apart by identity.
    static func block() -> DecodedBlock { DecodedBlock.copying([0, 0, 0, 0])! }

    /// Every key of `model` finds its block, and the count agrees.
    static func expectSame(_ table: BlockTable, _ model: [BlockCache.Key: DecodedBlock], probes: [BlockCache.Key]) {
        #expect(table.count == model.count)
        for key in probes { #expect(table[key] === model[key], "key \(key.file)/\(key.block)") }
    }

    @Test(arguments: [1, 2, 3])
    func randomOperationsMatchADictionary(seed: UInt64) {
        var generator = SeededGenerator(seed: seed)
        var table = BlockTable()
        var model: [BlockCache.Key: DecodedBlock] = [:]
        // A pool of 1,200 keys, so that keys repeat and are removed often;
        // random block numbers, because the hash spreads consecutive ones
        // evenly and random ones cluster (as long runs to shift back do).
        let keys = (0..<1_200).map { i in BlockCache.Key(file: UInt32(i % 4), block: UInt32(truncatingIfNeeded: generator.next())) }
        for step in 0..<20_000 {
            let key = keys[Int(generator.next() % UInt64(keys.count))]
            switch generator.next() % 10 {
            case 0..<5:
                let block = Self.block()
                table.insert(block, for: key)
                model[key] = block
            case 5..<9:
                #expect(table.remove(key) === model.removeValue(forKey: key))
            default:
                let file = UInt32(generator.next() % 4)
                let removed = table.removeAll { $0.file == file }
                let expected = model.filter { $0.key.file == file }
                #expect(removed.count == expected.count)
                #expect(Set(removed.map(ObjectIdentifier.init)) == Set(expected.values.map(ObjectIdentifier.init)))
                model = model.filter { $0.key.file != file }
            }
            if step % 997 == 0 { Self.expectSame(table, model, probes: keys) }
        }
        Self.expectSame(table, model, probes: keys)
    }

    /// Keys whose home slots are the same run end to end: removing from the
    /// middle of a run must leave every later key findable.
    @Test func removalInsideAClusterKeepsTheRestFindable() {
        var table = BlockTable()
        var model: [BlockCache.Key: DecodedBlock] = [:]
        let keys = (0..<1_000).map { BlockCache.Key(file: 7, block: UInt32($0)) }
        for key in keys {
            let block = Self.block()
            table.insert(block, for: key)
            model[key] = block
        }
        for key in keys where key.block % 3 == 1 {
            #expect(table.remove(key) === model.removeValue(forKey: key))
            #expect(table.remove(key) == nil)
        }
        Self.expectSame(table, model, probes: keys)
        #expect(table[BlockCache.Key(file: 8, block: 0)] == nil)
    }

    /// Tables of at most 8 keys in 16 slots, filled and emptied in random
    /// orders: keys share home slots and runs all the time, so every case
    /// of the backward shift (a run that wraps past the last slot among them)
    /// comes up.
    @Test func smallTablesKeepEveryKeyThroughRemovals() {
        var generator = SeededGenerator(seed: 5)
        for _ in 0..<20_000 {
            var table = BlockTable()
            var model: [BlockCache.Key: DecodedBlock] = [:]
            let keys = (0..<8).map { _ in BlockCache.Key(file: UInt32(generator.next() % 3), block: UInt32(generator.next() % 64)) }
            for key in keys {
                let block = Self.block()
                table.insert(block, for: key)
                model[key] = block
            }
            for key in keys.shuffled(using: &generator).prefix(Int(generator.next() % 8)) {
                guard table.remove(key) === model.removeValue(forKey: key) else {
                    Issue.record("removing \(key) answered differently from a Dictionary")
                    return
                }
                for other in keys where table[other] !== model[other] {
                    Issue.record("after removing \(key), \(other) is not found as in a Dictionary")
                    return
                }
            }
        }
    }

    /// An insert for a key it holds replaces the block and keeps the count.
    @Test func insertReplaces() {
        var table = BlockTable()
        let key = BlockCache.Key(file: 1, block: 2)
        let (first, second) = (Self.block(), Self.block())
        table.insert(first, for: key)
        table.insert(second, for: key)
        #expect(table.count == 1)
        #expect(table[key] === second)
    }
}
