// Leaves that live where an index checkpoint was read: the checkpoint's
// chunks read into memory, each when it is first needed, each leaf image
// laid out exactly as a `KeyIndex.Node` object, so that opening a store
// makes no leaf of its own and reads none.
//
// Why: opening a store of a million keys from a checkpoint made a leaf per
// 18 to 32 keys — an allocation, a copy and a check each — and closing it
// freed them one by one. In place, the leaves cost a read and a check, and
// a close frees one allocation per chunk of about 1 MiB; read lazily, the
// open costs what its meta costs (see `LeafArena`).
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
/// allocation per chunk of the checkpoint, each read from the file the
/// first time a lookup, a walk or a write reaches one of its leaves.
///
/// Every `KeyIndex` value (and `Cursor`) that may reach one of its leaves
/// holds it; its chunks are freed when the last of them goes.
///
/// Why lazily: an open that reads, checks and places every leaf touches
/// the whole index (37 MB for a million 16-byte keys) before it answers
/// anything, in proportion to the store; LevelDB's open reads no table.
/// Here an open builds the interior nodes from the checkpoint's meta
/// (its leaves' shapes and separators) with each leaf slot pointing at
/// where the leaf will lie, and a chunk is read when a leaf of it is first
/// reached (`NodeView.childPointer` calls ``makeResident(_:)``).
///
/// Each chunk's allocation is aligned to ``chunkAlignment`` and starts with
/// a header — its state, its arena and its number — so that a leaf's
/// address alone leads to its chunk's state: one acquiring load and a
/// branch on every descent into an in-place leaf, a call to ``load(chunk:)``
/// on the first. Loading takes ``loading``; the state is set with release
/// ordering after the leaves are written, so a reader that sees it loaded
/// sees them. Whoever reaches the leaf first pays for the chunk: a lookup
/// on any thread, a read view's walk, a writer's insert.
///
/// `@unchecked Sendable`: a chunk's leaves are written once, by ``load(chunk:)``
/// under ``loading``, before its state says loaded (release), and read only
/// after a reader has seen that state (acquire); afterwards they are only
/// read (an in-place leaf is never written, see above). `chunks` never
/// changes after `init`; `filler` is used only under ``loading``.
final class LeafArena: @unchecked Sendable {
    /// A chunk's allocation is aligned to this, so that its header is found
    /// by masking a leaf's address. A chunk is cut at about 1 MiB
    /// (`IndexCheckpoint.chunkBytes`), so it fits.
    static let chunkAlignment = 1 << 21
    /// The header before a chunk's leaves: state (`Atomic<Int>`) · arena (unretained) · chunk number.
    static let chunkHeaderSize = 64
    /// The longest chunk an arena holds.
    static let largestChunk = chunkAlignment - chunkHeaderSize

    private static let unread = 0, resident = 1

    /// Each chunk's memory: its header, then its leaves from `chunkHeaderSize` on.
    let chunks: [UnsafeMutableRawPointer]
    /// Serializes loading; see the type's comment.
    private let loading = Lock()
    /// Reads, checks and writes a chunk's leaves. Guarded by `loading`.
    private let filler: any LeafChunkFiller
    /// Chunks not yet read: changed under `loading`, read anywhere.
    private let unreadChunks: Atomic<Int>
    /// Test seam: called on the loading thread as each chunk starts to load.
    /// Guarded by `loading`.
    private var onLoad: (@Sendable () -> Void)?
    /// Whether a chunk could be neither read nor rebuilt (see `damage`):
    /// its leaves are empty, so a key missing from the index may exist.
    let damaged = Atomic<Bool>(false)

    /// Memory for chunks of `lengths` bytes (each at most ``largestChunk``),
    /// none of them read yet: `filler` fills chunk `c` when a leaf of it is
    /// first reached.
    init(chunkLengths lengths: [Int], filler: any LeafChunkFiller) {
        precondition(lengths.allSatisfy { $0 <= Self.largestChunk }, "LeafArena: a chunk larger than \(Self.largestChunk) bytes")
        self.filler = filler
        unreadChunks = Atomic(lengths.count)
        var chunks: [UnsafeMutableRawPointer] = []
        for length in lengths {
            var memory: UnsafeMutableRawPointer?
            let rc = posix_memalign(&memory, Self.chunkAlignment, Self.chunkHeaderSize + max(length, 1))
            precondition(rc == 0 && memory != nil, "LeafArena: posix_memalign failed: \(rc)")
            chunks.append(memory!)
        }
        self.chunks = chunks
        for (c, chunk) in chunks.enumerated() {
            chunk.bindMemory(to: Atomic<Int>.self, capacity: 1).initialize(to: Atomic(Self.unread))
            chunk.storeBytes(of: Unmanaged.passUnretained(self).toOpaque(), toByteOffset: 8, as: UnsafeMutableRawPointer.self)
            chunk.storeBytes(of: c, toByteOffset: 16, as: Int.self)
        }
    }

    deinit {
        for chunk in chunks {
            chunk.assumingMemoryBound(to: Atomic<Int>.self).deinitialize(count: 1)
            free(chunk)
        }
    }

    /// Where chunk `c`'s leaves lie.
    func leaves(ofChunk c: Int) -> UnsafeMutableRawPointer { chunks[c] + Self.chunkHeaderSize }

    /// Reads the chunk of the in-place leaf at `leaf` unless it is read already.
    @inline(__always)
    static func makeResident(_ leaf: UnsafeRawPointer) {
        let chunk = UnsafeMutableRawPointer(bitPattern: UInt(bitPattern: leaf) & ~UInt(chunkAlignment - 1))!
        if _fastPath(chunk.assumingMemoryBound(to: Atomic<Int>.self).pointee.load(ordering: .acquiring) == resident) { return }
        let arena = Unmanaged<LeafArena>.fromOpaque(chunk.load(fromByteOffset: 8, as: UnsafeRawPointer.self)).takeUnretainedValue()
        arena.load(chunk: chunk.load(fromByteOffset: 16, as: Int.self))
    }

    /// Reads, checks and places chunk `c`'s leaves, once.
    @inline(never)
    func load(chunk c: Int) {
        loading.withLock {
            let state = chunks[c].assumingMemoryBound(to: Atomic<Int>.self)
            guard state.pointee.load(ordering: .relaxed) == Self.unread else { return }
            onLoad?()
            filler.fill(chunk: c, into: leaves(ofChunk: c))
            if filler.damage.failure != nil { damaged.store(true, ordering: .relaxed) }
            state.pointee.store(Self.resident, ordering: .releasing)
            if unreadChunks.subtract(1, ordering: .relaxed).newValue == 0 { filler.allChunksRead() }
        }
    }

    /// Chunks no lookup has reached yet.
    var chunksUnread: Int { unreadChunks.load(ordering: .relaxed) }

    /// Sets the test seam called as each chunk starts to load.
    func setOnLoad(_ body: (@Sendable () -> Void)?) { loading.withLock { onLoad = body } }

    /// What went wrong with the chunks read so far: how many had to be
    /// rebuilt from the segments, and why a chunk could not be, if one could not.
    var damage: (rebuilt: Int, failure: String?) { loading.withLock { filler.damage } }
}

/// Fills a `LeafArena`'s chunks: the index checkpoint's, which reads each
/// from the file and checks it, or rebuilds it from the segments.
protocol LeafChunkFiller: Sendable {
    /// Writes chunk `c`'s leaves, as immortal in-place leaves, at `memory`:
    /// every leaf the slots pointing there expect, whatever the file holds.
    func fill(chunk c: Int, into memory: UnsafeMutableRawPointer)
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
