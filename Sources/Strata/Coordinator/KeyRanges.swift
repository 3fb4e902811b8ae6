internal import StrataStore

/// Key ranges, ascending and disjoint, their bounds kept one after another
/// in one buffer: the plan of a long `IN` holds two arrays, not two per
/// key, and reading it retains and frees nothing range by range.
struct KeyRanges: Equatable, Sendable, ExpressibleByArrayLiteral {
    /// Where one range's bounds lie in `bytes`: its start, then, right
    /// after it, its end (`endCount` bytes; -1: no end).
    private struct Bounds: Equatable, Sendable {
        var start: Int
        var startCount: Int32
        var endCount: Int32
    }

    private var bytes: [UInt8] = []
    private var bounds: [Bounds] = []

    init() {}

    init(_ ranges: [KeyRange]) {
        for range in ranges { append(range) }
    }

    init(arrayLiteral ranges: KeyRange...) {
        self.init(ranges)
    }

    var count: Int { bounds.count }
    var isEmpty: Bool { bounds.isEmpty }

    mutating func reserveCapacity(ranges: Int, bytes byteCount: Int) {
        bounds.reserveCapacity(ranges)
        bytes.reserveCapacity(byteCount)
    }

    mutating func append(_ range: KeyRange) {
        let start = bytes.count
        bytes.append(contentsOf: range.start)
        if let end = range.end { bytes.append(contentsOf: end) }
        bounds.append(Bounds(start: start, startCount: Int32(range.start.count), endCount: range.end.map { Int32($0.count) } ?? -1))
    }

    /// Appends the range of the keys that start with the bytes `write`
    /// appends (``KeyRange/init(prefix:)``), written in place: the start,
    /// then the end copied from it.
    mutating func appendPrefix(_ write: (inout [UInt8]) -> Void) {
        let start = bytes.count
        write(&bytes)
        let startCount = bytes.count - start
        let endCount = bytes.withUnsafeBytes { Self.prefixEndCount(UnsafeRawBufferPointer(rebasing: $0[start...])) }
        if endCount > 0 {
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: endCount) { end in
                bytes.withUnsafeBufferPointer { _ = end.initialize(from: $0[start..<(start + endCount)]) }
                end[endCount - 1] += 1
                bytes.append(contentsOf: UnsafeBufferPointer(end))
            }
        }
        bounds.append(Bounds(start: start, startCount: Int32(startCount), endCount: endCount > 0 ? Int32(endCount) : -1))
    }

    /// Appends, for each of `count` keys (`key(i)`, in order), the range of
    /// the keys that start with `prefix` followed by it, as
    /// ``appendPrefix(_:)`` would one by one: the buffer grown once, each
    /// start and end copied in place (an `IN` of thousands of values).
    mutating func appendPrefixes(_ prefix: [UInt8], followedByEach count: Int, _ key: (Int) -> UnsafeRawBufferPointer) {
        var keyBytes = 0
        for i in 0..<count { keyBytes += key(i).count }
        // At most: each range's start and its end, both as long as the start.
        let most = 2 * (count * prefix.count + keyBytes)
        let base = bytes.count
        bytes.append(contentsOf: repeatElement(0, count: most))
        bounds.reserveCapacity(bounds.count + count)
        var at = base
        bytes.withUnsafeMutableBytes { out in
            prefix.withUnsafeBytes { prefix in
                for i in 0..<count {
                    let start = at
                    if let from = prefix.baseAddress { out.baseAddress!.advanced(by: at).copyMemory(from: from, byteCount: prefix.count) }
                    at += prefix.count
                    let k = key(i)
                    if let from = k.baseAddress { out.baseAddress!.advanced(by: at).copyMemory(from: from, byteCount: k.count) }
                    at += k.count
                    let startCount = at - start
                    let endCount = Self.prefixEndCount(UnsafeRawBufferPointer(rebasing: out[start..<at]))
                    if endCount > 0 {
                        out.baseAddress!.advanced(by: at).copyMemory(from: out.baseAddress!.advanced(by: start), byteCount: endCount)
                        out[at + endCount - 1] += 1
                        at += endCount
                    }
                    bounds.append(Bounds(start: start, startCount: Int32(startCount), endCount: endCount > 0 ? Int32(endCount) : -1))
                }
            }
        }
        bytes.removeLast(base + most - at)
    }

    /// How many bytes of `prefix` the first key after every key that starts
    /// with it keeps: trailing 0xFF bytes dropped (its last byte is then
    /// incremented); 0 when every byte is 0xFF, and no key comes after.
    private static func prefixEndCount(_ prefix: UnsafeRawBufferPointer) -> Int {
        var count = prefix.count
        while count > 0 && prefix[count - 1] == 0xFF { count -= 1 }
        return count
    }

    /// Range `i`, copied out.
    subscript(i: Int) -> KeyRange {
        let b = bounds[i]
        let startEnd = b.start + Int(b.startCount)
        return KeyRange(start: Array(bytes[b.start..<startEnd]), end: b.endCount < 0 ? nil : Array(bytes[startEnd..<(startEnd + Int(b.endCount))]))
    }

    /// Every range, copied out.
    var ranges: [KeyRange] { bounds.indices.map { self[$0] } }

    /// Calls `body` with each range's start and end (nil: no end), lent for
    /// the call, in order — last first when `descending` — until it returns
    /// false; false when it did.
    @discardableResult
    func forEach<E: Error>(
        descending: Bool = false, _ body: (_ start: UnsafeRawBufferPointer, _ end: UnsafeRawBufferPointer?) throws(E) -> Bool
    ) throws(E) -> Bool {
        try withBounds { (count, range) throws(E) -> Bool in
            for n in 0..<count {
                let (start, end) = range(descending ? count - 1 - n : n)
                guard try body(start, end) else { return false }
            }
            return true
        }
    }

    /// Calls `body` with the number of ranges and a lookup of range `i`'s
    /// start and end by position, both lent for the call (a merge walk of
    /// an index reads them as it goes).
    func withBounds<R, E: Error>(
        _ body: (_ count: Int, _ range: (Int) -> (start: UnsafeRawBufferPointer, end: UnsafeRawBufferPointer?)) throws(E) -> R
    ) throws(E) -> R {
        try bytes.withBytes { (raw) throws(E) -> R in
            let base = raw.baseAddress
            return try bounds.withUnsafeBufferPointer { bounds in Result { () throws(E) -> R in
                try body(bounds.count) { i in
                    let b = bounds[i]
                    let start = UnsafeRawBufferPointer(start: base.map { $0 + b.start }, count: Int(b.startCount))
                    let end = b.endCount < 0 ? nil : UnsafeRawBufferPointer(start: base.map { $0 + b.start + Int(b.startCount) }, count: Int(b.endCount))
                    return (start, end)
                }
            } }.get()
        }
    }

    /// Whether each range starts after the one before it does.
    var isAscending: Bool {
        var previous: UnsafeRawBufferPointer?
        return forEach { start, _ in
            defer { previous = start }
            return previous.map { compareBytes($0, start) < 0 } ?? true
        }
    }

    /// The same ranges, in order of their starts.
    func sorted() -> KeyRanges {
        KeyRanges(ranges.sorted { $0.start.lexicographicallyPrecedes($1.start) })
    }
}
