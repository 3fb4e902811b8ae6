// The nodes of KeyIndex's B+tree, and their layout.
//
// Every node, leaf or interior, is ONE allocation (a ManagedBuffer):
//
//     [object header][NodeHeader][16-byte slot × slots][UInt16 key end × slots][key bytes ...]
//
// - In a leaf, key i is a stored key and slot i its IndexEntry.
// - In an interior node, slot i is child i: a retained pointer to the child
//   node and the child's allocation size; key 0 is empty and key i (i >= 1)
//   is the separator before child i: child i holds the keys k with
//   key(i) <= k < key(i + 1). Separators are the shortest prefix that divides
//   two neighbouring nodes, so they are usually a few bytes long.
//
// A node's key bytes stay below 3 * 16 KiB (see `KeyIndex.maxNodeBytes`),
// so `UInt16` end offsets suffice.
//
// Because the layout is fixed, code reads and writes nodes through
// `NodeView`, a raw pointer to the object, with no reference counting or
// exclusivity checks; the `Node` class only owns the memory. Knowing each
// child's size, a lookup reads every cache line of the next node at once
// (`touch`) instead of one per binary-search probe: cache misses are most
// of a lookup's time.
//
// Thread safety: a node is never written once it is shared. Every mutation
// walks down from the root checking `isKnownUniquelyReferenced` on each node
// it will write and copies any node another KeyIndex value or Cursor still
// references, so the only nodes ever written are reachable from exactly one
// KeyIndex, which its owner mutates on one thread at a time (the rule for
// any value). That is what guards the `@unchecked Sendable` wrappers below
// (`Node` cannot itself be Sendable: ManagedBuffer opts out).
internal import CStrataSystem
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

extension KeyIndex {
    struct NodeHeader {
        /// Keys (leaf) or children (interior node).
        var count: Int32
        /// Key bytes used.
        var byteCount: Int32
        /// Room for this many keys and slots.
        var slots: Int32
        /// Room for this many key bytes.
        var byteCapacity: Int32
        /// 0 for a leaf; children of an interior node are one lower.
        var height: Int32
        /// `inPlace` for a leaf loaded in place from an index checkpoint
        /// (`LeafArena`); 0 for every node this process allocated.
        var flags: Int32 = 0
    }

    /// `NodeHeader.flags` of a leaf that lives in a `LeafArena`: an
    /// immortal object (retain and release do nothing, it is never
    /// uniquely referenced, so a mutation copies it first, and it is never
    /// freed on its own). Its parent's slot carries `inPlaceChildBit`, so
    /// that a parent's deinit never touches it: the arena may be gone first.
    static let inPlace: Int32 = 1
    /// Set in an interior node's child size word when the child is an in-place leaf.
    static let inPlaceChildBit = 1 << 62

    final class Node: ManagedBuffer<NodeHeader, UInt64> {
        /// A new empty node with room for `slots` keys and at least
        /// `byteCapacity` key bytes (more when the allocator rounds up). The
        /// whole tail is zeroed, so a lookup may read any of it — but for
        /// its first `zeroed` bytes, which the caller fills at once.
        static func make(height: Int, slots: Int, byteCapacity: Int, zeroingFrom zeroed: Int = 0) -> Node {
            let words = (slots * 18 + byteCapacity + 7) >> 3
            let node = unsafeDowncast(
                Node.create(minimumCapacity: words) { _ in
                    NodeHeader(count: 0, byteCount: 0, slots: Int32(slots), byteCapacity: 0, height: Int32(height))
                },
                to: Node.self)
            let tailBytes = node.capacity * 8
            node.withUnsafeMutablePointers { header, tail in
                assert(UnsafeMutableRawPointer(header) == NodeView(node).object + NodeView.headerOffset)
                assert(UnsafeMutableRawPointer(tail) == NodeView(node).tail)
                header.pointee.byteCapacity = Int32(min(tailBytes - slots * 18, Int(UInt16.max)))
                memset(UnsafeMutableRawPointer(tail) + zeroed, 0, tailBytes - zeroed)
            }
            return node
        }

        deinit {
            let view = NodeView(self)
            guard view.height > 0 else { return }
            for i in 0..<view.count where !view.childIsInPlace(i) {
                Unmanaged<Node>.fromOpaque(view.childPointer(i)).release()
            }
        }
    }

