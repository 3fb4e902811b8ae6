/// A decompressed segment block: sorted records and the table of their
/// offsets, checked once on decode so lookups need no further bounds checks.
package final class DecodedBlock: @unchecked Sendable {
    // Sendable because: everything is immutable except `referenced`, which is
    // guarded by the lock of the block-cache shard holding the block.

    /// CLOCK's reference bit, set on a cache hit. Guarded by the cache shard's
    /// lock, so Swift's runtime exclusivity check (a dynamic one per access,
    /// on a get's hot path) is off for it.
    @exclusivity(unchecked) package var referenced = false
    package let bytes: [UInt8]
    package let count: Int
    /// Where the record-offset table starts in `bytes`.
    private let table: Int

    /// A decoded record, pointing into the block.
    package struct Record {
        package var key: UnsafeRawBufferPointer
        package var sequence: UInt64
        package var kind: OperationKind
        package var value: UnsafeRawBufferPointer
    }

    /// Validates the layout of raw block bytes: the offset table and every
    /// record must lie inside the block and decode. Nil when they do not.
    package init?(_ bytes: [UInt8]) {
        guard bytes.count >= 4 else { return nil }
        let count = Int(bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: bytes.count - 4, as: UInt32.self) }.littleEndian)
        guard count <= (bytes.count - 4) / 4 else { return nil }
        let table = bytes.count - 4 - 4 * count
        self.bytes = bytes
        self.count = count
        self.table = table
        let valid = bytes.withUnsafeBytes { raw -> Bool in
            var previousEnd = 0
            for i in 0..<count {
                let offset = Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: table + 4 * i, as: UInt32.self)))
                guard offset == previousEnd, offset < table else { return false }
                var reader = ByteReader(UnsafeRawBufferPointer(rebasing: raw[0..<table]), offset: offset)
                guard Self.decode(&reader) != nil else { return false }
                previousEnd = reader.offset
            }
            return previousEnd == table
        }
        if !valid { return nil }
    }

    @inline(__always)
    private static func decode(_ reader: inout ByteReader) -> Record? {
        guard let keyLength = reader.readLength(limit: reader.remaining), keyLength > 0,
              let key = reader.readBytes(keyLength),
              let sequence = reader.readVarint(),
              let rawKind = reader.readInteger(UInt8.self), let kind = OperationKind(rawValue: rawKind),
              let valueLength = reader.readLength(limit: reader.remaining),
              let value = reader.readBytes(valueLength)
        else { return nil }
        return Record(key: key, sequence: sequence, kind: kind, value: value)
    }

    /// Calls `body` with record `i` (pointers valid only inside `body`).
    @inline(__always)
    package func withRecord<T, E: Error>(_ i: Int, _ body: (Record) throws(E) -> T) throws(E) -> T {
        try bytes.withBytes { (raw) throws(E) -> T in
            let offset = Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: table + 4 * i, as: UInt32.self)))
            var reader = ByteReader(UnsafeRawBufferPointer(rebasing: raw[0..<table]), offset: offset)
            return try body(Self.decode(&reader)!)  // validated in init
        }
    }

    /// Bytes this block holds in memory (for the cache's budget).
    package var memoryCost: Int { bytes.capacity + 64 }
}

/// Builds the raw bytes of one block.
package struct BlockBuilder {
    package private(set) var bytes: [UInt8] = []
    private var offsets: [UInt32] = []

    package init() {}

    package var count: Int { offsets.count }
    package var isEmpty: Bool { offsets.isEmpty }
    /// The raw size the block would have if finished now.
    package var size: Int { bytes.count + 4 * offsets.count + 4 }

    package static func recordSize(key: Int, value: Int, sequence: UInt64) -> Int {
        varintSize(UInt64(key)) + key + varintSize(sequence) + 1 + varintSize(UInt64(value)) + value + 4
    }

    package mutating func add(key: UnsafeRawBufferPointer, sequence: UInt64, kind: OperationKind, value: UnsafeRawBufferPointer) {
        offsets.append(UInt32(bytes.count))
        bytes.appendVarint(UInt64(key.count))
        bytes.append(contentsOf: key)
        bytes.appendVarint(sequence)
        bytes.append(kind.rawValue)
        bytes.appendVarint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    /// The finished raw block; the builder is empty again afterwards.
    package mutating func finish() -> [UInt8] {
        var out = bytes
        for o in offsets { out.appendInteger(o) }
        out.appendInteger(UInt32(offsets.count))
        bytes.removeAll(keepingCapacity: true)
        offsets.removeAll(keepingCapacity: true)
        return out
    }
}
