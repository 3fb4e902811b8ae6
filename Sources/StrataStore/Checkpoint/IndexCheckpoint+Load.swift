import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

extension IndexCheckpoint {
    /// An index loaded from a checkpoint, and its segments, opened.
    struct Loaded {
        var index: KeyIndex
        /// In the manifest's order, each with its dead-record count set.
        var readers: [SegmentReader]
    }

    /// The directory's checkpoint, loaded, when it was made over exactly
    /// `segments` (the manifest's, in its order) and its meta passes every
    /// check; why not otherwise; nil when there is none. Never throws:
    /// whatever is wrong, the caller builds the index from the footers
    /// instead.
    ///
    /// No leaf is read here: the interior nodes are built from the meta,
    /// and each chunk of leaves is read, checked and placed where a lookup
    /// first reaches it (`LeafArena`, `CheckpointChunkFiller`). A chunk that
    /// then fails its checks is rebuilt from the segments with `rebuild`,
    /// which builds the whole index from their footers; a chunk even that
    /// cannot rebuild marks the index damaged (`KeyIndex.damage`).
    ///
    /// `inPlace` false reads and checks every chunk now, `ways` at a time,
    /// and copies every leaf out, as a runtime without immortal objects has
    /// it (for tests: the usual load does it only when
    /// `ImmortalObjects.header` is nil), as does an index of one leaf.
    static func load(fileSystem: any FileSystem, directory: String, segments: [SegmentInfo], ways: Int, inPlace: Bool = true,
                     rebuild: @escaping @Sendable () -> KeyIndex?) -> Result<Loaded, Refusal>? {
        let path = directory + "/" + fileName
        let fd: FileDescriptor
        do throws(SystemCallError) { fd = try fileSystem.open(path, .readOnly) } catch {
            return error.errno == ENOENT ? nil : .failure(.unreadable("\(error)"))
        }
        var keepOpen = false
        defer { if !keepOpen { try? fileSystem.close(fd) } }
        let meta: Meta
        let metaOffset: UInt64
        switch readMeta(fileSystem: fileSystem, fd: fd, path: path) {
        case .success(let read): (meta, metaOffset) = read
        case .failure(let refusal): return .failure(refusal)
        }

        if let stale = staleness(of: meta, under: segments) { return .failure(stale) }
        // Each chunk's first leaf, and one past the last chunk's last.
        var firstLeaf: [Int] = [0]
        firstLeaf.reserveCapacity(meta.chunks.count + 1)
        do {
            var chunkEnd: UInt64 = 0
            var leaf = 0, keyCount = 0
            guard meta.leaves.count == meta.leafCount, meta.separators.count == max(meta.leafCount - 1, 0) else {
                return .failure(.damaged("its leaf table disagrees with its counts"))
            }
            for chunk in meta.chunks {
                guard chunk.offset == chunkEnd, chunk.length > 0, chunk.length <= LeafArena.largestChunk,
                      chunk.leafCount > 0, chunk.leafCount <= meta.leafCount - leaf
                else {
                    return .failure(.damaged("its chunk table does not tile the file"))
                }
                // The chunk's leaf images, by their shapes, fill it exactly.
                var bytes = 0, keys = 0
                for shape in meta.leaves[leaf..<(leaf + chunk.leafCount)] {
                    bytes += shape.imageSize
                    keys += Int(shape.keyCount)
                }
                guard bytes == chunk.length, keys == chunk.keyCount else {
                    return .failure(.damaged("the chunk at offset \(chunk.offset) disagrees with its leaves' shapes"))
                }
                chunkEnd += UInt64(chunk.length)
                leaf += chunk.leafCount
                keyCount += chunk.keyCount
                firstLeaf.append(leaf)
            }
            guard chunkEnd == metaOffset, leaf == meta.leafCount, keyCount == meta.keyCount else {
                return .failure(.damaged("its chunk table disagrees with its counts"))
            }
        }
        var readers: [SegmentReader] = []
        for segment in meta.segments {
            guard let reader = SegmentReader.open(fileSystem: fileSystem, directory: directory, info: segment.info,
                                                  trailer: segment.trailer, blocks: segment.blocks)
            else { return .failure(.stale("\(SegmentFormat.fileName(segment.info.fileNumber)) is not the file it was made over, or could not be read")) }
            reader.deadRecords = segment.deadRecords
            readers.append(reader)
        }
        let layout = ChunkLayout(meta: meta, firstLeaf: firstLeaf)

        // Lazily (the usual case): the interior nodes over leaf slots that
        // point where each leaf will lie in the arena.
        if inPlace, let immortal = ImmortalObjects.header, meta.leafCount >= 2, let region = LeafArena.Region(size: Int(metaOffset)) {
            keepOpen = true
            let filler = CheckpointChunkFiller(fileSystem: fileSystem, fd: fd, path: path, layout: layout, rebuild: rebuild)
            let arena = LeafArena(region: region, chunkStarts: meta.chunks.map { Int($0.offset) }, lengths: meta.chunks.map(\.length),
                                  immortal: immortal, filler: filler)
            var leaves: [(address: UnsafeMutableRawPointer, size: Int)] = []
            leaves.reserveCapacity(meta.leafCount)
            for c in meta.chunks.indices {
                var address = arena.leaves(ofChunk: c)
                for shape in meta.leaves[firstLeaf[c]..<firstLeaf[c + 1]] {
                    leaves.append((address, shape.allocationSize))
                    address += shape.imageSize
                }
            }
            let index = KeyIndex.Builder.assemble(inPlaceLeaves: leaves, separators: meta.separators, count: meta.keyCount, arena: arena)
            return .success(Loaded(index: index, readers: readers))
        }

        // Otherwise every chunk now: each run reads a contiguous range of
        // chunks through a buffer of its own, checks them and copies each
        // leaf out.
        let runs = max(1, min(ways, meta.chunks.count))
        var results = [Result<[KeyIndex.NodeRef], Refusal>?](repeating: nil, count: runs)
        let largest = meta.chunks.map(\.length).max() ?? 0
        results.withUnsafeMutableBufferPointer { slots in
            // Each slot is written by exactly one iteration, and read only after they all return.
            nonisolated(unsafe) let slots = slots
            DispatchQueue.concurrentPerform(iterations: runs) { run in
                let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(largest, 1), alignment: 16)
                defer { buffer.deallocate() }
                var copied: [KeyIndex.NodeRef] = []
                for c in (layout.chunks.count * run / runs)..<(layout.chunks.count * (run + 1) / runs) {
                    let bytes = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<layout.chunks[c].length])
                    if let refusal = layout.read(chunk: c, into: bytes, fileSystem: fileSystem, fd: fd, path: path) {
                        slots[run] = .failure(refusal)
                        return
                    }
                    layout.forEachLeaf(ofChunk: c, at: bytes.baseAddress!) { image, _ in copied.append(KeyIndex.leafCopied(image)) }
                }
                slots[run] = .success(copied)
            }
        }
        var leaves: [KeyIndex.NodeRef] = []
        leaves.reserveCapacity(meta.leafCount)
        for result in results {
            switch result! {
            case .success(let run): leaves += run
            case .failure(let refusal): return .failure(refusal)
            }
        }
        let index = KeyIndex.Builder.assemble(leaves: leaves, separators: meta.separators, count: meta.keyCount)
        return .success(Loaded(index: index, readers: readers))
    }

    /// Why a checkpoint of `meta` does not fit a manifest naming `segments`, if it does not.
    static func staleness(of meta: Meta, under segments: [SegmentInfo]) -> Refusal? {
        guard meta.segments.map(\.info) != segments else { return nil }
        let names = { (s: [SegmentInfo]) in s.map { SegmentFormat.fileName($0.fileNumber) }.joined(separator: ", ") }
        return .stale("it lists [\(names(meta.segments.map(\.info)))], the manifest [\(names(segments))]")
    }

    /// The checkpoint's meta, checked, and where it starts.
    static func readMeta(fileSystem: any FileSystem, fd: FileDescriptor, path: String) -> Result<(Meta, UInt64), Refusal> {
        do throws(SystemCallError) {
            let size = try fileSystem.size(fd)
            guard size >= UInt64(trailerSize) else { return .failure(.damaged("\(size) bytes, shorter than its trailer")) }
            var trailerBytes = [UInt8](repeating: 0, count: trailerSize)
            guard try trailerBytes.withMutableBytes({ (b) throws(SystemCallError) in try fileSystem.readAll(fd, into: b, at: size - UInt64(trailerSize), path: path) }) == trailerSize,
                  let trailer = trailerBytes.withUnsafeBytes({ decodeTrailer($0) }),
                  trailer.offset <= size - UInt64(trailerSize), size - UInt64(trailerSize) - trailer.offset == UInt64(trailer.length)
            else { return .failure(.damaged("its trailer fails its checks")) }
            var metaBytes = [UInt8](repeating: 0, count: trailer.length)
            guard try metaBytes.withMutableBytes({ (b) throws(SystemCallError) in try fileSystem.readAll(fd, into: b, at: trailer.offset, path: path) }) == trailer.length,
                  CRC32C.checksum(metaBytes) == trailer.crc
            else { return .failure(.damaged("its meta fails its checksum")) }
            return metaBytes.withUnsafeBytes { Meta.decode($0) }.map { ($0, trailer.offset) }
        } catch {
            return .failure(.unreadable("\(error)"))
        }
    }

    /// Whether the directory's checkpoint would be used by an open of a
    /// store whose manifest names `segments` (its meta is read and
    /// checked; its chunks and the segment files are not): what
    /// `strata-dump info` reports. The reason when not.
    package static func refusal(fileSystem: any FileSystem, directory: String, segments: [SegmentInfo]) -> String? {
        let path = directory + "/" + fileName
        let fd: FileDescriptor
        do throws(SystemCallError) { fd = try fileSystem.open(path, .readOnly) } catch { return Refusal.unreadable("\(error)").description }
        defer { try? fileSystem.close(fd) }
        switch readMeta(fileSystem: fileSystem, fd: fd, path: path) {
        case .success(let (meta, _)):
            return staleness(of: meta, under: segments)?.description
        case .failure(let refusal):
            return refusal.description
        }
    }

    private typealias NodeView = KeyIndex.NodeView
}