    /// An owning reference to a node, for places that must be Sendable.
    struct NodeRef: @unchecked Sendable {  // see the note at the top of the file
        var node: Node
    }

    /// A borrowed, unretained view of a node: its layout and the operations
    /// on it. Only valid while something else keeps the node alive.
    struct NodeView {
        let object: UnsafeMutableRawPointer

        /// Where ManagedBuffer puts the header and the elements: after the
        /// 16-byte object header, each at its type's alignment.
        static let headerOffset = 16
        static let tailOffset = (16 + MemoryLayout<NodeHeader>.size + 7) & ~7

        @inline(__always) init(_ node: Node) { object = Unmanaged.passUnretained(node).toOpaque() }
        @inline(__always) init(object: UnsafeMutableRawPointer) { self.object = object }

        @inline(__always)
        var header: UnsafeMutablePointer<NodeHeader> {
            (object + Self.headerOffset).assumingMemoryBound(to: NodeHeader.self)
        }
        @inline(__always) var tail: UnsafeMutableRawPointer { object + Self.tailOffset }

        @inline(__always) var count: Int { Int(header.pointee.count) }
        @inline(__always) var byteCount: Int { Int(header.pointee.byteCount) }
        @inline(__always) var slots: Int { Int(header.pointee.slots) }
        @inline(__always) var byteCapacity: Int { Int(header.pointee.byteCapacity) }
        @inline(__always) var height: Int { Int(header.pointee.height) }
        @inline(__always) var isLeaf: Bool { header.pointee.height == 0 }

        @inline(__always) var endsBase: UnsafeMutableRawPointer { tail + slots &* 16 }
        @inline(__always) var keysBase: UnsafeMutableRawPointer { tail + slots &* 18 }

        /// Bytes from the start of the object to the end of its allocation.
        var allocationSize: Int { Self.tailOffset + slots * 18 + byteCapacity }

        // MARK: Keys

        @inline(__always)
        func end(_ i: Int) -> Int { Int(endsBase.load(fromByteOffset: i &* 2, as: UInt16.self)) }
        @inline(__always)
        func start(_ i: Int) -> Int { i == 0 ? 0 : end(i &- 1) }

        func withKey<R>(_ i: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
            let s = start(i)
            return try body(UnsafeRawBufferPointer(start: keysBase + s, count: end(i) - s))
        }

        func key(_ i: Int) -> [UInt8] { withKey(i) { Array($0) } }

        /// The comparison of key i with the given key.
        @inline(__always)
        func compareKey(_ i: Int, _ key: UnsafeRawPointer, _ keyCount: Int) -> Int {
            let ends = endsBase
            let s = i == 0 ? 0 : Int(ends.load(fromByteOffset: (i &- 1) &* 2, as: UInt16.self))
            let e = Int(ends.load(fromByteOffset: i &* 2, as: UInt16.self))
            return KeyIndex.compare(keysBase + s, e &- s, key, keyCount)
        }

        /// Leaf search: the first index whose key is >= the key, and whether
        /// it is equal. Branch-free halving (the step taken is a conditional
        /// move, not a branch the CPU mispredicts half the time).
        @inline(__always)
        func lowerBound(_ key: UnsafeRawPointer, _ keyCount: Int) -> (index: Int, found: Bool) {
            var n = count
            guard n > 0 else { return (0, false) }
            var base = 0
            while n > 1 {
                let half = n &>> 1
                base &+= compareKey(base &+ half &- 1, key, keyCount) < 0 ? half : 0
                n &-= half
            }
            let c = compareKey(base, key, keyCount)
            return c < 0 ? (base &+ 1, false) : (base, c == 0)
        }

        /// Interior search: the child whose range holds the key (the number
        /// of separators <= the key; key 0 is empty and sorts first).
        @inline(__always)
        func childIndex(_ key: UnsafeRawPointer, _ keyCount: Int) -> Int {
            var n = count
            var base = 0
            while n > 1 {
                let half = n &>> 1
                base &+= compareKey(base &+ half, key, keyCount) <= 0 ? half : 0
                n &-= half
            }
            return base
        }

