/// Puts and deletes that ``StrataStore/write(_:)`` applies atomically: after a
/// crash either every operation of the batch is present or none is, and no
/// reader ever sees part of it.
///
/// Operations apply in order, so a later operation on the same key wins.
///
/// ```swift
/// var batch = WriteBatch()
/// batch.put(Array("recipe/1".utf8), Array("Soup".utf8))
/// batch.delete(Array("recipe/0".utf8))
/// let sequence = try store.write(batch)
/// ```
public struct WriteBatch: Sendable {
    /// The operations, encoded as they go into the write-ahead log:
    /// `kind (1 = put, 0 = delete) · varint key length · key · [varint value length · value]`.
    package private(set) var encoded: [UInt8] = []
    /// How many operations the batch holds.
    public private(set) var count: Int = 0
    /// The longest key in the batch (checked against ``StrataStore/maximumKeySize``).
    package private(set) var longestKey: Int = 0
    package private(set) var hasEmptyKey = false

    /// An empty batch.
    public init() {}

    /// Whether the batch holds no operation.
    public var isEmpty: Bool { count == 0 }

    /// The size of the batch's encoded operations, in bytes.
    public var byteCount: Int { encoded.count }

    /// Sets `key` to `value`.
    public mutating func put(_ key: some Collection<UInt8>, _ value: some Collection<UInt8>) {
        encoded.append(OperationKind.put.rawValue)
        appendKey(key)
        encoded.appendVarint(UInt64(value.count))
        encoded.append(contentsOf: value)
    }

    /// Removes `key` (a no-op if it is absent, but still logged).
    public mutating func delete(_ key: some Collection<UInt8>) {
        encoded.append(OperationKind.delete.rawValue)
        appendKey(key)
    }

    /// Sets `key` to `value` (the fast path for byte arrays: the generic
    /// version cannot be specialized across the module boundary).
    public mutating func put(_ key: [UInt8], _ value: [UInt8]) {
        key.withUnsafeBytes { key in
            value.withUnsafeBytes { value in put(BorrowedBytes(key), BorrowedBytes(value)) }
        }
    }

    /// Sets `key` to `value`, both written in place into the batch: for a
    /// coder that can size its bytes first (Strata's records and keys), an
    /// operation costs one append and no copy.
    @_spi(Coding) @inlinable
    public mutating func put<Key: ByteWriting, Value: ByteWriting>(_ key: Key, _ value: Value) {
        let operation = PutOperation(key: key, value: value)
        appendOperation(keyCount: operation.keyCount) { $0.append(written: operation) }
    }

    /// Counts an operation on a key of `keyCount` bytes, which `append`
    /// appends to the encoded operations.
    @usableFromInline
    mutating func appendOperation(keyCount: Int, _ append: (inout [UInt8]) -> Void) {
        count += 1
        longestKey = max(longestKey, keyCount)
        if keyCount == 0 { hasEmptyKey = true }
        append(&encoded)
    }

    /// Removes `key` (the fast path for byte arrays).
    public mutating func delete(_ key: [UInt8]) {
        encoded.append(OperationKind.delete.rawValue)
        appendKey(bytes: key)
    }

    private mutating func appendKey(bytes key: [UInt8]) {
        count += 1
        longestKey = max(longestKey, key.count)
        if key.isEmpty { hasEmptyKey = true }
        encoded.appendVarint(UInt64(key.count))
        key.withUnsafeBytes { encoded.append(contentsOf: $0) }
    }

    /// Lets `body` rewrite each operation's key in place — the same length,
    /// so nothing moves: for a layer that stores keys under other bytes than
    /// it builds them with (Strata's renumbered entities), without
    /// re-encoding the batch. `body` must keep the keys non-empty.
    package mutating func rewriteKeysInPlace(_ body: (UnsafeMutableRawBufferPointer) -> Void) {
        encoded.withUnsafeMutableBytes { payload in
            var reader = ByteReader(UnsafeRawBufferPointer(payload))
            while !reader.isAtEnd, let op = BatchDecoder.next(&reader) {
                body(UnsafeMutableRawBufferPointer(mutating: op.key))
            }
        }
    }

