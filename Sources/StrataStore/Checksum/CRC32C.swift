import CStrataCRC32C

/// CRC32C (Castagnoli), the checksum on every WAL frame, segment block,
/// footer and manifest. Runs on the CPU's CRC instruction where there is one
/// (SSE4.2, ARMv8 CRC) and on slicing-by-8 tables elsewhere.
///
/// ```swift
/// CRC32C.checksum("123456789".utf8)   // 0xE3069283
/// ```
package enum CRC32C {
    /// Whether this CPU has the CRC32C instruction.
    package static let hardwareAvailable: Bool = strata_crc32c_hardware_available() != 0

    /// The checksum of `bytes`, continuing from `crc` (0 to start).
    @inline(__always)
    package static func checksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return crc }
        return hardwareAvailable
            ? strata_crc32c_hardware(crc, base, bytes.count)
            : strata_crc32c_portable(crc, base, bytes.count)
    }

    /// The checksum of a byte sequence, continuing from `crc`.
    package static func checksum<Bytes: Sequence<UInt8>>(_ bytes: Bytes, continuing crc: UInt32 = 0) -> UInt32 {
        if let result = bytes.withContiguousStorageIfAvailable({ checksum(UnsafeRawBufferPointer($0), continuing: crc) }) {
            return result
        }
        return checksum(Array(bytes), continuing: crc)
    }

    /// The table-driven path, whatever the CPU (for tests and comparisons).
    package static func portableChecksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return crc }
        return strata_crc32c_portable(crc, base, bytes.count)
    }

    /// The instruction path; nil on a CPU without one.
    package static func hardwareChecksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32? {
        guard hardwareAvailable else { return nil }
        guard let base = bytes.baseAddress, bytes.count > 0 else { return crc }
        return strata_crc32c_hardware(crc, base, bytes.count)
    }
}
