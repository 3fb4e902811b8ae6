internal import StrataStore

/// Sorting byte strings that lie in one buffer (index keys, unique keys,
/// an `IN` list's encodings) without comparing them byte by byte: they
/// mostly share a prefix (an index's tag, "SKU-"), so each is compared
/// first by the eight bytes after that prefix read as one integer —
/// zero-padded past a string's end, which keeps the byte order — and by
/// all its bytes only when those are equal.
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
        var keyed = spans.indices.map { i -> (head: UInt64, position: Int) in
            let span = spans[i]
            var head: UInt64 = 0
            for n in 0..<8 {
                let at = span.lowerBound + shared + n
                head = head << 8 | UInt64(at < span.upperBound ? raw[at] : 0)
            }
            return (head, i)
        }
        keyed.sort { a, b in
            if a.head != b.head { return a.head < b.head }
            return compareBytes(UnsafeRawBufferPointer(rebasing: raw[spans[a.position]]), UnsafeRawBufferPointer(rebasing: raw[spans[b.position]])) < 0
        }
        return keyed.map(\.position)
    }
}
