import Dispatch
import Foundation
import Synchronization
import SharedTestSupport
import Testing

@testable import StrataStore

/// The index checkpoint (`IndexCheckpoint`): a close saves the index over
/// the store's segments, the next open loads it. It must give exactly the
/// index, dead counts and statistics that building from the footers gives,
/// and anything wrong with it must cost nothing but the rebuild.
@Suite struct IndexCheckpointTests {
    /// Options under which even a small store saves a checkpoint.
    static func checkpointing(_ options: StoreOptions = smallOptions()) -> StoreOptions {
        var options = options
        options.indexCheckpointMinimumKeys = 1
        return options
    }

    /// A store of `keys` keys ("key0" → "v0", …), closed, its checkpoint saved.
    static func closedStore(keys: Int, _ name: String = #function) throws -> (ScratchDirectory, StoreOptions) {
        let dir = ScratchDirectory(name)
        var options = checkpointing()
        options.flushOnCloseThreshold = 1  // the close flushes, so that it can save one
        let store = try StrataStore(directory: dir.store, options: options)
        for i in 0..<keys { try store.put("key\(i)", "v\(i)") }
        try store.close()
        return (dir, options)
    }

    /// Records an issue unless `store`'s open found a checkpoint and built
    /// the index from the footers instead, for a reason that mentions `reason`.
    static func expectRefused(_ store: StrataStore, because reason: String, _ note: String) {
        if case .notUsed(let why) = store.recoveryReport.indexCheckpoint {
            #expect(why.contains(reason), "\(note): \(why)")
        } else {
            Issue.record("\(note): the checkpoint was not refused (\(store.recoveryReport.indexCheckpoint))")
        }
    }

    /// Every key and entry of a store's index, in order.
    static func entries(_ store: StrataStore) -> [([UInt8], IndexEntry)] {
        var all: [([UInt8], IndexEntry)] = []
        store.state.withReadLock {
            store.index.checkInvariants()
            store.index.forEach(from: nil) { key, entry in
                all.append((Array(key), entry))
                return true
            }
        }
        return all
    }

    /// A copy of the store's directory without its checkpoint, opened: the
    /// index as the footers build it.
    static func rebuilt(_ directory: String, _ options: StoreOptions) throws -> (StrataStore, ScratchDirectory) {
        let copy = ScratchDirectory("rebuilt")
        try FileManager.default.copyItem(atPath: directory, toPath: copy.store)
        try? FileManager.default.removeItem(atPath: copy.store + "/" + IndexCheckpoint.fileName)
        return (try StrataStore(directory: copy.store, options: options), copy)
    }

    static func expectSameIndex(_ loaded: StrataStore, _ rebuilt: StrataStore, _ note: String) {
        let a = entries(loaded), b = entries(rebuilt)
        #expect(a.count == b.count, "\(note): \(a.count) keys loaded, \(b.count) rebuilt")
        if let i = (0..<min(a.count, b.count)).first(where: { a[$0].0 != b[$0].0 || a[$0].1 != b[$0].1 }) {
            Issue.record("\(note): entry \(i) differs: \(a[i]) loaded, \(b[i]) rebuilt")
        }
        var (s, t) = (loaded.statistics, rebuilt.statistics)
        (s.indexBytes, t.indexBytes) = (0, 0)  // leaves are cut differently
        // The checkpoint carries the dead counts the closing store had, which
        // miss the tombstones a later write of their key made dead (the
        // index holds no tombstones): never more than a rebuild counts.
        #expect(s.deadRecords <= t.deadRecords, "\(note): \(s.deadRecords) dead records loaded, \(t.deadRecords) rebuilt")
        (s.deadRecords, t.deadRecords) = (0, 0)
        (s.cacheHits, s.cacheMisses, s.cacheBytes, t.cacheHits, t.cacheMisses, t.cacheBytes) = (0, 0, 0, 0, 0, 0)
        (s.indexCheckpointChunksUnread, s.indexCheckpointChunksRebuilt) = (0, 0)
        #expect(s == t, "\(note): statistics differ")
    }

