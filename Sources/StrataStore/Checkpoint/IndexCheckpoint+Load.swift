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
        var chunkEnd: UInt64 = 0
        var leafCount = 0, keyCount = 0
        for chunk in meta.chunks {
            // A leaf image takes at least 32 bytes (a header, a slot, an end,
            // a key byte, padding), and each key at least 19 of them.
            guard chunk.offset == chunkEnd, chunk.length > 0, chunk.leafCount > 0, chunk.keyCount >= chunk.leafCount,
                  chunk.leafCount <= chunk.length / 32, chunk.keyCount <= chunk.length / 19
            else {
                return .failure(.damaged("its chunk table does not tile the file"))
            }
            chunkEnd += UInt64(chunk.length)
            leafCount += chunk.leafCount
            keyCount += chunk.keyCount
        }
        guard chunkEnd == metaOffset, leafCount == meta.leafCount, keyCount == meta.keyCount else {
            return .failure(.damaged("its chunk table disagrees with its counts"))
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
        var results = [Result<LoadedRun, Refusal>?](repeating: nil, count: runs)
        let bounds = SegmentBounds(meta.segments)
        let largest = chunks.map(\.length).max() ?? 0
        results.withUnsafeMutableBufferPointer { slots in
            // Each slot is written by exactly one iteration, and read only after they all return.
            nonisolated(unsafe) let slots = slots
            DispatchQueue.concurrentPerform(iterations: runs) { run in
                let buffer = arena == nil ? UnsafeMutableRawBufferPointer.allocate(byteCount: max(largest, 1), alignment: 16) : nil
                defer { buffer?.deallocate() }
                var loaded = LoadedRun()
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
                    var offset = 0, keys = 0, made = 0
                    while offset < chunk.length {
                        let image = bytes.baseAddress! + offset
                        guard let size = KeyIndex.checkLeafImage(UnsafeRawBufferPointer(rebasing: bytes[offset...]), entries: bounds) else {
                            slots[run] = .failure(.damaged("a leaf in the chunk at offset \(chunk.offset) breaks the index's rules"))
                            return
                        }
                        let leaf = immortal.map { KeyIndex.leafInPlace(image, $0) } ?? KeyIndex.leafCopied(image)
                        let view = NodeView(leaf.node)
                        if let previous = loaded.leaves.last {
                            guard KeyIndex.appendSeparator(after: NodeView(previous.node), before: view, to: &loaded.separators) else {
                                slots[run] = .failure(.damaged("its leaves are out of order"))
                                return
                            }
                        }
                        loaded.leaves.append(leaf)
                        keys += view.count
                        made += 1
                        offset += size
                    }
                    guard offset == chunk.length, made == chunk.leafCount, keys == chunk.keyCount else {
                        slots[run] = .failure(.damaged("the chunk at offset \(chunk.offset) disagrees with its counts"))
                        return
                    }
                }
                slots[run] = .success(loaded)
            }
        }
        var leaves: [KeyIndex.NodeRef] = []
        var separators = KeyIndex.Separators(reservingCapacity: max(meta.leafCount - 1, 0))
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
            case .success(let run):
                if let last = leaves.last, let first = run.leaves.first {
                    guard KeyIndex.appendSeparator(after: NodeView(last.node), before: NodeView(first.node), to: &separators) else {
                        return refuse(.damaged("its leaves are out of order"))
                    }
                }
                leaves += run.leaves
                separators.append(contentsOf: run.separators)
            case .failure(let refusal): return refuse(refusal)
            }
        }
        results = []
        let index = KeyIndex.assemble(leaves: leaves, separators: separators, count: meta.keyCount, arena: arena)
        // The index holds the arena, but for one leaf, which it copies.
        leaves = []
        withExtendedLifetime(arena) {}
        return .success(Loaded(index: index, readers: readers))
    }

    /// What one run of a load made: its leaves, and the separators between them.
    private struct LoadedRun {
        var leaves: [KeyIndex.NodeRef] = []
        var separators = KeyIndex.Separators()
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
