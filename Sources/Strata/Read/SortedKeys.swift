internal import StrataStore

/// Byte strings in ascending order, each once, lent from one buffer: the
/// encoded values of an `IN` list, sorted without allocating or retaining
/// anything per value, and held by a plan in two arrays however long the
/// list. A key read out (``subscript(_:)``) is copied, except the only key
/// of a one-key list, which is the buffer.
struct SortedKeys: RandomAccessCollection, Equatable, Sendable {
    /// The keys, in the order they were written (not copied into order).
    private let bytes: [UInt8]
    /// Where each key lies in `bytes`, in ascending order of the keys.
    /// Empty for a list of one key (it is all of `bytes`).
    private let spans: [Range<Int>]
    let endIndex: Int

    /// The list of one key.
    init(one key: [UInt8]) {
        self.init(bytes: key, spans: [], endIndex: 1)
    }

    private init(bytes: [UInt8], spans: [Range<Int>], endIndex: Int) {
        self.bytes = bytes
        self.spans = spans
        self.endIndex = endIndex
    }

    /// The keys at `spans` of `buffer`, sorted, each once.
    init(sorting spans: [Range<Int>], of buffer: [UInt8]) {
        var sorted: [Range<Int>] = []
        sorted.reserveCapacity(spans.count)
        buffer.withUnsafeBytes { raw in
            // Each once: equal keys are neighbours once sorted.
            var previous: UnsafeRawBufferPointer?
            for i in ByteStringOrder.order(of: spans, in: raw) {
                let key = UnsafeRawBufferPointer(rebasing: raw[spans[i]])
                if let previous, compareBytes(previous, key) == 0 { continue }
                sorted.append(spans[i])
                previous = key
            }
        }
        if sorted.count == 1 {
            self.init(one: Array(buffer[sorted[0]]))
        } else {
            self.init(bytes: buffer, spans: sorted, endIndex: sorted.count)
        }
    }

    /// The same keys, however their buffers lie.
    static func == (a: SortedKeys, b: SortedKeys) -> Bool {
        a.count == b.count && a.indices.allSatisfy { a[$0] == b[$0] }
    }

    var startIndex: Int { 0 }

    /// Key `i`, copied (the buffer itself for a one-key list).
    subscript(i: Int) -> [UInt8] {
        spans.isEmpty ? bytes : Array(bytes[span(i)])
    }

    private func span(_ i: Int) -> Range<Int> {
        spans.isEmpty ? 0..<bytes.count : spans[i]
    }

    /// Calls `body` with each key, lent for the call, in order.
    func forEachKey(_ body: (UnsafeRawBufferPointer) -> Void) {
        bytes.withUnsafeBytes { raw in
            for i in indices { body(UnsafeRawBufferPointer(rebasing: raw[span(i)])) }
        }
    }

    /// Calls `body` with the number of keys and a lookup of key `i`, lent
    /// for the call (a caller that copies them all out sizes its buffer first).
    func withKeys<R>(_ body: (_ count: Int, _ key: (Int) -> UnsafeRawBufferPointer) -> R) -> R {
        bytes.withUnsafeBytes { raw in body(count) { i in UnsafeRawBufferPointer(rebasing: raw[span(i)]) } }
    }

    /// Whether `key` is one of them (a binary search).
    func contains(_ key: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { raw in
            key.withUnsafeBytes { key in
                var low = 0, high = count
                while low < high {
                    let middle = (low + high) / 2
                    let order = compareBytes(UnsafeRawBufferPointer(rebasing: raw[span(middle)]), key)
                    if order == 0 { return true }
                    if order < 0 { low = middle + 1 } else { high = middle }
                }
                return false
            }
        }
    }
}