    /// Sessions of random puts and deletes, flushes and compactions, each
    /// ending in a close. After each close, the reopened store must have
    /// loaded the checkpoint (when the close could save one) and hold
    /// exactly what a rebuild from the footers holds, and the model.
    @Test(arguments: [5, 23])
    func aReopenedStoreLoadsTheSameIndexTheFootersBuild(seed: UInt64) throws {
        let dir = ScratchDirectory()
        var options = Self.checkpointing()
        options.flushOnCloseThreshold = 1  // every close leaves an empty memtable
        options.automaticCompaction = false  // compactions only where the test asks: the dead counts at close are then known
        var rng = SeededGenerator(seed: seed)
        var model: [[UInt8]: [UInt8]] = [:]
        func key(_ n: UInt64) -> [UInt8] { bytes(String(format: "k%05d", Int(n))) + (n % 7 == 0 ? Array(repeating: 0x2F, count: Int(n % 40)) : []) }
        var saved = false
        var deadAtClose = 0
        for session in 0..<8 {
            let store = try StrataStore(directory: dir.store, options: options)
            #expect(store.recoveryReport.indexCheckpoint == (saved ? .loaded : .absent), "session \(session): \(store.recoveryReport.indexCheckpoint)")
            if saved { #expect(store.statistics.deadRecords == deadAtClose, "session \(session): dead records") }
            if session > 0 {
                let (rebuilt, copy) = try Self.rebuilt(dir.store, options)
                Self.expectSameIndex(store, rebuilt, "seed \(seed) session \(session)")
                try rebuilt.close()
                _ = copy
            }
            for (k, v) in model where try store.get(k) != v { Issue.record("session \(session): \(string(k) ?? "") reads wrong") }
            #expect(store.statistics.keys == model.count)
            for _ in 0..<(200 + Int(rng.next() % 400)) {
                var batch = WriteBatch()
                for _ in 0..<8 {
                    let k = key(rng.next() % 3_000)
                    if rng.next() % 5 == 0 {
                        batch.delete(k)
                        model[k] = nil
                    } else {
                        let v = bytes("s\(session)-\(rng.next() % 1_000)")
                        batch.put(k, v)
                        model[k] = v
                    }
                }
                try store.write(batch)
                if rng.next() % 150 == 0 { try store.flush() }
            }
            if rng.next() % 3 == 0 { try store.compact() }
            try store.flush()
            deadAtClose = store.statistics.deadRecords
            try store.close()
            saved = dir.files().contains(IndexCheckpoint.fileName)
            #expect(saved, "session \(session): no checkpoint after a close that flushed")
        }
    }

    /// A checkpoint of several chunks, loaded by several threads at once,
    /// with keys long enough that leaves are cut by bytes, not by count.
    @Test func aCheckpointOfManyChunksLoadsTheSameIndex() throws {
        let (dir, options) = try Self.manyChunkStore()
        // Each chunk is small (what a first lookup reads), or one leaf of long keys.
        let file = readFileBytes(dir.store + "/" + IndexCheckpoint.fileName)
        let meta = try file.suffix(IndexCheckpoint.trailerSize).withUnsafeBytes { trailer in
            let t = try #require(IndexCheckpoint.decodeTrailer(trailer))
            return try file[Int(t.offset)..<(Int(t.offset) + t.length)].withUnsafeBytes { try IndexCheckpoint.Meta.decode($0).get() }
        }
        #expect(meta.chunks.allSatisfy { $0.length <= IndexCheckpoint.chunkBytes || $0.leafCount == 1 })
        #expect(meta.chunks.contains { $0.leafCount == 1 && $0.length > IndexCheckpoint.chunkBytes }, "no leaf of long keys alone in its chunk")
        let (rebuilt, copy) = try Self.rebuilt(dir.store, options)
        let store = try StrataStore(directory: dir.store, options: options)
        #expect(store.recoveryReport.indexCheckpoint == .loaded)
        #expect(store.statistics.keys == 60_000)
        Self.expectSameIndex(store, rebuilt, "many chunks")
        _ = copy
    }

    /// The key of `manyChunkStore`'s record `n`, and its value.
    static func manyChunkRecord(_ n: Int) -> (key: [UInt8], value: [UInt8]) {
        let long = n % 500 == 0 ? String(repeating: "x", count: 5_000 + n % 3_000) : ""
        return (bytes("key/\(String(n * 7_919 % 60_000, radix: 16))/\(long)padding-to-forty-bytes"), bytes("v\(n)"))
    }

    /// A closed store of 60,000 keys (`manyChunkRecord`), some long enough
    /// that leaves are cut by bytes, not by count, whose checkpoint has
    /// more than three chunks.
    /// The store at `dir` opened through a file system that can be made to
    /// fail, its index loaded from the checkpoint (no chunk read yet).
    static func openThroughFaults(_ dir: ScratchDirectory, _ options: StoreOptions) throws -> (StrataStore, FaultInjectingFileSystem) {
        let fs = FaultInjectingFileSystem()
        var faulty = options
        faulty.fileSystem = fs
        let store = try StrataStore(directory: dir.store, options: faulty)
        #expect(store.recoveryReport.indexCheckpoint == .loaded)
        return (store, fs)
    }

    static func manyChunkStore(_ name: String = #function) throws -> (ScratchDirectory, StoreOptions) {
        let dir = ScratchDirectory(name)
        var options = Self.checkpointing()
        options.flushOnCloseThreshold = 1
        options.logSizeLimit = 16 << 20
        options.segmentSizeLimit = 64 << 20
        do {
            let store = try StrataStore(directory: dir.store, options: options)
            for chunk in 0..<60 {
                var batch = WriteBatch()
                for i in 0..<1_000 {
                    let (key, value) = manyChunkRecord(chunk * 1_000 + i)
                    batch.put(key, value)
                }
                try store.write(batch)
            }
            try store.close()
        }
        let size = (try FileManager.default.attributesOfItem(atPath: dir.store + "/" + IndexCheckpoint.fileName)[.size] as? Int) ?? 0
        #expect(size > 3 * IndexCheckpoint.chunkBytes, "the checkpoint is \(size) bytes: too few chunks")
        return (dir, options)
    }

    /// An open reads no chunk of leaves; a lookup reads the one chunk it
    /// reaches, once; the statistics read none; a walk reads them all.
    @Test func aChunkIsReadWhenALookupFirstReachesIt() throws {
        let (dir, options) = try Self.manyChunkStore()
        let store = try StrataStore(directory: dir.store, options: options)
        #expect(store.recoveryReport.indexCheckpoint == .loaded)
        let arena = try #require(store.index.arena)
        let chunks = arena.chunkCount
        #expect(chunks > 3 && arena.chunksUnread == chunks)
        #expect(store.statistics.keys == 60_000 && store.statistics.indexBytes > 60_000 * 20)
        #expect(store.statistics.indexCheckpointChunksUnread == chunks)
        #expect(arena.chunksUnread == chunks, "the statistics read a chunk")
        let (key, value) = Self.manyChunkRecord(12_345)
        #expect(try store.get(key) == value)
        #expect(arena.chunksUnread == chunks - 1)
        #expect(try store.get(key) == value)
        #expect(try store.get(bytes("key/none")) == nil)
        #expect(arena.chunksUnread >= chunks - 2)
        // A walk in key order reads the chunks after the one it reaches with it, more at each read.
        final class Loads: Sendable { let count = Atomic<Int>(0) }
        let loads = Loads()
        arena.setOnLoad { loads.count.add(1, ordering: .relaxed) }
        var seen = 0
        try store.readView().forEachKey(from: []) { _ in
            seen += 1
            return true
        }
        arena.setOnLoad(nil)
        #expect(seen == 60_000 && arena.chunksUnread == 0)
        #expect(loads.count.load(ordering: .relaxed) * 8 < chunks, "\(loads.count.load(ordering: .relaxed)) reads for \(chunks) chunks")
        #expect(arena.damage.rebuilt == 0 && arena.damage.failure == nil)
        for n in stride(from: 0, to: 60_000, by: 7) where try store.get(Self.manyChunkRecord(n).key) != Self.manyChunkRecord(n).value {
            Issue.record("record \(n) reads wrong")
        }
        try store.close()
    }

    /// A chunk damaged on disk, or one whose read fails after the open, is
    /// rebuilt from the segments when a lookup first reaches it: every key
    /// reads right, and nothing is reported damaged.
    @Test func aChunkThatCannotBeReadIsRebuiltFromTheSegments() throws {
        let (dir, options) = try Self.manyChunkStore()
        let path = dir.store + "/" + IndexCheckpoint.fileName
        let good = readFileBytes(path)
        func expectEveryRecord(_ store: StrataStore, _ note: String) throws {
            for n in 0..<60_000 where try store.get(Self.manyChunkRecord(n).key) != Self.manyChunkRecord(n).value {
                Issue.record("\(note): record \(n) reads wrong")
                return
            }
        }
        // A byte of the second chunk, and the last byte of the last.
        let meta = try good.suffix(IndexCheckpoint.trailerSize).withUnsafeBytes { trailer in
            let t = try #require(IndexCheckpoint.decodeTrailer(trailer))
            return try good[Int(t.offset)..<(Int(t.offset) + t.length)].withUnsafeBytes { try IndexCheckpoint.Meta.decode($0).get() }
        }
        for (name, offset) in [("the second chunk", Int(meta.chunks[1].offset) + 1_000), ("the last chunk's end", Int(meta.chunks.last!.offset) + meta.chunks.last!.length - 1)] {
            var bytes = good
            bytes[offset] ^= 0x10
            writeFileBytes(path, bytes)
            let store = try StrataStore(directory: dir.store, options: options)
            #expect(store.recoveryReport.indexCheckpoint == .loaded, "\(name)")
            try expectEveryRecord(store, name)
            let damage = try #require(store.index.arena).damage
            #expect(damage.rebuilt == 1 && damage.failure == nil, "\(name): \(damage)")
            #expect(store.statistics.indexCheckpointChunksRebuilt == 1 && store.statistics.indexCheckpointChunksUnread == 0, "\(name)")
            try store.close()
            // `strata-dump verify` notes the damage; it is no problem: reads rebuild it.
            let verified = try StoreInspector(directory: dir.store).verify()
            #expect(verified.problems.isEmpty, "\(name): \(verified.problems)")
            #expect(verified.notes.contains { $0.contains(IndexCheckpoint.fileName) && $0.contains("damaged") }, "\(name): \(verified.notes)")
        }
        writeFileBytes(path, good)
        #expect(!(try StoreInspector(directory: dir.store).verify().notes.contains { $0.contains(IndexCheckpoint.fileName) }),
                "a good checkpoint noted")
        // Every read of the file fails once the store is open.
        writeFileBytes(path, good)
        let (store, fs) = try Self.openThroughFaults(dir, options)
        fs.injectAlways(.error(EIO), on: .read, pathContains: "/" + IndexCheckpoint.fileName)
        try expectEveryRecord(store, "reads failing")
        let arena = try #require(store.index.arena)
        #expect(arena.chunksUnread == 0 && arena.damage.rebuilt == arena.chunkCount && arena.damage.failure == nil, "\(arena.damage)")
        #expect(fs.injectedFaultCount > 0)
        try store.close()
    }

