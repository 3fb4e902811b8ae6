internal import StrataStore

/// Byte-string keys in order, kept in chunks of a few hundred: inserting
/// or removing a key moves the keys of one chunk, not all of them — so
/// keeping the in-memory store's keys in order as each save writes costs
/// in proportion to what the save wrote, not to the store
/// (``InMemoryRecordStore``). Positions are flat (0..<``count``), as in one
/// sorted array.
struct ChunkedKeyOrder {
    /// A chunk splits in two past this many keys.
    static let chunkLimit = 512

    /// Non-empty chunks, each in order, each wholly below the next.
    private var chunks: [[[UInt8]]] = []
    /// The flat position of each chunk's first key.
    private var starts: [Int] = []
    private(set) var count = 0
    /// How many chunk starts updates have counted again, in all (tests
    /// pin that an update costs what it changed, not the store).
    private(set) var startsCounted = 0

    /// `keys`, which are in order and distinct.
    init(sorted keys: [[UInt8]]) {
        var start = 0
        while start < keys.count {
            let end = min(keys.count, start + Self.chunkLimit / 2)
            chunks.append(Array(keys[start..<end]))
            starts.append(start)
            start = end
        }
        count = keys.count
    }

    /// The flat position of the first key not below `key`.
    func lowerBound(_ key: UnsafeRawBufferPointer) -> Int {
        let c = chunk(for: key)
        guard c < chunks.count else { return count }
        return starts[c] + Self.lowerBound(key, in: chunks[c])
    }

    func lowerBound(_ key: [UInt8]) -> Int {
        key.withUnsafeBytes { lowerBound($0) }
    }

    /// Calls `body` with the keys at flat positions `range`, ascending or
    /// descending, until it returns false; returns whether it never did.
    func forEach<E: Error>(in range: Range<Int>, descending: Bool, _ body: ([UInt8]) throws(E) -> Bool) throws(E) -> Bool {
        guard !range.isEmpty else { return true }
        var c = chunkIndex(atFlat: descending ? range.upperBound - 1 : range.lowerBound)
        var i = (descending ? range.upperBound - 1 : range.lowerBound) - starts[c]
        for _ in 0..<range.count {
            guard try body(chunks[c][i]) else { return false }
            if descending {
                i -= 1
                if i < 0 && c > 0 {
                    c -= 1
                    i = chunks[c].count - 1
                }
            } else {
                i += 1
                if i == chunks[c].count && c + 1 < chunks.count {
                    c += 1
                    i = 0
                }
            }
        }
        return true
    }

    /// Removes `removed` (those among the keys) and inserts `inserted`
    /// (none among them). Each key moves the keys of its chunk; the chunks'
    /// flat starts are counted again once, from the first chunk changed —
    /// not once a key, which made a save of scattered keys cost in
    /// proportion to the store.
    mutating func update(removing removed: some Sequence<[UInt8]>, inserting inserted: some Sequence<[UInt8]>) {
        var firstChanged = chunks.count
        for key in removed {
            guard let c = remove(key) else { continue }
            firstChanged = min(firstChanged, c)
        }
        for key in inserted { firstChanged = min(firstChanged, insert(key)) }
        if firstChanged < chunks.count { renumber(from: firstChanged) }
    }

    /// Inserts `key`, which is not among the keys; returns the chunk it
    /// went into (``starts`` from there on are left to the caller).
    private mutating func insert(_ key: [UInt8]) -> Int {
        guard !chunks.isEmpty else {
            chunks = [[key]]
            starts = [0]
            count = 1
            return 0
        }
        let c = min(key.withUnsafeBytes { chunk(for: $0) }, chunks.count - 1)
        let i = key.withUnsafeBytes { Self.lowerBound($0, in: chunks[c]) }
        chunks[c].insert(key, at: i)
        if chunks[c].count > Self.chunkLimit {
            let upper = Array(chunks[c][(Self.chunkLimit / 2)...])
            chunks[c].removeSubrange((Self.chunkLimit / 2)...)
            chunks.insert(upper, at: c + 1)
            starts.insert(0, at: c + 1)
        }
        count += 1
        return c
    }

    /// Removes `key`, if it is among the keys; returns the chunk it was in
    /// (``starts`` from there on are left to the caller).
    private mutating func remove(_ key: [UInt8]) -> Int? {
        let c = key.withUnsafeBytes { chunk(for: $0) }
        guard c < chunks.count else { return nil }
        let i = key.withUnsafeBytes { Self.lowerBound($0, in: chunks[c]) }
        guard i < chunks[c].count, chunks[c][i] == key else { return nil }
        chunks[c].remove(at: i)
        if chunks[c].isEmpty {
            chunks.remove(at: c)
            starts.remove(at: c)
        }
        count -= 1
        return c
    }

    /// The first chunk whose last key is not below `key` (``chunks``'s
    /// count when every key is below it).
    private func chunk(for key: UnsafeRawBufferPointer) -> Int {
        var low = 0, high = chunks.count
        while low < high {
            let middle = (low + high) / 2
            if chunks[middle][chunks[middle].count - 1].withUnsafeBytes({ compareBytes($0, key) }) < 0 { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The chunk holding flat position `position` (< ``count``).
    private func chunkIndex(atFlat position: Int) -> Int {
        var low = 0, high = starts.count - 1
        while low < high {
            let middle = (low + high + 1) / 2
            if starts[middle] <= position { low = middle } else { high = middle - 1 }
        }
        return low
    }

    /// The flat starts of the chunks from `c` on, after `c` changed.
    private mutating func renumber(from c: Int) {
        var start = c == 0 ? 0 : starts[c - 1] + chunks[c - 1].count
        for k in c..<chunks.count {
            starts[k] = start
            start += chunks[k].count
        }
        startsCounted += chunks.count - c
    }

    /// The position of the first key of `keys` not below `key`.
    private static func lowerBound(_ key: UnsafeRawBufferPointer, in keys: [[UInt8]]) -> Int {
        var low = 0, high = keys.count
        while low < high {
            let middle = (low + high) / 2
            if keys[middle].withUnsafeBytes({ compareBytes($0, key) }) < 0 { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