        /// ``childIndex(_:_:)`` for a key known to lie in child `lo` or after
        /// it (a merge walk's next range; `lo` if it lies before): galloping
        /// from `lo`, then halving what the gallop leaves, so a key a few
        /// children on costs a few comparisons, not a search of the node.
        @inline(__always)
        func childIndex(_ key: UnsafeRawPointer, _ keyCount: Int, atOrAfter lo: Int) -> Int {
            let count = count
            var base = lo
            var step = 1
            while base &+ step < count && compareKey(base &+ step, key, keyCount) <= 0 {
                base &+= step
                step &<<= 1
            }
            var n = Swift.min(base &+ step, count) &- base
            while n > 1 {
                let half = n &>> 1
                base &+= compareKey(base &+ half, key, keyCount) <= 0 ? half : 0
                n &-= half
            }
            return base
        }

        // MARK: Slots

        @inline(__always)
        func entry(_ i: Int) -> IndexEntry { tail.load(fromByteOffset: i &* 16, as: IndexEntry.self) }
        @inline(__always)
        func setEntry(_ i: Int, _ entry: IndexEntry) { tail.storeBytes(of: entry, toByteOffset: i &* 16, as: IndexEntry.self) }

        /// Child i, read in first if it is an in-place leaf whose chunk of
        /// the index checkpoint no one has reached yet (`LeafArena`).
        @inline(__always)
        func childPointer(_ i: Int) -> UnsafeMutableRawPointer {
            let p = UnsafeMutableRawPointer(bitPattern: tail.load(fromByteOffset: i &* 16, as: UInt.self))!
            if tail.load(fromByteOffset: i &* 16 &+ 8, as: Int.self) & KeyIndex.inPlaceChildBit != 0 { LeafArena.makeResident(p) }
            return p
        }

        /// Child i's address as its slot holds it, without reading in an
        /// in-place leaf (for ``KeyIndex/prefetch(_:_:)``, which may be
        /// given memory not read yet).
        @inline(__always)
        func childAddress(_ i: Int) -> UnsafeRawPointer? {
            UnsafeRawPointer(bitPattern: tail.load(fromByteOffset: i &* 16, as: UInt.self))
        }

        /// Stores an in-place leaf that may not be read yet: its address
        /// and allocation size, as the index checkpoint's meta gives them
        /// (the leaf itself is not touched).
        func setInPlaceChild(_ i: Int, at leaf: UnsafeMutableRawPointer, size: Int) {
            tail.storeBytes(of: UInt(bitPattern: leaf), toByteOffset: i * 16, as: UInt.self)
            tail.storeBytes(of: size | KeyIndex.inPlaceChildBit, toByteOffset: i * 16 + 8, as: Int.self)
        }
        @inline(__always)
        func childSize(_ i: Int) -> Int { tail.load(fromByteOffset: i &* 16 &+ 8, as: Int.self) & (KeyIndex.inPlaceChildBit &- 1) }
        /// Whether child i is a leaf in a `LeafArena`, read from this node's slot alone.
        @inline(__always)
        func childIsInPlace(_ i: Int) -> Bool { tail.load(fromByteOffset: i &* 16 &+ 8, as: Int.self) & KeyIndex.inPlaceChildBit != 0 }
        @inline(__always) var isInPlace: Bool { header.pointee.flags == KeyIndex.inPlace }
        @inline(__always)
        func child(_ i: Int) -> NodeView { NodeView(object: childPointer(i)) }

        /// Stores a child pointer whose reference this node now owns.
        func setChild(_ i: Int, owned node: Node) {
            let p = Unmanaged.passRetained(node).toOpaque()
            let child = NodeView(object: p)
            tail.storeBytes(of: UInt(bitPattern: p), toByteOffset: i * 16, as: UInt.self)
            tail.storeBytes(of: child.allocationSize | (child.isInPlace ? KeyIndex.inPlaceChildBit : 0), toByteOffset: i * 16 + 8, as: Int.self)
        }

        /// Moves child i's reference out to the caller; `putChild` must give
        /// one back before anything else reads the slot.
        func takeChild(_ i: Int) -> Node { Unmanaged<Node>.fromOpaque(childPointer(i)).takeRetainedValue() }

        func putChild(_ i: Int, _ node: Node) { setChild(i, owned: node) }

        /// A strong reference to child i (the slot keeps its own).
        func childNode(_ i: Int) -> Node { Unmanaged<Node>.fromOpaque(childPointer(i)).takeUnretainedValue() }

