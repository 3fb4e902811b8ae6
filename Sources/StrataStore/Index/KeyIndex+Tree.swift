// KeyIndex's B+tree algorithms: copy-on-write insert and remove, traversal,
// and the structural self-check the tests use. Node layout: KeyIndex+Node.swift.

extension KeyIndex {
    // MARK: Copy-on-write

    /// Makes `node` uniquely referenced with room for `keys` more keys of
    /// `bytes` bytes: copies it when another KeyIndex or Cursor shares it,
    /// or when it is full (then the old node is dropped and its child
    /// references move to the copy).
    static func makeWritable(_ node: inout Node, keys: Int, bytes: Int) {
        let unique = isKnownUniquelyReferenced(&node)
        let view = NodeView(node)
        if unique && view.hasRoom(keys: keys, bytes: bytes) { return }
        // A view does not keep its node alive: without this, the optimizer
        // may release the old node (about to be overwritten) before the copy.
        let copy = withExtendedLifetime(node) { view.copy(extraKeys: keys, extraBytes: bytes, transfer: unique) }
        node = copy
    }

    // MARK: Insert

    /// Inserts or overwrites below `node`, which may be replaced by a copy.
    /// `rightEdge`: `node` is the last child of the last child ... of the
    /// root, so an insert at its end is an append to the whole index.
    static func insert(
        _ node: inout Node, _ key: UnsafeRawPointer, _ keyCount: Int, _ entry: IndexEntry, rightEdge: Bool
    ) -> (old: IndexEntry?, split: Split?) {
        if NodeView(node).isLeaf {
            let leaf = NodeView(node)
            // Appends (keys past the last) are common: check for one first.
            let (j, found) = rightEdge && leaf.count > 0 && leaf.compareKey(leaf.count - 1, key, keyCount) < 0
                ? (leaf.count, false)
                : leaf.lowerBound(key, keyCount)
            if found {
                makeWritable(&node, keys: 0, bytes: 0)
                let view = NodeView(node)
                let old = view.entry(j)
                view.setEntry(j, entry)
                return (old, nil)
            }
            makeWritable(&node, keys: 1, bytes: keyCount)
            let view = NodeView(node)
            view.insertKey(key, keyCount, at: j)
            view.setEntry(j, entry)
            guard view.isOverfull else { return (nil, nil) }
            return (nil, view.splitLeaf(rightBiased: rightEdge && j == view.count - 1))
        }

        makeWritable(&node, keys: 0, bytes: 0)
        var view = NodeView(node)
        let last = view.count - 1
        let appending = rightEdge && last > 0 && view.compareKey(last, key, keyCount) <= 0
        let i = appending ? last : view.childIndex(key, keyCount)
        // Prefetching pays for a random descent; an append's path down the
        // right edge is in cache already (reading it again only slows appends).
        if !appending { touch(view.childPointer(i), view.childSize(i)) }
        var child = view.takeChild(i)
        let result = insert(&child, key, keyCount, entry, rightEdge: rightEdge && i == view.count - 1)
        view.putChild(i, child)
        guard let split = result.split else { return (result.old, nil) }

        makeWritable(&node, keys: 1, bytes: split.separator.count)
        view = NodeView(node)
        split.separator.withUnsafeBytes { view.insertKey($0.baseAddress!, $0.count, at: i + 1) }
        view.setChild(i + 1, owned: split.right)
        guard view.isOverfull else { return (nil, nil) }
        return (nil, view.splitInner(rightBiased: split.rightBiased && i + 1 == view.count - 1))
    }

    /// A new root above `left` and the `right` it split off.
    static func makeRoot(_ left: Node, _ split: Split) -> Node {
        let height = NodeView(left).height + 1
        let root = Node.make(height: height, slots: innerCapacity + 1,
                             byteCapacity: max(split.separator.count * 8, 64))
        let view = NodeView(root)
        view.appendKey(UnsafeRawBufferPointer(start: nil, count: 0))
        view.setChild(0, owned: left)
        split.separator.withUnsafeBytes { view.appendKey($0) }
        view.setChild(1, owned: split.right)
        return root
    }

    // MARK: Bulk replace

