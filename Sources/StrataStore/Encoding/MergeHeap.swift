/// A binary min-heap of small integers (cursor indices) under a caller's
/// order: the k-way merges of recovery and compaction pop the cursor with the
/// smallest key (and, among equal keys, the newest version) first.
package struct MergeHeap {
    private var items: [Int]
    private let less: (Int, Int) -> Bool

    package init(_ items: [Int], by less: @escaping (Int, Int) -> Bool) {
        self.items = items
        self.less = less
        for i in stride(from: items.count / 2 - 1, through: 0, by: -1) { siftDown(i) }
    }

    package var top: Int? { items.first }

    /// The cursor that would be on top if the top were gone: the smaller of
    /// the top's two children. A merge can take keys from the top alone for
    /// as long as they stay below this cursor's key, with no sift per key.
    package var runnerUp: Int? {
        switch items.count {
        case 0, 1: return nil
        case 2: return items[1]
        default: return less(items[2], items[1]) ? items[2] : items[1]
        }
    }

    /// Re-establishes order after the top cursor advanced.
    package mutating func topChanged() { siftDown(0) }

    /// Removes the top cursor (exhausted).
    package mutating func removeTop() {
        items[0] = items[items.count - 1]
        items.removeLast()
        if !items.isEmpty { siftDown(0) }
    }

    private mutating func siftDown(_ start: Int) {
        var i = start
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < items.count && less(items[l], items[m]) { m = l }
            if r < items.count && less(items[r], items[m]) { m = r }
            if m == i { return }
            items.swapAt(i, m)
            i = m
        }
    }
}
