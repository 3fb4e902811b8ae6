import Foundation
@_spi(Coding) internal import StrataStore

/// Reading single properties of a record where it lies, without decoding
/// the rest: what a query without an index does to each record it scans.
extension RecordCoding {
    /// Where a record's leading properties start: the offset of each one's
    /// tag byte, found by walking tags and lengths (and checking them, and
    /// that each tag fits its property, as ``decode(_:entity:)``
    /// does). Reused from record to record, so a scan allocates nothing.
    struct FieldOffsets {
        private(set) var offsets: [Int] = []
        /// How many properties `locate` finds: the buffer is made by the
        /// first call (a lookup answered by an index judges no record, and
        /// allocates nothing for it).
        private let wanted: Int

        init(count: Int) { wanted = count }

        /// Walks the first `offsets.count` properties of `raw`, a record of
        /// `entity`; false when the record is malformed.
        @inline(__always)
        mutating func locate(in raw: UnsafeRawBufferPointer, entity: EntityDescription) -> Bool {
            if offsets.count != wanted { offsets = Array(repeating: 0, count: wanted) }
            var reader = ByteReader(raw)
            guard RecordCoding.readGeneration(&reader) != nil, reader.readVarint() != nil,
                  let count = reader.readLength(limit: 1 << 16), count == entity.properties.count, offsets.count <= count
            else { return false }
            for i in offsets.indices {
                offsets[i] = reader.offset
                guard let rawTag = reader.readInteger(UInt8.self), let tag = Tag(rawValue: rawTag),
                      RecordCoding.tag(tag, fits: i, of: entity), RecordCoding.skipValue(tag, &reader)
                else { return false }
            }
            return true
        }

        @inline(__always)
        subscript(_ property: Int) -> Int { offsets[property] }
    }

    /// Property `i`'s tag in `raw`, at `offset` (from ``FieldOffsets``).
    @inline(__always)
    static func tag(at offset: Int, in raw: UnsafeRawBufferPointer) -> Tag {
        Tag(rawValue: raw[offset])!  // checked by FieldOffsets.locate
    }

    /// The property at `offset`, decoded; nil when it is malformed.
    static func value(at offset: Int, in raw: UnsafeRawBufferPointer, property i: Int, of entity: EntityDescription) -> PropertyValue? {
        var reader = ByteReader(raw, offset: offset + 1)
        guard let value = readValue(tag(at: offset, in: raw), &reader, destination: entity.destinations[i]),
              entity.accepts(value, at: i) else { return nil }
        return value
    }

    /// How many objects the to-many relationship at `offset` holds, read
    /// from its length (its IDs are not decoded); nil when it is malformed.
    static func relationshipCount(at offset: Int, in raw: UnsafeRawBufferPointer) -> Int? {
        switch tag(at: offset, in: raw) {
        case .null: return 0
        case .objects:
            var reader = ByteReader(raw, offset: offset + 1)
            return reader.readLength(limit: reader.remaining / 2)
        default: return nil
        }
    }

    /// A string property's UTF-8 bytes, lent (not checked to be valid UTF-8).
    @inline(__always)
    static func stringBytes(at offset: Int, in raw: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        var reader = ByteReader(raw, offset: offset + 1)
        guard let length = reader.readLength(limit: reader.remaining) else { return nil }
        return reader.readBytes(length)
    }

    @inline(__always)
    static func integer(at offset: Int, in raw: UnsafeRawBufferPointer) -> Int64? {
        var reader = ByteReader(raw, offset: offset + 1)
        return reader.readVarint().map(unzigzag)
    }

    /// A double's or a date's bits (a date is its time since the reference date).
    @inline(__always)
    static func doubleValue(at offset: Int, in raw: UnsafeRawBufferPointer) -> Double? {
        var reader = ByteReader(raw, offset: offset + 1)
        return reader.readInteger(UInt64.self).map { Double(bitPattern: $0) }
    }

    /// Whether a value with `tag` can be property `i` of `entity` (integer
    /// ranges and relationship targets are checked when the value is read).
    @inline(__always)
    static func tag(_ tag: Tag, fits i: Int, of entity: EntityDescription) -> Bool {
        guard let type = entity.attributeTypes[i] else {
            switch tag {
            case .null, .object: return !entity.toManyFlags[i]
            case .objects: return entity.toManyFlags[i]
            default: return false
            }
        }
        switch (tag, type) {
        case (.null, _), (.string, .string), (.double, .double), (.boolFalse, .bool), (.boolTrue, .bool), (.date, .date),
             (.data, .binaryData), (.uuid, .uuid), (.integer, .integer16), (.integer, .integer32), (.integer, .integer64):
            return true
        default:
            return false
        }
    }

    /// Moves past the payload after a tag byte; false when it is malformed.
    @inline(__always)
    static func skipValue(_ tag: Tag, _ reader: inout ByteReader) -> Bool {
        switch tag {
        case .null, .boolFalse, .boolTrue: return true
        case .string, .data:
            guard let length = reader.readLength(limit: reader.remaining) else { return false }
            return reader.readBytes(length) != nil
        case .integer: return reader.readVarint() != nil
        case .double, .date: return reader.readInteger(UInt64.self) != nil
        case .uuid: return reader.readBytes(16) != nil
        case .object: return reader.readVarint() != nil && reader.readVarint() != nil
        case .objects:
            guard let n = reader.readLength(limit: reader.remaining / 2) else { return false }
            for _ in 0..<n where reader.readVarint() == nil || reader.readVarint() == nil { return false }
            return true
        }
    }
}
