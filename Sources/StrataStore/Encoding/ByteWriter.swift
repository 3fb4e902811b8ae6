/// Writes bytes in place, into room a byte array has already made for them:
/// the counterpart of ``Swift/Array/appendInteger(_:)`` and
/// ``Swift/Array/appendVarint(_:)`` for a coder that knows the size of what
/// it writes before it writes it.
///
/// Each `append` to an array checks that the array is uniquely referenced
/// and has room, and for `append(contentsOf:)` of a few bytes that costs
/// more than the copy itself. A save's record of five fields, its key and
/// the batch's framing would pay it about twenty times an object, and be
/// copied twice (record, then batch); written in place through
/// ``Swift/Array/append(written:)`` they pay it once.
///
/// ```swift
/// struct Tagged: ByteWriting {
///     var tag: UInt8, value: UInt64
///     var byteCount: Int { 1 + varintSize(value) }
///     func write(to writer: inout ByteWriter) {
///         writer.writeByte(tag)
///         writer.writeVarint(value)
///     }
/// }
/// var out: [UInt8] = []
/// out.append(written: Tagged(tag: 2, value: 300))
/// ```
///
/// Every write checks that it stays within the room announced: a coder
/// whose size and writes disagree traps (a programming error) rather than
/// write past the array's storage.
@_spi(Coding)
public struct ByteWriter {
    @usableFromInline var cursor: UnsafeMutableRawPointer?
    @usableFromInline let end: UnsafeMutableRawPointer?

    @inlinable
    init(_ room: UnsafeMutableRawBufferPointer) {
        cursor = room.baseAddress
        end = room.baseAddress.map { $0 + room.count }
    }

    /// Bytes left of the room announced.
    @inlinable public var remaining: Int {
        guard let cursor, let end else { return 0 }
        return end - cursor
    }

    @inlinable @inline(__always)
    mutating func advance(by count: Int) -> UnsafeMutableRawPointer {
        precondition(count <= remaining, "Strata: a coder wrote more bytes than it announced")
        let start = cursor!
        cursor = start + count
        return start
    }

    @inlinable @inline(__always)
    public mutating func writeByte(_ byte: UInt8) {
        advance(by: 1).storeBytes(of: byte, as: UInt8.self)
    }

    @inlinable @inline(__always)
    public mutating func writeInteger<T: FixedWidthInteger>(_ value: T) {
        advance(by: MemoryLayout<T>.size).storeBytes(of: value.littleEndian, as: T.self)
    }

    /// A LEB128 varint, as ``Swift/Array/appendVarint(_:)`` writes it.
    @inlinable @inline(__always)
    public mutating func writeVarint(_ value: UInt64) {
        let count = varintSize(value)
        let start = advance(by: count)
        var v = value
        for i in 0..<count - 1 {
            start.storeBytes(of: UInt8(truncatingIfNeeded: v) | 0x80, toByteOffset: i, as: UInt8.self)
            v >>= 7
        }
        start.storeBytes(of: UInt8(truncatingIfNeeded: v), toByteOffset: count - 1, as: UInt8.self)
    }

    @inlinable @inline(__always)
    public mutating func writeBytes(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        advance(by: bytes.count).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
    }
}

/// The bytes of `value` as a LEB128 varint.
@_spi(Coding) @inlinable @inline(__always)
public func varintSize(_ value: UInt64) -> Int {
    (64 - (value | 1).leadingZeroBitCount + 6) / 7
}

/// Bytes a coder can size before it writes them, and then write in place
/// through a ``ByteWriter``: appended to a byte array with
/// ``Swift/Array/append(written:)``, they cost one `append`.
@_spi(Coding)
public protocol ByteWriting {
    /// Exactly the bytes ``write(to:)`` writes.
    var byteCount: Int { get }
    func write(to writer: inout ByteWriter)
}

extension Array where Element == UInt8 {
    /// Appends `bytes`, written in place, at the cost of one `append`; a
    /// `bytes` that writes other than its `byteCount` traps.
    @_spi(Coding) @inlinable
    public mutating func append<Bytes: ByteWriting>(written bytes: Bytes) {
        append(contentsOf: WrittenInPlace(bytes))
    }
}

/// What ``Swift/Array/append(written:)`` hands `append(contentsOf:)`: its
/// exact count, so that the array makes room once, and a `_copyContents`
/// that writes straight into that room. Its iterator is empty: the array
/// asks it for more only once the room is full, and nothing else ever
/// iterates it.
@_spi(Coding)
public struct WrittenInPlace<Bytes: ByteWriting>: Sequence {
    @usableFromInline let bytes: Bytes
    @usableFromInline let count: Int

    @inlinable
    init(_ bytes: Bytes) {
        self.bytes = bytes
        self.count = bytes.byteCount
    }

    @inlinable public var underestimatedCount: Int { count }

    @inlinable public func makeIterator() -> EmptyCollection<UInt8>.Iterator { .init() }

    @inlinable
    public func _copyContents(initializing buffer: UnsafeMutableBufferPointer<UInt8>) -> (EmptyCollection<UInt8>.Iterator, Int) {
        precondition(buffer.count >= count)
        var writer = ByteWriter(UnsafeMutableRawBufferPointer(start: UnsafeMutableRawPointer(buffer.baseAddress), count: count))
        bytes.write(to: &writer)
        precondition(writer.remaining == 0, "Strata: a coder wrote fewer bytes than it announced")
        return (.init(), count)
    }
}
