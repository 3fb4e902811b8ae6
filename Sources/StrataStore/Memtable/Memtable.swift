#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// The values of the batches in the current write-ahead log, in memory, so
/// that reads of recent writes never touch the disk.
///
/// Records are appended to one arena reserved up front with `mmap`
/// (`MAP_NORESERVE`: address space only, pages arrive as they are touched).
/// The arena never moves, which is what lets readers read without a lock:
///
/// - Only the store's current write leader appends (rule: one writer).
/// - A record is complete before the index entry that points at it is
///   published under the store's state lock; a reader finds the offset under
///   that same lock, so the lock orders the writer's stores before the
///   reader's loads, and the bytes at that offset are never written again.
///
/// Record: `sequence u64 · kind u8 · varint key length · key · varint value length · value`.
package final class Memtable: @unchecked Sendable {
    // Sendable because: `base` is written only at offsets ≥ `used` by the
    // single write leader, and read only at offsets published through the
    // state lock (see above). `used`, `maximumSequence`, `tombstones` and
    // `recordCount` are touched only by the write leader until the memtable
    // is frozen (`freeze()` under the state lock), and only read after that.

    /// The file number index entries use to point here (its first log's number).
    package let number: UInt32
    private let base: UnsafeMutableRawPointer
    package let capacity: Int
    package private(set) var used: Int = 0
    package private(set) var maximumSequence: UInt64 = 0
    /// Offsets of delete records, which the index does not hold; a flush
    /// needs them to write tombstones.
    package private(set) var tombstones: [UInt32] = []
    /// How many records were appended.
    package private(set) var recordCount = 0

    /// Reserves `capacity` bytes of address space; nil if `mmap` refuses.
    package init?(number: UInt32, capacity: Int) {
        let flags: Int32
        #if canImport(Darwin)
        flags = MAP_PRIVATE | MAP_ANON
        #else
        flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE
        #endif
        guard capacity > 0, capacity <= Int(UInt32.max),
              let p = mmap(nil, capacity, PROT_READ | PROT_WRITE, flags, -1, 0),
              p != MAP_FAILED
        else { return nil }
        // No MADV_HUGEPAGE: it slows random writes and two-thread gets, and
        // THP's direct compaction can stall a fault.
        self.base = p
        self.capacity = capacity
        self.number = number
    }

    deinit { munmap(base, capacity) }

    package var remaining: Int { capacity - used }

    /// The bytes a record of this key and value takes.
    @inline(__always)
    package static func recordSize(keyCount: Int, valueCount: Int) -> Int {
        9 + varintSize(UInt64(keyCount)) + keyCount + varintSize(UInt64(valueCount)) + valueCount
    }

    /// Appends every operation of a batch payload already validated, all
    /// with `sequence`, and lists each in `placed` (after what it holds)
    /// with where its record went.
    ///
    /// The counters are kept in locals and stored once: per record, the
    /// class's stored properties cost three runtime exclusivity checks.
    package func append(batch payload: UnsafeRawBufferPointer, sequence: UInt64, into placed: inout [PlacedOperation]) {
        var offset = used
        var records = 0
        BatchDecoder.forEach(payload) { op in
            // The callers size memtables for what they append; past the arena
            // is a programming error, and trapping beats corrupting the heap.
            precondition(Self.recordSize(keyCount: op.key.count, valueCount: op.value.count) <= capacity - offset, "memtable overflow")
            let (key, p) = Self.writeRecord(sequence: sequence, op, at: base + offset)
            if op.kind == .delete { tombstones.append(UInt32(offset)) }
            placed.append(PlacedOperation(kind: op.kind, key: key, offset: UInt32(offset)))
            offset = p - base
            records += 1
        }
        used = offset
        if records > 0 { maximumSequence = max(maximumSequence, sequence) }
        recordCount += records
    }

    /// The record at `offset` (one `append(batch:sequence:into:)` placed and the index published).
    @inline(__always)
    package func record(at offset: UInt32) -> MemtableRecord {
        var p = UnsafeRawPointer(base + Int(offset))
        let sequence = UInt64(littleEndian: p.loadUnaligned(as: UInt64.self))
        p += 8
        let kind = OperationKind(rawValue: p.load(as: UInt8.self)) ?? .delete
        p += 1
        let (keyCount, k) = Self.getVarint(at: p)
        let key = UnsafeRawBufferPointer(start: k, count: Int(keyCount))
        let (valueCount, v) = Self.getVarint(at: k + Int(keyCount))
        return MemtableRecord(sequence: sequence, kind: kind, key: key, value: UnsafeRawBufferPointer(start: v, count: Int(valueCount)))
    }

    /// Writes `op`'s record at `start`; returns where its key went and where the record ends.
    @inline(__always)
    private static func writeRecord(sequence: UInt64, _ op: BatchOperation, at start: UnsafeMutableRawPointer) -> (key: UnsafeRawBufferPointer, end: UnsafeMutableRawPointer) {
        var p = start
        p.storeBytes(of: sequence.littleEndian, as: UInt64.self)
        p += 8
        p.storeBytes(of: op.kind.rawValue, as: UInt8.self)
        p += 1
        p = putVarint(UInt64(op.key.count), at: p)
        p.copyMemory(from: op.key.baseAddress!, byteCount: op.key.count)
        let key = UnsafeRawBufferPointer(start: p, count: op.key.count)
        p += op.key.count
        p = putVarint(UInt64(op.value.count), at: p)
        if op.value.count > 0 { p.copyMemory(from: op.value.baseAddress!, byteCount: op.value.count) }
        return (key, p + op.value.count)
    }

    @inline(__always)
    private static func putVarint(_ value: UInt64, at pointer: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer {
        var v = value
        var p = pointer
        while v >= 0x80 {
            p.storeBytes(of: UInt8(truncatingIfNeeded: v) | 0x80, as: UInt8.self)
            p += 1
            v >>= 7
        }
        p.storeBytes(of: UInt8(v), as: UInt8.self)
        return p + 1
    }

    @inline(__always)
    private static func getVarint(at pointer: UnsafeRawPointer) -> (UInt64, UnsafeRawPointer) {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        var p = pointer
        while true {
            let byte = p.load(as: UInt8.self)
            p += 1
            result |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return (result, p) }
            shift += 7
        }
    }
}

/// An operation appended to a memtable: its key (in the memtable's
/// memory, valid while the memtable lives) and its record's offset.
package struct PlacedOperation {
    package var kind: OperationKind
    package var key: UnsafeRawBufferPointer
    package var offset: UInt32
}

/// A record in a ``Memtable``, pointing into its arena.
package struct MemtableRecord {
    package var sequence: UInt64
    package var kind: OperationKind
    package var key: UnsafeRawBufferPointer
    package var value: UnsafeRawBufferPointer
}