    /// Removes every operation, keeping the allocated capacity.
    public mutating func removeAll() {
        encoded.removeAll(keepingCapacity: true)
        count = 0
        longestKey = 0
        hasEmptyKey = false
    }

    private mutating func appendKey(_ key: some Collection<UInt8>) {
        count += 1
        longestKey = max(longestKey, key.count)
        if key.isEmpty { hasEmptyKey = true }
        encoded.appendVarint(UInt64(key.count))
        encoded.append(contentsOf: key)
    }
}

/// A put as ``WriteBatch`` encodes it: `1 · varint key length · key ·
/// varint value length · value`.
@_spi(Coding)
public struct PutOperation<Key: ByteWriting, Value: ByteWriting>: ByteWriting {
    @usableFromInline let key: Key
    @usableFromInline let value: Value
    @usableFromInline let keyCount: Int
    @usableFromInline let valueCount: Int

    @inlinable
    init(key: Key, value: Value) {
        self.key = key
        self.value = value
        keyCount = key.byteCount
        valueCount = value.byteCount
    }

    @inlinable public var byteCount: Int {
        1 + varintSize(UInt64(keyCount)) + keyCount + varintSize(UInt64(valueCount)) + valueCount
    }

    @inlinable
    public func write(to writer: inout ByteWriter) {
        writer.writeByte(1)  // OperationKind.put
        writer.writeVarint(UInt64(keyCount))
        let valueFraming = varintSize(UInt64(valueCount)) + valueCount
        key.write(to: &writer)
        precondition(writer.remaining == valueFraming, "Strata: a key coder wrote other than \(keyCount) bytes")
        writer.writeVarint(UInt64(valueCount))
        value.write(to: &writer)
    }
}

/// Bytes lent for the length of one append.
@_spi(Coding)
public struct BorrowedBytes: ByteWriting {
    @usableFromInline let bytes: UnsafeRawBufferPointer
    @inlinable public init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }
    @inlinable public var byteCount: Int { bytes.count }
    @inlinable public func write(to writer: inout ByteWriter) { writer.writeBytes(bytes) }
}

/// What a logged operation does.
package enum OperationKind: UInt8, Sendable {
    case delete = 0
    case put = 1
}

/// One operation decoded from a batch payload, pointing into the payload.
package struct BatchOperation {
    package var kind: OperationKind
    package var key: UnsafeRawBufferPointer
    /// Empty for a delete.
    package var value: UnsafeRawBufferPointer
}

/// Walks the operations of an encoded batch payload (as written by
/// ``WriteBatch``), validating every length against the payload's bounds.
package enum BatchDecoder {
    /// Calls `body` for each operation; returns false (having called `body`
    /// for none of them) when the payload is malformed.
    package static func validate(_ payload: UnsafeRawBufferPointer, expectedCount: Int) -> Bool {
        var reader = ByteReader(payload)
        var seen = 0
        while !reader.isAtEnd {
            guard next(&reader) != nil else { return false }
            seen += 1
        }
        return seen == expectedCount
    }

    @inline(__always)
    package static func next(_ reader: inout ByteReader) -> BatchOperation? {
        guard let rawKind = reader.readInteger(UInt8.self), let kind = OperationKind(rawValue: rawKind),
              let keyLength = reader.readLength(limit: reader.remaining), keyLength > 0,
              let key = reader.readBytes(keyLength)
        else { return nil }
        if kind == .delete { return BatchOperation(kind: kind, key: key, value: UnsafeRawBufferPointer(start: nil, count: 0)) }
        guard let valueLength = reader.readLength(limit: reader.remaining), let value = reader.readBytes(valueLength) else { return nil }
        return BatchOperation(kind: kind, key: key, value: value)
    }

    /// Calls `body` for each operation of a payload already validated.
    package static func forEach(_ payload: UnsafeRawBufferPointer, _ body: (BatchOperation) throws -> Void) rethrows {
        var reader = ByteReader(payload)
        while !reader.isAtEnd, let op = next(&reader) { try body(op) }
    }
}
