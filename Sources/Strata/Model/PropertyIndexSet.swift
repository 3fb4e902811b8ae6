/// A set of an entity's property positions (indexes into its
/// ``EntityDescription/properties``), as bits, iterated in the entity's
/// order.
///
/// A save lists, for history, the properties each update changed, and a
/// batch insert the properties each row gives: a set per object. The
/// first 64 positions are held in a word, so a set costs no allocation for
/// any but the widest entities.
package struct PropertyIndexSet: Sequence, Sendable, ExpressibleByArrayLiteral {
    /// Positions 0..<64.
    private var low: UInt64 = 0
    /// Positions from 64 up, a word for each 64; empty for most entities.
    private var high: [UInt64] = []

    package init() {}

    package init(arrayLiteral positions: Int...) {
        self.init(positions)
    }

    package init(_ positions: some Sequence<Int>) {
        for position in positions { insert(position) }
    }

    /// The positions at which `values` differ from `base`, and those past
    /// `base`'s end.
    package init(differing values: [PropertyValue], from base: [PropertyValue]) {
        for i in values.indices where i >= base.count || values[i] != base[i] { insert(i) }
    }

    package mutating func insert(_ position: Int) {
        precondition(position >= 0, "a property position is never negative")
        if position < 64 {
            low |= 1 << UInt64(position)
            return
        }
        let word = position / 64 - 1
        if high.count <= word { high += repeatElement(0, count: word + 1 - high.count) }
        high[word] |= 1 << UInt64(position % 64)
    }

    package func contains(_ position: Int) -> Bool {
        guard position >= 0 else { return false }
        if position < 64 { return low & (1 << UInt64(position)) != 0 }
        let word = position / 64 - 1
        return word < high.count && high[word] & (1 << UInt64(position % 64)) != 0
    }

    package var count: Int {
        high.reduce(low.nonzeroBitCount) { $0 + $1.nonzeroBitCount }
    }

    package var isEmpty: Bool {
        low == 0 && high.allSatisfy { $0 == 0 }
    }

    package mutating func formUnion(_ other: PropertyIndexSet) {
        low |= other.low
        if high.count < other.high.count { high += repeatElement(0, count: other.high.count - high.count) }
        for (word, bits) in other.high.enumerated() { high[word] |= bits }
    }

    package func makeIterator() -> Iterator {
        Iterator(set: self)
    }

    /// The positions, ascending.
    package struct Iterator: IteratorProtocol {
        fileprivate let set: PropertyIndexSet
        /// The word being read: -1 for `low`, else an index into `high`.
        private var word = -1
        /// Its bits not yet returned.
        private var bits: UInt64

        fileprivate init(set: PropertyIndexSet) {
            self.set = set
            self.bits = set.low
        }

        package mutating func next() -> Int? {
            while bits == 0 {
                word += 1
                guard word < set.high.count else { return nil }
                bits = set.high[word]
            }
            let bit = bits.trailingZeroBitCount
            bits &= bits - 1
            return (word + 1) * 64 + bit
        }
    }
}