    /// ``KeyIndex/replaceAll(count:key:expected:replacement:)`` below
    /// `node` (which may be replaced by a copy) for the keys `range` (all
    /// within `node`'s key range, ascending). Entries change; keys and
    /// shape do not, so no node splits or merges.
    static func replaceAll(
        _ node: inout Node, _ range: Range<Int>,
        _ key: (Int) -> UnsafeRawBufferPointer,
        _ expected: (Int) -> IndexEntry,
        _ replacement: (Int) -> IndexEntry,
        _ replaced: inout Int
    ) {
        makeWritable(&node, keys: 0, bytes: 0)
        let view = NodeView(node)
        if view.isLeaf {
            // The first key is searched for; the next ones, ascending, are
            // found by stepping on from there (neighbours: a step or two).
            var j = 0
            for i in range {
                let k = key(i)
                if i == range.lowerBound {
                    j = view.lowerBound(k.baseAddress!, k.count).index
                } else {
                    while j < view.count && view.compareKey(j, k.baseAddress!, k.count) < 0 { j += 1 }
                }
                guard j < view.count, view.compareKey(j, k.baseAddress!, k.count) == 0 else { continue }
                if view.entry(j) == expected(i) {
                    view.setEntry(j, replacement(i))
                    replaced += 1
                }
            }
            return
        }
        var i = range.lowerBound
        while i < range.upperBound {
            let first = key(i)
            let c = view.childIndex(first.baseAddress!, first.count)
            // The run of keys below the next separator goes down together;
            // its end is found by halving (the keys ascend).
            var end = range.upperBound
            if c + 1 < view.count {
                var low = i + 1
                while low < end {
                    let mid = (low + end) / 2
                    let k = key(mid)
                    if view.compareKey(c + 1, k.baseAddress!, k.count) <= 0 { end = mid } else { low = mid + 1 }
                }
            }
            var child = view.takeChild(c)
            replaceAll(&child, i..<end, key, expected, replacement, &replaced)
            view.putChild(c, child)
            i = end
        }
    }

    // MARK: Remove

    /// Removes the key, which must be present below `node` (which may be
    /// replaced by a copy), merging a child that became underfull into a
    /// neighbour when the two fit in one node.
    static func remove(_ node: inout Node, _ key: UnsafeRawPointer, _ keyCount: Int) -> IndexEntry {
        makeWritable(&node, keys: 0, bytes: 0)
        let view = NodeView(node)
        if view.isLeaf {
            let (j, found) = view.lowerBound(key, keyCount)
            precondition(found, "KeyIndex: removing an absent key")
            let old = view.entry(j)
            view.removeKey(at: j)
            return old
        }
        let i = view.childIndex(key, keyCount)
        touch(view.childPointer(i), view.childSize(i))
        var child = view.takeChild(i)
        let old = remove(&child, key, keyCount)
        view.putChild(i, child)
        if NodeView(child).isUnderfull { mergeChild(of: view, at: i) }
        return old
    }

    /// Merges child i of `parent` (uniquely referenced) with its left
    /// neighbour, or else its right one, if the two fit in one node.
    static func mergeChild(of parent: NodeView, at i: Int) {
        func fits(_ l: Int) -> Bool {
            let left = parent.child(l)
            let right = parent.child(l + 1)
            let separatorBytes = left.isLeaf ? 0 : parent.end(l + 1) - parent.start(l + 1)
            return left.count + right.count <= left.capacityLimit
                && left.byteCount + separatorBytes + right.byteCount <= maxNodeBytes
        }
        let l: Int
        if i > 0, fits(i - 1) {
            l = i - 1
        } else if i + 1 < parent.count, fits(i) {
            l = i
        } else {
            return
        }
        let right = parent.child(l + 1)
        var left = parent.takeChild(l)
        if right.isLeaf {
            makeWritable(&left, keys: right.count, bytes: right.byteCount)
            NodeView(left).append(from: right, 0..<right.count)
        } else {
            // The separator between them comes down as key of right's first child.
            let separatorBytes = parent.end(l + 1) - parent.start(l + 1)
            makeWritable(&left, keys: right.count, bytes: separatorBytes + right.byteCount)
            let view = NodeView(left)
            let first = view.count
            parent.withKey(l + 1) { view.appendKey($0) }
            view.copySlot(first, from: right, 0)
            view.append(from: right, 1..<right.count)
            // The right node may be shared with a snapshot: take our own references.
            view.retainChildren(first..<view.count)
        }
        parent.putChild(l, left)
        let rightPointer = parent.childPointer(l + 1)
        parent.removeKey(at: l + 1)
        Unmanaged<Node>.fromOpaque(rightPointer).release()
    }

