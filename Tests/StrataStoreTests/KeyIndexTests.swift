import SharedTestSupport
import Testing
@testable import StrataStore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Two fixed seeds, or STRATA_TEST_SEED (the project's convention) to replay
/// or explore one.
private func modelTestSeeds() -> [UInt64] {
    if let text = getenv("STRATA_TEST_SEED").map({ String(cString: $0) }), let seed = UInt64(text) { return [seed] }
    return [0x5EED_0001, 0x5EED_0002]
}

private func entry(_ n: Int) -> IndexEntry {
    IndexEntry(sequence: UInt64(n), file: UInt32(truncatingIfNeeded: n &* 7), block: UInt32(truncatingIfNeeded: n &* 13))
}

/// Big-endian bytes of `n` (ascending when n ascends), with an optional prefix.
private func key(_ n: Int, prefix: [UInt8] = [], width: Int = 4) -> [UInt8] {
    prefix + (0..<width).map { UInt8(truncatingIfNeeded: n >> (8 * (width - 1 - $0))) }
}

/// Every (key, entry) of the index, in order, through forEach.
private func contents(_ index: KeyIndex, from start: [UInt8]? = nil) -> [([UInt8], IndexEntry)] {
    var result: [([UInt8], IndexEntry)] = []
    index.forEach(from: start) { key, entry in
        result.append((Array(key), entry))
        return true
    }
    return result
}

/// Every (key, entry) of the index below `end`, last first, through forEachDescending.
private func descendingContents(_ index: KeyIndex, before end: [UInt8]? = nil) -> [([UInt8], IndexEntry)] {
    var result: [([UInt8], IndexEntry)] = []
    index.forEachDescending(before: end) { key, entry in
        result.append((Array(key), entry))
        return true
    }
    return result
}

/// Every (key, entry) of the index, in order, through a Cursor.
private func cursorContents(_ index: KeyIndex, from start: [UInt8]? = nil) -> [([UInt8], IndexEntry)] {
    var cursor = index.makeCursor(from: start)
    var result: [([UInt8], IndexEntry)] = []
    while let (key, entry) = cursor.next() { result.append((key, entry)) }
    return result
}

private func sameContents(_ a: [([UInt8], IndexEntry)], _ b: [([UInt8], IndexEntry)]) -> Bool {
    a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
}

/// Records where two ordered listings first differ (without printing them whole).
private func expectSame(
    _ a: [([UInt8], IndexEntry)], _ b: [([UInt8], IndexEntry)], _ comment: Comment = "",
    sourceLocation: SourceLocation = #_sourceLocation
) {
    guard !sameContents(a, b) else { return }
    let i = (0..<min(a.count, b.count)).first { a[$0].0 != b[$0].0 || a[$0].1 != b[$0].1 } ?? min(a.count, b.count)
    let left = i < a.count ? "\(a[i])" : "end"
    let right = i < b.count ? "\(b[i])" : "end"
    Issue.record("\(comment) listings differ at \(i) (counts \(a.count), \(b.count)): \(left) vs \(right)",
                 sourceLocation: sourceLocation)
}

private func sorted(_ model: [[UInt8]: IndexEntry], from start: [UInt8]? = nil) -> [([UInt8], IndexEntry)] {
    model.filter { start == nil || !$0.key.lexicographicallyPrecedes(start!) }
        .sorted { $0.key.lexicographicallyPrecedes($1.key) }
        .map { ($0.key, $0.value) }
}

/// Runs `body` with `keys` as raw buffers valid for the call.
private func withKeys<R>(_ keys: [[UInt8]], _ body: ([UnsafeRawBufferPointer]) -> R) -> R {
    let buffers = keys.map { k -> UnsafeMutableRawBufferPointer in
        let b = UnsafeMutableRawBufferPointer.allocate(byteCount: k.count, alignment: 1)
        b.copyBytes(from: k)
        return b
    }
    defer { buffers.forEach { $0.deallocate() } }
    return body(buffers.map { UnsafeRawBufferPointer($0) })
}

@Suite("KeyIndex")
struct KeyIndexTests {
    @Test func entryIsSixteenBytes() {
        #expect(MemoryLayout<IndexEntry>.stride == 16)
    }

    @Test func emptyIndex() {
        let index = KeyIndex()
        #expect(index.count == 0)
        #expect(index.isEmpty)
        #expect(index.lookup([1, 2, 3]) == nil)
        #expect(contents(index).isEmpty)
        #expect(contents(index, from: [5]).isEmpty)
        #expect(cursorContents(index).isEmpty)
        #expect(cursorContents(index, from: [5]).isEmpty)
        #expect(index.memoryFootprint == 0)
        var copy = index
        #expect(copy.remove([1]) == nil)
        let replacedInEmpty = copy.replace([1], expected: entry(1), with: entry(2))
        #expect(!replacedInEmpty)
        index.checkInvariants()
    }

    @Test func insertOverwriteRemoveReplace() {
        var index = KeyIndex()
        #expect(index.insert([3], entry(3)) == nil)
        #expect(index.insert([1], entry(1)) == nil)
        #expect(index.insert([2], entry(2)) == nil)
        #expect(index.insert([2], entry(20)) == entry(2))
        #expect(index.count == 3)
        #expect(index.lookup([2]) == entry(20))
        let wrongExpectation = index.replace([2], expected: entry(2), with: entry(21))
        #expect(!wrongExpectation)
        #expect(index.lookup([2]) == entry(20))
        let rightExpectation = index.replace([2], expected: entry(20), with: entry(21))
        #expect(rightExpectation)
        #expect(index.lookup([2]) == entry(21))
        let absentKey = index.replace([9], expected: entry(21), with: entry(22))
        #expect(!absentKey)
        #expect(index.lookup([9]) == nil)
        #expect(index.remove([2]) == entry(21))
        #expect(index.remove([2]) == nil)
        #expect(index.count == 2)
        #expect(index.remove([1]) == entry(1))
        #expect(index.remove([3]) == entry(3))
        #expect(index.count == 0)
        #expect(contents(index).isEmpty)
        index.checkInvariants()
    }

    /// Unsigned bytes, then the shorter key first: memcmp order.
    @Test func keyOrderIsUnsignedLexicographic() {
        let keys: [[UInt8]] = [
            [0xFF], [0x00], [0x7F], [0x80], [0x01, 0x00], [0x01], [0x01, 0xFF], [0x00, 0x00, 0x00],
            Array(repeating: 0xAB, count: 9), Array(repeating: 0xAB, count: 8), Array(repeating: 0xAB, count: 17),
            Array(repeating: 0xAB, count: 16) + [0x00], Array(repeating: 0xAB, count: 8) + [0xFF],
        ]
        var index = KeyIndex()
        for (n, k) in keys.enumerated() { index.insert(k, entry(n)) }
        let expected = keys.sorted { $0.lexicographicallyPrecedes($1) }
        #expect(contents(index).map(\.0) == expected)
        #expect(cursorContents(index).map(\.0) == expected)
        for (n, k) in keys.enumerated() { #expect(index.lookup(k) == entry(n)) }
        #expect(index.lookup([0x01, 0x00, 0x00]) == nil)
        #expect(index.lookup(Array(repeating: 0xAB, count: 10)) == nil)
    }

    /// The word-at-a-time comparison (with its overlapping last word for
    /// common prefixes of 8 to 16 bytes) orders every pair of keys as memcmp
    /// then length does: keys of 0 to 40 bytes over a three-letter alphabet,
    /// so that most pairs share long prefixes and differ at every position.
    @Test func compareAgreesWithLexicographicOrder() {
        var rng = SeededGenerator(seed: 29)
        let alphabet: [UInt8] = [0x00, 0x7F, 0xFF]
        let keys = (0..<600).map { _ in (0..<Int(rng.next() % 41)).map { _ in alphabet[Int(rng.next() % 3)] } }
        var checked = 0
        for a in keys {
            for b in keys.prefix(200) {
                let expected = a == b ? 0 : (a.lexicographicallyPrecedes(b) ? -1 : 1)
                let got = a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in KeyIndex.compare(pa, pb) } }
                if got.signum() != expected {
                    Issue.record("compare(\(a), \(b)) = \(got), expected the sign of \(expected)")
                    return
                }
                checked += 1
            }
        }
        #expect(checked == 120_000)
    }

    @Test func forEachAndCursorFromStartKeys() {
        var index = KeyIndex()
        // Even numbers 0, 2, ..., 19_998 as 4-byte big-endian keys: many leaves.
        for n in stride(from: 0, to: 20_000, by: 2) { index.insert(key(n), entry(n)) }
        func check(_ start: [UInt8]?, first: Int?, count: Int, _ comment: Comment) {
            let viaForEach = contents(index, from: start)
            let viaCursor = cursorContents(index, from: start)
            #expect(viaForEach.count == count, comment)
            #expect(viaForEach.first.map(\.0) == first.map { key($0) }, comment)
            expectSame(viaForEach, viaCursor, comment)
        }
        check(nil, first: 0, count: 10_000, "all")
        check(key(0), first: 0, count: 10_000, "first key, present")
        check([0], first: 0, count: 10_000, "before all (a prefix of the first key)")
        check(key(1234), first: 1234, count: 10_000 - 617, "present")
        check(key(1235), first: 1236, count: 10_000 - 618, "absent")
        check(key(1234) + [0], first: 1236, count: 10_000 - 618, "absent, just after a present key")
        check(key(19_998), first: 19_998, count: 1, "last key")
        check(key(19_999), first: nil, count: 0, "after all")
        check([0xFF], first: nil, count: 0, "far after all")
        check([], first: 0, count: 10_000, "empty start means all")

        // Early stop: forEach stops when body returns false.
        var visited = 0
        index.forEach(from: key(100)) { _, _ in
            visited += 1
            return visited < 5
        }
        #expect(visited == 5)
    }

    /// Randomized model test against a Dictionary: insert, overwrite, remove
    /// and compare-and-set on keys of 1...64 bytes plus some ~5,000-byte keys
    /// (so nodes also split and merge by bytes), with the whole order checked
    /// periodically through forEach and Cursor.
    @Test(arguments: modelTestSeeds())
    func randomizedAgainstDictionary(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        // A fixed universe of keys, so operations hit existing keys often.
        // Few distinct byte values make long shared prefixes.
        var universe: [[UInt8]] = []
        var seen = Set<[UInt8]>()
        while universe.count < 6_000 {
            let long = rng.next() % 100 == 0
            let length = long ? 4_900 + Int(rng.next() % 200) : 1 + Int(rng.next() % 64)
            let alphabet = UInt64(1 + rng.next() % 4)
            let k = (0..<length).map { _ in UInt8(truncatingIfNeeded: rng.next() % alphabet &* 61) }
            if seen.insert(k).inserted { universe.append(k) }
        }

        var index = KeyIndex()
        var model: [[UInt8]: IndexEntry] = [:]
        var snapshots: [(KeyIndex, [([UInt8], IndexEntry)])] = []
        let operations = 200_000
        for step in 0..<operations {
            // Phases: grow, churn, shrink, so trees grow and collapse again.
            let phase = (step / 25_000) % 4
            let insertWeight: UInt64 = [70, 40, 15, 40][phase]
            let k = universe[Int(rng.next() % UInt64(universe.count))]
            let roll = rng.next() % 100
            let e = entry(step)
            if roll < insertWeight {
                let got = index.insert(k, e)
                let want = model.updateValue(e, forKey: k)
                guard got == want else {
                    Issue.record("seed \(seed) step \(step): insert returned \(String(describing: got)), expected \(String(describing: want))")
                    return
                }
            } else if roll < 85 {
                let got = index.remove(k)
                let want = model.removeValue(forKey: k)
                guard got == want else {
                    Issue.record("seed \(seed) step \(step): remove returned \(String(describing: got)), expected \(String(describing: want))")
                    return
                }
            } else if roll < 95 {
                // Compare-and-set, with the right expectation half the time.
                let expected = (rng.next() % 2 == 0 ? model[k] : nil) ?? entry(Int(rng.next() % 1000))
                let got = k.withUnsafeBytes { index.replace($0, expected: expected, with: e) }
                let want = model[k] == expected
                if want { model[k] = e }
                guard got == want else {
                    Issue.record("seed \(seed) step \(step): replace returned \(got), expected \(want)")
                    return
                }
            } else {
                guard index.lookup(k) == model[k] else {
                    Issue.record("seed \(seed) step \(step): lookup disagrees with the model")
                    return
                }
            }
            guard index.count == model.count else {
                Issue.record("seed \(seed) step \(step): count \(index.count), expected \(model.count)")
                return
            }
            if step % 20_000 == 19_999 {
                // Snapshots taken along the way must never change.
                snapshots.append((index, contents(index)))
            }
            if step % 10_000 == 9_999 || step == operations - 1 {
                index.checkInvariants()
                let want = sorted(model)
                guard sameContents(contents(index), want), sameContents(cursorContents(index), want) else {
                    Issue.record("seed \(seed) step \(step): ordered contents disagree with the model")
                    return
                }
                guard sameContents(descendingContents(index), want.reversed()) else {
                    Issue.record("seed \(seed) step \(step): descending contents disagree with the model")
                    return
                }
                let start = universe[Int(rng.next() % UInt64(universe.count))]
                let wantBefore = want.filter { $0.0.lexicographicallyPrecedes(start) }.reversed()
                guard sameContents(descendingContents(index, before: start), Array(wantBefore)) else {
                    Issue.record("seed \(seed) step \(step): descending contents before a key disagree with the model")
                    return
                }
                let wantFrom = sorted(model, from: start)
                guard sameContents(contents(index, from: start), wantFrom),
                      sameContents(cursorContents(index, from: start), wantFrom) else {
                    Issue.record("seed \(seed) step \(step): contents from a start key disagree with the model")
                    return
                }
                for (k, v) in model where index.lookup(k) != v {
                    Issue.record("seed \(seed) step \(step): lookup disagrees with the model")
                    return
                }
            }
        }
        for (n, (snapshot, frozen)) in snapshots.enumerated() {
            snapshot.checkInvariants()
            expectSame(contents(snapshot), frozen, "seed \(seed): snapshot \(n) changed")
            #expect(snapshot.count == frozen.count, "seed \(seed): snapshot \(n) count changed")
        }
    }

    /// The bulk compare-and-set a flush repoints with, against one
    /// `replace` per key on a copy: runs of neighbours, scattered keys,
    /// absent keys, wrong expectations, long keys, and a snapshot taken
    /// before that must not change.
    @Test(arguments: modelTestSeeds())
    func replaceAllEqualsOneReplacePerKey(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        var index = KeyIndex()
        var universe: [[UInt8]] = []
        for n in 0..<40_000 {
            let long = n % 997 == 0
            universe.append(key(n * 2, prefix: long ? [UInt8](repeating: 7, count: 3_000) : [], width: 4))
        }
        universe.sort { $0.lexicographicallyPrecedes($1) }
        for (n, k) in universe.enumerated() where n % 5 != 0 { index.insert(k, entry(n)) }  // a fifth absent
        for round in 0..<20 {
            let snapshot = index, frozen = contents(index)
            // A sorted, distinct pick: a dense run and scattered keys.
            let start = Int(rng.next() % UInt64(universe.count))
            var picked = Set((start..<min(start + Int(rng.next() % 3_000), universe.count)))
            for _ in 0..<Int(rng.next() % 2_000) { picked.insert(Int(rng.next() % UInt64(universe.count))) }
            let picks = picked.sorted()
            let expected = picks.map { n in rng.next() % 4 == 0 ? entry(n + 1) : (index.lookup(universe[n]) ?? entry(n)) }
            let replacement = picks.map { entry($0 + 1_000_000 * (round + 1)) }

            var oneByOne = index
            var missedOneByOne = 0
            for (i, n) in picks.enumerated() where !oneByOne.replace(universe[n], expected: expected[i], with: replacement[i]) {
                missedOneByOne += 1
            }
            let missed = withKeys(picks.map { universe[$0] }) { keys in
                index.replaceAll(count: keys.count, key: { keys[$0] }, expected: { expected[$0] }, replacement: { replacement[$0] })
            }
            #expect(missed == missedOneByOne, "seed \(seed) round \(round)")
            index.checkInvariants()
            expectSame(contents(index), contents(oneByOne), "seed \(seed) round \(round)")
            expectSame(contents(snapshot), frozen, "seed \(seed) round \(round): the snapshot changed")
        }
    }

    /// An ascending run inserted at once, against one `insert` per key on
    /// a copy: runs of neighbours (new keys between stored ones, stored
    /// keys overwritten, appends past the last), scattered keys, long keys
    /// that fill leaves by bytes, over an index built in bulk (leaves
    /// with no spare room) and one grown by inserts, with a snapshot taken
    /// before that must not change.
    @Test(arguments: modelTestSeeds())
    func insertAscendingEqualsOneInsertPerKey(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        // Even numbers stored at first, odd ones new; every 499th key long.
        let universe = (0..<30_000).map { n in key(n, prefix: n % 499 == 0 ? [UInt8](repeating: 7, count: 3_000) : [], width: 4) }
            .sorted { $0.lexicographicallyPrecedes($1) }
        let stored = universe.enumerated().filter { $0.offset % 2 == 0 && $0.offset < 25_000 }.map(\.element)
        let source = ArraySource(stored)
        defer { source.base.deallocate() }
        var built = KeyIndex.build(source, ways: 2)
        var grown = KeyIndex()
        for (n, k) in stored.enumerated() { grown.insert(k, entry(n)); built.insert(k, entry(n)) }
        for var index in [built, grown] {
            for round in 0..<15 {
                let snapshot = index, frozen = contents(index)
                let start = Int(rng.next() % UInt64(universe.count))
                var picked = Set(start..<min(start + Int(rng.next() % 4_000), universe.count))
                for _ in 0..<Int(rng.next() % 500) { picked.insert(Int(rng.next() % UInt64(universe.count))) }
                let picks = picked.sorted()
                let entries = picks.map { entry($0 + 1_000_000 * (round + 1)) }

                var oneByOne = index
                let replacedOneByOne = zip(picks, entries).compactMap { oneByOne.insert(universe[$0], $1) }
                var replaced: [IndexEntry] = []
                withKeys(picks.map { universe[$0] }) { keys in
                    index.insertAscending(count: keys.count, key: { keys[$0] }, entry: { entries[$0] }) { replaced.append($0) }
                }
                index.checkInvariants()
                #expect(index.count == oneByOne.count, "seed \(seed) round \(round)")
                #expect(replaced == replacedOneByOne, "seed \(seed) round \(round)")
                expectSame(contents(index), contents(oneByOne), "seed \(seed) round \(round)")
                expectSame(contents(snapshot), frozen, "seed \(seed) round \(round): the snapshot changed")
                for n in picks.prefix(50) { #expect(index.lookup(universe[n]) == oneByOne.lookup(universe[n])) }
            }
        }
    }

    @Test func insertAscendingRefusesKeysOutOfOrder() async {
        await #expect(processExitsWith: .failure) {
            var index = KeyIndex()
            let keys: [[UInt8]] = [[1], [3], [2]]
            withKeys(keys) { k in index.insertAscending(count: 3, key: { k[$0] }, entry: { _ in IndexEntry(sequence: 1, file: 1, block: 1) }) { _ in } }
        }
    }

    @Test func copyIsAnIndependentSnapshot() {
        var index = KeyIndex()
        for n in 0..<30_000 { index.insert(key(n * 3), entry(n)) }
        let snapshot = index
        let frozen = contents(snapshot)
        var cursor = snapshot.makeCursor(from: key(3_000))
        var cursorSeen: [([UInt8], IndexEntry)] = []
        for _ in 0..<100 { cursorSeen.append(cursor.next()!) }

        // Mutate the original heavily: overwrite, insert between, remove.
        for n in 0..<30_000 {
            index.insert(key(n * 3), entry(n + 1_000_000))
            index.insert(key(n * 3 + 1), entry(n))
            if n % 2 == 0 { index.remove(key(n * 3)) }
        }
        index.checkInvariants()
        #expect(index.count == 45_000)
        #expect(index.lookup(key(3)) == entry(1 + 1_000_000))

        // The snapshot, and a cursor made from it before, saw none of it.
        snapshot.checkInvariants()
        #expect(snapshot.count == 30_000)
        expectSame(contents(snapshot), frozen)
        #expect(snapshot.lookup(key(3)) == entry(1))
        #expect(snapshot.lookup(key(1)) == nil)
        while let next = cursor.next() { cursorSeen.append(next) }
        expectSame(cursorSeen, Array(frozen[1_000...]))

        // And mutating the snapshot's copy leaves the original alone.
        var other = snapshot
        for n in 0..<30_000 { other.remove(key(n * 3)) }
        #expect(other.count == 0)
        expectSame(contents(snapshot), frozen)
        #expect(index.count == 45_000)
    }

    @Test func cursorOutlivesItsIndex() {
        var cursor: KeyIndex.Cursor
        do {
            var index = KeyIndex()
            for n in 0..<5_000 { index.insert(key(n), entry(n)) }
            cursor = index.makeCursor(from: key(4_990))
            index = KeyIndex()
            #expect(index.count == 0)
        }
        var seen = 0
        while let (k, e) = cursor.next() {
            #expect(k == key(4_990 + seen) && e == entry(4_990 + seen))
            seen += 1
        }
        #expect(seen == 10)
    }

    /// One task mutates the index while others read snapshots of it; run
    /// under `swift test --sanitize=thread` this also checks that no
    /// mutation writes into a node a snapshot can see.
    @Test func snapshotsReadWhileOriginalIsMutated() async {
        var index = KeyIndex()
        for n in 0..<20_000 { index.insert(key(n * 2), entry(n)) }
        for round in 0..<4 {
            let snapshot = index
            let frozen = contents(snapshot)
            let writer = index
            async let mutated: KeyIndex = Task.detached {
                var index = writer
                var rng = SeededGenerator(seed: UInt64(round))
                for step in 0..<20_000 {
                    let k = key(Int(rng.next() % 50_000))
                    switch rng.next() % 3 {
                    case 0: index.insert(k, entry(step + 1_000_000))
                    case 1: index.remove(k)
                    default: _ = k.withUnsafeBytes { index.replace($0, expected: entry(step), with: entry(step + 1)) }
                    }
                }
                return index
            }.value
            async let readerOK: Bool = Task.detached {
                var ok = true
                for pass in 0..<3 {
                    ok = ok && sameContents(contents(snapshot), frozen)
                    ok = ok && sameContents(cursorContents(snapshot, from: pass == 1 ? key(777) : nil),
                                            pass == 1 ? Array(frozen.drop { $0.0.lexicographicallyPrecedes(key(777)) }) : frozen)
                    for (k, e) in frozen.prefix(2_000) where snapshot.lookup(k) != e { ok = false }
                }
                return ok
            }.value
            let (result, ok) = await (mutated, readerOK)
            #expect(ok, "round \(round): a snapshot changed while the original was mutated")
            result.checkInvariants()
            snapshot.checkInvariants()
            expectSame(contents(snapshot), frozen)
            index = result
        }
    }

    @Test func builderEqualsIncrementalInsert() {
        var rng = SeededGenerator(seed: 7)
        for size in [0, 1, 31, 32, 33, 1_000, 50_000] {
            var keys = Set<[UInt8]>()
            while keys.count < size {
                let length = rng.next() % 50 == 0 ? 3_000 + Int(rng.next() % 3_000) : 1 + Int(rng.next() % 24)
                keys.insert((0..<length).map { _ in UInt8(truncatingIfNeeded: rng.next() % 3 &* 100) })
            }
            let ordered = keys.sorted { $0.lexicographicallyPrecedes($1) }
            var builder = KeyIndex.Builder()
            var incremental = KeyIndex()
            for (n, k) in ordered.enumerated() {
                builder.append(k, entry(n))
                incremental.insert(k, entry(n))
            }
            var built = builder.build()
            built.checkInvariants()
            #expect(built.count == size)
            expectSame(contents(built), contents(incremental), "size \(size)")
            expectSame(cursorContents(built), contents(incremental), "size \(size)")
            for (n, k) in ordered.enumerated() where built.lookup(k) != entry(n) {
                Issue.record("size \(size): lookup of key \(n) in the built index")
                break
            }
            // A built index is an ordinary one: it takes inserts and removes.
            for (n, k) in ordered.enumerated() where n % 3 == 0 {
                #expect(built.remove(k) == incremental.remove(k))
            }
            for n in 0..<200 {
                #expect(built.insert(key(n, prefix: [0x42]), entry(n)) == incremental.insert(key(n, prefix: [0x42]), entry(n)))
            }
            built.checkInvariants()
            #expect(built.count == incremental.count)
            expectSame(contents(built), contents(incremental), "size \(size), after edits")
            // The builder starts over after build().
            #expect(builder.build().count == 0)
        }
    }

    /// Keys held in arrays, for ``KeyIndex/build(_:ways:)``.
    struct ArraySource: SortedIndexSource {
        let keys: [[UInt8]]
        let base: UnsafeMutableRawPointer
        let starts: [Int]

        init(_ keys: [[UInt8]]) {
            self.keys = keys
            let total = keys.reduce(0) { $0 + $1.count }
            let base = UnsafeMutableRawPointer.allocate(byteCount: max(total, 1), alignment: 8)
            var starts: [Int] = []
            var offset = 0
            for k in keys {
                starts.append(offset)
                k.withUnsafeBytes { (base + offset).copyMemory(from: $0.baseAddress!, byteCount: k.count) }
                offset += k.count
            }
            self.base = base
            self.starts = starts
        }

        var count: Int { keys.count }
        func key(_ i: Int) -> UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base + starts[i], count: keys[i].count) }
        func entry(_ i: Int) -> IndexEntry { StrataStoreTests.entry(i) }
    }

    /// The bulk build (opening a store) makes the same index as inserts,
    /// however many runs fill its leaves, with leaves cut by bytes too.
    @Test func bulkBuildEqualsIncrementalInsert() {
        var rng = SeededGenerator(seed: 11)
        for size in [0, 1, 31, 32, 33, 4_097, 20_000] {
            var keys = Set<[UInt8]>()
            while keys.count < size {
                let length = rng.next() % 50 == 0 ? 3_000 + Int(rng.next() % 3_000) : 1 + Int(rng.next() % 24)
                keys.insert((0..<length).map { _ in UInt8(truncatingIfNeeded: rng.next() % 3 &* 100) })
            }
            let ordered = keys.sorted { $0.lexicographicallyPrecedes($1) }
            var incremental = KeyIndex()
            for (n, k) in ordered.enumerated() { incremental.insert(k, entry(n)) }
            let source = ArraySource(ordered)
            defer { source.base.deallocate() }
            for ways in [1, 2, 3, 8] {
                var built = KeyIndex.build(source, ways: ways)
                built.checkInvariants()
                #expect(built.count == size)
                expectSame(contents(built), contents(incremental), "size \(size), \(ways) ways")
                expectSame(cursorContents(built), contents(incremental), "size \(size), \(ways) ways")
                for (n, k) in ordered.enumerated() where built.lookup(k) != entry(n) {
                    Issue.record("size \(size), \(ways) ways: lookup of key \(n) in the built index")
                    break
                }
                for n in 0..<100 { built.insert(key(n, prefix: [0x42]), entry(n)) }
                built.checkInvariants()
            }
        }
    }

    @Test func bulkBuildRejectsKeysOutOfOrder() async {
        await #expect(processExitsWith: .failure) {
            let source = ArraySource([[1], [3], [2]])
            _ = KeyIndex.build(source, ways: 1)
        }
    }

    @Test func memoryFootprintGrowsWithCount() {
        var index = KeyIndex()
        #expect(index.memoryFootprint == 0)
        var previous = 0
        for n in 0..<100_000 {
            index.insert(key(n, width: 16), entry(n))
            if n == 0 || n == 999 || n == 9_999 || n == 99_999 {
                let footprint = index.memoryFootprint
                #expect(footprint > previous)
                #expect(footprint >= (n + 1) * (16 + 16))  // at least the keys and entries
                previous = footprint
            }
        }
        var builder = KeyIndex.Builder()
        for n in 0..<100_000 { builder.append(key(n, width: 16), entry(n)) }
        let built = builder.build()
        #expect(built.memoryFootprint > 0)
        #expect(built.memoryFootprint <= index.memoryFootprint)
    }

    @Test func longKeysSplitNodesByBytes() {
        var index = KeyIndex()
        var model: [[UInt8]: IndexEntry] = [:]
        // 16 KiB keys (the maximum) differing only at the end, mixed with short ones.
        for n in 0..<60 {
            let long = Array(repeating: UInt8(0x61), count: KeyIndex.maxKeyLength - 2) + [UInt8(n / 256), UInt8(n % 256)]
            index.insert(long, entry(n))
            model[long] = entry(n)
            index.insert(key(n), entry(n + 1000))
            model[key(n)] = entry(n + 1000)
        }
        index.checkInvariants()
        expectSame(contents(index), sorted(model))
        for (k, e) in model { #expect(index.lookup(k) == e) }
        for (n, k) in model.keys.enumerated() where n % 2 == 0 {
            #expect(index.remove(k) == model.removeValue(forKey: k))
        }
        index.checkInvariants()
        expectSame(cursorContents(index), sorted(model))
    }

    @Test func ascendingAndDescendingInserts() {
        var ascending = KeyIndex()
        var descending = KeyIndex()
        for n in 0..<20_000 {
            ascending.insert(key(n), entry(n))
            descending.insert(key(19_999 - n), entry(19_999 - n))
        }
        ascending.checkInvariants()
        descending.checkInvariants()
        expectSame(contents(ascending), contents(descending))
        // Right-biased splits leave full leaves behind an append.
        #expect(ascending.memoryFootprint < descending.memoryFootprint)
        for n in 0..<20_000 { ascending.remove(key(n)) }
        #expect(ascending.count == 0)
        #expect(ascending.memoryFootprint == 0)
    }

    @Test func emptyKeyIsRejected() async {
        await #expect(processExitsWith: .failure) {
            var index = KeyIndex()
            index.insert([], IndexEntry(sequence: 1, file: 1, block: 1))
        }
    }

    @Test func builderRejectsKeysOutOfOrder() async {
        await #expect(processExitsWith: .failure) {
            var builder = KeyIndex.Builder()
            builder.append([2], IndexEntry(sequence: 1, file: 1, block: 1))
            builder.append([1], IndexEntry(sequence: 1, file: 1, block: 1))
        }
    }
}

