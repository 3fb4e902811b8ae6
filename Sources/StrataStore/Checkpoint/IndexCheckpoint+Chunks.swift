// The index checkpoint's chunks of leaves, read when they are first needed:
// where each leaf lies, how a chunk read from the file is checked, and what
// fills a chunk that fails its checks.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

extension IndexCheckpoint {
    /// Where each leaf of a checkpoint lies and what it must hold, from its
    /// meta: the chunks, each leaf's shape, the separators between leaves
    /// and the segments its entries may point into.
    struct ChunkLayout: Sendable {
        let chunks: [Chunk]
        let shapes: [LeafShape]
        let separators: KeyIndex.Separators
        /// Chunk `c` holds leaves `firstLeaf[c]..<firstLeaf[c + 1]`.
        let firstLeaf: [Int]
        let bounds: SegmentBounds

        init(meta: Meta, firstLeaf: [Int]) {
            chunks = meta.chunks
            shapes = meta.leaves
            separators = meta.separators
            self.firstLeaf = firstLeaf
            bounds = SegmentBounds(meta.segments)
        }

        /// Calls `body` with the address and number of each leaf of chunk `c`,
        /// whose bytes lie at `base`: where the shapes put them, whatever
        /// the bytes there hold.
        func forEachLeaf(ofChunk c: Int, at base: UnsafeMutableRawPointer, _ body: (UnsafeMutableRawPointer, Int) -> Void) {
            var offset = 0
            for leaf in firstLeaf[c]..<firstLeaf[c + 1] {
                body(base + offset, leaf)
                offset += shapes[leaf].imageSize
            }
        }

        /// Reads chunk `c` into `bytes` (its length) and checks it: nil when
        /// it passes its checksum and every leaf is a leaf by the index's
        /// rules, of the shape the meta gives it, between the separators on
        /// either side; why not otherwise.
        func read(chunk c: Int, into bytes: UnsafeMutableRawBufferPointer, fileSystem: any FileSystem, fd: FileDescriptor,
                  path: String) -> Refusal? {
            read(chunks: c..<c + 1, into: bytes, fileSystem: fileSystem, fd: fd, path: path) ?? check(chunk: c, UnsafeRawBufferPointer(bytes))
        }

        /// The bytes `range` spans in the file: its chunks are neighbours there.
        func byteCount(of range: Range<Int>) -> Int {
            Int(chunks[range.upperBound - 1].offset - chunks[range.lowerBound].offset) + chunks[range.upperBound - 1].length
        }

        /// Reads the chunks of `range` into `bytes`, in one read; why not, if they could not be.
        func read(chunks range: Range<Int>, into bytes: UnsafeMutableRawBufferPointer, fileSystem: any FileSystem, fd: FileDescriptor,
                  path: String) -> Refusal? {
            let length = byteCount(of: range)
            do throws(SystemCallError) {
                let into = UnsafeMutableRawBufferPointer(rebasing: bytes[0..<length])
                guard try fileSystem.readAll(fd, into: into, at: chunks[range.lowerBound].offset, path: path) == length else {
                    return .damaged("a chunk is cut short")
                }
            } catch {
                return .unreadable("\(error)")
            }
            return nil
        }

        /// Checks chunk `c`, read into `bytes`: see ``read(chunk:into:fileSystem:fd:path:)``.
        func check(chunk c: Int, _ bytes: UnsafeRawBufferPointer) -> Refusal? {
            let chunk = chunks[c]
            let bytes = UnsafeRawBufferPointer(rebasing: bytes[0..<chunk.length])
            guard CRC32C.checksum(bytes) == chunk.crc else {
                return .damaged("the chunk at offset \(chunk.offset) fails its checksum")
            }
            let last = shapes.count - 1
            var offset = 0
            for leaf in firstLeaf[c]..<firstLeaf[c + 1] {
                let image = bytes.baseAddress! + offset
                guard let size = KeyIndex.checkLeafImage(UnsafeRawBufferPointer(rebasing: bytes[offset...]), entries: bounds),
                      KeyIndex.leafImage(image, has: shapes[leaf], between: leaf == 0 ? nil : leaf - 1, and: leaf == last ? nil : leaf,
                                         of: separators)
                else {
                    return .damaged("a leaf in the chunk at offset \(chunk.offset) breaks the index's rules")
                }
                offset += size
            }
            return nil
        }
    }
}