    /// A chunk that fails once another checkpoint has taken the file's
    /// place (a snapshot that outlived its store, a close that wrote a new
    /// one) leaves that file alone: a failure removes only the checkpoint
    /// the store opened, so that the next open rebuilds — never a newer one.
    @Test(arguments: [false, true])
    func aChunkThatFailsRemovesOnlyTheCheckpointItCameFrom(replaced: Bool) throws {
        let (dir, options) = try Self.manyChunkStore("\(#function)-\(replaced)")
        let path = dir.store + "/" + IndexCheckpoint.fileName
        let (store, fs) = try Self.openThroughFaults(dir, options)
        if replaced {
            // As a close writes one: a new file renamed over the path.
            writeFileBytes(path + ".new", readFileBytes(path))
            #expect(rename(path + ".new", path) == 0)
        }
        fs.injectAlways(.error(EIO), on: .read, pathContains: "/" + IndexCheckpoint.fileName)
        fs.injectAlways(.error(EIO), on: .open, pathContains: ".seg")
        // Its chunk unread, then neither readable nor rebuildable.
        #expect(throws: StoreError.self) { _ = try store.get(Self.manyChunkRecord(59_999).key) }
        #expect(store.index.damage != nil)
        #expect(FileManager.default.fileExists(atPath: path) == replaced, replaced ? "the newer checkpoint was removed" : "the damaged one stays")
        fs.clearFaults()
        try? store.close()
    }

