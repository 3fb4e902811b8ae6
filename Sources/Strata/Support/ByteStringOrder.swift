internal import StrataStore

/// Sorting byte strings that lie in one buffer (index keys, unique keys,
/// an `IN` list's encodings) without comparing them byte by byte: they
/// mostly share a prefix (an index's tag, "SKU-"), so the bytes after the
/// prefix they share are read eight at a time as one integer (a head) and
/// the strings ordered by their heads with a radix sort; those with equal
/// heads are ordered the same way by the eight bytes after, and so on. A
/// string is read as zero-padded past its end, and among strings equal so
/// read the shorter comes first — which is the strings' byte order.
enum ByteStringOrder {
    /// The positions of `spans` (ranges of `raw`) in ascending order of the
    /// bytes they cover; equal strings keep their order.
    static func order(of spans: [Range<Int>], in raw: UnsafeRawBufferPointer) -> [Int] {
        var keyed = spans.indices.map { Keyed(head: 0, position: $0) }
        var scratch: [Keyed] = []
        sort(&keyed, keyed.indices, past: 0, spans, raw, scratch: &scratch)
        return keyed.map(\.position)
    }

    /// A string's head and its position among the spans.
    struct Keyed {
        var head: UInt64
        var position: Int
    }

    /// From this many strings on, a run is ordered by a radix sort of heads
    /// (eight passes at most over it, with fixed costs of its own), where
    /// a comparison sort costs about log₂(count) comparisons a string.
    static let radixThreshold = 256

    /// Sorts `keyed[range]`, strings equal in their first `offset` bytes
    /// (zero-padded), stably.
    private static func sort(
        _ keyed: inout [Keyed], _ range: Range<Int>, past offset: Int, _ spans: [Range<Int>], _ raw: UnsafeRawBufferPointer,
        scratch: inout [Keyed]
    ) {
        func bytes(_ position: Int) -> UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: raw[spans[position]]) }
        guard range.count >= radixThreshold else {
            if range.count < 2 { return }
            if range.count <= 16 {
                // A few (most runs of equal heads): inserted one by one, in
                // place, without the buffer a merge sort makes.
                for i in (range.lowerBound + 1)..<range.upperBound {
                    let item = keyed[i]
                    var j = i
                    while j > range.lowerBound && compareBytes(bytes(keyed[j - 1].position), bytes(item.position)) > 0 {
                        keyed[j] = keyed[j - 1]
                        j -= 1
                    }
                    keyed[j] = item
                }
            } else {
                keyed[range].sort { compareBytes(bytes($0.position), bytes($1.position)) < 0 }
            }
            return
        }
        // Byte `i` of the string at `position`, zero past its end.
        @inline(__always) func byte(_ position: Int, _ i: Int) -> UInt8 {
            let span = spans[position]
            return i < span.count ? raw[span.lowerBound + i] : 0
        }
        var longest = 0
        for i in range { longest = Swift.max(longest, spans[keyed[i].position].count) }
        // Past every string's end, all read as zeros: the shorter first.
        guard longest > offset else {
            keyed[range].sort { spans[$0.position].count < spans[$1.position].count }
            return
        }
        // The bytes past `offset` that every string of the run shares.
        let first = spans[keyed[range.lowerBound].position]
        var shared = longest - offset
        for i in range.dropFirst() where shared > 0 {
            let span = spans[keyed[i].position]
            // Within both strings, then (past the shorter's end) padded.
            let within = Swift.min(shared, Swift.max(0, Swift.min(first.count, span.count) - offset))
            var n = 0
            while n < within && raw[first.lowerBound + offset + n] == raw[span.lowerBound + offset + n] { n += 1 }
            if n == within {
                while n < shared && byte(keyed[range.lowerBound].position, offset + n) == byte(keyed[i].position, offset + n) { n += 1 }
            }
            shared = n
        }
        let at = offset + shared
        for i in range {
            let span = spans[keyed[i].position]
            if span.count - at >= 8 {
                keyed[i].head = UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: span.lowerBound + at, as: UInt64.self))
            } else {
                var head: UInt64 = 0
                for n in 0..<8 { head = head << 8 | UInt64(byte(keyed[i].position, at + n)) }
                keyed[i].head = head
            }
        }
        radixSortByHead(&keyed, range, scratch: &scratch)
        // Equal heads are neighbours now, in their first order: each run of
        // them ordered by the bytes after.
        var start = range.lowerBound
        while start < range.upperBound {
            var end = start + 1
            while end < range.upperBound && keyed[end].head == keyed[start].head { end += 1 }
            if end - start > 1 { sort(&keyed, start..<end, past: at + 8, spans, raw, scratch: &scratch) }
            start = end
        }
    }

    /// Sorts `keyed[range]` by head, stably: least significant byte first,
    /// a pass per byte that differs among the heads (one counting pass
    /// finds them). `scratch`: room for the passes, reused.
    static func radixSortByHead(_ keyed: inout [Keyed], _ range: Range<Int>, scratch: inout [Keyed]) {
        let count = range.count
        guard count > 1 else { return }
        var counts = [Int](repeating: 0, count: 8 * 256)
        counts.withUnsafeMutableBufferPointer { counts in
            keyed.withUnsafeBufferPointer { keyed in
                for item in keyed[range] {
                    var head = item.head
                    for byte in 0..<8 {
                        counts[byte &* 256 &+ Int(head & 0xFF)] &+= 1
                        head >>= 8
                    }
                }
            }
        }
        if scratch.count < count { scratch = Array(repeating: Keyed(head: 0, position: 0), count: count) }
        // The order so far: in `keyed[range]`, or in `scratch[0..<count]`.
        var inKeyed = true
        let anyHead = keyed[range.lowerBound].head
        var offsets = [Int](repeating: 0, count: 256)
        for byte in 0..<8 {
            let base = byte * 256
            // Every head has the same byte here: the pass would move nothing.
            if counts[base + Int((anyHead >> (8 * byte)) & 0xFF)] == count { continue }
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
            keyed.withUnsafeMutableBufferPointer { keyed in
                scratch.withUnsafeMutableBufferPointer { scratch in
                    let inRange = UnsafeMutableBufferPointer(rebasing: keyed[range])
                    let spare = UnsafeMutableBufferPointer(rebasing: scratch[0..<count])
                    if inKeyed { pass(UnsafeBufferPointer(inRange), spare) } else { pass(UnsafeBufferPointer(spare), inRange) }
                }
            }
            inKeyed.toggle()
        }
        if !inKeyed {
            keyed.withUnsafeMutableBufferPointer { keyed in
                scratch.withUnsafeBufferPointer { scratch in
                    _ = UnsafeMutableBufferPointer(rebasing: keyed[range]).update(fromContentsOf: scratch[0..<count])
                }
            }
        }
    }
}
