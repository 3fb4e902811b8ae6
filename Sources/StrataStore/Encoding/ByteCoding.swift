/// Little-endian integers and LEB128 varints appended to a byte array: the
/// building blocks of every on-disk format in StrataStore, and of Strata's
/// records.
///
/// The helpers Strata's record coder calls are `@_spi(Coding) public` and
/// `@inlinable`, where `package` would do for access: the compiler does not
/// inline a `package` function's body into another module, so every
/// `readInteger` there would run unspecialized, looking up `T`'s metadata at
/// run time, in every record every fetch decodes.
/// `@_spi` keeps them out of StrataStore's public API.
extension Array where Element == UInt8 {
    @_spi(Coding) @inlinable @inline(__always)
    public mutating func appendInteger<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    @_spi(Coding) @inlinable @inline(__always)
    public mutating func appendVarint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        append(UInt8(v))
    }

    /// Overwrites `T` at `offset` (for headers whose fields are known last).
    package mutating func storeInteger<T: FixedWidthInteger>(_ value: T, at offset: Int) {
        withUnsafeMutableBytes { $0.storeBytes(of: value.littleEndian, toByteOffset: offset, as: T.self) }
    }
}

/// Reads what ``Swift/Array/appendInteger(_:)`` and ``Swift/Array/appendVarint(_:)``
/// wrote, from untrusted bytes: every read is bounds-checked and a malformed
/// input returns nil (decoders turn that into a corruption error); nothing traps.
@_spi(Coding)
public struct ByteReader {
    public let bytes: UnsafeRawBufferPointer
    /// Where the next read starts: always within `0...bytes.count`, which
    /// every bounds check below relies on, so only the reads move it.
    @inlinable public var offset: Int { _offset }
    @usableFromInline var _offset: Int

    /// Reads from `offset` on; an offset outside `bytes` reads nothing.
    @inlinable
    public init(_ bytes: UnsafeRawBufferPointer, offset: Int = 0) {
        self.bytes = bytes
        self._offset = (0...bytes.count).contains(offset) ? offset : bytes.count
    }

    @inlinable public var remaining: Int { bytes.count - _offset }
    @inlinable public var isAtEnd: Bool { _offset >= bytes.count }

    @inlinable @inline(__always)
    public mutating func readInteger<T: FixedWidthInteger>(_: T.Type = T.self) -> T? {
        let size = MemoryLayout<T>.size
        guard remaining >= size else { return nil }
        let value = bytes.loadUnaligned(fromByteOffset: _offset, as: T.self)
        _offset += size
        return T(littleEndian: value)
    }

    @inlinable @inline(__always)
    public mutating func readVarint() -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while _offset < bytes.count {
            let byte = bytes[_offset]
            _offset += 1
            if shift == 63 && byte > 1 { return nil }  // overflows 64 bits
            result |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return result }
            shift += 7
            if shift > 63 { return nil }
        }
        return nil
    }

    /// A varint that must fit in an `Int` no larger than `limit`.
    @inlinable @inline(__always)
    public mutating func readLength(limit: Int) -> Int? {
        guard let v = readVarint(), v <= UInt64(limit) else { return nil }
        return Int(v)
    }

    /// The next `count` bytes, without copying.
    @inlinable @inline(__always)
    public mutating func readBytes(_ count: Int) -> UnsafeRawBufferPointer? {
        guard count >= 0, remaining >= count else { return nil }
        defer { _offset += count }
        return UnsafeRawBufferPointer(rebasing: bytes[_offset..<_offset + count])
    }
}

/// Unsigned lexicographic order of byte strings: memcmp on the common prefix,
/// then the shorter first. The order of keys everywhere in the engine.
@inline(__always)
package func compareBytes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
    let n = Swift.min(a.count, b.count)
    if n > 0 {
        let c = memcmp(a.baseAddress!, b.baseAddress!, n)
        if c != 0 { return Int(c) }
    }
    return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

extension Array where Element == UInt8 {
    /// `withUnsafeBytes` that keeps a typed error (the standard one is `rethrows`,
    /// which erases it). Inlinable, so that a caller in another module gets
    /// it specialized: unspecialized, each call looks up its `Result`'s
    /// metadata at run time.
    @inlinable
    package func withBytes<T, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> T) throws(E) -> T {
        try withUnsafeBytes { bytes in Result { () throws(E) -> T in try body(bytes) } }.get()
    }

    /// `withUnsafeMutableBytes` that keeps a typed error (inlinable, as ``withBytes(_:)``).
    @inlinable
    package mutating func withMutableBytes<T, E: Error>(_ body: (UnsafeMutableRawBufferPointer) throws(E) -> T) throws(E) -> T {
        try withUnsafeMutableBytes { bytes in Result { () throws(E) -> T in try body(bytes) } }.get()
    }
}