        func retainChildren(_ range: Range<Int>) {
            for i in range where !childIsInPlace(i) { _ = Unmanaged<Node>.fromOpaque(childPointer(i)).retain() }
        }

        // MARK: Editing (only on uniquely referenced nodes; no reference counting)

        func hasRoom(keys: Int, bytes: Int) -> Bool {
            count + keys <= slots && byteCount + bytes <= byteCapacity
        }

        /// Opens slot `j` and stores the key there; the caller fills the
        /// slot. The node must have room.
        func insertKey(_ key: UnsafeRawPointer, _ length: Int, at j: Int) {
            assert(hasRoom(keys: 1, bytes: length), "KeyIndex: node full")
            let n = count
            let s = start(j)
            let keys = keysBase
            let ends = endsBase
            memmove(keys + s + length, keys + s, byteCount - s)
            if length > 0 { memcpy(keys + s, key, length) }
            memmove(ends + (j + 1) * 2, ends + j * 2, (n - j) * 2)
            ends.storeBytes(of: UInt16(s + length), toByteOffset: j * 2, as: UInt16.self)
            let delta = UInt16(length)
            for i in (j + 1)..<(n + 1) {
                let e = ends.load(fromByteOffset: i * 2, as: UInt16.self)
                ends.storeBytes(of: e &+ delta, toByteOffset: i * 2, as: UInt16.self)
            }
            memmove(tail + (j + 1) * 16, tail + j * 16, (n - j) * 16)
            header.pointee.count += 1
            header.pointee.byteCount += Int32(length)
        }

        /// Removes key and slot `j` (a child's reference is the caller's to release).
        func removeKey(at j: Int) {
            let n = count
            let s = start(j)
            let e = end(j)
            let keys = keysBase
            let ends = endsBase
            memmove(keys + s, keys + e, byteCount - e)
            memmove(ends + j * 2, ends + (j + 1) * 2, (n - j - 1) * 2)
            let delta = UInt16(e - s)
            for i in j..<(n - 1) {
                let end = ends.load(fromByteOffset: i * 2, as: UInt16.self)
                ends.storeBytes(of: end &- delta, toByteOffset: i * 2, as: UInt16.self)
            }
            memmove(tail + j * 16, tail + (j + 1) * 16, (n - j - 1) * 16)
            header.pointee.count -= 1
            header.pointee.byteCount -= Int32(e - s)
        }

        /// Copies a key's bytes to `to`: keys of 8 to 16 bytes (Strata's
        /// object keys are 11) as two words, overlapping below 16, with no
        /// call — opening a store copies every key, and a `memcpy` call per
        /// key would weigh on it.
        @inline(__always)
        static func copyKey(_ key: UnsafeRawBufferPointer, to: UnsafeMutableRawPointer) {
            guard let p = key.baseAddress else { return }
            if key.count >= 8 && key.count <= 16 {
                to.storeBytes(of: p.loadUnaligned(as: UInt64.self), as: UInt64.self)
                (to + (key.count &- 8)).storeBytes(of: p.loadUnaligned(fromByteOffset: key.count &- 8, as: UInt64.self), as: UInt64.self)
            } else {
                memcpy(to, p, key.count)
            }
        }

        /// Fills an empty leaf made for exactly `count` keys whose bytes it
        /// has room for: what `appendKey` and `setEntry` do key by key, with
        /// the counts kept in registers and written once.
        @inline(__always)
        func fillLeaf(count: Int, key: (Int) -> UnsafeRawBufferPointer, entry: (Int) -> IndexEntry) {
            assert(self.count == 0 && count <= slots, "KeyIndex: fillLeaf on a leaf too small or not empty")
            let keys = keysBase, ends = endsBase, entries = tail
            var b = 0
            for i in 0..<count {
                let k = key(i)
                Self.copyKey(k, to: keys + b)
                b &+= k.count
                ends.storeBytes(of: UInt16(truncatingIfNeeded: b), toByteOffset: i &* 2, as: UInt16.self)
                entries.storeBytes(of: entry(i), toByteOffset: i &* 16, as: IndexEntry.self)
            }
            precondition(b <= byteCapacity, "KeyIndex: fillLeaf past the leaf's bytes")
            header.pointee.count = Int32(count)
            header.pointee.byteCount = Int32(b)
        }