    /// A write whose keys reach unread chunks reads them before it takes the
    /// `state` lock, so that readers never wait for it to read one (Rule 5).
    /// The seam tries the lock for writing as each chunk starts to load:
    /// that fails while the loading thread (or any other) holds it.
    @Test func aWriteReadsTheChunksItReachesBeforeItTakesTheStateLock() throws {
        let (dir, options) = try Self.manyChunkStore()
        let store = try StrataStore(directory: dir.store, options: options)
        let arena = try #require(store.index.arena)
        final class Loads: Sendable {
            let all = Atomic<Int>(0), underStateLock = Atomic<Int>(0)
        }
        let loads = Loads()
        arena.setOnLoad {
            loads.all.add(1, ordering: .relaxed)
            if store.state.tryWithLock({ true }) == nil { loads.underStateLock.add(1, ordering: .relaxed) }
        }
        for n in stride(from: 0, to: 60_000, by: 1_499) {
            var batch = WriteBatch()
            batch.put(Self.manyChunkRecord(n).key, bytes("w\(n)"))
            if n % 2 == 0 { batch.delete(Self.manyChunkRecord(n + 1).key) }
            try store.write(batch)
        }
        #expect(loads.all.load(ordering: .relaxed) > 3, "the writes read \(loads.all.load(ordering: .relaxed)) chunks")
        #expect(loads.underStateLock.load(ordering: .relaxed) == 0)
        for n in stride(from: 0, to: 60_000, by: 1_499) {
            #expect(try store.get(Self.manyChunkRecord(n).key) == bytes("w\(n)"))
            if n % 2 == 0 { #expect(try store.get(Self.manyChunkRecord(n + 1).key) == nil) }
        }
        arena.setOnLoad(nil)
        try store.close()
    }

    /// A chunk that can be neither read nor rebuilt (its bytes damaged, the
    /// segments unreadable) leaves its keys out of the index: every walk of
    /// keys alone — forward, by ranges, backward — says so with a
    /// corruption error (`StoreError.damagedIndex`) rather than answer
    /// without them, as a read of values and a missed lookup do.
    @Test func aWalkOfKeysOverAChunkThatCannotBeRebuiltThrows() throws {
        let (dir, options) = try Self.manyChunkStore()
        let path = dir.store + "/" + IndexCheckpoint.fileName
        var bytes = readFileBytes(path)
        bytes[1_000] ^= 0x10  // in the first chunk
        writeFileBytes(path, bytes)
        let (store, fs) = try Self.openThroughFaults(dir, options)
        fs.injectAlways(.error(EIO), on: .open, pathContains: ".seg")
        func expectDamaged(_ walk: String, _ body: () throws -> Void) {
            #expect(throws: StoreError.self, "\(walk)") {
                do { try body() } catch let error as StoreError {
                    #expect(error.code == .corruption && error.message.contains("rebuild its index"), "\(walk): \(error)")
                    throw error
                }
            }
        }
        let view = store.readView()
        expectDamaged("forward") { try view.forEachKey(from: []) { _ in true } }
        expectDamaged("backward") { try view.forEachKeyDescending(from: []) { _ in true } }
        let (start, end): ([UInt8], [UInt8]) = ([], [0xFF, 0xFF, 0xFF, 0xFF])
        expectDamaged("by ranges") {
            try start.withUnsafeBytes { start in
                try end.withUnsafeBytes { end in
                    try view.forEachKey(inRanges: 1, bounds: { _ in (start, end) }) { _ in true }
                }
            }
        }
        fs.clearFaults()
        try? store.close()
    }

    /// Threads that look keys up right after the open, and a writer, reach
    /// the same chunks at once: each chunk is read once, and every read is
    /// right (run under ThreadSanitizer by `make test-tsan`).
    @Test func threadsReachingUnreadChunksAtOnceReadThemOnce() throws {
        let (dir, options) = try Self.manyChunkStore()
        let store = try StrataStore(directory: dir.store, options: options)
        let arena = try #require(store.index.arena)
        final class Failures: Sendable { let count = Atomic<Int>(0) }
        let failures = Failures()
        DispatchQueue.concurrentPerform(iterations: 5) { thread in
            var rng = SeededGenerator(seed: UInt64(thread + 1))
            for _ in 0..<2_000 {
                let (key, value) = Self.manyChunkRecord(Int(rng.next() % 60_000))
                let rewritten: [UInt8] = value + [0x21]
                if thread == 4 {
                    var batch = WriteBatch()
                    batch.put(key, rewritten)
                    if (try? store.write(batch)) == nil { failures.count.add(1, ordering: .relaxed) }
                } else if let read = try? store.get(key), read == value || read == rewritten {
                    continue
                } else {
                    failures.count.add(1, ordering: .relaxed)
                }
            }
        }
        #expect(failures.count.load(ordering: .relaxed) == 0)
        #expect(arena.damage.rebuilt == 0 && arena.damage.failure == nil)
        #expect(store.statistics.keys == 60_000)
        try store.close()
    }

    /// How many of `index`'s leaves live in its arena.
    static func inPlaceLeaves(_ index: KeyIndex) -> Int {
        func count(_ node: KeyIndex.NodeView) -> Int {
            if node.isLeaf { return node.isInPlace ? 1 : 0 }
            return (0..<node.count).reduce(0) { $0 + count(node.child($1)) }
        }
        return index.root.map { count(KeyIndex.NodeView($0.node)) } ?? 0
    }

    /// A checkpoint's leaves are used where it was read (`LeafArena`);
    /// copied out instead, as on a runtime whose immortal objects do not
    /// behave as in-place leaves need, they give the same index.
    @Test func leavesLoadedInPlaceAndCopiedOutGiveTheSameIndex() throws {
        let (dir, options) = try Self.closedStore(keys: 5_000)
        #expect(ImmortalObjects.header != nil, "this runtime's immortal objects do not behave as in-place leaves need")
        let store = try StrataStore(directory: dir.store, options: options)
        #expect(store.recoveryReport.indexCheckpoint == .loaded)
        #expect(store.index.arena != nil, "the open copied its leaves out")
        let expected = Self.entries(store)
        for inPlace in [true, false] {
            let result = IndexCheckpoint.load(fileSystem: POSIXFileSystem(), directory: dir.store,
                                              segments: store.manifest.segments, ways: 3, inPlace: inPlace, rebuild: { nil })
            let loaded = try #require(result).get()
            #expect((loaded.index.arena != nil) == inPlace)
            loaded.index.checkInvariants()
            var all: [([UInt8], IndexEntry)] = []
            loaded.index.forEach(from: nil) { key, entry in
                all.append((Array(key), entry))
                return true
            }
            #expect(all.count == expected.count && zip(all, expected).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }, "in place: \(inPlace)")
        }
        try store.close()
    }

    /// An index whose leaves live in the arena is written as any other (each
    /// leaf it changes is copied first); a snapshot taken before keeps
    /// reading the leaves in place, after the store is closed too; a
    /// compaction that repoints every key lets go of the arena; and a load
    /// of one leaf makes the root a copy, not the leaf in place.
    @Test func anIndexLoadedInPlaceIsWrittenSnapshottedAndLetGo() throws {
        var (dir, options) = try Self.closedStore(keys: 3_000)
        // Only the compaction below may let go of the arena: an automatic
        // one, started by the flush, would do it at a time of its own.
        options.automaticCompaction = false
        var snapshot: KeyIndex
        var cursor: KeyIndex.Cursor
        do {
            let store = try StrataStore(directory: dir.store, options: options)
            #expect(store.index.arena != nil)
            let loadedInPlace = store.state.withReadLock { Self.inPlaceLeaves(store.index) }
            (snapshot, cursor) = store.state.withReadLock { (store.index, store.index.makeCursor(from: nil)) }
            // "key1000" ... "key1999" lie together in key order: the writes
            // reach the leaves of that range and no other.
            for i in stride(from: 1_000, to: 2_000, by: 2) { try store.put("key\(i)", "w\(i)") }
            for i in stride(from: 1_001, to: 2_000, by: 4) { try store.delete("key\(i)") }
            try store.flush()
            store.state.withReadLock { store.index.checkInvariants() }
            for i in [0, 999, 1_000, 1_001, 1_002, 1_003, 1_998, 1_999, 2_000, 2_999] {
                let written = (1_000..<2_000).contains(i)
                #expect(try store.string("key\(i)") == (!written ? "v\(i)" : i % 2 == 0 ? "w\(i)" : i % 4 == 1 ? nil : "v\(i)"), "key\(i)")
            }
            let stillInPlace = store.state.withReadLock { Self.inPlaceLeaves(store.index) }
            #expect(stillInPlace > 0 && stillInPlace < loadedInPlace, "in place: \(stillInPlace) of \(loadedInPlace) leaves")
            #expect(store.index.arena != nil, "leaves the writes did not reach still live in the arena")
            try store.compact()
            #expect(store.state.withReadLock { Self.inPlaceLeaves(store.index) } == 0)
            #expect(store.index.arena == nil, "every key repointed, the arena is still held")
            try store.close()
        }
        // The snapshot and the cursor hold the arena: they read the keys as loaded.
        snapshot.checkInvariants()
        #expect(snapshot.count == 3_000)
        #expect(snapshot.lookup(bytes("key2")) != nil && snapshot.lookup(bytes("key1")) != nil)
        var seen = 0
        while let (key, _) = cursor.next() {
            if seen == 0 { #expect(key == bytes("key0")) }
            seen += 1
        }
        #expect(seen == 3_000)
        // Written after the store is gone: the leaves it changes are copied.
        for i in 0..<3_000 where i % 3 == 0 { snapshot.remove(bytes("key\(i)")) }
        snapshot.checkInvariants()
        #expect(snapshot.count == 2_000)

        // A store of one leaf: its root is a copy, not the leaf in the arena.
        let (small, smallOptions) = try Self.closedStore(keys: 10, "one leaf")
        let store = try StrataStore(directory: small.store, options: smallOptions)
        #expect(store.recoveryReport.indexCheckpoint == .loaded)
        #expect(store.index.root.map { KeyIndex.NodeView($0.node).isInPlace } == false)
        #expect(try store.string("key9") == "v9")
        try store.close()
    }

    /// `strata-dump info` tells a checkpoint an open would use from one it
    /// would refuse, and a leftover of an interrupted save.
    @Test func theInspectorReportsTheCheckpoint() throws {
        let (dir, options) = try Self.closedStore(keys: 1_000)
        let path = dir.store + "/" + IndexCheckpoint.fileName
        var summary = try StoreInspector(directory: dir.store).summary()
        #expect(summary.files.first { $0.name == "INDEX" }.map { ($0.kind, $0.isLive) } ?? (.other, false) == (.indexCheckpoint, true))
        #expect(!summary.notes.contains { $0.contains("INDEX") }, "\(summary.notes)")
        let old = readFileBytes(path)
        do {
            let store = try StrataStore(directory: dir.store, options: options)
            try store.put("more", "m")
            try store.close()
        }
        writeFileBytes(path, old)
        writeFileBytes(dir.store + "/" + IndexCheckpoint.temporaryName, [1, 2, 3])
        summary = try StoreInspector(directory: dir.store).summary()
        #expect(summary.files.first { $0.name == "INDEX" }.map { ($0.kind, $0.isLive) } ?? (.other, true) == (.indexCheckpoint, false))
        #expect(summary.notes.contains { $0.contains("INDEX, the index checkpoint, will not be used: made over other segments") }, "\(summary.notes)")
        #expect(summary.notes.contains { $0.contains("INDEX.tmp is a leftover") }, "\(summary.notes)")
        let store = try StrataStore(directory: dir.store, options: options)
        #expect(store.recoveryReport.orphanFilesRemoved.contains(IndexCheckpoint.temporaryName))
    }

    /// The checkpoint covers the segments; the log holds what came after.
    /// A store that stops without a close (its files copied while it is
    /// open) opens from the checkpoint and replays the log on top.
    @Test func writesAfterTheCheckpointAreReplayedOnTop() throws {
        let (dir, options) = try Self.closedStore(keys: 2_000)
        let store = try StrataStore(directory: dir.store, options: options)
        #expect(store.recoveryReport.indexCheckpoint == .loaded)
        for i in stride(from: 0, to: 2_000, by: 3) { try store.delete("key\(i)") }
        for i in stride(from: 1, to: 2_000, by: 3) { try store.put("key\(i)", "w\(i)") }
        let crashed = ScratchDirectory("crashed")
        try FileManager.default.copyItem(atPath: dir.store, toPath: crashed.store)
        try store.close()
        // Rebuilt from a copy taken first: opening a store starts a new log, and numbers the memtable after it.
        let (rebuilt, copy) = try Self.rebuilt(crashed.store, options)
        let reopened = try StrataStore(directory: crashed.store, options: options)
        #expect(reopened.recoveryReport.indexCheckpoint == .loaded)
        #expect(reopened.recoveryReport.batchesReplayed > 0)
        for i in 0..<2_000 {
            let expected: String? = i % 3 == 0 ? nil : i % 3 == 1 ? "w\(i)" : "v\(i)"
            #expect(try reopened.string("key\(i)") == expected)
        }
        Self.expectSameIndex(reopened, rebuilt, "after replay")
        _ = copy
    }

    /// A checkpoint made over other segments (here: put back after a flush
    /// replaced them) is refused as stale, and the store opens intact.
    @Test func aCheckpointOverOtherSegmentsIsRefused() throws {
        let (dir, options) = try Self.closedStore(keys: 1_000)
        let path = dir.store + "/" + IndexCheckpoint.fileName
        let old = readFileBytes(path)
        do {
            let store = try StrataStore(directory: dir.store, options: options)
            for i in 0..<1_000 { try store.put("key\(i)", "w\(i)") }
            try store.close()
        }
        #expect(readFileBytes(path) != old)
        writeFileBytes(path, old)
        let store = try StrataStore(directory: dir.store, options: options)
        Self.expectRefused(store, because: "other segments", "a stale checkpoint")
        for i in 0..<1_000 { #expect(try store.string("key\(i)") == "w\(i)") }
    }

    /// Damage in the checkpoint's meta or trailer, a cut, or a format this
    /// build does not know: refused at the open, nothing lost. (Damage in a
    /// chunk is found when the chunk is first read: see below.)
    @Test func aDamagedCheckpointIsRefused() throws {
        let (dir, options) = try Self.closedStore(keys: 3_000)
        let path = dir.store + "/" + IndexCheckpoint.fileName
        let good = readFileBytes(path)
        let trailer = good.count - IndexCheckpoint.trailerSize
        let metaOffset = Int(good[trailer..<trailer + 8].withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) })
        var damaged: [(String, [UInt8], String)] = []
        for (name, offset) in [("the meta", metaOffset + 20), ("the meta's separators", trailer - 3),
                               ("the trailer", trailer + 2), ("the magic", good.count - 1)] {
            var bytes = good
            bytes[offset] ^= 0x10
            damaged.append((name, bytes, "damaged"))
        }
        damaged.append(("a cut", Array(good.dropLast(7)), "damaged"))
        damaged.append(("nothing", [], "damaged"))
        // A newer format, with its checksums right.
        var newer = Array(good[metaOffset..<trailer])
        newer[0] = 9
        damaged.append(("format 9", Array(good[..<metaOffset]) + newer
                            + IndexCheckpoint.encodeTrailer(metaOffset: UInt64(metaOffset), metaLength: newer.count, metaCRC: CRC32C.checksum(newer)),
                        "not readable"))
        for (name, bytes, reason) in damaged {
            writeFileBytes(path, bytes)
            let store = try StrataStore(directory: dir.store, options: options)
            Self.expectRefused(store, because: reason, name)
            #expect(store.statistics.keys == 3_000, "\(name)")
            #expect(try store.string("key2999") == "v2999", "\(name)")
            // Its segments unchanged, the close saves a good one again.
            try store.close()
            let again = try StrataStore(directory: dir.store, options: options)
            #expect(again.recoveryReport.indexCheckpoint == .loaded, "\(name): the close did not save the checkpoint again")
            try again.close()
        }
    }

