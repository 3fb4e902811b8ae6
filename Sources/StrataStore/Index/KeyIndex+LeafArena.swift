// Leaves that live where an index checkpoint was read: the checkpoint's
// chunks read into memory, each when it is first needed, each leaf image
// laid out exactly as a `KeyIndex.Node` object, so that opening a store
// makes no leaf of its own and reads none.
//
// Why: opening a store of a million keys from a checkpoint made a leaf per
// 18 to 32 keys — an allocation, a copy and a check each — and closing it
// freed them one by one. In place, the leaves cost a read and a check, and
// a close unmaps one region; read lazily, the open costs what its meta
// costs (see `LeafArena`).
//
// How a leaf in a chunk can be a Swift object: its first two words are
// written at load with `Node`'s type and the reference count the Swift
// runtime gives its own statically allocated objects (the empty array's
// storage), which marks the object immortal. On such an object retain and
// release do nothing, `isKnownUniquelyReferenced` is false, and no deinit
// ever runs. The index's rules do the rest: a mutation copies every node it
// writes that is not uniquely referenced (KeyIndex+Node.swift), so an
// in-place leaf is never written; a parent's deinit skips an in-place
// child, which its slot marks, so the chunks may be freed before the
// parents that point into them are freed; and the root is never an
// in-place leaf, so that whatever order a value's properties go in, the
// arena is not needed to free the root. `ImmortalObjects.header` checks
// that the runtime behaves so before any leaf relies on it; where it does
// not, the checkpoint's leaves are copied into nodes of their own instead.
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// The memory of leaves loaded in place from an index checkpoint: one
/// reserved region of address space laid out as the checkpoint's chunks
/// are in its file, each chunk read into its place the first time a
/// lookup, a walk or a write reaches one of its leaves.
///
/// Every `KeyIndex` value (and `Cursor`) that may reach one of its leaves
/// holds it; the region is unmapped when the last of them goes.
///
/// Why lazily: an open that reads, checks and places every leaf touches
/// the whole index (37 MB for a million 16-byte keys) before it answers
/// anything, in proportion to the store; LevelDB's open reads no table.
/// Here an open builds the interior nodes from the checkpoint's meta
/// (its leaves' shapes and separators) with each leaf slot pointing at
/// where the leaf will lie, and a chunk is read when a leaf of it is first
/// reached (`NodeView.childPointer` calls ``makeResident(_:)``).
///
/// Why small chunks (`IndexCheckpoint.chunkBytes`): the first reach of a
/// leaf pays for its whole chunk — read, checksummed, every key checked,
/// its memory faulted in — and a list's page in a process that has just
/// opened the store reaches a leaf of the records' keys for each of its
/// objects: with chunks of 1 MiB, a first page of 20 read some 20 MiB of
/// index. SQLite reads a page of 4 KiB where this reads a chunk.
///
/// Why one region, untouched until read: a chunk never reached costs
/// address space only, and an open writes nothing there (a header per
/// chunk written at open was a page fault per chunk). A leaf's first word
/// — its object's type — is zero as the kernel hands the page over, and
/// is written last when its chunk is placed, so the leaf itself says
/// whether it is there: one acquiring load of a word the descent reads
/// anyway, and on a zero a call that finds the arena in ``regions`` and
/// loads the chunk. Loading takes ``loading``, reads and checks the chunk
/// in a scratch buffer, copies it into place, then stores each leaf's type
/// with release ordering, so a reader that sees a type sees its leaf.
/// Whoever reaches the leaf first pays for the chunk: a lookup on any
/// thread, a read view's walk, a writer's insert.
///
/// `@unchecked Sendable`: a chunk's leaves are written once, by ``load(chunk:)``
/// under ``loading``, before their types (release), and read only after a
/// reader has seen the type (acquire); afterwards they are only read (an
/// in-place leaf is never written, see above). `region`, `chunkStarts`,
/// `chunkLengths` and `immortal` never change after `init`; `filler`,
/// `scratch` and `loaded` are used only under ``loading``.
final class LeafArena: @unchecked Sendable {
    /// The longest chunk an arena takes: a chunk is cut at
    /// `IndexCheckpoint.chunkBytes`, or is one leaf (at most about 33 KiB).
    static let largestChunk = 1 << 16
    /// The most a read of chunks in key order takes at once.
    static let readAheadBytes = 256 << 10

