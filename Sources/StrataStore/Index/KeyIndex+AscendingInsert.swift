// Inserting a run of ascending keys: what a write batch of neighbouring keys
// (an import's, a bulk load's) asks of the index.
//
// An insert walks from the root to a leaf, making each node on the way
// writable; for sequential keys that walk is a large part of a write's
// whole commit. Keys that ascend mostly land in the leaf the previous one
// went to, so after a full insert the run keeps that leaf and its upper
// bound (the nearest separator to its right on the way down) and puts the
// next keys straight into it while they stay below the bound and the leaf
// has room. Whatever does not fit — a key past the bound, a full leaf, a
// split — goes through the full insert, which leaves the path to its leaf
// writable again for the keys after it.

extension KeyIndex {
    /// Inserts or overwrites `count` keys in ascending order: key `i` gets
    /// `entry(i)`. Calls `replaced` with each entry overwritten. The keys
    /// must be strictly ascending, each non-empty and at most
    /// `maxKeyLength` bytes (a key out of order traps).
    ///
    /// The same as `count` calls of ``insert(_:_:)-(UnsafeRawBufferPointer,_)``
    /// in that order, at a fraction of their cost when the keys are
    /// neighbours.
    ///
    /// ```swift
    /// index.insertAscending(count: keys.count, key: { keys[$0] }, entry: { entries[$0] }) { old in dead += 1 }
    /// ```
    package mutating func insertAscending(
        count n: Int,
        key: (Int) -> UnsafeRawBufferPointer,
        entry: (Int) -> IndexEntry,
        replaced: (IndexEntry) -> Void
    ) {
        var i = 0
        // Keys that go into the index one by one before the next try at a
        // leaf: when a walk down to a key's leaf took no key after it (the
        // keys are far apart), the next tries come after 1, 2, 4 ... 64
        // more keys, so that a run of scattered keys pays for a few walks,
        // not one a key.
        var skip = 0, backoff = 1
        while i < n {
            let first = key(i)
            if i > 0 { precondition(Self.compare(key(i - 1), first) < 0, "KeyIndex.insertAscending: keys out of order") }
            if let old = insert(first, entry(i)) { replaced(old) }
            i += 1
            if skip > 0 {
                skip -= 1
                continue
            }
            guard i < n, let root else { continue }
            let taken = i
            // Every node on the path to `first`'s leaf is now referenced by
            // this index alone (the insert made each writable), and nothing
            // below reallocates a node, so unretained views and the
            // separator's bytes stay valid until the next full insert.
            var leaf = NodeView(root.node)
            var bound: (UnsafeRawPointer, Int)? = nil
            while !leaf.isLeaf {
                let c = leaf.childIndex(first.baseAddress!, first.count)
                if c + 1 < leaf.count {
                    let s = leaf.start(c + 1)
                    bound = (UnsafeRawPointer(leaf.keysBase + s), leaf.end(c + 1) - s)
                }
                leaf = leaf.child(c)
            }
            var previous = first
            while i < n {
                let k = key(i)
                precondition(Self.compare(previous, k) < 0 && k.count <= Self.maxKeyLength, "KeyIndex.insertAscending: keys out of order or too long")
                if let (b, bCount) = bound, Self.compare(k.baseAddress!, k.count, b, bCount) >= 0 { break }
                let last = leaf.count - 1
                let (j, found) = leaf.compareKey(last, k.baseAddress!, k.count) < 0
                    ? (last + 1, false)
                    : leaf.lowerBound(k.baseAddress!, k.count)
                if found {
                    replaced(leaf.entry(j))
                } else {
                    // Room without a split or a larger node; else the full insert.
                    guard leaf.count < Self.leafCapacity, leaf.hasRoom(keys: 1, bytes: k.count),
                          leaf.byteCount + k.count <= Self.maxNodeBytes
                    else { break }
                    if j == leaf.count { leaf.appendKey(k) } else { leaf.insertKey(k.baseAddress!, k.count, at: j) }
                    count += 1
                }
                leaf.setEntry(j, entry(i))
                previous = k
                i += 1
            }
            if i == taken {
                skip = backoff
                backoff = min(backoff * 2, 64)
            } else {
                backoff = 1
            }
        }
    }
}
