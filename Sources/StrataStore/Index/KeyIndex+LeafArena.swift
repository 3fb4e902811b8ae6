// Leaves that live where an index checkpoint was read: the checkpoint's
// chunks read into memory, each leaf image laid out exactly as a
// `KeyIndex.Node` object, so that opening a store makes no leaf of its own.
//
// Why: opening a store of a million keys from a checkpoint made a leaf per
// 18 to 32 keys — an allocation, a copy and a check each — and closing it
// freed them one by one. In place, the leaves cost a read and a check, and
// a close frees one allocation per chunk of about 1 MiB.
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
// parents that point into them are freed. `ImmortalObjects.header` checks
// that the runtime behaves so before any leaf relies on it; where it does
// not, the checkpoint's leaves are copied into nodes of their own instead.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// The memory of leaves loaded in place from an index checkpoint: one
/// allocation per chunk of the checkpoint.
///
/// Every `KeyIndex` value (and `Cursor`) that may reach one of its leaves
/// holds it; its chunks are freed when the last of them goes.
///
/// Chunks come from malloc rather than one `mmap`ed region: in a process
/// that has freed memory before (a store opened after an import), malloc
/// hands back pages already mapped, where a fresh region is faulted in and
/// zeroed by the kernel (and, asked for huge pages, may first have to make
/// free 2 MiB pages by compacting memory).
/// Measured 2026-11-27 in `strata-bench engine`, which opens after its
/// fills: a region of huge pages made the open 35–51 ms against 29–31 ms
/// for the build before (one malloc a leaf).
///
/// `@unchecked Sendable`: a chunk's bytes are written only while the
/// checkpoint loads, by the one run that owns the chunk, before the index
/// exists; afterwards they are only read (an in-place leaf is never
/// written, see above), and `chunks` never changes after `init`.
final class LeafArena: @unchecked Sendable {
    /// Each chunk's memory, in the checkpoint's order.
    let chunks: [UnsafeMutableRawPointer]

    /// Memory for chunks of `lengths` bytes.
    init(chunkLengths lengths: [Int]) {
        chunks = lengths.map { UnsafeMutableRawPointer.allocate(byteCount: max($0, 1), alignment: 16) }
    }

    deinit {
        for chunk in chunks { chunk.deallocate() }
    }
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
