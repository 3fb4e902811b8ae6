// A KeyIndex's leaves as byte images, and an index assembled back from them:
// what the index checkpoint (`IndexCheckpoint`) stores, so that opening a
// store copies its leaves instead of building them key by key.
//
// A leaf's image is the leaf's own layout for a leaf made for exactly its
// keys (`slots == count`), behind a small header, so loading one is one
// allocation and one copy:
//
//     count u32 · byteCount u32 · IndexEntry × count · UInt16 key end × count · key bytes · zeros to a multiple of 8
//
// IndexEntry is (sequence u64, file u32, block u32); the integers are in the
// host's byte order (the checkpoint records which, and a host of the other
// order rebuilds the index instead).
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

extension KeyIndex {
    /// Bytes before a leaf image's slots.
    static let leafImageHeaderSize = 8

    /// The size of the image of a leaf of `count` keys and `byteCount` key bytes.
    static func leafImageSize(count: Int, byteCount: Int) -> Int {
        (leafImageHeaderSize + count * 18 + byteCount + 7) & ~7
    }

    /// Visits every leaf in key order.
    func forEachLeaf<E: Error>(_ body: (NodeView) throws(E) -> Void) throws(E) {
        func visit(_ node: NodeView) throws(E) {
            if node.isLeaf { return try body(node) }
            for c in 0..<node.count { try visit(node.child(c)) }
        }
        guard let root else { return }
        try visit(NodeView(root.node))
    }

    /// Writes `leaf`'s image at `to`, which has room for
    /// `leafImageSize(count:byteCount:)` bytes; returns that size.
    static func writeLeafImage(_ leaf: NodeView, to: UnsafeMutableRawPointer) -> Int {
        let count = leaf.count, bytes = leaf.byteCount
        to.storeBytes(of: UInt32(count), as: UInt32.self)
        (to + 4).storeBytes(of: UInt32(bytes), as: UInt32.self)
        var p = to + leafImageHeaderSize
        memcpy(p, leaf.tail, count * 16)
        p += count * 16
        memcpy(p, leaf.endsBase, count * 2)
        p += count * 2
        memcpy(p, leaf.keysBase, bytes)
        p += bytes
        let size = leafImageSize(count: count, byteCount: bytes)
        memset(p, 0, to + size - p)
        return size
    }

    /// A leaf made from the image at the start of `image`, and the image's
    /// size; nil when the image breaks any rule of a leaf: its counts and
    /// sizes, its key ends, keys empty, too long or not strictly ascending,
    /// or an entry `entries` refuses.
    static func leaf<Entries: IndexEntryCheck>(fromImage image: UnsafeRawBufferPointer, entries: Entries) -> (node: NodeRef, size: Int)? {
        guard image.count >= leafImageHeaderSize, let base = image.baseAddress else { return nil }
        let count = Int(base.loadUnaligned(as: UInt32.self))
        let bytes = Int(base.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
        // A leaf at rest holds at most leafCapacity keys and 2 * maxKeyLength
        // key bytes (as `checkInvariants` has it).
        guard count >= 1, count <= leafCapacity, bytes >= count, bytes <= 2 * maxKeyLength else { return nil }
        let size = leafImageSize(count: count, byteCount: bytes)
        guard size <= image.count else { return nil }
        let node = Node.make(height: 0, slots: count, byteCapacity: bytes, zeroingFrom: count * 18 + bytes)
        let view = NodeView(node)
        // slots == count: the entries, the ends and the keys lie end to end,
        // as in the image.
        assert(view.endsBase == view.tail + count * 16 && view.keysBase == view.endsBase + count * 2)
        memcpy(view.tail, base + leafImageHeaderSize, count * 18 + bytes)
        var previousEnd = 0
        for i in 0..<count {
            let end = view.end(i)
            guard end > previousEnd, end <= bytes, end - previousEnd <= maxKeyLength, entries.contains(view.entry(i)) else { return nil }
            if i > 0 {
                let s = view.start(i - 1)
                guard compare(view.keysBase + s, previousEnd - s, view.keysBase + previousEnd, end - previousEnd) < 0 else { return nil }
            }
            previousEnd = end
        }
        guard previousEnd == bytes else { return nil }
        view.header.pointee.count = Int32(count)
        view.header.pointee.byteCount = Int32(bytes)
        return (NodeRef(node: node), size)
    }

    /// The index whose leaves are `leaves`, in key order, holding `count`
    /// keys in all; nil when a leaf's first key is not above the previous
    /// leaf's last, or the counts disagree.
    static func assemble(leaves: [NodeRef], count: Int) -> KeyIndex? {
        guard !leaves.isEmpty else { return count == 0 ? KeyIndex() : nil }
        var separators: [[UInt8]] = []
        separators.reserveCapacity(leaves.count - 1)
        var total = NodeView(leaves[0].node).count
        for i in 1..<leaves.count {
            let left = NodeView(leaves[i - 1].node), right = NodeView(leaves[i].node)
            let l = left.start(left.count - 1)
            let last = UnsafeRawBufferPointer(start: left.keysBase + l, count: left.byteCount - l)
            let first = UnsafeRawBufferPointer(start: right.keysBase, count: right.end(0))
            guard compare(last, first) < 0 else { return nil }
            separators.append(separator(between: last, and: first))
            total += right.count
        }
        guard total == count else { return nil }
        return Builder.assemble(leaves: leaves, separators: separators, count: count)
    }
}

/// What a leaf image's entries are checked against (the index checkpoint's
/// segments); a protocol rather than a closure, so that the check is
/// specialized into the loop over every key.
protocol IndexEntryCheck {
    func contains(_ entry: IndexEntry) -> Bool
}
