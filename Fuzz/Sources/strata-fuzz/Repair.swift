import StrataStore

/// Recomputes the checksums of a fuzzed file in place, leaving every other
/// byte as the fuzzer made it (see ``FuzzTarget``'s mode byte). Lengths are
/// taken as they stand; a repair stops where the structure stops making sense.
enum Repair {
    private static func crc(_ bytes: [UInt8], _ range: Range<Int>) -> UInt32 {
        bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[range])) }
    }

    /// The log header's CRC, then each frame's (header and payload).
    static func log(_ bytes: inout [UInt8]) {
        guard bytes.count >= LogFormat.fileHeaderSize else { return }
        bytes.storeInteger(crc(bytes, 0..<28), at: 28)
        var offset = LogFormat.fileHeaderSize
        while offset + LogFormat.frameHeaderSize <= bytes.count, let length = bytes.integer(at: offset + 4, as: UInt32.self).map(Int.init),
              length <= bytes.count - offset - LogFormat.frameHeaderSize {
            let payload = offset + LogFormat.frameHeaderSize
            let head = crc(bytes, offset..<offset + 24)
            let sum = bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[payload..<payload + length]), continuing: head) }
            bytes.storeInteger(sum, at: offset + 24)
            offset = payload + length
        }
    }

    /// The segment header's CRC, each block's, the footer's and the trailer's.
    static func segment(_ bytes: inout [UInt8]) {
        guard bytes.count >= SegmentFormat.headerSize else { return }
        bytes.storeInteger(crc(bytes, 0..<28), at: 28)
        var offset = SegmentFormat.headerSize
        while offset + SegmentFormat.blockHeaderSize <= bytes.count, bytes.integer(at: offset, as: UInt32.self) == SegmentFormat.blockMagic,
              let stored = bytes.integer(at: offset + 4, as: UInt32.self).map(Int.init),
              stored <= bytes.count - offset - SegmentFormat.blockHeaderSize {
            let body = offset + SegmentFormat.blockHeaderSize
            let head = crc(bytes, offset..<offset + 12)
            let sum = bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[body..<body + stored]), continuing: head) }
            bytes.storeInteger(sum, at: offset + 12)
            offset = body + stored
        }
        guard bytes.count >= SegmentFormat.headerSize + SegmentFormat.trailerSize else { return }
        let trailer = bytes.count - SegmentFormat.trailerSize
        if let footer = bytes.integer(at: trailer, as: UInt64.self), footer < UInt64(trailer), Int(footer) + 4 <= trailer {
            bytes.storeInteger(crc(bytes, Int(footer) + 4..<trailer), at: trailer + 20)
        }
        bytes.storeInteger(crc(bytes, trailer..<trailer + 48), at: trailer + 48)
    }

    /// The manifest's CRC: its last four bytes.
    static func manifest(_ bytes: inout [UInt8]) {
        guard bytes.count >= 4 else { return }
        bytes.storeInteger(crc(bytes, 0..<bytes.count - 4), at: bytes.count - 4)
    }
}