/// Fills a `LeafArena`'s chunks from an index checkpoint: each is read from
/// the file and checked; one that fails (damage the meta's checksum could
/// not see, an I/O error) is rebuilt from the segments, leaf by leaf, from
/// an index built from their footers (once, for every such chunk); one
/// even that cannot rebuild (the segments cannot be read, or do not hold
/// what the meta says) is left as empty leaves, the index is marked
/// damaged, so that reads say so instead of missing keys, and the file is
/// removed, so that the next open rebuilds the index.
///
/// The file stays open until every chunk has been read.
///
/// `@unchecked Sendable`: `fd`, `fallback`, `rebuilt` and `failure` change
/// only in `fill` and `allChunksRead`, and are read in `damage`, all of
/// which the arena calls under its `loading` lock; the rest never changes.
final class CheckpointChunkFiller: LeafChunkFiller, @unchecked Sendable {
    private let fileSystem: any FileSystem
    private var fd: FileDescriptor?
    private let path: String
    private let layout: IndexCheckpoint.ChunkLayout
    /// The whole index, built from the checkpoint's segments' footers.
    private let rebuild: @Sendable () -> KeyIndex?
    private enum Fallback { case untried, built(KeyIndex), unavailable }
    private var fallback = Fallback.untried
    private var rebuilt = 0
    private var failure: String?
    /// Which file `path` named when this filler was made (nil where the
    /// file system does not say): the one a failure may remove. A close may
    /// have put a newer checkpoint there since, which it must leave alone.
    private let opened: [UInt64]?

    init(fileSystem: any FileSystem, fd: FileDescriptor, path: String, layout: IndexCheckpoint.ChunkLayout,
         rebuild: @escaping @Sendable () -> KeyIndex?) {
        self.fileSystem = fileSystem
        self.fd = fd
        self.path = path
        self.layout = layout
        self.rebuild = rebuild
        opened = (try? fileSystem.status(path))??.identity
    }

    deinit {
        if let fd { try? fileSystem.close(fd) }
    }

    var damage: (rebuilt: Int, failure: String?) { (rebuilt, failure) }

    func fill(chunks range: Range<Int>, into memory: UnsafeMutableRawPointer) {
        func read(_ chunks: Range<Int>, at memory: UnsafeMutableRawPointer) -> IndexCheckpoint.Refusal? {
            let bytes = UnsafeMutableRawBufferPointer(start: memory, count: layout.byteCount(of: chunks))
            return fd.map { layout.read(chunks: chunks, into: bytes, fileSystem: fileSystem, fd: $0, path: path) } ?? .unreadable("its file was closed")
        }
        // A read of several chunks that fails is tried again a chunk at a
        // time, so that only the chunks it cannot read are rebuilt.
        let unread = read(range, at: memory)
        let start = layout.chunks[range.lowerBound].offset
        for c in range {
            let at = memory + Int(layout.chunks[c].offset - start)
            let refusal = unread == nil ? nil : range.count == 1 ? unread : read(c..<c + 1, at: at)
            guard let refusal = refusal ?? layout.check(chunk: c, UnsafeRawBufferPointer(start: at, count: layout.chunks[c].length)) else {
                // The object's words, whatever the file held there, are the arena's to write.
                layout.forEachLeaf(ofChunk: c, at: at) { image, _ in memset(image, 0, 16) }
                continue
            }
            rebuildChunk(c, at: at, because: refusal)
        }
    }