    /// Every live arena's region, for the first reach of a chunk, which
    /// has a leaf's address and needs its arena: arenas are few (one per
    /// checkpoint a store opened), so a short list searched under a lock,
    /// as loading takes one a moment later anyway.
    private static let regions = Mutex<[(start: UInt, end: UInt, arena: Unmanaged<LeafArena>)]>([])

    /// Address space for a checkpoint's chunks, laid out as in its file:
    /// reserved, not yet touched, handed to the arena that will unmap it.
    struct Region {
        fileprivate let start: UnsafeMutableRawPointer
        fileprivate let size: Int

        /// `size` bytes; nil when the address space cannot be reserved.
        init?(size: Int) {
            let flags: Int32
            #if canImport(Darwin)
            flags = MAP_PRIVATE | MAP_ANON
            #else
            flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE
            #endif
            guard size > 0, let start = mmap(nil, size, PROT_READ | PROT_WRITE, flags, -1, 0), start != MAP_FAILED else { return nil }
            #if os(Linux)
            // With transparent huge pages always on, a chunk's first touch
            // would commit 2 MiB around it: an unread chunk is to cost
            // address space only. (Advice: its failure changes nothing else.)
            _ = madvise(start, size, MADV_NOHUGEPAGE)
            #endif
            self.start = start
            self.size = size
        }
    }

    private let region: Region
    /// Where each chunk starts in the region (its offset in the file), ascending.
    private let chunkStarts: [Int]
    private let chunkLengths: [Int]
    /// The words that make a placed leaf image a `KeyIndex.Node`.
    private let immortal: (type: UInt, referenceCount: UInt64)
    /// Serializes loading; see the type's comment.
    private let loading = Lock()
    /// Reads, checks and writes a chunk's leaves. Guarded by `loading`.
    private let filler: any LeafChunkFiller
    /// Where a chunk is read and checked before it is placed. Guarded by `loading`.
    private let scratch: UnsafeMutableRawPointer
    /// Which chunks are placed. Guarded by `loading`.
    private var loaded: [Bool]
    /// The last chunk placed, and how many bytes the read that placed it
    /// took past its start (see ``load(chunk:)``). Guarded by `loading`.
    private var lastLoaded = -2, readAhead = 0
    /// Chunks not yet read: changed under `loading`, read anywhere.
    private let unreadChunks: Atomic<Int>
    /// Test seam: called on the loading thread as each read of chunks (one,
    /// or a run read ahead together) starts.
    /// Guarded by `loading`.
    private var onLoad: (@Sendable () -> Void)?
    /// Whether a chunk could be neither read nor rebuilt (see `damage`):
    /// its leaves are empty, so a key missing from the index may exist.
    let damaged = Atomic<Bool>(false)

    /// The arena over `region`, for chunks at `starts` of `lengths` bytes
    /// (each at most ``largestChunk``, within the region, in order), none
    /// of them read yet: `filler` fills chunk `c` when a leaf of it is
    /// first reached, and each of its leaves is made a node with `immortal`.
    init(region: Region, chunkStarts starts: [Int], lengths: [Int], immortal: (type: UInt, referenceCount: UInt64),
         filler: any LeafChunkFiller) {
        precondition(starts.count == lengths.count && zip(starts, lengths).allSatisfy { $1 > 0 && $1 <= Self.largestChunk && $0 + $1 <= region.size },
                     "LeafArena: a chunk outside its region or larger than \(Self.largestChunk) bytes")
        self.region = region
        chunkStarts = starts
        chunkLengths = lengths
        self.immortal = immortal
        self.filler = filler
        scratch = UnsafeMutableRawPointer.allocate(byteCount: max(lengths.max() ?? 1, Self.readAheadBytes), alignment: 16)
        loaded = Array(repeating: false, count: starts.count)
        unreadChunks = Atomic(starts.count)
        let start = UInt(bitPattern: region.start)
        let entry = (start, start + UInt(region.size), Unmanaged.passUnretained(self))
        Self.regions.withLock { $0.append(entry) }
    }

