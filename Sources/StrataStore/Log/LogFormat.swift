/// The write-ahead log's on-disk format.
///
/// ```
/// file   := header frame*
/// header := "STRATAWL" · version u32 · salt u32 · fileNumber u64 · reserved u32 · crc32c(previous 28 bytes) u32
/// frame  := magic u32 · payloadLength u32 · sequence u64 · operationCount u32 · salt u32 · crc u32 · payload
/// ```
/// All integers little-endian. A frame is one ``WriteBatch``, whole: its CRC32C
/// covers the first 24 header bytes *and* the payload, so a flipped length is
/// caught (LevelDB's CRC leaves the length out). The salt is random per file and
/// sits inside the checksum, so a frame left over from another file never
/// passes as one of this file's. Sequence numbers rise strictly along the log;
/// an all-zero header (preallocated or zero-filled space) ends it.
package enum LogFormat {
    package static let fileMagic: [UInt8] = Array("STRATAWL".utf8)
    package static let version: UInt32 = 1
    package static let fileHeaderSize = 32
    package static let frameMagic: UInt32 = 0x4654_5353  // "SSTF"
    package static let frameHeaderSize = 28
    /// A frame's payload may not exceed this (a sanity bound for decoding untrusted lengths).
    package static let maximumPayload = 1 << 30

    package static func fileName(_ number: UInt32) -> String { fileNumberName(number) + ".wal" }

    package static func encodeFileHeader(salt: UInt32, fileNumber: UInt32) -> [UInt8] {
        var bytes = fileMagic
        bytes.appendInteger(version)
        bytes.appendInteger(salt)
        bytes.appendInteger(UInt64(fileNumber))
        bytes.appendInteger(UInt32(0))
        bytes.appendInteger(CRC32C.checksum(bytes))
        return bytes
    }

    package struct FileHeader: Equatable {
        package var salt: UInt32
        package var fileNumber: UInt32
    }

    package enum HeaderProblem: Error { case tooShort, badMagic, badVersion(UInt32), badChecksum }

    package static func decodeFileHeader(_ bytes: UnsafeRawBufferPointer) -> Result<FileHeader, HeaderProblem> {
        guard bytes.count >= fileHeaderSize else { return .failure(.tooShort) }
        guard bytes.prefix(8).elementsEqual(fileMagic) else { return .failure(.badMagic) }
        var reader = ByteReader(bytes, offset: 8)
        let version = reader.readInteger(UInt32.self)!
        let salt = reader.readInteger(UInt32.self)!
        let number = reader.readInteger(UInt64.self)!
        _ = reader.readInteger(UInt32.self)
        let crc = reader.readInteger(UInt32.self)!
        guard CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<28])) == crc else { return .failure(.badChecksum) }
        guard version == LogFormat.version else { return .failure(.badVersion(version)) }
        return .success(FileHeader(salt: salt, fileNumber: UInt32(truncatingIfNeeded: number)))
    }

    /// Appends one frame for a batch payload to `output`.
    package static func appendFrame(to output: inout [UInt8], sequence: UInt64, operationCount: Int, salt: UInt32, payload: [UInt8]) {
        let start = output.count
        output.appendInteger(frameMagic)
        output.appendInteger(UInt32(payload.count))
        output.appendInteger(sequence)
        output.appendInteger(UInt32(operationCount))
        output.appendInteger(salt)
        output.appendInteger(UInt32(0))  // crc, patched below
        output.append(contentsOf: payload)
        let crc = output.withUnsafeBytes { all -> UInt32 in
            let head = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: all[start..<start + 24]))
            return CRC32C.checksum(UnsafeRawBufferPointer(rebasing: all[(start + frameHeaderSize)...]), continuing: head)
        }
        output.storeInteger(crc, at: start + 24)
    }
}

/// The zero-padded decimal name every store file starts with: `000042`.
package func fileNumberName(_ number: UInt32) -> String {
    let digits = String(number)
    return digits.count >= 6 ? digits : String(repeating: "0", count: 6 - digits.count) + digits
}
