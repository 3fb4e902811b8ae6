// Building a KeyIndex from keys already in order, as opening a store does
// with its segments' key tables: the leaves are cut and filled straight
// from the source, several at once, instead of key by key through Builder.
import Dispatch

/// Keys in strictly ascending order with their entries, read by position
/// (a generic parameter rather than closures, so that the build loop is
/// specialized for each source: a call per key would weigh on every open).
package protocol SortedIndexSource: SendableMetatype {
    var count: Int { get }
    func key(_ i: Int) -> UnsafeRawBufferPointer
    func entry(_ i: Int) -> IndexEntry
}

extension KeyIndex {
    /// The index of `source`'s keys, which must be strictly ascending
    /// (checked: a trap otherwise, as `Builder`).
    ///
    /// The leaves are filled in `ways` contiguous runs at once (one per
    /// core): on a store of a million keys, most of what opening it costs.
    /// `source` is read from those threads at once, and must only read.
    package static func build<Source: SortedIndexSource>(_ source: Source, ways: Int) -> KeyIndex {
        let count = source.count
        guard count > 0 else { return KeyIndex() }
        // Each run takes a contiguous range of keys, checks it, cuts it into
        // leaves (up to leafCapacity keys, and key bytes within a node's
        // limit, as Builder cuts them) and fills them. A run's leaves and
        // the separators before each (but its first) are its own.
        let runs = max(1, min(ways, count / (leafCapacity * 64)))
        let results = (0..<runs).map { _ in BulkBuildRun() }
        // The source is only read, from every run at once.
        nonisolated(unsafe) let source = source
        DispatchQueue.concurrentPerform(iterations: runs) { run in
            let range = (count * run / runs)..<(count * (run + 1) / runs)
            let result = results[run]
            var start = range.lowerBound
            // The key before `end`, carried from one step to the next.
            var previous = range.lowerBound > 0 ? source.key(range.lowerBound - 1) : UnsafeRawBufferPointer(start: nil, count: 0)
            while start < range.upperBound {
                var end = start
                var bytes = 0
                while end < range.upperBound, end - start < leafCapacity {
                    let k = source.key(end)
                    precondition(!k.isEmpty && k.count <= maxKeyLength, "KeyIndex: a key is empty or longer than \(maxKeyLength) bytes")
                    if end > 0 { precondition(compare(previous, k) < 0, "KeyIndex.build: keys must be strictly ascending") }
                    if end > start, bytes + k.count > maxNodeBytes { break }
                    previous = k
                    bytes += k.count
                    end += 1
                }
                let node = Node.make(height: 0, slots: end - start, byteCapacity: bytes)
                NodeView(node).fillLeaf(count: end - start, key: { source.key(start &+ $0) }, entry: { source.entry(start &+ $0) })
                if start > range.lowerBound { result.separators.append(between: source.key(start - 1), and: source.key(start)) }
                result.leaves.append(NodeRef(node: node))
                start = end
            }
        }
        var level: [NodeRef] = []
        var separators = Separators()
        for (run, result) in results.enumerated() {
            if run > 0 {
                let first = count * run / runs
                separators.append(between: source.key(first - 1), and: source.key(first))
            }
            level += result.leaves
            separators.append(contentsOf: result.separators)
        }
        return Builder.assemble(leaves: level, separators: separators, count: count)
    }
}

/// What one run of ``KeyIndex/build(_:ways:)`` made.
///
/// `@unchecked Sendable`: written only by the one iteration of
/// `concurrentPerform` that owns the run, and read only after it returns.
final class BulkBuildRun: @unchecked Sendable {
    var leaves: [KeyIndex.NodeRef] = []
    var separators = KeyIndex.Separators()
}
