// A KeyIndex's leaves as byte images, and an index assembled back from them:
// what the index checkpoint (`IndexCheckpoint`) stores, so that opening a
// store reads its leaves instead of building them key by key.
//
// A leaf's image is the leaf itself: a `Node` object made for exactly its
// keys (`slots == count`, `byteCapacity == byteCount`), padded to 16 bytes,
// so that a checkpoint read into memory is a run of leaves in place
// (KeyIndex+LeafArena.swift):
//
//     object header (16 zero bytes; the load writes the type and reference count there)
//     · NodeHeader: count i32 · byteCount i32 · slots i32 · byteCapacity i32 · height i32 (0) · flags i32 (inPlace)
//     · IndexEntry × count · UInt16 key end × count · key bytes · zeros to a multiple of 16
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
    /// Bytes before a leaf image's slots: the object's header and the node's.
    static let leafImageHeaderSize = NodeView.tailOffset

    /// The size of the image of a leaf of `count` keys and `byteCount` key bytes.
    static func leafImageSize(count: Int, byteCount: Int) -> Int {
        (leafImageHeaderSize + count * 18 + byteCount + 15) & ~15
    }

    /// Visits every leaf in key order, with the separator the tree keeps
    /// before it (nil for the first leaf): above every key left of the
    /// leaf, at most its first key.
    func forEachLeaf<E: Error>(_ body: (NodeView, _ separatorBefore: UnsafeRawBufferPointer?) throws(E) -> Void) throws(E) {
        func visit(_ node: NodeView, _ before: UnsafeRawBufferPointer?) throws(E) {
            if node.isLeaf { return try body(node, before) }
            for c in 0..<node.count {
                // Key c of an interior node divides child c - 1 from child c.
                let s = node.start(c)
                try visit(node.child(c), c == 0 ? before : UnsafeRawBufferPointer(start: node.keysBase + s, count: node.end(c) - s))
            }
        }
        guard let root else { return }
        try withExtendedLifetime(root) { () throws(E) in try visit(NodeView(root.node), nil) }
    }

    /// Writes `leaf`'s image at `to`, which has room for
    /// `leafImageSize(count:byteCount:)` bytes; returns that size.
    static func writeLeafImage(_ leaf: NodeView, to: UnsafeMutableRawPointer) -> Int {
        let count = leaf.count, bytes = leaf.byteCount
        memset(to, 0, NodeView.headerOffset)
        (to + NodeView.headerOffset).storeBytes(
            of: NodeHeader(count: Int32(count), byteCount: Int32(bytes), slots: Int32(count), byteCapacity: Int32(bytes),
                           height: 0, flags: inPlace),
            as: NodeHeader.self)
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

    /// The size of the leaf image at the start of `image`; nil when the
    /// image breaks any rule of a leaf: its header, counts and sizes, its
    /// key ends, keys empty, too long or not strictly ascending, or an entry
    /// `entries` refuses. Reads the image in place (its object header aside).
    static func checkLeafImage<Entries: IndexEntryCheck>(_ image: UnsafeRawBufferPointer, entries: Entries) -> Int? {
        guard image.count >= leafImageHeaderSize, let base = image.baseAddress else { return nil }
        let header = base.loadUnaligned(fromByteOffset: NodeView.headerOffset, as: NodeHeader.self)
        let count = Int(header.count), bytes = Int(header.byteCount)
        // A leaf at rest holds at most leafCapacity keys and 2 * maxKeyLength
        // key bytes (as `checkInvariants` has it).
        guard count >= 1, count <= leafCapacity, bytes >= count, bytes <= 2 * maxKeyLength,
              header.slots == header.count, header.byteCapacity == header.byteCount, header.height == 0, header.flags == inPlace
        else { return nil }
        let size = leafImageSize(count: count, byteCount: bytes)
        guard size <= image.count else { return nil }
        let view = NodeView(object: UnsafeMutableRawPointer(mutating: base))
        let ends = view.endsBase, keys = view.keysBase
        var previousStart = 0, previousEnd = 0
        for i in 0..<count {
            let end = Int(ends.load(fromByteOffset: i &* 2, as: UInt16.self))
            guard end > previousEnd, end <= bytes, end &- previousEnd <= maxKeyLength else { return nil }
            if i > 0, compare(keys + previousStart, previousEnd &- previousStart, keys + previousEnd, end &- previousEnd) >= 0 {
                return nil
            }
            previousStart = previousEnd
            previousEnd = end
        }
        guard previousEnd == bytes, entries.containsAll(view.tail, count: count) else { return nil }
        return size
    }

    /// The checked leaf image at `image` copied into a leaf of its own: for
    /// a runtime where in-place leaves cannot be immortal objects.
    static func leafCopied(_ image: UnsafeRawPointer) -> NodeRef {
        let header = image.loadUnaligned(fromByteOffset: NodeView.headerOffset, as: NodeHeader.self)
        let count = Int(header.count), bytes = Int(header.byteCount)
        let node = Node.make(height: 0, slots: count, byteCapacity: bytes, zeroingFrom: count * 18 + bytes)
        let view = NodeView(node)
        // slots == count: the entries, the ends and the keys lie end to end, as in the image.
        assert(view.endsBase == view.tail + count * 16 && view.keysBase == view.endsBase + count * 2)
        memcpy(view.tail, image + leafImageHeaderSize, count * 18 + bytes)
        view.header.pointee.count = Int32(count)
        view.header.pointee.byteCount = Int32(bytes)
        return NodeRef(node: node)
    }

    /// Whether the checked leaf image at `image` holds `shape`'s keys and
    /// bytes and lies between separators `before` and `after` of
    /// `separators` (nil: the index's first or last leaf): its first key
    /// not below the one, its last below the other. Checked for every
    /// leaf, that also puts the separators in order.
    static func leafImage(_ image: UnsafeRawPointer, has shape: IndexCheckpoint.LeafShape, between before: Int?, and after: Int?,
                          of separators: Separators) -> Bool {
        let leaf = NodeView(object: UnsafeMutableRawPointer(mutating: image))
        guard leaf.count == Int(shape.keyCount), leaf.byteCount == Int(shape.keyBytes) else { return false }
        if let before {
            let first = UnsafeRawBufferPointer(start: leaf.keysBase, count: leaf.end(0))
            guard separators.withKey(before, { compare($0, first) }) <= 0 else { return false }
        }
        if let after {
            let l = leaf.start(leaf.count - 1)
            let last = UnsafeRawBufferPointer(start: leaf.keysBase + l, count: leaf.byteCount - l)
            guard separators.withKey(after, { compare(last, $0) }) < 0 else { return false }
        }
        return true
    }

    /// A copy of an in-place leaf in memory of its own.
    static func ownedCopy(of leaf: NodeRef) -> NodeRef {
        NodeRef(node: NodeView(leaf.node).copy(extraKeys: 0, extraBytes: 0, transfer: false))
    }
}

/// What a leaf image's entries are checked against (the index checkpoint's
/// segments); a protocol rather than a closure, so that the check is
/// specialized into the loop over every key.
protocol IndexEntryCheck {
    /// Whether it contains each of the `count` entries stored at `entries`.
    func containsAll(_ entries: UnsafeRawPointer, count: Int) -> Bool
}
