import Foundation
@_spi(Coding) internal import StrataStore

/// Keys and records written in place: each knows its size before it writes,
/// so a save puts an object's key and record into its batch with one append
/// and no intermediate array (see `ByteWriter`). The layouts are those
/// ``RecordCoding`` documents; its `[UInt8]` functions append these.
extension RecordCoding {
    /// Puts the record of `id` holding `values` into `batch`.
    static func put(_ id: ObjectID, _ values: [PropertyValue], version: UInt64, generation: UInt64, into batch: inout WriteBatch) {
        batch.put(KeyBytes(id), RecordBytes(values, version: version, generation: generation))
    }

    /// An object's key: `o`, the entity's position (2 bytes, big-endian),
    /// the primary key (8 bytes, big-endian).
    struct KeyBytes: ByteWriting {
        let id: ObjectID
        init(_ id: ObjectID) { self.id = id }

        var byteCount: Int { 11 }

        func write(to writer: inout ByteWriter) {
            let index = id.entity.index
            writer.writeByte(objectTag)
            writer.writeByte(UInt8(index >> 8))
            writer.writeByte(UInt8(index & 0xFF))
            writer.writeInteger(id.primaryKey.byteSwapped)  // big-endian, written little-endian swapped
        }
    }

    /// A record: its header, then each value.
    struct RecordBytes: ByteWriting {
        let values: [PropertyValue]
        let header: HeaderBytes

        init(_ values: [PropertyValue], version: UInt64, generation: UInt64) {
            self.values = values
            header = HeaderBytes(version: version, generation: generation, count: values.count)
        }

        var byteCount: Int {
            var size = header.byteCount
            for value in values { size += ValueBytes.byteCount(of: value) }
            return size
        }

        func write(to writer: inout ByteWriter) {
            header.write(to: &writer)
            for value in values { ValueBytes.write(value, to: &writer) }
        }
    }

    /// A record's header: format 1 (generation 0) is a format byte, the
    /// version and the property count; format 2 puts the schema generation
    /// the record was written under after the format byte.
    struct HeaderBytes: ByteWriting {
        let version: UInt64
        let generation: UInt64
        let count: Int

        var byteCount: Int {
            1 + (generation == 0 ? 0 : varintSize(generation)) + varintSize(version) + varintSize(UInt64(count))
        }

        func write(to writer: inout ByteWriter) {
            if generation == 0 {
                writer.writeByte(1)
            } else {
                writer.writeByte(2)
                writer.writeVarint(generation)
            }
            writer.writeVarint(version)
            writer.writeVarint(UInt64(count))
        }
    }

    /// One property value: a tag byte and its payload.
    struct ValueBytes: ByteWriting {
        let value: PropertyValue
        init(_ value: PropertyValue) { self.value = value }

        var byteCount: Int { Self.byteCount(of: value) }
        func write(to writer: inout ByteWriter) { Self.write(value, to: &writer) }

        @inline(__always)
        static func byteCount(of value: PropertyValue) -> Int {
            switch value {
            case .null, .bool: return 1
            case .string(let s):
                let count = s.utf8.count
                return 1 + varintSize(UInt64(count)) + count
            case .integer(let i): return 1 + varintSize(zigzag(i))
            case .double, .date: return 9
            case .data(let d): return 1 + varintSize(UInt64(d.count)) + d.count
            case .uuid: return 17
            case .object(let id): return 1 + varintSize(UInt64(id.entity.index)) + varintSize(id.primaryKey)
            case .objects(let ids):
                var size = 1 + varintSize(UInt64(ids.count))
                for id in ids { size += varintSize(UInt64(id.entity.index)) + varintSize(id.primaryKey) }
                return size
            }
        }

        @inline(__always)
        static func zigzag(_ i: Int64) -> UInt64 { UInt64(bitPattern: (i << 1) ^ (i >> 63)) }

        @inline(__always)
        static func write(_ value: PropertyValue, to writer: inout ByteWriter) {
            switch value {
            case .null: writer.writeByte(Tag.null.rawValue)
            case .string(let s):
                writer.writeByte(Tag.string.rawValue)
                writer.writeVarint(UInt64(s.utf8.count))
                // Native strings lend their UTF-8; a bridged one is walked.
                let lent: Void? = s.utf8.withContiguousStorageIfAvailable { writer.writeBytes(UnsafeRawBufferPointer($0)) }
                if lent == nil { for byte in s.utf8 { writer.writeByte(byte) } }
            case .integer(let i):
                writer.writeByte(Tag.integer.rawValue)
                writer.writeVarint(zigzag(i))
            case .double(let d):
                writer.writeByte(Tag.double.rawValue)
                writer.writeInteger(d.bitPattern)
            case .bool(let b): writer.writeByte(b ? Tag.boolTrue.rawValue : Tag.boolFalse.rawValue)
            case .date(let d):
                writer.writeByte(Tag.date.rawValue)
                writer.writeInteger(d.timeIntervalSinceReferenceDate.bitPattern)
            case .data(let d):
                writer.writeByte(Tag.data.rawValue)
                writer.writeVarint(UInt64(d.count))
                d.withUnsafeBytes { writer.writeBytes($0) }
            case .uuid(let u):
                writer.writeByte(Tag.uuid.rawValue)
                withUnsafeBytes(of: u.uuid) { writer.writeBytes($0) }
            case .object(let id):
                writer.writeByte(Tag.object.rawValue)
                writer.writeVarint(UInt64(id.entity.index))
                writer.writeVarint(id.primaryKey)
            case .objects(let ids):
                writer.writeByte(Tag.objects.rawValue)
                writer.writeVarint(UInt64(ids.count))
                for id in ids {
                    writer.writeVarint(UInt64(id.entity.index))
                    writer.writeVarint(id.primaryKey)
                }
            }
        }
    }
}