    /// Rewrites the checkpoint at `path` with `change` made to its first
    /// chunk, and its checksums made right again: damage a checksum cannot see.
    static func recraft(_ path: String, meta changeMeta: (inout IndexCheckpoint.Meta) -> Void = { _ in },
                        _ change: (inout [UInt8]) -> Void) throws {
        let bytes = readFileBytes(path)
        let trailer = try #require(bytes.suffix(IndexCheckpoint.trailerSize).withUnsafeBytes { IndexCheckpoint.decodeTrailer($0) })
        let metaRange = Int(trailer.offset)..<(Int(trailer.offset) + trailer.length)
        var meta = try bytes[metaRange].withUnsafeBytes { try IndexCheckpoint.Meta.decode($0).get() }
        let first = meta.chunks[0]
        var chunk = Array(bytes[Int(first.offset)..<(Int(first.offset) + first.length)])
        change(&chunk)
        changeMeta(&meta)
        meta.chunks[0].crc = CRC32C.checksum(chunk)
        let encoded = meta.encoded()
        writeFileBytes(path, chunk + bytes[first.length..<metaRange.lowerBound] + encoded
                       + IndexCheckpoint.encodeTrailer(metaOffset: trailer.offset, metaLength: encoded.count, metaCRC: CRC32C.checksum(encoded)))
    }

