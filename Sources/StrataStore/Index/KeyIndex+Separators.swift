extension KeyIndex {
    /// The separator keys between consecutive nodes of one level, in one
    /// buffer: `i` divides node `i` from node `i + 1`.
    ///
    /// Why: a separator as an array of its own is an allocation and a free
    /// per leaf (55,000 for a million keys), which the interior nodes copy
    /// anyway, and opening and closing a store from its checkpoint makes and
    /// frees every one of them.
    struct Separators: Sendable, Equatable {
        private(set) var bytes: [UInt8] = []
        /// Where each separator ends in `bytes`.
        private(set) var ends: [Int] = []

        init() {}

        /// The separators whose bytes lie end to end in `bytes`, separator
        /// `i` ending at `ends[i]` (as an index checkpoint stores them); nil
        /// unless every one is 1 to `maxKeyLength` bytes and they fill
        /// `bytes` exactly. Their order is the caller's to check.
        init?(bytes: [UInt8], ends: [Int]) {
            var previous = 0
            for end in ends {
                guard end > previous, end - previous <= KeyIndex.maxKeyLength else { return nil }
                previous = end
            }
            guard previous == bytes.count else { return nil }
            self.bytes = bytes
            self.ends = ends
        }

        init(reservingCapacity count: Int) {
            ends.reserveCapacity(count)
            bytes.reserveCapacity(count * 8)
        }

        var count: Int { ends.count }

        /// The length of separator `i`.
        func length(_ i: Int) -> Int { ends[i] - (i == 0 ? 0 : ends[i - 1]) }

        /// Calls `body` with the bytes of separator `i`.
        func withKey<T>(_ i: Int, _ body: (UnsafeRawBufferPointer) -> T) -> T {
            let start = i == 0 ? 0 : ends[i - 1]
            return bytes.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[start..<ends[i]])) }
        }

        /// Appends the shortest prefix of `right` that is greater than
        /// `left` (given left < right; see ``KeyIndex/separator(between:and:)``).
        mutating func append(between left: UnsafeRawBufferPointer, and right: UnsafeRawBufferPointer) {
            let length = KeyIndex.separatorLength(between: left, and: right)
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: right[0..<length]))
            ends.append(bytes.count)
        }

        /// Appends `separator` as it is.
        mutating func append(_ separator: UnsafeRawBufferPointer) {
            bytes.append(contentsOf: separator)
            ends.append(bytes.count)
        }

        /// Appends separator `i` of `other`.
        mutating func append(_ i: Int, of other: Separators) {
            other.withKey(i) { bytes.append(contentsOf: $0) }
            ends.append(bytes.count)
        }

        /// Appends all of `other`'s separators.
        mutating func append(contentsOf other: Separators) {
            let base = bytes.count
            bytes.append(contentsOf: other.bytes)
            ends.reserveCapacity(ends.count + other.ends.count)
            for end in other.ends { ends.append(base + end) }
        }
    }

    /// The length of ``separator(between:and:)``.
    static func separatorLength(between left: UnsafeRawBufferPointer, and right: UnsafeRawBufferPointer) -> Int {
        let n = min(left.count, right.count)
        var p = 0
        while p < n, left[p] == right[p] { p += 1 }
        precondition(p < right.count, "KeyIndex: separator of keys out of order")
        return p + 1
    }
}