    deinit {
        let start = UInt(bitPattern: region.start)
        Self.regions.withLock { regions in regions.removeAll { $0.start == start } }
        scratch.deallocate()
        munmap(region.start, region.size)
    }

    /// How many chunks the checkpoint has.
    var chunkCount: Int { chunkStarts.count }

    /// Where chunk `c`'s leaves lie.
    func leaves(ofChunk c: Int) -> UnsafeMutableRawPointer { region.start + chunkStarts[c] }

    /// Reads the chunk of the in-place leaf at `leaf` unless it is read already.
    @inline(__always)
    static func makeResident(_ leaf: UnsafeRawPointer) {
        if _fastPath(UnsafeMutableRawPointer(mutating: leaf).assumingMemoryBound(to: Atomic<UInt>.self).pointee.load(ordering: .acquiring) != 0) {
            return
        }
        load(leaf: UInt(bitPattern: leaf))
    }

    /// The first reach of the leaf at `leaf`: finds its arena and chunk and loads it.
    @inline(never)
    private static func load(leaf: UInt) {
        // The caller's index holds the arena, so it stays registered throughout.
        guard let region = regions.withLock({ $0.first { leaf >= $0.start && leaf < $0.end } }) else {
            preconditionFailure("LeafArena: an in-place leaf outside every arena")
        }
        let arena = region.arena.takeUnretainedValue()
        let offset = Int(leaf - region.start)
        // The last chunk starting at or before the leaf.
        var low = 0, high = arena.chunkStarts.count
        while high - low > 1 {
            let middle = (low + high) / 2
            if arena.chunkStarts[middle] <= offset { low = middle } else { high = middle }
        }
        arena.load(chunk: low)
    }

    /// Reads, checks and places chunk `c`'s leaves, once — and, when it
    /// follows the last chunk read (a walk in key order), the unread
    /// chunks after it, twice as many bytes each time up to
    /// ``readAheadBytes``, in one read: a walk of every key reads a few
    /// hundred KiB at a time instead of a chunk at a time.
    @inline(never)
    func load(chunk c: Int) {
        loading.withLock {
            guard !loaded[c] else { return }
            onLoad?()
            readAhead = c == lastLoaded + 1 ? min(max(readAhead * 2, chunkLengths[c]), Self.readAheadBytes) : 0
            var end = c + 1
            while end < loaded.count, !loaded[end], chunkStarts[end] + chunkLengths[end] - chunkStarts[c] <= readAhead { end += 1 }
            filler.fill(chunks: c..<end, into: scratch)
            if filler.damage.failure != nil { damaged.store(true, ordering: .relaxed) }
            for chunk in c..<end {
                // Each leaf's bytes first, its type last: the one word a
                // reader may be reading meanwhile, only ever stored atomically.
                let place = leaves(ofChunk: chunk), from = scratch + (chunkStarts[chunk] - chunkStarts[c])
                filler.forEachLeaf(ofChunk: chunk) { offset, size in
                    let leaf = place + offset
                    memcpy(leaf + 16, from + offset + 16, size - 16)
                    leaf.storeBytes(of: immortal.referenceCount, toByteOffset: 8, as: UInt64.self)
                    leaf.assumingMemoryBound(to: Atomic<UInt>.self).pointee.store(immortal.type, ordering: .releasing)
                }
                loaded[chunk] = true
            }
            lastLoaded = end - 1
            if unreadChunks.subtract(end - c, ordering: .relaxed).newValue == 0 { filler.allChunksRead() }
        }
    }

    /// Chunks no lookup has reached yet.
    var chunksUnread: Int { unreadChunks.load(ordering: .relaxed) }

    /// Sets the test seam called as each read of chunks starts.
    func setOnLoad(_ body: (@Sendable () -> Void)?) { loading.withLock { onLoad = body } }

    /// What went wrong with the chunks read so far: how many had to be
    /// rebuilt from the segments, and why a chunk could not be, if one could not.
    var damage: (rebuilt: Int, failure: String?) { loading.withLock { filler.damage } }
}

