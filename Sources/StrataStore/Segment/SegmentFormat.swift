/// The segment file format: an immutable, sorted run of records.
///
/// ```
/// file    := header block* footer trailer
/// header  := "STRATASG" · version u32 · reserved u32 · fileNumber u64 · reserved u32 · crc32c(previous 28 bytes) u32
/// block   := "SBLK" u32 · storedLength u32 · rawLength u32 · crc u32 · LZ4(raw block)
///            crc = crc32c(the first 12 header bytes · stored bytes)
/// raw block := record* · recordOffset u32 * n · n u32
/// record  := varint keyLength · key · varint sequence · kind u8 · varint valueLength · value
/// footer  := "SFTR" u32 · LZ4(raw footer)
/// raw footer := varint blockCount · (varint offset · varint storedLength · varint rawLength · varint recordCount)*
///               · (varint keyLength · key · varint sequence · kind u8)*      one per record, in order
/// trailer := footerOffset u64 · footerStoredLength u32 · footerRawLength u32 · footerCRC u32 · blockCount u32
///            · recordCount u64 · minSequence u64 · maxSequence u64 · crc32c(previous 48 bytes) u32 · "SGND" u32
/// ```
/// Records are in ascending key order, one per key. Blocks hold 4–64 KiB of
/// records (a record larger than that gets a block of its own) and are
/// compressed whole. The footer lists every key with its sequence and kind so
/// that opening a store reads footers, not data; it is derived data with its
/// own checksum, and a segment whose footer or trailer fails is rebuilt by
/// scanning its blocks, each of which carries its own checksum.
package enum SegmentFormat {
    package static let fileMagic: [UInt8] = Array("STRATASG".utf8)
    package static let version: UInt32 = 1
    package static let headerSize = 32
    package static let blockMagic: UInt32 = 0x4B4C_4253  // "SBLK"
    package static let blockHeaderSize = 16
    package static let footerMagic: UInt32 = 0x5254_4653  // "SFTR"
    package static let trailerMagic: UInt32 = 0x444E_4753  // "SGND"
    package static let trailerSize = 56
    /// Bounds for untrusted lengths read from a segment.
    package static let maximumBlock = 1 << 30

    package static func fileName(_ number: UInt32) -> String { fileNumberName(number) + ".seg" }

    package static func encodeHeader(fileNumber: UInt32) -> [UInt8] {
        var bytes = fileMagic
        bytes.appendInteger(version)
        bytes.appendInteger(UInt32(0))
        bytes.appendInteger(UInt64(fileNumber))
        bytes.appendInteger(UInt32(0))
        bytes.appendInteger(CRC32C.checksum(bytes))
        return bytes
    }

    /// Why a header did not decode: a version this build does not read, or damage.
    ///
    /// A wrong magic is damage too: the file is one the manifest names as a
    /// segment, so whatever it holds now, it was a segment when it was written.
    package enum HeaderProblem: Error { case unsupportedVersion(UInt32), damaged }

    package static func checkHeader(_ bytes: UnsafeRawBufferPointer, fileNumber: UInt32) -> HeaderProblem? {
        guard bytes.count >= headerSize, bytes.prefix(8).elementsEqual(fileMagic) else { return .damaged }
        var reader = ByteReader(bytes, offset: 8)
        let version = reader.readInteger(UInt32.self)!
        _ = reader.readInteger(UInt32.self)
        let number = reader.readInteger(UInt64.self)!
        _ = reader.readInteger(UInt32.self)
        let crc = reader.readInteger(UInt32.self)!
        guard CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<28])) == crc else { return .damaged }
        guard version == self.version else { return .unsupportedVersion(version) }
        guard number == UInt64(fileNumber) else { return .damaged }
        return nil
    }

    /// Where a block sits and how big it is.
    package struct BlockHandle: Sendable, Equatable {
        package var offset: UInt64
        package var storedLength: UInt32
        package var rawLength: UInt32
        package var recordCount: UInt32
    }

    package struct Trailer: Equatable {
        package var footerOffset: UInt64
        package var footerStoredLength: UInt32
        package var footerRawLength: UInt32
        package var footerCRC: UInt32
        package var blockCount: UInt32
        package var recordCount: UInt64
        package var minimumSequence: UInt64
        package var maximumSequence: UInt64

        package func encoded() -> [UInt8] {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(SegmentFormat.trailerSize)
            bytes.appendInteger(footerOffset)
            bytes.appendInteger(footerStoredLength)
            bytes.appendInteger(footerRawLength)
            bytes.appendInteger(footerCRC)
            bytes.appendInteger(blockCount)
            bytes.appendInteger(recordCount)
            bytes.appendInteger(minimumSequence)
            bytes.appendInteger(maximumSequence)
            bytes.appendInteger(CRC32C.checksum(bytes))
            bytes.appendInteger(SegmentFormat.trailerMagic)
            return bytes
        }

        package init(footerOffset: UInt64, footerStoredLength: UInt32, footerRawLength: UInt32, footerCRC: UInt32,
                     blockCount: UInt32, recordCount: UInt64, minimumSequence: UInt64, maximumSequence: UInt64) {
            self.footerOffset = footerOffset
            self.footerStoredLength = footerStoredLength
            self.footerRawLength = footerRawLength
            self.footerCRC = footerCRC
            self.blockCount = blockCount
            self.recordCount = recordCount
            self.minimumSequence = minimumSequence
            self.maximumSequence = maximumSequence
        }

        package init?(decoding bytes: UnsafeRawBufferPointer) {
            guard bytes.count == SegmentFormat.trailerSize else { return nil }
            var r = ByteReader(bytes)
            footerOffset = r.readInteger()!
            footerStoredLength = r.readInteger()!
            footerRawLength = r.readInteger()!
            footerCRC = r.readInteger()!
            blockCount = r.readInteger()!
            recordCount = r.readInteger()!
            minimumSequence = r.readInteger()!
            maximumSequence = r.readInteger()!
            let crc: UInt32 = r.readInteger()!
            let magic: UInt32 = r.readInteger()!
            guard magic == SegmentFormat.trailerMagic,
                  CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<48])) == crc
            else { return nil }
        }
    }

    /// Appends a block header and the compressed block for `raw` to `output`.
    package static func appendBlock(raw: UnsafeRawBufferPointer, to output: inout [UInt8]) -> UInt32 {
        let start = output.count
        output.appendInteger(blockMagic)
        output.appendInteger(UInt32(0))
        output.appendInteger(UInt32(raw.count))
        output.appendInteger(UInt32(0))
        let stored = LZ4.compress(raw, appendingTo: &output)
        output.storeInteger(UInt32(stored), at: start + 4)
        let crc = output.withUnsafeBytes { all -> UInt32 in
            let head = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: all[start..<start + 12]))
            return CRC32C.checksum(UnsafeRawBufferPointer(rebasing: all[(start + blockHeaderSize)...]), continuing: head)
        }
        output.storeInteger(crc, at: start + 12)
        return UInt32(stored)
    }

    package enum BlockProblem: Error, CustomStringConvertible {
        case badMagic, badLength, badChecksum, badCompression, badLayout
        package var description: String {
            switch self {
            case .badMagic: "bad block magic"
            case .badLength: "block length out of bounds"
            case .badChecksum: "block checksum mismatch"
            case .badCompression: "block does not decompress"
            case .badLayout: "block record table is malformed"
            }
        }
    }

    /// Checks a stored block (header and compressed bytes) and decompresses it.
    package static func decodeBlock(_ stored: UnsafeRawBufferPointer, expectedRecords: UInt32?,
                                    memory: BlockMemory? = nil) -> Result<DecodedBlock, BlockProblem> {
        guard stored.count >= blockHeaderSize else { return .failure(.badLength) }
        var r = ByteReader(stored)
        guard r.readInteger(UInt32.self) == blockMagic else { return .failure(.badMagic) }
        let storedLength = Int(r.readInteger(UInt32.self)!)
        let rawLength = Int(r.readInteger(UInt32.self)!)
        let crc = r.readInteger(UInt32.self)!
        guard storedLength == stored.count - blockHeaderSize, rawLength <= maximumBlock else { return .failure(.badLength) }
        let body = UnsafeRawBufferPointer(rebasing: stored[blockHeaderSize...])
        let head = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: stored[0..<12]))
        guard CRC32C.checksum(body, continuing: head) == crc else { return .failure(.badChecksum) }
        var decompressed = true
        guard let block = DecodedBlock.make(byteCount: rawLength, memory: memory, fill: { output in
            decompressed = LZ4.decompress(body, into: output)
            return decompressed
        }) else { return .failure(decompressed ? .badLayout : .badCompression) }
        if let expectedRecords, block.count != Int(expectedRecords) { return .failure(.badLayout) }
        return .success(block)
    }
}