    // MARK: Traversal

    /// Visits keys >= start below `node` in order; false when `body` stopped.
    static func forEach(
        _ node: NodeView, from start: UnsafeRawBufferPointer?,
        _ body: (UnsafeRawBufferPointer, IndexEntry) throws -> Bool
    ) rethrows -> Bool {
        if node.isLeaf {
            var j = start.map { node.lowerBound($0.baseAddress!, $0.count).index } ?? 0
            let keys = node.keysBase
            while j < node.count {
                let s = node.start(j)
                if try !body(UnsafeRawBufferPointer(start: keys + s, count: node.end(j) - s), node.entry(j)) {
                    return false
                }
                j += 1
            }
            return true
        }
        let first = start.map { node.childIndex($0.baseAddress!, $0.count) } ?? 0
        // The child sought into is loaded whole first, as a point lookup's
        // is; the ones after it are read from their first key on.
        touch(node.childPointer(first), node.childSize(first))
        for c in first..<node.count where try !forEach(node.child(c), from: c == first ? start : nil, body) {
            return false
        }
        return true
    }

    /// Ranges lent by their position, ascending and disjoint, and the one a
    /// merge walk (``forEach(_:in:_:)``) is in.
    struct RangeWalk {
        let count: Int
        let bounds: (Int) -> (start: UnsafeRawBufferPointer, end: UnsafeRawBufferPointer?)
        var current = 0
        /// The first range whose leaf has not been prefetched yet.
        var prefetched = 0

        /// The start of the range the walk is in.
        var start: UnsafeRawBufferPointer { bounds(current).start }
    }

    /// Visits the keys of each of the walk's ranges below `node`, in order;
    /// false when `body` stopped. A merge: the tree is walked once, left to
    /// right, and each range's start is sought in the leaf the walk has
    /// reached, or from the nearest node above it that holds it — not from
    /// the root, as one walk a range would (an `IN` of sorted keys mostly
    /// finds the next one in the same leaf).
    static func forEach(
        _ node: NodeView, in walk: inout RangeWalk,
        _ body: (UnsafeRawBufferPointer, IndexEntry) throws -> Bool
    ) rethrows -> Bool {
        if node.isLeaf {
            var j = 0
            let keys = node.keysBase
            while walk.current < walk.count {
                let (start, end) = walk.bounds(walk.current)
                if let p = start.baseAddress { j = Swift.max(j, node.lowerBound(p, start.count).index) }
                while j < node.count {
                    let s = node.start(j)
                    let key = UnsafeRawBufferPointer(start: keys + s, count: node.end(j) - s)
                    if let end, compareBytes(key, end) >= 0 { break }
                    if try !body(key, node.entry(j)) { return false }
                    j += 1
                }
                // The leaf's end: the range may go on in the next one.
                if j == node.count { return true }
                walk.current += 1
            }
            return true
        }
        guard walk.current < walk.count else { return true }
        let first = walk.start
        var c = first.baseAddress.map { node.childIndex($0, first.count) } ?? 0
        while c < node.count {
            if node.height == 1 { prefetchLeaves(below: node, after: c, &walk) }
            // As a point lookup does: the child's lines loaded together, not
            // one memory round trip per binary-search probe.
            touch(node.childPointer(c), node.childSize(c))
            if try !forEach(node.child(c), in: &walk, body) { return false }
            guard walk.current < walk.count else { return true }
            // The range it stopped in goes on in the next child, or starts further on.
            let start = walk.start
            c = start.baseAddress.map { node.childIndex($0, start.count, atOrAfter: c &+ 1) } ?? c &+ 1
        }
        return true
    }

    /// How many ranges ahead of the one being walked a merge walk
    /// prefetches the leaves of.
    static let rangeWalkLookahead = 4
    /// How much of each such leaf it prefetches: its first KiB (the
    /// header, the slots and the first keys). More lines than that in
    /// flight at once only queue behind one another.
    static let rangeWalkPrefetchBytes = 1024