        /// Appends a key after the last, with an empty slot; the node must have room.
        func appendKey(_ key: UnsafeRawBufferPointer) {
            assert(hasRoom(keys: 1, bytes: key.count), "KeyIndex: node full")
            let n = count
            let b = byteCount
            Self.copyKey(key, to: keysBase + b)
            endsBase.storeBytes(of: UInt16(b + key.count), toByteOffset: n * 2, as: UInt16.self)
            header.pointee.count += 1
            header.pointee.byteCount += Int32(key.count)
        }

        /// Appends keys and slots `range` of `source` (raw: child references
        /// are copied, not retained). This node must have room.
        func append(from source: NodeView, _ range: Range<Int>) {
            guard !range.isEmpty else { return }
            let n = count
            let b = byteCount
            let s = source.start(range.lowerBound)
            let length = source.end(range.upperBound - 1) - s
            assert(hasRoom(keys: range.count, bytes: length), "KeyIndex: node full")
            memcpy(keysBase + b, source.keysBase + s, length)
            let ends = endsBase
            for (k, i) in range.enumerated() {
                ends.storeBytes(of: UInt16(b + source.end(i) - s), toByteOffset: (n + k) * 2, as: UInt16.self)
            }
            memcpy(tail + n * 16, source.tail + range.lowerBound * 16, range.count * 16)
            header.pointee.count += Int32(range.count)
            header.pointee.byteCount += Int32(length)
        }

        /// Keeps keys and slots 0..<m (raw: no reference is released).
        func truncate(to m: Int) {
            header.pointee.byteCount = Int32(start(m))
            header.pointee.count = Int32(m)
        }

        /// Copies slot `i` of `source` into slot `j` (raw).
        func copySlot(_ j: Int, from source: NodeView, _ i: Int) {
            memcpy(tail + j * 16, source.tail + i * 16, 16)
        }

        // MARK: Sizing

        var capacityLimit: Int { isLeaf ? KeyIndex.leafCapacity : KeyIndex.innerCapacity }

        var isOverfull: Bool {
            count > capacityLimit || (byteCount > KeyIndex.maxNodeBytes && count >= 2)
        }

        var isUnderfull: Bool {
            count < capacityLimit / 4 && byteCount < KeyIndex.maxNodeBytes / 4
        }

        /// Key-byte room for `slots` keys of the average length here (after
        /// adding `extraKeys` keys of `extraBytes` bytes), within the node budget.
        func estimatedByteCapacity(slots: Int, extraKeys: Int = 0, extraBytes: Int = 0) -> Int {
            let keys = count + extraKeys
            let bytes = byteCount + extraBytes
            guard keys > 0 else { return bytes }
            return max(bytes, min(bytes * slots / keys, KeyIndex.maxNodeBytes))
        }

        /// A copy with room for `extraKeys` more keys of `extraBytes` bytes
        /// (and at least one slot more than a full node). `transfer`: this
        /// node is uniquely referenced and about to be dropped, so its child
        /// references move to the copy; otherwise the copy retains them.
        func copy(extraKeys: Int, extraBytes: Int, transfer: Bool) -> Node {
            let slots = max(capacityLimit + 1, count + extraKeys)
            let needed = byteCount + extraBytes
            let capacity = needed <= byteCapacity
                ? byteCapacity
                : max(needed, estimatedByteCapacity(slots: slots, extraKeys: extraKeys, extraBytes: extraBytes))
            let node = Node.make(height: height, slots: slots, byteCapacity: capacity)
            NodeView(node).append(from: self, 0..<count)
            if !isLeaf {
                if transfer { truncate(to: 0) } else { retainChildren(0..<count) }
            }
            return node
        }

        /// Where an overfull leaf splits (keys 0..<m stay): half the keys,
        /// or, when the bytes outgrew the budget, the point that best
        /// balances them.
        func leafSplitPoint() -> Int {
            guard byteCount > KeyIndex.maxNodeBytes else { return count / 2 }
            var best = 1
            var bestWorst = Int.max
            for m in 1..<count {
                let worst = max(end(m - 1), byteCount - end(m - 1))
                if worst < bestWorst { bestWorst = worst; best = m }
            }
            return best
        }