    func forEachLeaf(ofChunk c: Int, _ body: (_ offset: Int, _ size: Int) -> Void) {
        var offset = 0
        for leaf in layout.firstLeaf[c]..<layout.firstLeaf[c + 1] {
            let size = layout.shapes[leaf].imageSize
            body(offset, size)
            offset += size
        }
    }

    func allChunksRead() {
        if let fd { try? fileSystem.close(fd) }
        fd = nil
        fallback = .unavailable
    }

    /// Chunk `c`'s leaves, made again from the segments: each leaf takes
    /// the keys between its separators, which must be exactly as many, and
    /// as many bytes, as its shape says (the interior nodes were built for
    /// that shape).
    private func rebuildChunk(_ c: Int, at memory: UnsafeMutableRawPointer, because refusal: IndexCheckpoint.Refusal) {
        if case .untried = fallback { fallback = rebuild().map { .built($0) } ?? .unavailable }
        guard case .built(let index) = fallback else {
            return fail(c, at: memory, "chunk \(c) was \(refusal.description), and the segments could not be read to rebuild it")
        }
        var mismatch: Int?
        layout.forEachLeaf(ofChunk: c, at: memory) { image, leaf in
            if mismatch == nil, !rebuildLeaf(leaf, at: image, from: index) { mismatch = leaf }
        }
        if let mismatch {
            return fail(c, at: memory, "chunk \(c) was \(refusal.description), and the segments do not hold the keys its leaf \(mismatch) had")
        }
        rebuilt += 1
    }

    /// Writes leaf `leaf` at `image` from `index`'s keys between the
    /// leaf's separators; false (and nothing written) unless they fit its shape.
    private func rebuildLeaf(_ leaf: Int, at image: UnsafeMutableRawPointer, from index: KeyIndex) -> Bool {
        let shape = layout.shapes[leaf]
        let lower: [UInt8]? = leaf == 0 ? nil : separator(leaf - 1)
        let upper: [UInt8]? = leaf == layout.shapes.count - 1 ? nil : separator(leaf)
        var keys: [UInt8] = [], ends: [Int] = [], entries: [IndexEntry] = []
        index.forEach(from: lower) { key, entry in
            if let upper, upper.withUnsafeBytes({ KeyIndex.compare(key, $0) }) >= 0 { return false }
            keys.append(contentsOf: key)
            ends.append(keys.count)
            entries.append(entry)
            return entries.count <= Int(shape.keyCount)
        }
        guard entries.count == Int(shape.keyCount), keys.count == Int(shape.keyBytes) else { return false }
        let node = KeyIndex.Node.make(height: 0, slots: entries.count, byteCapacity: keys.count)
        let view = KeyIndex.NodeView(node)
        keys.withUnsafeBytes { k in
            view.fillLeaf(count: entries.count,
                          key: { i in UnsafeRawBufferPointer(rebasing: k[(i == 0 ? 0 : ends[i - 1])..<ends[i]]) },
                          entry: { entries[$0] })
        }
        _ = KeyIndex.writeLeafImage(view, to: image)
        withExtendedLifetime(node) {}
        return true
    }

    private func separator(_ i: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        layout.separators.withKey(i) { bytes.append(contentsOf: $0) }
        return bytes
    }

    /// Leaves chunk `c`'s leaves empty and the index damaged (see the type).
    private func fail(_ c: Int, at memory: UnsafeMutableRawPointer, _ why: String) {
        layout.forEachLeaf(ofChunk: c, at: memory) { image, _ in
            memset(image, 0, KeyIndex.leafImageHeaderSize)
            (image + KeyIndex.NodeView.headerOffset).storeBytes(
                of: KeyIndex.NodeHeader(count: 0, byteCount: 0, slots: 0, byteCapacity: 0, height: 0, flags: KeyIndex.inPlace),
                as: KeyIndex.NodeHeader.self)
        }
        if failure == nil {
            failure = "the index checkpoint \(path) is damaged: \(why)"
            if (try? fileSystem.status(path))??.identity == opened { try? fileSystem.remove(path) }
        }
    }
}