    /// A checkpoint whose checksums are right but whose first leaf breaks a
    /// rule — a key end past the leaf's bytes, keys out of order, an entry
    /// in a file that is not one of its segments — is used, and the chunk is
    /// rebuilt from the segments when a lookup first reaches it. Where the
    /// meta's own account of the leaves is wrong, the chunk cannot be
    /// rebuilt into it: reads then fail with a typed error, the checkpoint
    /// is removed, and the next open rebuilds the index.
    @Test func aLeafThatBreaksTheRulesIsRebuiltFromTheSegmentsWhateverItsChecksums() throws {
        let (dir, options) = try Self.closedStore(keys: 1_000)
        let path = dir.store + "/" + IndexCheckpoint.fileName
        let good = readFileBytes(path)
        // The first leaf: object header (16 bytes) · count i32 · byteCount i32 · four more i32
        // · 16-byte entries · UInt16 ends · keys ("key0", "key1", "key10", …).
        let h = KeyIndex.leafImageHeaderSize
        let changes: [(String, (inout [UInt8]) -> Void)] = [
            ("a key end past the leaf's bytes", { chunk in
                let count = Int(chunk[16]) | Int(chunk[17]) << 8
                let bytes = Int(chunk[20]) | Int(chunk[21]) << 8
                let ends = h + 16 * count
                chunk[ends] = UInt8(truncatingIfNeeded: bytes + 40)
                chunk[ends + 1] = UInt8(truncatingIfNeeded: (bytes + 40) >> 8)
            }),
            ("keys out of order", { chunk in
                let count = Int(chunk[16]) | Int(chunk[17]) << 8
                let keys = h + 18 * count
                #expect(Array(chunk[keys..<keys + 8]) == bytes("key0key1"))
                chunk[keys + 3] = UInt8(ascii: "1")
                chunk[keys + 7] = UInt8(ascii: "0")
            }),
            ("a header that is not a leaf's", { chunk in
                chunk[32] = 1  // height
            }),
            ("an entry in no segment of the checkpoint", { chunk in
                chunk[h + 8] = 0xEE  // the first entry's file number
            }),
            // Its keys still in order, but its last now above the separator
            // the meta keeps between it and the next leaf.
            ("a key beyond the separator after its leaf", { chunk in
                let count = Int(chunk[16]) | Int(chunk[17]) << 8
                let ends = h + 16 * count
                let lastStart = Int(chunk[ends + 2 * (count - 2)]) | Int(chunk[ends + 2 * (count - 2) + 1]) << 8
                chunk[h + 18 * count + lastStart] = UInt8(ascii: "z")
            }),
        ]
        for (name, change) in changes {
            writeFileBytes(path, good)
            try Self.recraft(path, change)
            let store = try StrataStore(directory: dir.store, options: options)
            #expect(store.recoveryReport.indexCheckpoint == .loaded, "\(name)")
            #expect(try store.string("key0") == "v0", "\(name)")
            #expect(try store.string("key1") == "v1", "\(name)")
            #expect(store.statistics.keys == 1_000, "\(name)")
            let damage = try #require(store.index.arena, "\(name)").damage
            #expect(damage.rebuilt == 1 && damage.failure == nil, "\(name): \(damage)")
            for i in 0..<1_000 where try store.string("key\(i)") != "v\(i)" { Issue.record("\(name): key\(i) reads wrong") }
            try store.close()
        }
        // The meta's account of the leaves: a shape that is not the leaf's
        // (the chunk's sizes still add up), a separator above the next leaf's first key.
        let metaChanges: [(String, String?, (inout IndexCheckpoint.Meta) -> Void)] = [
            // The first leaf's shape swapped with another's of the same chunk: the chunk still adds up.
            ("a leaf's shape", nil, { meta in
                let other = (1..<meta.chunks[0].leafCount).first { meta.leaves[$0] != meta.leaves[0] }
                #expect(other != nil, "the first chunk's leaves all have one shape")
                meta.leaves.swapAt(0, other ?? 0)
            }),
            ("a separator above the next leaf", nil, { meta in
                var separators = KeyIndex.Separators()
                for i in 0..<meta.separators.count {
                    if i == 0 { bytes("zz").withUnsafeBytes { separators.append($0) } } else { meta.separators.withKey(i) { separators.append($0) } }
                }
                meta.separators = separators
            }),
            ("a leaf's shape that does not fill its chunk", "shapes", { meta in
                meta.leaves[0].keyBytes += 16
            }),
        ]
        for (name, refusedBecause, change) in metaChanges {
            writeFileBytes(path, good)
            try Self.recraft(path, meta: change) { _ in }
            let store = try StrataStore(directory: dir.store, options: options)
            if let refusedBecause {
                Self.expectRefused(store, because: refusedBecause, name)
                #expect(try store.string("key999") == "v999", "\(name)")
                #expect(store.statistics.keys == 1_000, "\(name)")
                try store.close()
                continue
            }
            // Used, but its first chunk can be neither read nor rebuilt.
            #expect(store.recoveryReport.indexCheckpoint == .loaded, "\(name)")
            #expect(throws: StoreError.self, "\(name)") { _ = try store.string("key0") }
            do {
                _ = try store.string("no such key")
                Issue.record("\(name): a miss in a damaged index did not throw")
            } catch let error as StoreError {
                #expect(error.code == .corruption && error.message.contains("reopen"), "\(name): \(error)")
            }
            #expect(throws: StoreError.self, "\(name)") { _ = try store.scan(prefix: bytes("key")) }
            #expect(!FileManager.default.fileExists(atPath: path), "\(name): the damaged checkpoint is still there")
            try store.close()
            let reopened = try StrataStore(directory: dir.store, options: options)
            #expect(reopened.recoveryReport.indexCheckpoint == .absent, "\(name)")
            for i in 0..<1_000 where try reopened.string("key\(i)") != "v\(i)" { Issue.record("\(name): key\(i) reads wrong after the reopen") }
            try reopened.close()
        }
        // The unchanged file, through the same rewriting, is used: the changes above are what it refuses.
        writeFileBytes(path, good)
        try Self.recraft(path) { _ in }
        let store = try StrataStore(directory: dir.store, options: options)
        #expect(store.recoveryReport.indexCheckpoint == .loaded)
        try store.close()

        // A damaged index is not saved, though new segments would have a close save one.
        writeFileBytes(path, good)
        try Self.recraft(path, meta: metaChanges[0].2) { _ in }
        let damaged = try StrataStore(directory: dir.store, options: options)
        #expect(throws: StoreError.self) { _ = try damaged.string("key0") }
        try damaged.put("later", "x")
        try damaged.flush()
        try damaged.close()
        #expect(!FileManager.default.fileExists(atPath: path), "the close saved the damaged index")
        let reopened = try StrataStore(directory: dir.store, options: options)
        #expect(reopened.recoveryReport.indexCheckpoint == .absent)
        #expect(try reopened.string("later") == "x" && reopened.string("key5") == "v5")
        try reopened.close()
    }

