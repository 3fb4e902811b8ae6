/// A decompressed segment block: sorted records and the table of their
/// offsets, checked once on decode so lookups need no further bounds checks.
///
/// Its bytes are a frame of the cache's ``BlockMemory`` when one was free
/// (huge pages), else a heap allocation; either goes back when the block is
/// freed.
package final class DecodedBlock: @unchecked Sendable {
    // Sendable because: everything is immutable except `referenced`, which is
    // guarded by the lock of the block-cache shard holding the block; the
    // bytes are written only before `init` returns.

    /// CLOCK's reference bit, set on a cache hit. Guarded by the cache shard's
    /// lock, so Swift's runtime exclusivity check (a dynamic one per access,
    /// on a get's hot path) is off for it.
    @exclusivity(unchecked) package var referenced = false
    /// The raw block; held here rather than in an array, so that reading a
    /// record does not first load the array's header (one cache miss less
    /// for a get on a cold block).
    private let base: UnsafeMutableRawPointer
    /// Raw bytes in the block.
    package let byteCount: Int
    package let count: Int
    /// Where the record-offset table starts in the bytes.
    private let table: Int
    /// Where the bytes came from: a frame of this memory, or the heap when nil.
    private let memory: BlockMemory?
    private let frame: Int32

    /// A decoded record, pointing into the block.
    package struct Record {
        package var key: UnsafeRawBufferPointer
        package var sequence: UInt64
        package var kind: OperationKind
        package var value: UnsafeRawBufferPointer
    }

    private init(base: UnsafeMutableRawPointer, byteCount: Int, count: Int, table: Int, memory: BlockMemory?, frame: Int32) {
        (self.base, self.byteCount, self.count, self.table, self.memory, self.frame) = (base, byteCount, count, table, memory, frame)
    }

    deinit {
        if let memory { memory.release(.init(index: frame, base: base)) } else { base.deallocate() }
    }

    /// A block of `byteCount` raw bytes that `fill` writes (returning false
    /// when it cannot, as a decompressor does on bad input), in a frame of
    /// `memory` when one is free, else on the heap. Nil when `fill` fails or
    /// the bytes are not a valid block: the memory goes back then.
    package static func make(byteCount: Int, memory: BlockMemory?, fill: (UnsafeMutableRawBufferPointer) -> Bool) -> DecodedBlock? {
        let frame = memory?.allocate(byteCount)
        let base = frame?.base ?? UnsafeMutableRawPointer.allocate(byteCount: max(byteCount, 1), alignment: 8)
        let release = {
            if let frame { memory!.release(frame) } else { base.deallocate() }
        }
        guard fill(UnsafeMutableRawBufferPointer(start: base, count: byteCount)),
              let (count, table) = layout(UnsafeRawBufferPointer(start: base, count: byteCount))
        else {
            release()
            return nil
        }
        return DecodedBlock(base: base, byteCount: byteCount, count: count, table: table,
                            memory: frame == nil ? nil : memory, frame: frame?.index ?? -1)
    }

    /// A block holding a copy of `bytes` (on the heap), or nil when they are
    /// not a valid block.
    package static func copying(_ bytes: [UInt8]) -> DecodedBlock? {
        make(byteCount: bytes.count, memory: nil) { destination in
            bytes.withUnsafeBytes { destination.copyMemory(from: $0) }
            return true
        }
    }

    /// Checks the layout of raw block bytes: the offset table and every
    /// record must lie inside the block and decode. Returns the record count
    /// and where the table starts, or nil when they do not.
    private static func layout(_ raw: UnsafeRawBufferPointer) -> (count: Int, table: Int)? {
        guard raw.count >= 4 else { return nil }
        let count = Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: raw.count - 4, as: UInt32.self)))
        guard count <= (raw.count - 4) / 4 else { return nil }
        let table = raw.count - 4 - 4 * count
        var previousEnd = 0
        for i in 0..<count {
            let offset = Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: table + 4 * i, as: UInt32.self)))
            guard offset == previousEnd, offset < table else { return nil }
            var reader = ByteReader(UnsafeRawBufferPointer(rebasing: raw[0..<table]), offset: offset)
            guard Self.decode(&reader) != nil else { return nil }
            previousEnd = reader.offset
        }
        return previousEnd == table ? (count, table) : nil
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
        let offset = Int(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: table + 4 * i, as: UInt32.self)))
        var reader = ByteReader(UnsafeRawBufferPointer(start: base, count: table), offset: offset)
        return try body(Self.decode(&reader)!)  // validated in `make`
    }

    /// Bytes this block holds in memory (for the cache's budget): a whole
    /// frame when it has one.
    package var memoryCost: Int { (memory?.frameSize ?? byteCount) + 64 }
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
