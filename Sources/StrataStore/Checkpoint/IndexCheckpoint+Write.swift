#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

extension IndexCheckpoint {
    /// Saves `index` as the checkpoint over `segments` (in the manifest's
    /// order), replacing the directory's checkpoint, if any. Returns false
    /// and writes nothing when an entry of the index points outside those
    /// segments (the memtable still holds a newer version: the index then
    /// is not the segments' alone). The caller checks that the memtable is
    /// empty: a deletion there leaves no entry to find.
    ///
    /// Not synced: a checkpoint torn by a crash fails its checksums and the
    /// next open rebuilds the index, as it would without one.
    static func write(_ index: KeyIndex, segments: [Segment], fileSystem: any FileSystem, directory: String) throws(SystemCallError) -> Bool {
        let temporary = directory + "/" + temporaryName
        if (try? fileSystem.status(temporary)) != nil { try fileSystem.remove(temporary) }
        let fd = try fileSystem.open(temporary, .createNew)
        // The largest leaf image: leafCapacity keys and just under 3 * maxNodeBytes of key bytes.
        let largestLeaf = KeyIndex.leafImageSize(count: KeyIndex.leafCapacity, byteCount: 3 * KeyIndex.maxNodeBytes)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkBytes + largestLeaf, alignment: 16)
        defer { buffer.deallocate() }
        let bounds = SegmentBounds(segments)
        do throws(SystemCallError) {
            var chunks: [Chunk] = []
            var offset: UInt64 = 0
            var used = 0, leaves = 0, keys = 0
            func writeChunk() throws(SystemCallError) {
                let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<used])
                try fileSystem.writeAll(fd, bytes, at: offset, path: temporary)
                chunks.append(Chunk(offset: offset, length: used, crc: CRC32C.checksum(bytes), leafCount: leaves, keyCount: keys))
                offset += UInt64(used)
                (used, leaves, keys) = (0, 0, 0)
            }
            var outside = false
            var shapes: [LeafShape] = []
            var separators = KeyIndex.Separators(reservingCapacity: index.count / KeyIndex.leafCapacity)
            try index.forEachLeaf { (leaf, separatorBefore) throws(SystemCallError) in
                // A merge can leave a leaf empty beside one of very long keys: it holds nothing to save.
                guard !outside, leaf.count > 0 else { return }
                for i in 0..<leaf.count where !bounds.contains(leaf.entry(i)) {
                    outside = true
                    return
                }
                let size = KeyIndex.leafImageSize(count: leaf.count, byteCount: leaf.byteCount)
                if used > 0 && used + size > chunkBytes { try writeChunk() }
                used += KeyIndex.writeLeafImage(leaf, to: buffer.baseAddress! + used)
                // The tree's own separator divides this leaf from the last one
                // saved, empty leaves between them or not (only the tree's
                // first leaf has none, and it comes first).
                if !shapes.isEmpty, let separatorBefore { separators.append(separatorBefore) }
                shapes.append(LeafShape(keyCount: UInt16(truncatingIfNeeded: leaf.count), keyBytes: UInt16(truncatingIfNeeded: leaf.byteCount)))
                leaves += 1
                keys += leaf.count
            }
            if outside {
                try? fileSystem.close(fd)
                try? fileSystem.remove(temporary)
                return false
            }
            if used > 0 { try writeChunk() }
            let meta = Meta(keyCount: index.count, leafCount: shapes.count, segments: segments, chunks: chunks,
                            leaves: shapes, separators: separators).encoded()
            try meta.withBytes { (b) throws(SystemCallError) in try fileSystem.writeAll(fd, b, at: offset, path: temporary) }
            let trailer = encodeTrailer(metaOffset: offset, metaLength: meta.count, metaCRC: CRC32C.checksum(meta))
            try trailer.withBytes { (b) throws(SystemCallError) in try fileSystem.writeAll(fd, b, at: offset + UInt64(meta.count), path: temporary) }
        } catch {
            try? fileSystem.close(fd)
            try? fileSystem.remove(temporary)
            throw error
        }
        do throws(SystemCallError) {
            try fileSystem.close(fd)
            try fileSystem.rename(temporary, to: directory + "/" + fileName)
        } catch {
            try? fileSystem.remove(temporary)
            throw error
        }
        return true
    }
}