/// The merge walk over many ranges (`forEach(inRanges:bounds:_:)`, what an
/// `IN` of many keys reads) against one walk per range from the root.
@Suite struct KeyIndexRangeWalkTests {
    /// Keys of 1 to 3 bytes from a small alphabet (so ranges start on keys,
    /// between keys, and past the last), in trees from one leaf to three levels.
    @Test(arguments: [(40, UInt64(1)), (3_000, 2), (40_000, 3)])
    func aMergeWalkVisitsWhatAWalkPerRangeVisits(size: Int, seed: UInt64) {
        var generator = SeededGenerator(seed: seed)
        let alphabet: [UInt8] = [0, 1, 2, 0x41, 0x42, 0xFE, 0xFF]
        func randomKey() -> [UInt8] {
            (0..<Int.random(in: 1...3, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }
        }
        var index = KeyIndex()
        for n in 0..<size {
            // Wider keys too, so that leaves hold many and some ranges span several.
            index.insert(randomKey() + withUnsafeBytes(of: UInt32(n).bigEndian, Array.init), entry(n))
        }
        for trial in 0..<60 {
            // Ascending, disjoint: sorted distinct cut points, some skipped;
            // only the last range may have no end.
            let cuts = Set((0..<Int.random(in: 1...80, using: &generator)).map { _ in randomKey() })
                .sorted { $0.lexicographicallyPrecedes($1) }
            var ranges: [(start: [UInt8], end: [UInt8]?)] = []
            var i = 0
            while i < cuts.count {
                let end = i + 1 < cuts.count ? cuts[i + 1] : nil
                ranges.append((cuts[i], end))
                i += Int.random(in: 2...3, using: &generator)
            }
            var expected: [([UInt8], IndexEntry)] = []
            for range in ranges {
                index.forEach(from: range.start) { key, entry in
                    if let end = range.end, !Array(key).lexicographicallyPrecedes(end) { return false }
                    expected.append((Array(key), entry))
                    return true
                }
            }
            let stopAfter = trial % 4 == 1 ? Int.random(in: 0...max(0, expected.count), using: &generator) : Int.max
            var walked: [([UInt8], IndexEntry)] = []
            withKeys(ranges.map(\.start)) { starts in
                withKeys(ranges.map { $0.end ?? [] }) { ends in
                    index.forEach(inRanges: ranges.count, bounds: { (starts[$0], ranges[$0].end == nil ? nil : ends[$0]) }) { key, entry in
                        guard walked.count < stopAfter else { return false }
                        walked.append((Array(key), entry))
                        return walked.count < stopAfter
                    }
                }
            }
            #expect(sameContents(walked, Array(expected.prefix(stopAfter))), "size \(size), trial \(trial): \(ranges.count) ranges")
        }
    }

    /// The merge walk's search for the child holding its next range, from
    /// the child it reached (galloping), against a search of the whole node:
    /// the same child, or the one it started from when the key lies before.
    @Test func aSearchFromAChildFindsWhatASearchOfTheNodeFinds() {
        var generator = SeededGenerator(seed: 4)
        var index = KeyIndex()
        for n in 0..<20_000 {
            index.insert(withUnsafeBytes(of: UInt64.random(in: 0...UInt64(n) * 1_000, using: &generator).bigEndian, Array.init), entry(n))
        }
        let root = index.root!.node
        let node = KeyIndex.NodeView(root)
        #expect(!node.isLeaf && node.count > 8)
        var checked = 0
        defer { withExtendedLifetime(root) {} }
        for _ in 0..<400 {
            let key = withUnsafeBytes(of: UInt64.random(in: 0...20_000_000, using: &generator).bigEndian, Array.init)
            key.withUnsafeBytes { key in
                let whole = node.childIndex(key.baseAddress!, key.count)
                for lo in 0...node.count {
                    #expect(node.childIndex(key.baseAddress!, key.count, atOrAfter: lo) == max(lo, whole), "from \(lo), whole \(whole)")
                    checked += 1
                }
            }
        }
        #expect(checked > 400 * 8)
    }
}
