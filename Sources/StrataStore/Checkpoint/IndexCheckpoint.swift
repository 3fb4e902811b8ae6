/// The index checkpoint: the engine's in-memory index over one set of
/// segments, saved when a store closes, so that the next open copies it in
/// instead of rebuilding it from every segment's key table.
///
/// Rebuilding is what opening a large store costs: a million keys read,
/// checked, merged and placed into leaves, and the memory of three copies
/// of them touched for the first time, page fault by page fault. A
/// checkpoint holds the leaves as they are in memory, objects and all, and
/// a meta from which the open builds the interior nodes; each chunk of
/// leaves is read into memory and checked where it lies when a lookup
/// first reaches it (`LeafArena`): no leaf is allocated or copied, and the
/// open reads none.
///
/// It is a cache, never the truth: the segments are. It names the exact
/// segments it was made over — the manifest's records of them, their
/// trailers as on disk (which carry their footers' checksums) and their
/// block tables — and is used only when the manifest names exactly those
/// segments and each file still ends in that trailer. Anything else
/// (another segment set after a flush or compaction, a checksum that
/// fails, a format or byte order this build does not read, an I/O error)
/// and the open rebuilds the index from the footers as it always did, and
/// says why in ``RecoveryReport/indexCheckpoint``; a chunk that fails when
/// it is read is rebuilt from the segments (`CheckpointChunkFiller`). The log is replayed on
/// top either way, so writes after the checkpoint, crash or not, are never
/// lost: the checkpoint covers the segments, the log everything newer.
/// Segment numbers are never reused, so a segment set seen once names the
/// same bytes forever.
///
/// ```
/// file     := chunk* · meta · trailer
/// chunk    := leaf image*                      at most 4 KiB, or one leaf; see KeyIndex+LeafImages.swift
/// meta     := format u32 · byteOrder u32 · keyCount u64 · leafCount u64 · segmentCount u32 · chunkCount u32
///             · segment* · chunk record* · leaf shape × leafCount
///             · separator end u32 × (leafCount − 1) · separator bytes
/// segment  := fileNumber u32 · blockCount u32 · fileSize u64 · recordCount u64 · minimumSequence u64
///             · maximumSequence u64 · deadRecords u64 · trailer (56 bytes, as in the segment file)
///             · (offset u64 · storedLength u32 · rawLength u32 · recordCount u32 · reserved u32) * blockCount
/// chunk record := offset u64 · length u32 · crc32c(chunk) u32 · leafCount u32 · keyCount u32
/// leaf shape   := keyCount u16 · keyBytes u16  (each leaf's, in key order: where each image lies and how large it is)
/// separator    := the key dividing two neighbouring leaves (above every key of the left, at most the right's first):
///                 the interior nodes' keys, so that the open builds them without reading a leaf
/// trailer  := metaOffset u64 · metaLength u32 · crc32c(meta) u32 · crc32c(previous 16 bytes) u32 · "SIDX" u32
/// ```
/// Integers are little-endian except inside leaf images, which are in the
/// host's order (`byteOrder` says which: a host of the other order does not
/// use the file).
package enum IndexCheckpoint {
    package static let fileName = "INDEX"
    package static let temporaryName = "INDEX.tmp"
    /// 2 since leaf images are leaves in place (format 1's images, a
    /// smaller header, are refused as `unsupported`: the open rebuilds);
    /// 3 since the meta holds each leaf's shape and the separators between
    /// leaves (a format-2 checkpoint is refused the same way); 4 since
    /// chunks are cut at 4 KiB (a format-3 checkpoint, of chunks of 1 MiB,
    /// is refused the same way, and the next close writes a new one).
    static let format: UInt32 = 4
    static let magic: UInt32 = 0x5844_4953  // "SIDX"
    static let trailerSize = 24
    /// Written as a native integer: reads back as this only on a host of the writer's byte order.
    static let byteOrderMark: UInt32 = 0x0102_0304
    /// A chunk is cut before a leaf that would take it past this many
    /// bytes: a chunk is this or less, or one leaf (see `LeafArena` for why so small).
    static let chunkBytes = 4 << 10

    /// What the checkpoint records of each segment it was made over.
    struct Segment: Equatable {
        var info: SegmentInfo
        var deadRecords: Int
        var trailer: [UInt8]
        var blocks: [SegmentFormat.BlockHandle]
    }

    struct Chunk: Equatable {
        var offset: UInt64
        var length: Int
        var crc: UInt32
        var leafCount: Int
        var keyCount: Int
    }

    /// A leaf's key count and key bytes: what its image's size follows from.
    struct LeafShape: Equatable {
        var keyCount: UInt16
        var keyBytes: UInt16

        var imageSize: Int { KeyIndex.leafImageSize(count: Int(keyCount), byteCount: Int(keyBytes)) }
        /// The leaf's `NodeView.allocationSize` in place (its image without the padding).
        var allocationSize: Int { KeyIndex.leafImageHeaderSize + Int(keyCount) * 18 + Int(keyBytes) }
    }

    struct Meta: Equatable {
        var keyCount: Int
        var leafCount: Int
        var segments: [Segment]
        var chunks: [Chunk]
        /// Every leaf's, in key order (`leafCount` of them).
        var leaves: [LeafShape]
        /// `leafCount − 1` of them: separator `i` divides leaf `i` from leaf `i + 1`.
        var separators: KeyIndex.Separators

        func encoded() -> [UInt8] {
            var b: [UInt8] = []
            b.appendInteger(IndexCheckpoint.format)
            b.append(contentsOf: withUnsafeBytes(of: IndexCheckpoint.byteOrderMark) { Array($0) })
            b.appendInteger(UInt64(keyCount))
            b.appendInteger(UInt64(leafCount))
            b.appendInteger(UInt32(segments.count))
            b.appendInteger(UInt32(chunks.count))
            for s in segments {
                b.appendInteger(s.info.fileNumber)
                b.appendInteger(UInt32(s.blocks.count))
                b.appendInteger(s.info.fileSize)
                b.appendInteger(s.info.recordCount)
                b.appendInteger(s.info.minimumSequence)
                b.appendInteger(s.info.maximumSequence)
                b.appendInteger(UInt64(s.deadRecords))
                b.append(contentsOf: s.trailer)
                for block in s.blocks {
                    b.appendInteger(block.offset)
                    b.appendInteger(block.storedLength)
                    b.appendInteger(block.rawLength)
                    b.appendInteger(block.recordCount)
                    b.appendInteger(UInt32(0))
                }
            }
            for c in chunks {
                b.appendInteger(c.offset)
                b.appendInteger(UInt32(c.length))
                b.appendInteger(c.crc)
                b.appendInteger(UInt32(c.leafCount))
                b.appendInteger(UInt32(c.keyCount))
            }
            b.reserveCapacity(b.count + leaves.count * 8 + separators.bytes.count)
            for leaf in leaves {
                b.appendInteger(leaf.keyCount)
                b.appendInteger(leaf.keyBytes)
            }
            for end in separators.ends { b.appendInteger(UInt32(end)) }
            b.append(contentsOf: separators.bytes)
            return b
        }

        /// Why `bytes` is not a meta this build reads, or the meta.
        static func decode(_ bytes: UnsafeRawBufferPointer) -> Result<Meta, IndexCheckpoint.Refusal> {
            var r = ByteReader(bytes)
            guard let format = r.readInteger(UInt32.self) else { return .failure(.damaged("its meta is cut short")) }
            guard format == IndexCheckpoint.format else { return .failure(.unsupported("format \(format)")) }
            guard let mark = r.readBytes(4) else { return .failure(.damaged("its meta is cut short")) }
            guard mark.loadUnaligned(as: UInt32.self) == IndexCheckpoint.byteOrderMark else {
                return .failure(.unsupported("written on a host of the other byte order"))
            }
            guard let keys = r.readInteger(UInt64.self), let leaves = r.readInteger(UInt64.self),
                  let segmentCount = r.readInteger(UInt32.self), let chunkCount = r.readInteger(UInt32.self),
                  keys <= UInt64(Int.max), leaves <= keys, Int(segmentCount) <= r.remaining / 100, Int(chunkCount) <= r.remaining / 24
            else { return .failure(.damaged("its meta's counts are impossible")) }
            var segments: [Segment] = []
            for _ in 0..<segmentCount {
                guard let number = r.readInteger(UInt32.self), let blockCount = r.readInteger(UInt32.self),
                      let size = r.readInteger(UInt64.self), let records = r.readInteger(UInt64.self),
                      let minimum = r.readInteger(UInt64.self), let maximum = r.readInteger(UInt64.self),
                      let dead = r.readInteger(UInt64.self), dead <= records, dead <= UInt64(Int.max),
                      let trailer = r.readBytes(SegmentFormat.trailerSize), Int(blockCount) <= r.remaining / 24
                else { return .failure(.damaged("a segment's record is cut short")) }
                var blocks: [SegmentFormat.BlockHandle] = []
                blocks.reserveCapacity(Int(blockCount))
                for _ in 0..<blockCount {
                    guard let offset = r.readInteger(UInt64.self), let stored = r.readInteger(UInt32.self),
                          let raw = r.readInteger(UInt32.self), let count = r.readInteger(UInt32.self), r.readInteger(UInt32.self) != nil
                    else { return .failure(.damaged("a block table is cut short")) }
                    blocks.append(.init(offset: offset, storedLength: stored, rawLength: raw, recordCount: count))
                }
                segments.append(Segment(info: SegmentInfo(fileNumber: number, fileSize: size, recordCount: records,
                                                          minimumSequence: minimum, maximumSequence: maximum),
                                        deadRecords: Int(dead), trailer: Array(trailer), blocks: blocks))
            }
            var chunks: [Chunk] = []
            for _ in 0..<chunkCount {
                guard let offset = r.readInteger(UInt64.self), let length = r.readInteger(UInt32.self), let crc = r.readInteger(UInt32.self),
                      let leafCount = r.readInteger(UInt32.self), let keyCount = r.readInteger(UInt32.self)
                else { return .failure(.damaged("its chunk table is cut short")) }
                chunks.append(Chunk(offset: offset, length: Int(length), crc: crc, leafCount: Int(leafCount), keyCount: Int(keyCount)))
            }
            let separatorCount = max(Int(leaves) - 1, 0)
            guard Int(leaves) <= r.remaining / 4, separatorCount <= (r.remaining - Int(leaves) * 4) / 4 else {
                return .failure(.damaged("its leaf table is cut short"))
            }
            var shapes: [LeafShape] = []
            shapes.reserveCapacity(Int(leaves))
            for _ in 0..<leaves {
                shapes.append(LeafShape(keyCount: r.readInteger(UInt16.self)!, keyBytes: r.readInteger(UInt16.self)!))
            }
            var ends: [Int] = []
            ends.reserveCapacity(separatorCount)
            for _ in 0..<separatorCount { ends.append(Int(r.readInteger(UInt32.self)!)) }
            guard let bytes = r.readBytes(r.remaining), let separators = KeyIndex.Separators(bytes: Array(bytes), ends: ends) else {
                return .failure(.damaged("its separators do not fill its meta"))
            }
            return .success(Meta(keyCount: Int(keys), leafCount: Int(leaves), segments: segments, chunks: chunks,
                                 leaves: shapes, separators: separators))
        }
    }

    /// Why an open did not use a checkpoint it found.
    enum Refusal: Error, Equatable {
        /// Made over other segments than the manifest names now (a flush or
        /// compaction since): the usual case, nothing wrong.
        case stale(String)
        /// A format or byte order this build does not read.
        case unsupported(String)
        /// A checksum or structure check failed.
        case damaged(String)
        /// Reading it failed.
        case unreadable(String)

        var description: String {
            switch self {
            case .stale(let why): "made over other segments (\(why))"
            case .unsupported(let why): "not readable by this build (\(why))"
            case .damaged(let why): "damaged (\(why))"
            case .unreadable(let why): "could not be read (\(why))"
            }
        }
    }

    static func encodeTrailer(metaOffset: UInt64, metaLength: Int, metaCRC: UInt32) -> [UInt8] {
        var b: [UInt8] = []
        b.appendInteger(metaOffset)
        b.appendInteger(UInt32(metaLength))
        b.appendInteger(metaCRC)
        b.appendInteger(CRC32C.checksum(b))
        b.appendInteger(magic)
        return b
    }

    /// (metaOffset, metaLength, metaCRC) when `bytes` is a trailer.
    static func decodeTrailer(_ bytes: UnsafeRawBufferPointer) -> (offset: UInt64, length: Int, crc: UInt32)? {
        guard bytes.count == trailerSize else { return nil }
        var r = ByteReader(bytes)
        guard let offset = r.readInteger(UInt64.self), let length = r.readInteger(UInt32.self), let crc = r.readInteger(UInt32.self),
              let own = r.readInteger(UInt32.self), let m = r.readInteger(UInt32.self), m == magic,
              CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<16])) == own
        else { return nil }
        return (offset, Int(length), crc)
    }
}
