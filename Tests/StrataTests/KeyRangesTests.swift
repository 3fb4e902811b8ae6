import Foundation
import SharedTestSupport
@testable import Strata
import Testing

/// The packed forms a plan keeps its keys in: ``KeyRanges`` (bounds in one
/// buffer) and ``SortedKeys`` (an `IN` list's encodings, sorted, each once),
/// against the plain arrays they replace.
@Suite struct KeyRangesTests {
    /// Byte strings short enough to collide, with 0x00 and 0xFF common (a
    /// prefix's end drops trailing 0xFF bytes).
    static func randomKeys(_ count: Int, seed: UInt64) -> [[UInt8]] {
        var generator = SeededGenerator(seed: seed)
        let alphabet: [UInt8] = [0, 1, 0x41, 0x7F, 0xFE, 0xFF]
        return (0..<count).map { _ in
            (0..<Int.random(in: 0...4, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }
        }
    }

    @Test func aPrefixRangeIsTheRangeOfThePrefix() {
        let keys = Self.randomKeys(500, seed: 7) + [[0xFF, 0xFF], [0x41, 0xFF, 0xFF], []]
        var packed = KeyRanges()
        for key in keys { packed.appendPrefix { $0 += key } }
        #expect(packed.ranges == keys.map { KeyRange(prefix: $0) })
        #expect(packed == KeyRanges(keys.map { KeyRange(prefix: $0) }))
        #expect(packed.count == keys.count)
    }

    /// Many prefixes appended at once are what appending each would make,
    /// behind ranges already there: a shared prefix (none, or ending in
    /// 0xFF) before keys that are empty, all 0xFF, or end in 0xFF.
    @Test func prefixesAppendedAtOnceAreThePrefixesAppendedOneByOne() {
        let keys = Self.randomKeys(700, seed: 11) + [[0xFF, 0xFF], [], [0x41, 0xFF]]
        for prefix in [[], [0x01, 0x07], [0xFF], [0x41, 0xFF, 0xFF]] as [[UInt8]] {
            var oneByOne = KeyRanges([KeyRange(start: [2], end: [3])])
            var atOnce = oneByOne
            for key in keys { oneByOne.appendPrefix { $0 += prefix; $0 += key } }
            let (buffer, spans) = Self.packed(keys)
            buffer.withUnsafeBytes { raw in
                atOnce.appendPrefixes(prefix, followedByEach: keys.count) { UnsafeRawBufferPointer(rebasing: raw[spans[$0]]) }
            }
            #expect(atOnce == oneByOne, "prefix \(prefix)")
            #expect(atOnce.ranges == [KeyRange(start: [2], end: [3])] + keys.map { KeyRange(prefix: prefix + $0) })
        }
    }

    @Test func rangesAreLentInOrderOrLastFirst() {
        let ranges = [KeyRange(start: [1], end: [2]), KeyRange(start: [3], end: nil), KeyRange(prefix: [5, 0xFF])]
        let packed = KeyRanges(ranges)
        for descending in [false, true] {
            var lent: [KeyRange] = []
            packed.forEach(descending: descending) { start, end in
                lent.append(KeyRange(start: Array(start), end: end.map { Array($0) }))
                return true
            }
            #expect(lent == (descending ? ranges.reversed() : ranges))
        }
        var seen = 0
        let finished = packed.forEach { _, _ in
            seen += 1
            return seen < 2
        }
        #expect(!finished && seen == 2)
        #expect(packed.isAscending)
        let unordered = KeyRanges([ranges[2], ranges[0], ranges[1]])
        #expect(!unordered.isAscending)
        #expect(unordered.sorted() == packed)
    }

    @Test func sortedKeysAreTheSortedDistinctKeys() {
        for (count, seed) in [(0, UInt64(1)), (1, 2), (2, 3), (1_000, 4)] {
            let keys = Self.randomKeys(count, seed: seed)
            var buffer: [UInt8] = []
            var spans: [Range<Int>] = []
            for key in keys {
                spans.append(buffer.count..<(buffer.count + key.count))
                buffer += key
            }
            let sorted = SortedKeys(sorting: spans, of: buffer)
            let expected = Set(keys).sorted { $0.lexicographicallyPrecedes($1) }
            #expect(Array(sorted) == expected, "\(count) keys")
            var lent: [[UInt8]] = []
            sorted.forEachKey { lent.append(Array($0)) }
            #expect(lent == expected)
            for probe in Self.randomKeys(200, seed: seed + 100) {
                #expect(sorted.contains(probe) == expected.contains(probe))
            }
        }
        let one = SortedKeys(one: [9, 9])
        #expect(Array(one) == [[9, 9]] && one.contains([9, 9]) && !one.contains([9]))
    }

    /// Keys that share a long prefix and agree on the eight bytes after it
    /// (where ``ByteStringOrder`` compares integers) sort as their bytes do:
    /// the tie-break past those bytes, and zero-padding of short keys.
    /// `keys` one after another in one buffer, and where each lies.
    static func packed(_ keys: [[UInt8]]) -> (buffer: [UInt8], spans: [Range<Int>]) {
        var buffer: [UInt8] = []
        var spans: [Range<Int>] = []
        for key in keys {
            spans.append(buffer.count..<(buffer.count + key.count))
            buffer += key
        }
        return (buffer, spans)
    }

    @Test func keysSharingAPrefixSortAsTheirBytes() {
        var generator = SeededGenerator(seed: 41)
        let alphabet: [UInt8] = [0, 1, 0x30, 0x39, 0xFF]
        let prefix = Array("\u{1}SKU-".utf8)
        let keys = (0..<2_000).map { _ -> [UInt8] in
            let head: [UInt8] = Bool.random(using: &generator) ? Array("00000000".utf8) : []
            let tail = (0..<Int.random(in: 0...12, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }
            return prefix + head + tail
        }
        let expected = keys.sorted { $0.lexicographicallyPrecedes($1) }
        #expect(UniqueKey.sorted(keys.map(UniqueKey.init)).map(\.bytes) == expected)
        let (buffer, spans) = Self.packed(keys)
        let order = buffer.withUnsafeBytes { ByteStringOrder.order(of: spans, in: $0) }
        #expect(order.map { keys[$0] } == expected)
        #expect(Set(order) == Set(keys.indices))
        // Equal keys keep their first order.
        #expect(zip(order, order.dropFirst()).allSatisfy { keys[$0] != keys[$1] || $0 < $1 })
        // Hundreds of keys equal but for trailing zero bytes (read as
        // zero-padded, the shorter first), or equal outright: runs of equal
        // heads long enough to be radix sorted again, past every key's end.
        let zeros = (0..<800).map { i in prefix + Array(repeating: 0, count: i % 4) + (i % 5 == 0 ? [0x30] : []) }.shuffled(using: &generator)
        let (zeroBuffer, zeroSpans) = Self.packed(zeros)
        let zeroOrder = zeroBuffer.withUnsafeBytes { ByteStringOrder.order(of: zeroSpans, in: $0) }
        #expect(zeroOrder.map { zeros[$0] } == zeros.sorted { $0.lexicographicallyPrecedes($1) })
        #expect(zip(zeroOrder, zeroOrder.dropFirst()).allSatisfy { zeros[$0] != zeros[$1] || $0 < $1 })
        // Fewer keys than a radix sort takes: compared one with another.
        let few = Array(spans.prefix(ByteStringOrder.radixThreshold - 1))
        let fewOrder = buffer.withUnsafeBytes { ByteStringOrder.order(of: few, in: $0) }
        #expect(fewOrder.map { keys[$0] } == keys.prefix(few.count).sorted { $0.lexicographicallyPrecedes($1) })
        #expect(zip(fewOrder, fewOrder.dropFirst()).allSatisfy { keys[$0] != keys[$1] || $0 < $1 })
    }
}