    /// A segment file that is not the one the checkpoint was made over (its
    /// trailer differs) makes the open rebuild, which then reports what is
    /// wrong with the file.
    @Test func aSegmentThatChangedUnderTheCheckpointIsNotTrusted() throws {
        let (dir, options) = try Self.closedStore(keys: 1_000)
        let segment = dir.store + "/" + dir.files().first { $0.hasSuffix(".seg") }!
        var bytes = readFileBytes(segment)
        bytes[bytes.count - 30] ^= 1  // inside the trailer's sequences
        writeFileBytes(segment, bytes)
        let store = try StrataStore(directory: dir.store, options: options)
        Self.expectRefused(store, because: "not the file", "a changed segment")
        // The footers were read instead: the damaged trailer made the open scan the blocks.
        #expect(store.recoveryReport.segmentsRebuiltByScan.count == 1)
        #expect(try store.string("key999") == "v999")
    }

    /// A close whose memtable still holds writes saves no checkpoint, and
    /// removes the one whose segments a flush replaced; a small store saves
    /// none; a read-only open loads one and writes nothing.
    @Test func whenACloseSavesARemovesOrLeavesTheCheckpoint() throws {
        let dir = ScratchDirectory()
        var options = Self.checkpointing()
        options.flushOnCloseThreshold = Int.max
        let path = dir.store + "/" + IndexCheckpoint.fileName
        do {
            let store = try StrataStore(directory: dir.store, options: options)
            for i in 0..<1_000 { try store.put("key\(i)", "v\(i)") }
            try store.flush()
            try store.close()
        }
        #expect(FileManager.default.fileExists(atPath: path))
        do {
            var readOnly = options
            readOnly.readOnly = true
            let before = readFileBytes(path)
            let store = try StrataStore(directory: dir.store, options: readOnly)
            #expect(store.recoveryReport.indexCheckpoint == .loaded)
            try store.close()
            #expect(readFileBytes(path) == before)
        }
        do {
            // Loaded, unchanged: the close leaves it as it is.
            let store = try StrataStore(directory: dir.store, options: options)
            #expect(store.recoveryReport.indexCheckpoint == .loaded)
            try store.put("extra", "x")
            try store.close()
            #expect(FileManager.default.fileExists(atPath: path))
        }
        do {
            // A flush replaced the segments and the memtable holds writes: removed.
            let store = try StrataStore(directory: dir.store, options: options)
            #expect(store.recoveryReport.indexCheckpoint == .loaded)
            try store.flush()
            try store.put("later", "y")
            try store.close()
            #expect(!FileManager.default.fileExists(atPath: path))
        }
        do {
            // Saved again over the new segments; then a flush and deletions
            // only: the memtable holds no entry the index points to, but it is
            // not empty — no checkpoint (it would lack the deleted keys the
            // segments still hold), and the stale one is removed.
            var flushing = options
            flushing.flushOnCloseThreshold = 1
            let saving = try StrataStore(directory: dir.store, options: flushing)
            try saving.put("saved", "s")
            try saving.close()
            #expect(FileManager.default.fileExists(atPath: path))
            let store = try StrataStore(directory: dir.store, options: options)
            #expect(store.recoveryReport.indexCheckpoint == .loaded)
            try store.put("flushed", "f")
            try store.flush()
            try store.delete("saved")
            try store.close()
            #expect(!FileManager.default.fileExists(atPath: path), "a checkpoint was saved over a memtable of deletions")
        }
        do {
            var large = options
            large.indexCheckpointMinimumKeys = 10_000
            let store = try StrataStore(directory: dir.store, options: large)
            #expect(store.recoveryReport.indexCheckpoint == .absent)
            try store.flush()
            try store.close()
            #expect(!FileManager.default.fileExists(atPath: path), "a store below the minimum saved a checkpoint")
        }
        let store = try StrataStore(directory: dir.store, options: options)
        #expect(try store.string("later") == "y")
        #expect(try store.string("extra") == "x")
        #expect(try store.string("saved") == nil)
        #expect(try store.string("flushed") == "f")
    }

    /// A checkpoint that cannot be written (any write, the close, the
    /// rename) leaves no file behind, and the close still succeeds.
    @Test func aFailedSaveLeavesNothingAndTheCloseSucceeds() throws {
        for operation in [FaultInjectingFileSystem.Operation.open, .write, .rename] {
            let dir = ScratchDirectory()
            let fs = FaultInjectingFileSystem()
            var options = Self.checkpointing()
            options.flushOnCloseThreshold = 1
            options.fileSystem = fs
            let store = try StrataStore(directory: dir.store, options: options)
            for i in 0..<3_000 { try store.put("key\(i)", "v\(i)") }
            fs.injectAlways(.error(EIO), on: operation, pathContains: IndexCheckpoint.temporaryName)
            try store.close()
            #expect(fs.injectedFaultCount > 0, "\(operation)")
            #expect(!dir.files().contains { $0.hasPrefix("INDEX") }, "\(operation): \(dir.files())")
            var plain = options
            plain.fileSystem = POSIXFileSystem()
            let reopened = try StrataStore(directory: dir.store, options: plain)
            #expect(reopened.recoveryReport.indexCheckpoint == .absent)
            #expect(try reopened.string("key2999") == "v2999")
        }
    }

    /// A checkpoint that cannot be read is refused, not an open that fails.
    @Test func anUnreadableCheckpointIsRefused() throws {
        var (dir, options) = try Self.closedStore(keys: 3_000)
        for operation in [FaultInjectingFileSystem.Operation.open, .read, .size] {
            let fs = FaultInjectingFileSystem()
            fs.injectAlways(.error(EIO), on: operation, pathContains: "/" + IndexCheckpoint.fileName)
            options.fileSystem = fs
            options.readOnly = true
            let store = try StrataStore(directory: dir.store, options: options)
            Self.expectRefused(store, because: "could not be read", "\(operation)")
            #expect(try store.string("key2999") == "v2999")
            try store.close()
        }
    }
}
