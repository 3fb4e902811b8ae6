import SharedTestSupport
@testable import Strata
import Testing

/// A save writes its new objects in record-key order (entity number, then
/// primary key), whichever way the positions are found.
struct KeyOrderTests {
    /// What the order must be: a comparison sort of the record keys.
    static func expected(_ ids: [ObjectID]) -> [Int] {
        ids.indices.sorted { (ids[$0].entity.index, ids[$0].primaryKey) < (ids[$1].entity.index, ids[$1].primaryKey) }
    }

    static func ids(_ count: Int, keys: () -> UInt64, using generator: inout some RandomNumberGenerator) -> [ObjectID] {
        let entities = makeModel().entities
        return (0..<count).map { _ in
            ObjectID(entity: entities.randomElement(using: &generator)!, primaryKey: keys(), isTemporary: false)
        }
    }

    /// Dense keys (a save's usual), sparse keys over every byte, keys past
    /// 48 bits (the comparison sort), and saves below and at the radix
    /// sort's threshold; several entities mixed in each.
    @Test(arguments: [1, 2, 255, 256, 3_000])
    func positionsFollowTheRecordKeys(count: Int) {
        var generator = SeededGenerator(seed: UInt64(count))
        var next: UInt64 = 0
        var dense = Self.ids(count, keys: { next += 1; return next }, using: &generator)
        dense.shuffle(using: &generator)
        var keyGenerator = SeededGenerator(seed: 7)
        let sparse = Self.ids(count, keys: { keyGenerator.next() >> 16 }, using: &generator)
        let wide = Self.ids(count, keys: { keyGenerator.next() | 1 << 63 }, using: &generator)
        for ids in [dense, sparse, wide] {
            #expect(KeyOrder.positions(of: ids) == Self.expected(ids))
        }
    }

    /// Equal keys keep their order, and a byte in which every key agrees is
    /// skipped without disturbing the others.
    @Test func theRadixSortIsStable() {
        var generator = SeededGenerator(seed: 42)
        let keys = (0..<1_000).map { _ in UInt64.random(in: 0..<64, using: &generator) << 40 | 0xAB00 }
        let expected = keys.indices.sorted { (keys[$0], $0) < (keys[$1], $1) }
        #expect(KeyOrder.radixOrder(of: keys) == expected)
        #expect(KeyOrder.radixOrder(of: []) == [])
    }
}
