/// An open segment file: its block table in memory, its blocks read on demand.
///
/// The file descriptor stays open for the reader's lifetime, so a read view
/// that still refers to a segment that compaction has since deleted keeps
/// reading it (an unlinked file lives on while a descriptor is open).
package final class SegmentReader: @unchecked Sendable {
    // Sendable because: every stored property is immutable after init, except
    // `deadRecords`, which is guarded by the store's state lock.
    package let info: SegmentInfo
    package let path: String
    package let blocks: [SegmentFormat.BlockHandle]
    private let fileSystem: any FileSystem
    private let fd: FileDescriptor
    /// Records in this file that are no longer the newest version of their
    /// key. Guarded by the store's state lock.
    package var deadRecords: Int = 0

    package var fileNumber: UInt32 { info.fileNumber }

    private init(info: SegmentInfo, path: String, blocks: [SegmentFormat.BlockHandle], fileSystem: any FileSystem, fd: FileDescriptor) {
        self.info = info
        self.path = path
        self.blocks = blocks
        self.fileSystem = fileSystem
        self.fd = fd
    }

    deinit { try? fileSystem.close(fd) }

    /// The keys of a segment, in order, as its footer (or a scan) lists them.
    package struct KeyTable {
        package var bytes: [UInt8]
        /// Per record: where its key sits in `bytes`, its sequence, kind and block.
        package var entries: [Entry]
        package struct Entry {
            package var keyStart: UInt32
            package var keyLength: UInt32
            package var sequence: UInt64
            /// Where the record is (block and slot).
            package var location: RecordLocation
            package var kind: OperationKind
        }
    }

    /// What opening a segment found.
    package struct Opened {
        package var reader: SegmentReader
        package var keys: KeyTable
        /// True when the footer failed its checks and the blocks were scanned instead.
        package var rebuiltByScan: Bool
    }

    /// Opens a segment and reads its keys, from the footer when it checks out
    /// and by scanning every block otherwise. Throws `StoreError` (corruption,
    /// unsupportedVersion, ioFailure) naming the file and offset.
    ///
    /// `expectedSize` is the size the manifest recorded. A segment is fsynced
    /// before the manifest names it, so a file of any other size was truncated
    /// or extended since: corruption, never something to scan around (a scan
    /// of a file cut at a block boundary would find fewer blocks and no fault,
    /// losing their records and resurrecting what their tombstones deleted).
    package static func open(fileSystem: any FileSystem, directory: String, fileNumber: UInt32, expectedSize: UInt64? = nil) throws(StoreError) -> Opened {
        let path = directory + "/" + SegmentFormat.fileName(fileNumber)
        let fd: FileDescriptor
        do throws(SystemCallError) { fd = try fileSystem.open(path, .readOnly) } catch {
            if error.errno == ENOENT {
                throw StoreError(.corruption, "segment \(SegmentFormat.fileName(fileNumber)) named in the manifest is missing", path: path, errno: error.errno)
            }
            throw StoreError(.ioFailure, "cannot open segment", path: path, errno: error.errno, cause: error)
        }
        do {
            let size = try fileSystem.size(fd)
            if let expectedSize, size != expectedSize {
                throw StoreError(.corruption, "segment \(SegmentFormat.fileName(fileNumber)) is \(size) bytes but the MANIFEST recorded \(expectedSize) (truncated or extended)",
                                 path: path, offset: min(size, expectedSize))
            }
            var header = [UInt8](repeating: 0, count: SegmentFormat.headerSize)
            let n = try header.withMutableBytes { (b) throws(SystemCallError) in try fileSystem.readAll(fd, into: b, at: 0, path: path) }
            if n == SegmentFormat.headerSize || n > 0 {
                switch header.withUnsafeBytes({ SegmentFormat.checkHeader($0, fileNumber: fileNumber) }) {
                case .unsupportedVersion(let v)?:
                    throw StoreError(.unsupportedVersion, "segment format version \(v) is not supported", path: path, offset: 8)
                case .damaged?:
                    throw StoreError(.corruption, "segment header is damaged", path: path, offset: 0)
                case nil: break
                }
            } else {
                throw StoreError(.corruption, "segment file is empty", path: path, offset: 0)
            }
            if let fromFooter = try readFooter(fileSystem: fileSystem, fd: fd, path: path, size: size, fileNumber: fileNumber) {
                let reader = SegmentReader(info: fromFooter.info, path: path, blocks: fromFooter.blocks, fileSystem: fileSystem, fd: fd)
                return Opened(reader: reader, keys: fromFooter.keys, rebuiltByScan: false)
            }
            let scanned = try scan(fileSystem: fileSystem, fd: fd, path: path, size: size, fileNumber: fileNumber)
            let reader = SegmentReader(info: scanned.info, path: path, blocks: scanned.blocks, fileSystem: fileSystem, fd: fd)
            return Opened(reader: reader, keys: scanned.keys, rebuiltByScan: true)
        } catch let error as StoreError {
            try? fileSystem.close(fd)
            throw error
        } catch {
            try? fileSystem.close(fd)
            throw StoreError(.ioFailure, "cannot read segment", path: path, errno: (error as? SystemCallError)?.errno, cause: error as? SystemCallError)
        }
    }

    /// Opens a segment this process just wrote and fsynced, with the block
    /// table its writer kept (``SegmentWriter/openFinished()``): nothing is
    /// read; the file must have `info.fileSize` bytes.
    static func open(fileSystem: any FileSystem, directory: String, written info: SegmentInfo,
                     blocks: [SegmentFormat.BlockHandle]) throws(StoreError) -> SegmentReader {
        let path = directory + "/" + SegmentFormat.fileName(info.fileNumber)
        let fd: FileDescriptor
        do throws(SystemCallError) { fd = try fileSystem.open(path, .readOnly) } catch {
            throw StoreError(.ioFailure, "cannot open segment", path: path, errno: error.errno, cause: error)
        }
        let size: UInt64
        do throws(SystemCallError) { size = try fileSystem.size(fd) } catch {
            try? fileSystem.close(fd)
            throw StoreError(.ioFailure, "cannot read segment", path: path, errno: error.errno, cause: error)
        }
        guard size == info.fileSize else {
            try? fileSystem.close(fd)
            throw StoreError(.corruption, "segment \(SegmentFormat.fileName(info.fileNumber)) is \(size) bytes but \(info.fileSize) were written",
                             path: path, offset: min(size, info.fileSize))
        }
        return SegmentReader(info: info, path: path, blocks: blocks, fileSystem: fileSystem, fd: fd)
    }

    /// Opens a segment whose block table the index checkpoint kept, without
    /// reading its footer: the file must have `info.fileSize` bytes, a good
    /// header, and exactly `trailer` as its trailer (the footer's checksum,
    /// record count and sequences), and `blocks` must tile the file from the
    /// header to the footer with the trailer's counts. Nil when anything
    /// differs or cannot be read: the caller then opens it the usual way,
    /// which reports what is wrong, if anything.
    package static func open(fileSystem: any FileSystem, directory: String, info: SegmentInfo,
                             trailer: [UInt8], blocks: [SegmentFormat.BlockHandle]) -> SegmentReader? {
        let path = directory + "/" + SegmentFormat.fileName(info.fileNumber)
        guard trailer.count == SegmentFormat.trailerSize,
              let decoded = trailer.withUnsafeBytes({ SegmentFormat.Trailer(decoding: $0) }),
              decoded.blockCount == UInt32(blocks.count), decoded.recordCount == info.recordCount,
              decoded.minimumSequence == info.minimumSequence, decoded.maximumSequence == info.maximumSequence,
              info.fileSize >= UInt64(SegmentFormat.headerSize + SegmentFormat.trailerSize)
        else { return nil }
        var expectedOffset = UInt64(SegmentFormat.headerSize)
        var records: UInt64 = 0
        for block in blocks {
            guard block.offset == expectedOffset, block.storedLength <= UInt32(SegmentFormat.maximumBlock),
                  block.rawLength <= UInt32(SegmentFormat.maximumBlock), block.recordCount <= block.rawLength
            else { return nil }
            expectedOffset = block.offset + UInt64(SegmentFormat.blockHeaderSize) + UInt64(block.storedLength)
            records += UInt64(block.recordCount)
        }
        guard expectedOffset == decoded.footerOffset, records == info.recordCount,
              decoded.footerOffset <= info.fileSize - UInt64(SegmentFormat.trailerSize),
              info.fileSize - UInt64(SegmentFormat.trailerSize) - decoded.footerOffset == 4 + UInt64(decoded.footerStoredLength)
        else { return nil }
        guard let fd = try? fileSystem.open(path, .readOnly) else { return nil }
        var header = [UInt8](repeating: 0, count: SegmentFormat.headerSize)
        var found = [UInt8](repeating: 0, count: SegmentFormat.trailerSize)
        let matches = { () throws(SystemCallError) -> Bool in
            guard try fileSystem.size(fd) == info.fileSize,
                  try header.withMutableBytes({ (b) throws(SystemCallError) in try fileSystem.readAll(fd, into: b, at: 0, path: path) }) == header.count,
                  header.withUnsafeBytes({ SegmentFormat.checkHeader($0, fileNumber: info.fileNumber) }) == nil,
                  try found.withMutableBytes({ (b) throws(SystemCallError) in
                      try fileSystem.readAll(fd, into: b, at: info.fileSize - UInt64(SegmentFormat.trailerSize), path: path)
                  }) == found.count
            else { return false }
            return found == trailer
        }
        guard (try? matches()) == true else {
            try? fileSystem.close(fd)
            return nil
        }
        return SegmentReader(info: info, path: path, blocks: blocks, fileSystem: fileSystem, fd: fd)
    }

    /// This segment's trailer as it is on disk, when it decodes and agrees
    /// with `info` (what the index checkpoint records to recognize the file).
    package func trailerBytes() -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: SegmentFormat.trailerSize)
        guard info.fileSize >= UInt64(SegmentFormat.trailerSize),
              (try? bytes.withMutableBytes({ (b) throws(SystemCallError) in
                  try fileSystem.readAll(fd, into: b, at: info.fileSize - UInt64(SegmentFormat.trailerSize), path: path)
              })) == bytes.count,
              let trailer = bytes.withUnsafeBytes({ SegmentFormat.Trailer(decoding: $0) }),
              trailer.blockCount == UInt32(blocks.count), trailer.recordCount == info.recordCount,
              trailer.minimumSequence == info.minimumSequence, trailer.maximumSequence == info.maximumSequence
        else { return nil }
        return bytes
    }

    private struct Contents {
        var info: SegmentInfo
        var blocks: [SegmentFormat.BlockHandle]
        var keys: KeyTable
    }

    /// The footer's contents, or an error when anything about it fails a check.
    /// The footer's contents; nil when it fails a check (the caller then
    /// scans). An I/O error is thrown, not papered over with a scan.
    private static func readFooter(fileSystem: any FileSystem, fd: FileDescriptor, path: String, size: UInt64, fileNumber: UInt32) throws(SystemCallError) -> Contents? {
        guard let trailer = try readTrailer(fileSystem: fileSystem, fd: fd, path: path, size: size) else { return nil }
        var stored = [UInt8](repeating: 0, count: 4 + Int(trailer.footerStoredLength))
        guard try stored.withMutableBytes({ (b) throws(SystemCallError) in try fileSystem.readAll(fd, into: b, at: trailer.footerOffset, path: path) }) == stored.count
        else { return nil }
        let raw: [UInt8]? = stored.withUnsafeBytes { all in
            guard all.loadUnaligned(as: UInt32.self) == SegmentFormat.footerMagic.littleEndian else { return nil }
            let body = UnsafeRawBufferPointer(rebasing: all[4...])
            guard CRC32C.checksum(body) == trailer.footerCRC else { return nil }
            return LZ4.decompress(body, rawCount: Int(trailer.footerRawLength))
        }
        guard let raw else { return nil }
        let parsed: Contents? = raw.withUnsafeBytes { bytes in
            var r = ByteReader(bytes)
            guard let blockCount = r.readLength(limit: bytes.count), blockCount == Int(trailer.blockCount) else { return nil }
            var blocks: [SegmentFormat.BlockHandle] = []
            blocks.reserveCapacity(blockCount)
            var total: UInt64 = 0
            var expectedOffset = UInt64(SegmentFormat.headerSize)
            for _ in 0..<blockCount {
                guard let offset = r.readVarint(), let storedLength = r.readVarint(), let rawLength = r.readVarint(),
                      let count = r.readVarint(), offset == expectedOffset,
                      storedLength <= UInt64(SegmentFormat.maximumBlock), rawLength <= UInt64(SegmentFormat.maximumBlock),
                      count <= rawLength
                else { return nil }
                blocks.append(.init(offset: offset, storedLength: UInt32(storedLength), rawLength: UInt32(rawLength), recordCount: UInt32(count)))
                expectedOffset = offset + UInt64(SegmentFormat.blockHeaderSize) + storedLength
                total += count
            }
            guard expectedOffset == trailer.footerOffset, total == trailer.recordCount else { return nil }
            guard total <= UInt64(r.remaining / Self.smallestKeyTableRecord) else { return nil }
            guard let entries = Self.parseKeyTable(bytes, from: r.offset, blocks: blocks, total: Int(total)) else { return nil }
            let keys = KeyTable(bytes: raw, entries: entries)
            let info = SegmentInfo(fileNumber: fileNumber, fileSize: size, recordCount: trailer.recordCount,
                                   minimumSequence: trailer.minimumSequence, maximumSequence: trailer.maximumSequence)
            return Contents(info: info, blocks: blocks, keys: keys)
        }
        guard let parsed else { return nil }
        return parsed
    }

    /// The fewest bytes a key-table record takes: a length, one key byte, a
    /// sequence and a kind.
    private static let smallestKeyTableRecord = 4

    /// The footer's key table from `start` to the end of `bytes`: per
    /// record a key length, the key, a sequence varint and a kind byte, the
    /// keys strictly ascending, `blocks`' record counts in all, nothing
    /// after. Nil when anything fails a check.
    ///
    /// Opening a store reads every key of every segment here, so this loop
    /// reads through a raw pointer with its varints inline rather than
    /// through `ByteReader`: whatever it costs a key, an open pays for every
    /// key of the store.
    private static func parseKeyTable(_ bytes: UnsafeRawBufferPointer, from start: Int, blocks: [SegmentFormat.BlockHandle], total: Int) -> [KeyTable.Entry]? {
        guard let base = bytes.baseAddress else { return total == 0 && start == bytes.count ? [] : nil }
        let end = bytes.count
        var offset = start
        /// The varint at `offset`, as `ByteReader.readVarint` reads it: one
        /// and two bytes inline (key lengths, and the sequences of most
        /// stores), longer ones through the reader.
        @inline(__always) func varint() -> UInt64? {
            if offset &+ 1 < end {
                let first = UInt64(base.load(fromByteOffset: offset, as: UInt8.self))
                if first < 0x80 {
                    offset &+= 1
                    return first
                }
                let second = UInt64(base.load(fromByteOffset: offset &+ 1, as: UInt8.self))
                if second < 0x80 {
                    offset &+= 2
                    return first & 0x7F | second &<< 7
                }
            }
            var r = ByteReader(bytes, offset: offset)
            defer { offset = r.offset }
            return r.readVarint()
        }
        var failed = false
        let entries = [KeyTable.Entry](unsafeUninitializedCapacity: total) { buffer, initialized in
            var previousStart = 0, previousLength = 0
            for (index, block) in blocks.enumerated() {
                guard block.recordCount <= UInt32(RecordLocation.maximumSlots) else { failed = true; return }
                for slot in 0..<block.recordCount {
                    guard let length = varint(), length > 0, length <= UInt64(end &- offset) else { failed = true; return }
                    let keyStart = offset, keyLength = Int(length)
                    offset &+= keyLength
                    guard let sequence = varint(), offset < end,
                          let kind = OperationKind(rawValue: base.load(fromByteOffset: offset, as: UInt8.self))
                    else { failed = true; return }
                    offset &+= 1
                    if initialized > 0, KeyIndex.compare(base + previousStart, previousLength, base + keyStart, keyLength) >= 0 { failed = true; return }
                    (previousStart, previousLength) = (keyStart, keyLength)
                    guard initialized < total else { failed = true; return }
                    (buffer.baseAddress! + initialized).initialize(to: .init(
                        keyStart: UInt32(keyStart), keyLength: UInt32(keyLength), sequence: sequence,
                        location: RecordLocation(block: UInt32(index), slot: slot), kind: kind))
                    initialized += 1
                }
            }
        }
        guard !failed, entries.count == total, offset == end else { return nil }
        return entries
    }

    /// The trailer, when it checks out and points at a footer inside the file.
    private static func readTrailer(fileSystem: any FileSystem, fd: FileDescriptor, path: String, size: UInt64) throws(SystemCallError) -> SegmentFormat.Trailer? {
        guard size >= UInt64(SegmentFormat.headerSize + SegmentFormat.trailerSize) else { return nil }
        var trailerBytes = [UInt8](repeating: 0, count: SegmentFormat.trailerSize)
        let trailerOffset = size - UInt64(SegmentFormat.trailerSize)
        guard try trailerBytes.withMutableBytes({ (b) throws(SystemCallError) in try fileSystem.readAll(fd, into: b, at: trailerOffset, path: path) }) == SegmentFormat.trailerSize,
              let trailer = trailerBytes.withUnsafeBytes({ SegmentFormat.Trailer(decoding: $0) }),
              trailer.footerOffset >= UInt64(SegmentFormat.headerSize), trailer.footerOffset <= trailerOffset,
              // A subtraction, not `footerOffset + 4 + length`: an untrusted
              // footerOffset near 2^64 would overflow the sum and trap.
              trailerOffset - trailer.footerOffset == 4 + UInt64(trailer.footerStoredLength),
              Int(trailer.footerRawLength) <= SegmentFormat.maximumBlock
        else { return nil }
        return trailer
    }

    /// Rebuilds the block table and key list by reading every block. A block
    /// that fails its checks is corruption (segments are synced before the
    /// manifest names them, so nothing in one is ever legitimately torn).
    private static func scan(fileSystem: any FileSystem, fd: FileDescriptor, path: String, size: UInt64, fileNumber: UInt32) throws(StoreError) -> Contents {
        let bytes: [UInt8]
        do throws(SystemCallError) {
            var b = [UInt8](repeating: 0, count: Int(size))
            let n = try b.withMutableBytes { (buf) throws(SystemCallError) in try fileSystem.readAll(fd, into: buf, at: 0, path: path) }
            b.removeLast(b.count - n)
            bytes = b
        } catch {
            throw StoreError(.ioFailure, "cannot read segment for a scan", path: path, errno: error.errno, cause: error)
        }
        // Where the blocks end: at the footer a sound trailer points at (so a
        // damaged footer magic does not pass for a damaged block), else at
        // the first footer magic found between blocks.
        let blocksEnd: Int?
        do throws(SystemCallError) {
            blocksEnd = try readTrailer(fileSystem: fileSystem, fd: fd, path: path, size: size).map { Int($0.footerOffset) }
        } catch {
            throw StoreError(.ioFailure, "cannot read segment for a scan", path: path, errno: error.errno, cause: error)
        }
        var blocks: [SegmentFormat.BlockHandle] = []
        var keys = KeyTable(bytes: [], entries: [])
        var offset = SegmentFormat.headerSize
        var minimum = UInt64.max
        var maximum: UInt64 = 0
        var previousKey: [UInt8]? = nil
        try bytes.withBytes { (all) throws(StoreError) in
            while offset + 4 <= all.count {
                if offset == blocksEnd { return }
                let magic = UInt32(littleEndian: all.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
                if magic == SegmentFormat.footerMagic && blocksEnd == nil { return }
                guard magic == SegmentFormat.blockMagic, offset + SegmentFormat.blockHeaderSize <= all.count else {
                    throw StoreError(.corruption, "segment block at offset \(offset) is damaged (bad block magic) and the footer is unusable", path: path, offset: UInt64(offset))
                }
                let storedLength = Int(UInt32(littleEndian: all.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)))
                guard storedLength <= all.count - offset - SegmentFormat.blockHeaderSize else {
                    throw StoreError(.corruption, "segment block at offset \(offset) runs past the end of the file", path: path, offset: UInt64(offset))
                }
                let end = offset + SegmentFormat.blockHeaderSize + storedLength
                let block: DecodedBlock
                switch SegmentFormat.decodeBlock(UnsafeRawBufferPointer(rebasing: all[offset..<end]), expectedRecords: nil) {
                case .success(let b): block = b
                case .failure(let problem):
                    throw StoreError(.corruption, "segment block at offset \(offset): \(problem)", path: path, offset: UInt64(offset))
                }
                let index = UInt32(blocks.count)
                guard block.count <= RecordLocation.maximumSlots else {
                    throw StoreError(.corruption, "segment block at offset \(offset) holds more records than a block may", path: path, offset: UInt64(offset))
                }
                for i in 0..<block.count {
                    let ok = block.withRecord(i) { record -> Bool in
                        if let previousKey, previousKey.withUnsafeBytes({ compareBytes($0, record.key) }) >= 0 { return false }
                        previousKey = Array(record.key)
                        keys.entries.append(.init(keyStart: UInt32(keys.bytes.count), keyLength: UInt32(record.key.count),
                                                  sequence: record.sequence, location: RecordLocation(block: index, slot: UInt32(i)), kind: record.kind))
                        keys.bytes.append(contentsOf: record.key)
                        minimum = min(minimum, record.sequence)
                        maximum = max(maximum, record.sequence)
                        return true
                    }
                    if !ok { throw StoreError(.corruption, "segment block at offset \(offset) holds keys out of order", path: path, offset: UInt64(offset)) }
                }
                blocks.append(.init(offset: UInt64(offset), storedLength: UInt32(storedLength),
                                    rawLength: UInt32(block.byteCount), recordCount: UInt32(block.count)))
                offset = end
            }
            if offset < all.count {
                throw StoreError(.corruption, "segment ends inside a block header", path: path, offset: UInt64(offset))
            }
        }
        let info = SegmentInfo(fileNumber: fileNumber, fileSize: size, recordCount: UInt64(keys.entries.count),
                               minimumSequence: keys.entries.isEmpty ? 0 : minimum, maximumSequence: maximum)
        return Contents(info: info, blocks: blocks, keys: keys)
    }

    /// Reads, checks and decompresses block `index`, into a frame of `memory`
    /// when one is free (see ``BlockMemory``).
    package func readBlock(_ index: UInt32, memory: BlockMemory? = nil) throws(StoreError) -> DecodedBlock {
        guard Int(index) < blocks.count else {
            throw StoreError(.corruption, "block \(index) does not exist in this segment", path: path)
        }
        let handle = blocks[Int(index)]
        let length = SegmentFormat.blockHeaderSize + Int(handle.storedLength)
        var stored = [UInt8](repeating: 0, count: length)
        let n: Int
        do throws(SystemCallError) {
            n = try stored.withMutableBytes { (b) throws(SystemCallError) in try fileSystem.readAll(fd, into: b, at: handle.offset, path: path) }
        } catch {
            throw StoreError(.ioFailure, "cannot read segment block", path: path, offset: handle.offset, errno: error.errno, cause: error)
        }
        guard n == length else {
            throw StoreError(.corruption, "segment block is truncated", path: path, offset: handle.offset)
        }
        switch stored.withUnsafeBytes({ SegmentFormat.decodeBlock($0, expectedRecords: handle.recordCount, memory: memory) }) {
        case .success(let block): return block
        case .failure(let problem):
            throw StoreError(.corruption, "segment block: \(problem)", path: path, offset: handle.offset)
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif
