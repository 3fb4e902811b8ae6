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
    /// `segments` (the manifest's, in its order) and every check passes;
    /// why not otherwise; nil when there is none. Never throws: whatever
    /// is wrong, the caller builds the index from the footers instead.
    ///
    /// The chunks are read and their leaves checked `ways` at a time.
    /// `inPlace` false copies every leaf out of the chunks, as a runtime
    /// without immortal objects has it (for tests: the usual load does it
    /// only when `ImmortalObjects.header` is nil).
    static func load(fileSystem: any FileSystem, directory: String, segments: [SegmentInfo], ways: Int,
                     inPlace: Bool = true) -> Result<Loaded, Refusal>? {
        let path = directory + "/" + fileName
        let fd: FileDescriptor
        do throws(SystemCallError) { fd = try fileSystem.open(path, .readOnly) } catch {
            return error.errno == ENOENT ? nil : .failure(.unreadable("\(error)"))
        }
        defer { try? fileSystem.close(fd) }
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
                guard chunk.offset == chunkEnd, chunk.length > 0, chunk.leafCount > 0, chunk.leafCount <= meta.leafCount - leaf else {
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

        // Each run reads a contiguous range of chunks and checks its leaves.
        // In place (the usual case), each chunk is read into the arena's
        // memory for it and each leaf is made an object where it lies;
        // otherwise each run reads through a buffer of its own and copies
        // each leaf out.
        let chunks = meta.chunks
        let runs = max(1, min(ways, chunks.count))
        let immortal = inPlace ? ImmortalObjects.header : nil
        let arena = immortal == nil ? nil : LeafArena(chunkLengths: chunks.map(\.length))
        var results = [Result<[KeyIndex.NodeRef], Refusal>?](repeating: nil, count: runs)
        let bounds = SegmentBounds(meta.segments)
        let shapes = meta.leaves, separators = meta.separators, leafCount = meta.leafCount, leafStarts = firstLeaf
        let largest = chunks.map(\.length).max() ?? 0
        results.withUnsafeMutableBufferPointer { slots in
            // Each slot is written by exactly one iteration, and read only after they all return.
            nonisolated(unsafe) let slots = slots
            DispatchQueue.concurrentPerform(iterations: runs) { run in
                let buffer = arena == nil ? UnsafeMutableRawBufferPointer.allocate(byteCount: max(largest, 1), alignment: 16) : nil
                defer { buffer?.deallocate() }
                var loaded: [KeyIndex.NodeRef] = []
                for c in (chunks.count * run / runs)..<(chunks.count * (run + 1) / runs) {
                    let chunk = chunks[c]
                    let bytes = arena.map { UnsafeMutableRawBufferPointer(start: $0.chunks[c], count: chunk.length) }
                        ?? UnsafeMutableRawBufferPointer(rebasing: buffer![0..<chunk.length])
                    do throws(SystemCallError) {
                        guard try fileSystem.readAll(fd, into: bytes, at: chunk.offset, path: path) == chunk.length else {
                            slots[run] = .failure(.damaged("a chunk is cut short"))
                            return
                        }
                    } catch {
                        slots[run] = .failure(.unreadable("\(error)"))
                        return
                    }
                    guard CRC32C.checksum(UnsafeRawBufferPointer(bytes)) == chunk.crc else {
                        slots[run] = .failure(.damaged("the chunk at offset \(chunk.offset) fails its checksum"))
                        return
                    }
                    // Each leaf: a leaf by the index's rules, of the shape the
                    // meta gives it, between the separators on either side.
                    var offset = 0
                    for g in leafStarts[c]..<leafStarts[c + 1] {
                        let image = bytes.baseAddress! + offset
                        guard let size = KeyIndex.checkLeafImage(UnsafeRawBufferPointer(rebasing: bytes[offset...]), entries: bounds),
                              KeyIndex.leafImage(image, has: shapes[g], between: g == 0 ? nil : g - 1, and: g == leafCount - 1 ? nil : g,
                                                 of: separators)
                        else {
                            slots[run] = .failure(.damaged("a leaf in the chunk at offset \(chunk.offset) breaks the index's rules"))
                            return
                        }
                        loaded.append(immortal.map { KeyIndex.leafInPlace(image, $0) } ?? KeyIndex.leafCopied(image))
                        offset += size
                    }
                }
                slots[run] = .success(loaded)
            }
        }
        var leaves: [KeyIndex.NodeRef] = []
        // A release of an in-place leaf reads its reference count, so every
        // reference to one goes before the arena can.
        func refuse(_ refusal: Refusal) -> Result<Loaded, Refusal> {
            results = []
            leaves = []
            withExtendedLifetime(arena) {}
            return .failure(refusal)
        }
        leaves.reserveCapacity(meta.leafCount)
        for result in results {
            switch result! {
            case .success(let run): leaves += run
            case .failure(let refusal): return refuse(refusal)
            }
        }
        results = []
        let index = KeyIndex.assemble(leaves: leaves, separators: meta.separators, count: meta.keyCount, arena: arena)
        // The index holds the arena, but for one leaf, which it copies.
        leaves = []
        withExtendedLifetime(arena) {}
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