    /// Starts loading the leaves below `node` (a node just above the
    /// leaves) that the walk's next ranges will be sought in, after child
    /// `c`: an `IN` of keys spread over a large index finds each in a leaf
    /// of its own, and a leaf not in cache is a memory round trip, which the
    /// prefetch overlaps with the work on the ranges before it. A range
    /// that falls in the last child may lie beyond `node`; the next node
    /// prefetches it.
    @inline(__always)
    static func prefetchLeaves(below node: NodeView, after c: Int, _ walk: inout RangeWalk) {
        var last = c
        walk.prefetched = Swift.max(walk.prefetched, walk.current &+ 1)
        let limit = Swift.min(walk.count, walk.current &+ 1 &+ rangeWalkLookahead)
        while walk.prefetched < limit {
            let start = walk.bounds(walk.prefetched).start
            guard let p = start.baseAddress else { break }
            let i = node.childIndex(p, start.count, atOrAfter: last)
            if i > last, let address = node.childAddress(i) {
                prefetch(address, Swift.min(rangeWalkPrefetchBytes, node.childSize(i)))
                last = i
            }
            if i == node.count &- 1 { break }
            walk.prefetched &+= 1
        }
    }

    /// Visits keys < end below `node` in descending order; false when
    /// `body` stopped. A child covers the keys from its separator to the
    /// next one's, so the keys below `end` are in the child `end` would go
    /// to and those before it.
    static func forEachDescending(
        _ node: NodeView, before end: UnsafeRawBufferPointer?,
        _ body: (UnsafeRawBufferPointer, IndexEntry) throws -> Bool
    ) rethrows -> Bool {
        if node.isLeaf {
            var j = end.map { node.lowerBound($0.baseAddress!, $0.count).index } ?? node.count
            let keys = node.keysBase
            while j > 0 {
                j -= 1
                let s = node.start(j)
                if try !body(UnsafeRawBufferPointer(start: keys + s, count: node.end(j) - s), node.entry(j)) {
                    return false
                }
            }
            return true
        }
        guard node.count > 0 else { return true }
        let last = end.map { node.childIndex($0.baseAddress!, $0.count) } ?? node.count - 1
        touch(node.childPointer(last), node.childSize(last))
        for c in stride(from: last, through: 0, by: -1) where try !forEachDescending(node.child(c), before: c == last ? end : nil, body) {
            return false
        }
        return true
    }

    // MARK: Self-check (for tests)

    /// Walks the whole tree and stops the process if a structural rule is
    /// broken: key order, separator bounds, node limits and capacities,
    /// equal leaf depth, child sizes recorded by parents, and `count`.
    func checkInvariants() {
        guard let root else {
            precondition(count == 0, "KeyIndex: count \(count) with no root")
            return
        }
        var total = 0
        var previous: [UInt8]? = nil
        func check(_ node: NodeView, lower: [UInt8]?, upper: [UInt8]?) {
            precondition(node.count <= node.slots && node.byteCount <= node.byteCapacity, "KeyIndex: node over capacity")
            precondition(node.count <= node.capacityLimit, "KeyIndex: node overfull")
            precondition(node.byteCount <= 2 * KeyIndex.maxKeyLength, "KeyIndex: node bytes")
            precondition(node.count == 0 || node.end(node.count - 1) == node.byteCount, "KeyIndex: byte count")
            if node.isLeaf {
                for j in 0..<node.count {
                    let key = node.key(j)
                    precondition(!key.isEmpty, "KeyIndex: empty key")
                    if let previous { precondition(previous.lexicographicallyPrecedes(key), "KeyIndex: keys out of order") }
                    if let lower { precondition(!key.lexicographicallyPrecedes(lower), "KeyIndex: key below its separator") }
                    if let upper { precondition(key.lexicographicallyPrecedes(upper), "KeyIndex: key at or above its separator") }
                    previous = key
                    total += 1
                }
                return
            }
            precondition(node.count >= 1 && node.end(0) == 0, "KeyIndex: interior node without an empty first key")
            for c in 0..<node.count {
                let lo = c == 0 ? lower : node.key(c)
                let hi = c == node.count - 1 ? upper : node.key(c + 1)
                if let lo, let hi { precondition(lo.lexicographicallyPrecedes(hi), "KeyIndex: separators out of order") }
                let child = node.child(c)
                precondition(child.height == node.height - 1, "KeyIndex: child height")
                precondition(node.childSize(c) == child.allocationSize, "KeyIndex: stale child size")
                check(child, lower: lo, upper: hi)
            }
        }
        check(NodeView(root.node), lower: nil, upper: nil)
        precondition(total == count, "KeyIndex: count \(count) but \(total) keys")
    }
}
