internal import StrataStore

/// Byte strings in ascending order, each once, kept one after another in
/// one buffer: the encoded values of an `IN` list, sorted without
/// allocating or retaining anything per value, and held by a plan in two
/// arrays however long the list. A key read out (``subscript(_:)``) is
/// copied, except the only key of a one-key list, which is the buffer.
struct SortedKeys: RandomAccessCollection, Equatable, Sendable {
    private let bytes: [UInt8]
    /// Where each key ends in `bytes` (a key starts where the one before
    /// it ends). Empty for a list of one key (it is all of `bytes`).
    private let ends: [Int]
    let endIndex: Int

    /// The list of one key.
    init(one key: [UInt8]) {
        self.init(bytes: key, ends: [], endIndex: 1)
    }

    private init(bytes: [UInt8], ends: [Int], endIndex: Int) {
        self.bytes = bytes
        self.ends = ends
        self.endIndex = endIndex
    }

    /// The keys at `spans` of `buffer`, sorted, each once.
    init(sorting spans: [Range<Int>], of buffer: [UInt8]) {
        var spans = spans
        var bytes: [UInt8] = []
        var ends: [Int] = []
        bytes.reserveCapacity(buffer.count)
        ends.reserveCapacity(spans.count)
        buffer.withUnsafeBytes { raw in
            spans = ByteStringOrder.order(of: spans, in: raw).map { spans[$0] }
            // Each once: equal keys are neighbours now.
            var previous: UnsafeRawBufferPointer?
            for span in spans {
                let key = UnsafeRawBufferPointer(rebasing: raw[span])
                if let previous, compareBytes(previous, key) == 0 { continue }
                bytes.append(contentsOf: key)
                ends.append(bytes.count)
                previous = key
            }
        }
        self.init(bytes: bytes, ends: ends.count == 1 ? [] : ends, endIndex: ends.count)
    }

    var startIndex: Int { 0 }

    /// Key `i`, copied (the buffer itself for a one-key list).
    subscript(i: Int) -> [UInt8] {
        ends.isEmpty ? bytes : Array(bytes[span(i)])
    }

    private func span(_ i: Int) -> Range<Int> {
        ends.isEmpty ? 0..<bytes.count : (i == 0 ? 0 : ends[i - 1])..<ends[i]
    }

    /// Calls `body` with each key, lent for the call, in order.
    func forEachKey(_ body: (UnsafeRawBufferPointer) -> Void) {
        bytes.withUnsafeBytes { raw in
            for i in indices { body(UnsafeRawBufferPointer(rebasing: raw[span(i)])) }
        }
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