/// Fills a `LeafArena`'s chunks: the index checkpoint's, which reads each
/// from the file and checks it, or rebuilds it from the segments.
protocol LeafChunkFiller: Sendable {
    /// Writes the leaf images of `chunks`, neighbours in the file, at
    /// `memory` as the file lays them out, each with its first two words
    /// zero (the arena makes them nodes once they are in place): every
    /// leaf the slots pointing there expect, whatever the file holds.
    func fill(chunks: Range<Int>, into memory: UnsafeMutableRawPointer)
    /// Calls `body` with where each leaf of chunk `c` lies from the
    /// chunk's start, and its image's size.
    func forEachLeaf(ofChunk c: Int, _ body: (_ offset: Int, _ size: Int) -> Void)
    /// Every chunk has been filled (the file is needed no more).
    func allChunksRead()
    /// See `LeafArena.damage`.
    var damage: (rebuilt: Int, failure: String?) { get }
}

/// The two words that make memory an immortal `KeyIndex.Node`.
enum ImmortalObjects {
    /// `Node`'s type word and the runtime's immortal reference count, or
    /// nil when this runtime does not treat such an object as the leaves
    /// need (checked once, on a scratch object).
    static let header: (type: UInt, referenceCount: UInt64)? = {
        #if _ptrauth(_arm64e)
        // There the type word may be signed with its object's address: a
        // copy of it elsewhere would not authenticate, and nothing the probe
        // below does reads it. The leaves are loaded the other way.
        return nil
        #else
        // The empty array's storage is a static object of the runtime's, made immortal.
        let empty: [Int] = []
        let referenceCount = unsafeBitCast(empty, to: UnsafeRawPointer.self).load(fromByteOffset: 8, as: UInt64.self)
        let sample = KeyIndex.Node.make(height: 0, slots: 1, byteCapacity: 8)
        let type = Unmanaged.passUnretained(sample).toOpaque().load(as: UInt.self)
        withExtendedLifetime(sample) {}

        let size = KeyIndex.NodeView.tailOffset + 32
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        defer { scratch.deallocate() }
        memset(scratch, 0, size)
        scratch.storeBytes(of: type, as: UInt.self)
        scratch.storeBytes(of: referenceCount, toByteOffset: 8, as: UInt64.self)
        // Every retain is balanced by a release, so that on a runtime where
        // the count is an ordinary one the scratch object is never freed.
        var unchanged = false, unique = true
        do {
            var node = Unmanaged<KeyIndex.Node>.fromOpaque(scratch).takeUnretainedValue()
            let retained = Unmanaged.passUnretained(node).retain()
            unchanged = scratch.load(fromByteOffset: 8, as: UInt64.self) == referenceCount
            retained.release()
            unique = isKnownUniquelyReferenced(&node)
        }
        guard unchanged, !unique, scratch.load(fromByteOffset: 8, as: UInt64.self) == referenceCount,
              scratch.load(as: UInt.self) == type
        else { return nil }
        return (type, referenceCount)
        #endif
    }()
}

extension KeyIndex {
    /// Why this index cannot be trusted to hold every key, if it cannot: a
    /// chunk of the index checkpoint it was loaded from could be neither
    /// read nor rebuilt from the segments (`CheckpointChunkFiller`). Read
    /// on a miss and after a walk, where a lost key would go unnoticed.
    package var damage: String? {
        guard let arena, arena.damaged.load(ordering: .relaxed) else { return nil }
        return arena.damage.failure
    }

    /// Lets go of the arena once no leaf of this value lives in it: a
    /// compaction repoints every key of the segments it merged, and so
    /// copies every leaf it touches. Reads the interior nodes only.
    mutating func releaseArenaIfUnused() {
        guard arena != nil else { return }
        func reaches(_ node: NodeView) -> Bool {
            if node.isLeaf { return node.isInPlace }
            if node.height == 1 { return (0..<node.count).contains { node.childIsInPlace($0) } }
            return (0..<node.count).contains { reaches(node.child($0)) }
        }
        if let root, reaches(NodeView(root.node)) { return }
        arena = nil
    }
}
