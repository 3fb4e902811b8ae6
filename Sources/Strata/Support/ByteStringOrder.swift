internal import StrataStore

/// Sorting byte strings that lie in one buffer (index keys, unique keys,
/// an `IN` list's encodings) without comparing them byte by byte: they
/// mostly share a prefix (an index's tag, "SKU-"), so each is ordered
/// first by the eight bytes after that prefix read as one integer (its
/// head) — zero-padded past a string's end, which keeps the byte order —
/// and by all its bytes only among those whose heads are equal.
enum ByteStringOrder {
    /// The positions of `spans` (ranges of `raw`) in ascending order of the
    /// bytes they cover; equal strings keep their order.
    static func order(of spans: [Range<Int>], in raw: UnsafeRawBufferPointer) -> [Int] {
        guard let first = spans.first else { return [] }
        var shared = first.count
        for span in spans.dropFirst() where shared > 0 {
            var n = 0
            let limit = Swift.min(shared, span.count)
            while n < limit && raw[first.lowerBound + n] == raw[span.lowerBound + n] { n += 1 }
            shared = n
        }
        var keyed = spans.indices.map { i -> Keyed in
            let span = spans[i]
            let from = span.lowerBound + shared
            if span.upperBound - from >= 8 {
                return Keyed(head: UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: from, as: UInt64.self)), position: i)
            }
            var head: UInt64 = 0
            for n in 0..<8 {
                let at = from + n
                head = head << 8 | UInt64(at < span.upperBound ? raw[at] : 0)
            }
            return Keyed(head: head, position: i)
        }
        func bytes(_ position: Int) -> UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: raw[spans[position]]) }
        guard keyed.count >= radixThreshold else {
            keyed.sort { a, b in a.head != b.head ? a.head < b.head : compareBytes(bytes(a.position), bytes(b.position)) < 0 }
            return keyed.map(\.position)
        }
        radixSortByHead(&keyed)
        // Equal heads are neighbours now, in their first order: each run of
        // them sorted by all its bytes (a stable sort).
        var start = 0
        while start < keyed.count {
            var end = start + 1
            while end < keyed.count && keyed[end].head == keyed[start].head { end += 1 }
            if end - start > 1 { keyed[start..<end].sort { compareBytes(bytes($0.position), bytes($1.position)) < 0 } }
            start = end
        }
        return keyed.map(\.position)
    }

    /// A string's head and its position among the spans.
    struct Keyed {
        var head: UInt64
        var position: Int
    }

    /// From this many strings on, heads are ordered by a radix sort: eight
    /// passes at most over the list, where comparisons cost about
    /// log₂(count) each (a sort of 10,000 SKUs: about 550 instructions a
    /// key compared, about 100 by radix).
    static let radixThreshold = 256

    /// Sorts `keyed` by head, stably: least significant byte first, a pass
    /// per byte that differs among the heads (one counting pass finds them).
    static func radixSortByHead(_ keyed: inout [Keyed]) {
        let count = keyed.count
        var counts = [Int](repeating: 0, count: 8 * 256)
        counts.withUnsafeMutableBufferPointer { counts in
            keyed.withUnsafeBufferPointer { keyed in
                for item in keyed {
                    var head = item.head
                    for byte in 0..<8 {
                        counts[byte &* 256 &+ Int(head & 0xFF)] &+= 1
                        head >>= 8
                    }
                }
            }
        }
        var other = keyed
        var from = true  // the sorted order so far is in `keyed` (else in `other`)
        for byte in 0..<8 {
            let base = byte * 256
            // Every head has the same byte here: the pass would move nothing.
            if counts[base + Int((keyed[0].head >> (8 * byte)) & 0xFF)] == count { continue }
            var offsets = [Int](repeating: 0, count: 256)
            var total = 0
            for value in 0..<256 {
                offsets[value] = total
                total += counts[base + value]
            }
            let shift = UInt64(8 * byte)
            func pass(_ source: UnsafeBufferPointer<Keyed>, _ destination: UnsafeMutableBufferPointer<Keyed>) {
                offsets.withUnsafeMutableBufferPointer { offsets in
                    for item in source {
                        let value = Int((item.head >> shift) & 0xFF)
                        destination[offsets[value]] = item
                        offsets[value] &+= 1
                    }
                }
            }
            if from {
                keyed.withUnsafeBufferPointer { source in other.withUnsafeMutableBufferPointer { pass(source, $0) } }
            } else {
                other.withUnsafeBufferPointer { source in keyed.withUnsafeMutableBufferPointer { pass(source, $0) } }
            }
            from.toggle()
        }
        if !from { keyed = other }
    }
}