        /// Where an overfull interior node splits: children 0..<m stay, key m
        /// goes up, children m... move.
        func innerSplitPoint() -> Int {
            guard byteCount > KeyIndex.maxNodeBytes else { return count / 2 }
            var best = 1
            var bestWorst = Int.max
            for m in 1..<count {
                let worst = max(start(m), byteCount - end(m))
                if worst < bestWorst { bestWorst = worst; best = m }
            }
            return best
        }

        /// Moves the upper keys of this (uniquely referenced, overfull) leaf
        /// to a new right sibling. Right-biased (an append at the end of the
        /// tree) keeps all but the last key here, as SQLite does, so
        /// sequential inserts leave full leaves behind them.
        func splitLeaf(rightBiased: Bool) -> Split {
            let slots = KeyIndex.leafCapacity + 1
            let m = rightBiased ? count - 1 : leafSplitPoint()
            let rightBytes = byteCount - start(m)
            // A right-biased sibling will be filled by more keys like these.
            let average = rightBiased ? (byteCount, count) : (rightBytes, count - m)
            let capacity = max(rightBytes, min(average.0 * slots / average.1, KeyIndex.maxNodeBytes))
            let right = Node.make(height: 0, slots: slots, byteCapacity: capacity)
            let r = NodeView(right)
            r.append(from: self, m..<count)
            truncate(to: m)
            let separator = withKey(m - 1) { left in r.withKey(0) { KeyIndex.separator(between: left, and: $0) } }
            return (separator, right, rightBiased)
        }

        /// Moves the upper children of this (uniquely referenced, overfull)
        /// interior node to a new right sibling; returns the separator
        /// between them. Right-biased keeps all but the last child.
        func splitInner(rightBiased: Bool) -> Split {
            let slots = KeyIndex.innerCapacity + 1
            let m = rightBiased ? count - 1 : innerSplitPoint()
            let separator = key(m)
            let rightBytes = byteCount - end(m)
            let capacity = rightBiased
                ? estimatedByteCapacity(slots: slots)
                : max(rightBytes, min(rightBytes * slots / max(count - m - 1, 1), KeyIndex.maxNodeBytes))
            let right = Node.make(height: height, slots: slots, byteCapacity: capacity)
            let r = NodeView(right)
            // Child m becomes the right node's first child, without a separator;
            // the children's references move with them.
            r.appendKey(UnsafeRawBufferPointer(start: nil, count: 0))
            r.copySlot(0, from: self, m)
            r.append(from: self, (m + 1)..<count)
            truncate(to: m)
            return (separator, right, rightBiased)
        }

        var memoryFootprint: Int {
            var total = allocationSize
            if !isLeaf {
                // An in-place leaf's size is in its slot: counting it reads no chunk.
                for i in 0..<count { total += childIsInPlace(i) ? childSize(i) : child(i).memoryFootprint }
            }
            return total
        }
    }

    /// The separator pushed up by a split, the new right sibling, and whether
    /// the split was right-biased (an append at the right edge of the tree).
    typealias Split = (separator: [UInt8], right: Node, rightBiased: Bool)

    /// Starts loading every cache line of `[p, p + size)` (at most 4 KiB)
    /// without waiting for them (``touch(_:_:)`` waits): for a node the walk
    /// will reach after work it has still to do. A hint; it never faults.
    @inline(__always)
    static func prefetch(_ p: UnsafeRawPointer, _ size: Int) {
        let size = min(size, 4096)
        var offset = 0
        while offset < size {
            strata_prefetch(p + offset)
            offset &+= 64
        }
    }

    /// Reads one byte of every cache line of `[p, p + size)` (at most 4 KiB):
    /// independent loads the CPU issues together, so a node costs about one
    /// memory round trip instead of one per binary-search probe.
    @inline(__always)
    static func touch(_ p: UnsafeRawPointer, _ size: Int) {
        let size = min(size, 4096)
        var sum: UInt64 = 0
        var offset = 0
        while offset < size {
            sum &+= UInt64(p.load(fromByteOffset: offset, as: UInt8.self))
            offset &+= 64
        }
        sum &+= UInt64(p.load(fromByteOffset: size &- 1, as: UInt8.self))
        // Never true (sum <= 65 * 255); using the sum keeps the loads.
        if sum == .max { fatalError("unreachable") }
    }
}
