// KeyIndex: the engine's in-memory ordered index (key -> where its newest
// version lives). Public surface, Cursor and Builder; node layout in
// KeyIndex+Node.swift, tree algorithms in KeyIndex+Tree.swift.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// Where the newest version of a key lives.
package struct IndexEntry: Hashable, Sendable {
    /// Batch sequence number of the version.
    package var sequence: UInt64
    /// File number of the memtable or segment holding it.
    package var file: UInt32
    /// Block index in a segment, or byte offset in a memtable.
    package var block: UInt32

    package init(sequence: UInt64, file: UInt32, block: UInt32) {
        self.sequence = sequence
        self.file = file
        self.block = block
    }
}

/// The engine's in-memory ordered index: key -> where its newest version lives.
///
/// A B+tree of copy-on-write nodes, each a single allocation: leaves keep
/// their keys packed end to end with a `UInt16` end offset per key and the
/// entries alongside; interior nodes keep their separators (the shortest
/// prefix dividing two neighbours) the same way. See `KeyIndex+Node.swift`.
///
/// Concurrency: `KeyIndex` is a value. A copy is an immutable point-in-time
/// snapshot that other threads may read while the original is mutated: a
/// mutation checks `isKnownUniquelyReferenced` on every node on its path and
/// copies any node another copy (or a `Cursor`) still holds, so it writes
/// only into nodes no one else can see. There are no locks.
///
/// Key order is unsigned lexicographic byte order (memcmp on the common
/// prefix, then the shorter key first). Keys are 1 to `maxKeyLength` bytes.
package struct KeyIndex: Sendable {
    /// The longest key the index accepts.
    package static let maxKeyLength = 16_384
    /// Most keys in one leaf (about 1 KiB for 16-byte keys: a lookup reads
    /// a whole leaf in one memory round trip).
    static let leafCapacity = 32
    /// Most children of one interior node.
    static let innerCapacity = 64
    /// Key (or separator) bytes above which a node with two or more keys
    /// splits. Since a key is at most 16 KiB, a node then never holds more
    /// than 2 * 16 KiB at rest or 3 * 16 KiB while splitting, which is why
    /// `UInt16` end offsets suffice.
    static let maxNodeBytes = 16_384

    /// nil when empty.
    var root: NodeRef?

    /// The memory of leaves loaded in place from an index checkpoint, kept
    /// while this value may reach one (see `LeafArena`); nil otherwise.
    var arena: LeafArena?

    /// The number of keys. O(1).
    package internal(set) var count: Int = 0

    package init() {}

    package var isEmpty: Bool { count == 0 }

    // MARK: Lookup

    /// The entry stored for `key`, or nil. Does not allocate, retain or lock.
    package func lookup(_ key: UnsafeRawBufferPointer) -> IndexEntry? {
        guard let object = root.map({ NodeView($0.node).object }), let p = key.baseAddress else { return nil }
        // Unretained walk: this value keeps every node alive and unchanged.
        var node = NodeView(object: object)
        let keyCount = key.count
        while !node.isLeaf {
            let i = node.childIndex(p, keyCount)
            let child = node.childPointer(i)
            Self.touch(child, node.childSize(i))
            node = NodeView(object: child)
        }
        let (j, found) = node.lowerBound(p, keyCount)
        return found ? node.entry(j) : nil
    }

    package func lookup(_ key: [UInt8]) -> IndexEntry? {
        key.withUnsafeBytes { lookup($0) }
    }

    package func contains(_ key: [UInt8]) -> Bool { lookup(key) != nil }

    // MARK: Mutation

    /// Inserts `key` or overwrites its entry; returns the previous entry.
    @discardableResult
    package mutating func insert(_ key: UnsafeRawBufferPointer, _ entry: IndexEntry) -> IndexEntry? {
        precondition(!key.isEmpty, "KeyIndex: the empty key cannot be stored")
        precondition(key.count <= Self.maxKeyLength, "KeyIndex: key longer than \(Self.maxKeyLength) bytes")
        guard root != nil else {
            let slots = Self.leafCapacity + 1
            let leaf = Node.make(height: 0, slots: slots,
                                 byteCapacity: max(key.count, min(key.count * slots, Self.maxNodeBytes)))
            NodeView(leaf).appendKey(key)
            NodeView(leaf).setEntry(0, entry)
            root = NodeRef(node: leaf)
            count = 1
            return nil
        }
        let result = Self.insert(&root!.node, key.baseAddress!, key.count, entry, rightEdge: true)
        if let split = result.split {
            root = NodeRef(node: Self.makeRoot(root!.node, split))
        }
        if result.old == nil { count += 1 }
        return result.old
    }

    @discardableResult
    package mutating func insert(_ key: [UInt8], _ entry: IndexEntry) -> IndexEntry? {
        key.withUnsafeBytes { insert($0, entry) }
    }

    /// Removes `key`; returns the entry it had, or nil when absent (and then
    /// copies no node).
    @discardableResult
    package mutating func remove(_ key: UnsafeRawBufferPointer) -> IndexEntry? {
        guard lookup(key) != nil else { return nil }
        let old = Self.remove(&root!.node, key.baseAddress!, key.count)
        count -= 1
        // Shrink the tree: an interior root with a single child gives way to it.
        while let node = root?.node, !NodeView(node).isLeaf, NodeView(node).count == 1 {
            root = NodeRef(node: NodeView(node).childNode(0))
        }
        // The root is never an in-place leaf (see KeyIndex+LeafArena.swift).
        // A root shrinks to the child its children's merge just wrote, which
        // is a copy, so this does not happen with today's merges (deleting
        // all but one untouched leaf's keys merges into it first); it keeps
        // the rule should that change.
        if let leaf = root, NodeView(leaf.node).isInPlace { root = Self.ownedCopy(of: leaf) }
        if count == 0 { root = nil }
        return old
    }

    @discardableResult
    package mutating func remove(_ key: [UInt8]) -> IndexEntry? {
        key.withUnsafeBytes { remove($0) }
    }

    /// Compare-and-set: replaces the entry only if `key` is present with
    /// exactly `expected`. Returns whether it did.
    package mutating func replace(_ key: UnsafeRawBufferPointer, expected: IndexEntry, with new: IndexEntry) -> Bool {
        guard lookup(key) == expected else { return false }
        insert(key, new)
        return true
    }

    package mutating func replace(_ key: [UInt8], expected: IndexEntry, with new: IndexEntry) -> Bool {
        key.withUnsafeBytes { replace($0, expected: expected, with: new) }
    }

    /// ``replace(_:expected:with:)`` for `count` keys at once: for each
    /// `i`, sets `key(i)`'s entry to `replacement(i)` if it is `expected(i)`.
    /// The keys must be in ascending order, each once. Returns how many
    /// were not replaced (absent, or holding another entry).
    ///
    /// Walks the tree once for the whole run, so a node is descended into
    /// once however many of the keys it holds, instead of a lookup and an
    /// insert per key: a flush repoints the keys of a memtable, which are
    /// mostly neighbours (an import's), in key order.
    ///
    /// ```swift
    /// let missed = index.replaceAll(count: placed.count,
    ///                               key: { keys[$0] }, expected: { old[$0] }, replacement: { new[$0] })
    /// ```
    package mutating func replaceAll(
        count: Int,
        key: (Int) -> UnsafeRawBufferPointer,
        expected: (Int) -> IndexEntry,
        replacement: (Int) -> IndexEntry
    ) -> Int {
        guard count > 0, root != nil else { return count }
        var replaced = 0
        Self.replaceAll(&root!.node, 0..<count, key, expected, replacement, &replaced)
        return count - replaced
    }

    // MARK: Ordered traversal

    /// Visits keys >= `start` (all keys when nil) in ascending order until
    /// `body` returns false. The key buffer is valid only during the call.
    package func forEach(from start: [UInt8]?, _ body: (UnsafeRawBufferPointer, IndexEntry) throws -> Bool) rethrows {
        if let start {
            try start.withUnsafeBytes { try forEach(fromBytes: $0, body) }
        } else {
            try forEach(fromBytes: nil, body)
        }
    }

    /// ``forEach(from:_:)`` from a lent key.
    package func forEach(fromBytes start: UnsafeRawBufferPointer?, _ body: (UnsafeRawBufferPointer, IndexEntry) throws -> Bool) rethrows {
        guard let root else { return }
        try withExtendedLifetime(root) {
            _ = try Self.forEach(NodeView(root.node), from: start.flatMap { $0.isEmpty ? nil : $0 }, body)
        }
    }

    /// Visits the keys of `count` ranges — range `i` from `bounds(i).start`
    /// (inclusive) to `bounds(i).end` (exclusive; nil: no end), ascending
    /// and disjoint, each lent for the walk — in order, until `body` returns
    /// false, walking the tree once (``forEach(_:in:_:)``).
    package func forEach(
        inRanges count: Int, bounds: (Int) -> (start: UnsafeRawBufferPointer, end: UnsafeRawBufferPointer?),
        _ body: (UnsafeRawBufferPointer, IndexEntry) throws -> Bool
    ) rethrows {
        guard let root, count > 0 else { return }
        try withoutActuallyEscaping(bounds) { bounds in
            var walk = RangeWalk(count: count, bounds: bounds)
            try withExtendedLifetime(root) { _ = try Self.forEach(NodeView(root.node), in: &walk, body) }
        }
    }

    /// Visits keys < `end` (all keys when nil) in descending order until
    /// `body` returns false. The key buffer is valid only during the call.
    package func forEachDescending(before end: [UInt8]?, _ body: (UnsafeRawBufferPointer, IndexEntry) throws -> Bool) rethrows {
        if let end {
            try end.withUnsafeBytes { try forEachDescending(beforeBytes: $0, body) }
        } else {
            try forEachDescending(beforeBytes: nil, body)
        }
    }

    /// ``forEachDescending(before:_:)`` before a lent key.
    package func forEachDescending(beforeBytes end: UnsafeRawBufferPointer?, _ body: (UnsafeRawBufferPointer, IndexEntry) throws -> Bool) rethrows {
        guard let root else { return }
        try withExtendedLifetime(root) {
            _ = try Self.forEachDescending(NodeView(root.node), before: end.flatMap { $0.isEmpty ? nil : $0 }, body)
        }
    }

    /// A lazy ascending iterator from the first key >= `start` (all keys when
    /// nil). It holds this snapshot's root, so it keeps working, over this
    /// snapshot, whatever happens to the index afterwards.
    package func makeCursor(from start: [UInt8]?) -> Cursor {
        if let start, !start.isEmpty {
            return start.withUnsafeBytes { Cursor(root: root, arena: arena, start: $0) }
        }
        return Cursor(root: root, arena: arena, start: nil)
    }

    package struct Cursor: IteratorProtocol, Sendable {
        /// A node on the path from the root and the child being visited.
        /// Unretained: `root` and `arena` keep the whole snapshot alive, and a shared
        /// snapshot is never written (see KeyIndex+Node.swift).
        struct Frame: @unchecked Sendable {
            let node: NodeView
            var child: Int
        }
        let root: NodeRef?
        let arena: LeafArena?
        var path: [Frame] = []
        /// The leaf being visited, and the next key in it.
        var leaf: Frame?

        init(root: NodeRef?, arena: LeafArena?, start: UnsafeRawBufferPointer?) {
            self.root = root
            self.arena = arena
            guard let root else { return }
            var node = NodeView(root.node)
            while !node.isLeaf {
                let i = start.map { node.childIndex($0.baseAddress!, $0.count) } ?? 0
                path.append(Frame(node: node, child: i))
                node = node.child(i)
            }
            leaf = Frame(node: node, child: start.map { node.lowerBound($0.baseAddress!, $0.count).index } ?? 0)
        }

        package mutating func next() -> (key: [UInt8], entry: IndexEntry)? {
            while let current = leaf {
                if current.child < current.node.count {
                    leaf!.child += 1
                    return (current.node.key(current.child), current.node.entry(current.child))
                }
                advance()
            }
            return nil
        }

        /// Moves to the first key of the next leaf (leaf becomes nil at the end).
        private mutating func advance() {
            leaf = nil
            while let top = path.last {
                let next = top.child + 1
                if next < top.node.count {
                    path[path.count - 1].child = next
                    var node = top.node.child(next)
                    while !node.isLeaf {
                        path.append(Frame(node: node, child: 0))
                        node = node.child(0)
                    }
                    leaf = Frame(node: node, child: 0)
                    return
                }
                path.removeLast()
            }
        }
    }

    // MARK: Memory

    /// Bytes of heap memory this index holds: every node's whole allocation
    /// (object header, node header, slots, offsets and key bytes, including
    /// unused capacity). Computed by walking the tree; nodes shared with
    /// other snapshots are counted in full.
    package var memoryFootprint: Int {
        guard let root else { return 0 }
        return withExtendedLifetime(root) { NodeView(root.node).memoryFootprint }
    }

    // MARK: Bulk build

    /// Builds an index from strictly ascending keys in O(n), with leaves and
    /// interior nodes packed full (and allocated to fit).
    package struct Builder: Sendable {
        /// Finished nodes of the level being built (leaves), and the
        /// separators between them: separators[i] divides nodes[i] and nodes[i + 1].
        private var nodes: [NodeRef] = []
        private var separators = Separators()
        /// The leaf being filled.
        private var keys: [UInt8] = []
        private var ends: [Int] = []
        private var entries: [IndexEntry] = []
        /// The last key of the previous leaf, while the current one is empty.
        private var previousLast: [UInt8] = []
        private var count = 0

        package init() {}

        package mutating func append(_ key: UnsafeRawBufferPointer, _ entry: IndexEntry) {
            precondition(!key.isEmpty, "KeyIndex: the empty key cannot be stored")
            precondition(key.count <= KeyIndex.maxKeyLength, "KeyIndex: key longer than \(KeyIndex.maxKeyLength) bytes")
            if let last = ends.last {
                let lastStart = ends.count > 1 ? ends[ends.count - 2] : 0
                let ascending = keys.withUnsafeBytes {
                    KeyIndex.compare(UnsafeRawBufferPointer(rebasing: $0[lastStart..<last]), key) < 0
                }
                precondition(ascending, "KeyIndex.Builder: keys must be strictly ascending")
                if ends.count == KeyIndex.leafCapacity || last + key.count > KeyIndex.maxNodeBytes {
                    finishLeaf()
                }
            } else if !nodes.isEmpty {
                precondition(previousLast.withUnsafeBytes { KeyIndex.compare($0, key) < 0 },
                             "KeyIndex.Builder: keys must be strictly ascending")
            }
            if ends.isEmpty && !nodes.isEmpty {
                previousLast.withUnsafeBytes { separators.append(between: $0, and: key) }
            }
            keys.append(contentsOf: key)
            ends.append(keys.count)
            entries.append(entry)
            count += 1
        }

        package mutating func append(_ key: [UInt8], _ entry: IndexEntry) {
            key.withUnsafeBytes { append($0, entry) }
        }

        private mutating func finishLeaf() {
            let n = ends.count
            let leaf = Node.make(height: 0, slots: n, byteCapacity: keys.count)
            let view = NodeView(leaf)
            keys.withUnsafeBytes { bytes in
                var s = 0
                for i in 0..<n {
                    view.appendKey(UnsafeRawBufferPointer(rebasing: bytes[s..<ends[i]]))
                    view.setEntry(i, entries[i])
                    s = ends[i]
                }
            }
            previousLast = view.key(n - 1)
            nodes.append(NodeRef(node: leaf))
            keys.removeAll(keepingCapacity: true)
            ends.removeAll(keepingCapacity: true)
            entries.removeAll(keepingCapacity: true)
        }

        /// Returns the index of everything appended, and empties the builder.
        package mutating func build() -> KeyIndex {
            if !ends.isEmpty { finishLeaf() }
            defer { self = Builder() }
            guard !nodes.isEmpty else { return KeyIndex() }
            return Self.assemble(leaves: nodes, separators: separators, count: count)
        }

        /// The index over `leaves` (in key order, `separators` between
        /// them), its interior levels built as full as the limits allow.
        static func assemble(leaves: [NodeRef], separators: Separators, count: Int) -> KeyIndex {
            guard !leaves.isEmpty else { return KeyIndex() }
            precondition(separators.count == leaves.count - 1, "KeyIndex.assemble: a separator between each two leaves")
            return assemble(level: leaves, separators: separators, height: 1, count: count)
        }

        /// The index whose nodes of `height - 1` are `level`: the levels
        /// above are grouped until one node is left, the root.
        private static func assemble(level: [NodeRef], separators: Separators, height: Int, count: Int) -> KeyIndex {
            var (level, seps, height) = (level, separators, height)
            while level.count > 1 {
                (level, seps) = group(level, seps, height: height)
                height += 1
            }
            var index = KeyIndex()
            index.root = level[0]
            index.count = count
            return index
        }

        /// The index over leaves that lie in `arena` and may not be read yet,
        /// each given by its address and allocation size, in key order with
        /// `separators` between them; `count` keys in all. No leaf is touched.
        static func assemble(inPlaceLeaves leaves: [(address: UnsafeMutableRawPointer, size: Int)], separators: Separators,
                             count: Int, arena: LeafArena) -> KeyIndex {
            // The root is never an in-place leaf (see KeyIndex+LeafArena.swift): two leaves at least.
            precondition(leaves.count >= 2 && separators.count == leaves.count - 1, "KeyIndex.assemble: two leaves or more, a separator between each two")
            let (parents, seps) = group(leaves.count, separators, height: 1) { parent, slot, c in
                parent.setInPlaceChild(slot, at: leaves[c].address, size: leaves[c].size)
            }
            var index = assemble(level: parents, separators: seps, height: 2, count: count)
            index.arena = arena
            return index
        }

        /// Packs `children` into interior nodes as full as the limits allow;
        /// returns the nodes and the separators between them.
        private static func group(_ children: [NodeRef], _ separators: Separators, height: Int) -> ([NodeRef], Separators) {
            group(children.count, separators, height: height) { parent, slot, c in parent.setChild(slot, owned: children[c].node) }
        }

        /// Packs `count` children into interior nodes as full as the limits
        /// allow, `setChild(parent, slot, c)` storing child `c`; returns the
        /// nodes and the separators between them.
        private static func group(_ count: Int, _ separators: Separators, height: Int,
                                  setChild: (NodeView, Int, Int) -> Void) -> ([NodeRef], Separators) {
            var parents: [NodeRef] = []
            var upper = Separators()
            var start = 0
            while start < count {
                var end = start + 1
                var bytes = 0
                while end < count, end - start < KeyIndex.innerCapacity,
                      bytes + separators.length(end - 1) <= KeyIndex.maxNodeBytes {
                    bytes += separators.length(end - 1)
                    end += 1
                }
                let node = Node.make(height: height, slots: end - start, byteCapacity: bytes)
                let view = NodeView(node)
                for c in start..<end {
                    if c == start {
                        view.appendKey(UnsafeRawBufferPointer(start: nil, count: 0))
                    } else {
                        separators.withKey(c - 1) { view.appendKey($0) }
                    }
                    setChild(view, c - start, c)
                }
                parents.append(NodeRef(node: node))
                if end < count { upper.append(end - 1, of: separators) }
                start = end
            }
            return (parents, upper)
        }
    }
}

// MARK: - Key comparison

extension KeyIndex {
    /// Unsigned lexicographic order: negative, zero or positive. Compares
    /// 8 bytes at a time as big-endian words (no call for short keys).
    @inline(__always)
    static func compare(_ a: UnsafeRawPointer, _ aCount: Int, _ b: UnsafeRawPointer, _ bCount: Int) -> Int {
        var n = min(aCount, bCount)
        if n >= 8 && n <= 16 {
            // Keys of 8 to 16 bytes (Strata's object keys, the bench's keys):
            // the first word, then the last word of the common prefix, which
            // may overlap the first. Where the first words are equal, the
            // overlapped bytes are too, so the last words order what is left.
            let x = a.loadUnaligned(as: UInt64.self), y = b.loadUnaligned(as: UInt64.self)
            if x != y { return x.bigEndian < y.bigEndian ? -1 : 1 }
            let xl = a.loadUnaligned(fromByteOffset: n &- 8, as: UInt64.self), yl = b.loadUnaligned(fromByteOffset: n &- 8, as: UInt64.self)
            if xl != yl { return xl.bigEndian < yl.bigEndian ? -1 : 1 }
            return aCount &- bCount
        }
        var offset = 0
        while n >= 8 {
            let x = a.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            let y = b.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            if x != y { return x.bigEndian < y.bigEndian ? -1 : 1 }
            offset &+= 8
            n &-= 8
            if n > 64 {
                // Long shared prefix: let libc's vector loop finish.
                let c = memcmp(a + offset, b + offset, n)
                return c != 0 ? Int(c) : aCount &- bCount
            }
        }
        if n > 0 {
            var x: UInt64 = 0
            var y: UInt64 = 0
            for k in offset..<(offset &+ n) {
                x = x &<< 8 | UInt64(a.load(fromByteOffset: k, as: UInt8.self))
                y = y &<< 8 | UInt64(b.load(fromByteOffset: k, as: UInt8.self))
            }
            if x != y { return x < y ? -1 : 1 }
        }
        return aCount &- bCount
    }

    @inline(__always)
    static func compare(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        guard let pa = a.baseAddress, let pb = b.baseAddress else { return a.count - b.count }
        return compare(pa, a.count, pb, b.count)
    }

    /// The shortest prefix of `right` that is greater than `left` (given
    /// left < right): every key <= left sorts below it, and `right` does not.
    static func separator(between left: UnsafeRawBufferPointer, and right: UnsafeRawBufferPointer) -> [UInt8] {
        Array(UnsafeRawBufferPointer(rebasing: right[0..<separatorLength(between: left, and: right)]))
    }
}
