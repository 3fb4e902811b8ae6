import Foundation
@_spi(Coding) internal import StrataStore

/// How objects are laid out in the store.
///
/// Object keys are `o`, the entity's position (2 bytes, big-endian) and the
/// primary key (8 bytes, big-endian): all objects of an entity are one prefix
/// scan, in primary-key order. Metadata keys are `m` and a name.
///
/// A record is a format byte (1; or 2 and the schema generation it was
/// written under, see ``StoredSchemas``), the object's store version
/// (varint), the property count (varint) and each property in the entity's
/// order: a tag byte and its payload. Relationships store the targets'
/// entity position and primary key.
///
/// A migrated store's keys name entities by their *stored* number, which
/// ``StoredSchemas`` translates to and from the model's positions; readers
/// above the store only ever see records of the current generation (older
/// ones are upgraded as they are read).
package enum RecordCoding {
    static let objectTag: UInt8 = 0x6F  // "o"
    static let metaTag: UInt8 = 0x6D    // "m"
    static let modelKey: [UInt8] = [metaTag] + Array("model".utf8)
    static let keysKey: [UInt8] = [metaTag] + Array("keys".utf8)
    static let storeKey: [UInt8] = [metaTag] + Array("store".utf8)

    enum Tag: UInt8 {
        case null = 0, string, integer, double, boolFalse, boolTrue, date, data, uuid, object, objects
    }

    package static func prefix(of entity: EntityDescription) -> [UInt8] {
        entityPrefix(objectTag, entity.index)
    }

    /// `tag` (object or index) then an entity's number, 2 bytes big-endian:
    /// the prefix of every key of that kind of the entity.
    static func entityPrefix(_ tag: UInt8, _ number: UInt16) -> [UInt8] {
        [tag, UInt8(number >> 8), UInt8(number & 0xFF)]
    }

    package static func key(_ id: ObjectID) -> [UInt8] {
        var key: [UInt8] = []
        key.append(written: KeyBytes(id))
        return key
    }

    /// The ID a key names; nil for a key that is not a well-formed object key of `model`.
    package static func objectID(fromKey key: [UInt8], model: ManagedObjectModel) -> ObjectID? {
        guard key.count == 11, key[0] == objectTag, let entity = model.entity(at: UInt16(key[1]) << 8 | UInt16(key[2])) else { return nil }
        var pk: UInt64 = 0
        for byte in key[3...] { pk = pk << 8 | UInt64(byte) }
        return ObjectID(entity: entity, primaryKey: pk, isTemporary: false)
    }

    /// The primary key of an object key that starts with `prefix` (an
    /// entity's, ``prefix(of:)``); nil for any other key.
    @inline(__always)
    static func primaryKey(fromKey key: UnsafeRawBufferPointer, prefix: [UInt8]) -> UInt64? {
        guard key.count == 11, key[0] == prefix[0], key[1] == prefix[1], key[2] == prefix[2] else { return nil }
        return UInt64(bigEndian: key.loadUnaligned(fromByteOffset: 3, as: UInt64.self))
    }

    /// Appends the record of an object holding `values` at store version
    /// `version`, written under schema generation `generation` of its store
    /// (0: the store's first schema, whose records carry no generation).
    package static func encode(_ values: [PropertyValue], version: UInt64, generation: UInt64 = 0, into out: inout [UInt8]) {
        out.append(written: RecordBytes(values, version: version, generation: generation))
    }

    /// A record's header: format 1 (generation 0) is a format byte, the
    /// version and the property count; format 2 puts the schema generation
    /// the record was written under after the format byte.
    static func appendHeader(version: UInt64, generation: UInt64, count: Int, into out: inout [UInt8]) {
        out.append(written: HeaderBytes(version: version, generation: generation, count: count))
    }

    /// Reads a record header's format byte and generation; nil for a format
    /// this build does not know.
    @inline(__always)
    static func readGeneration(_ reader: inout ByteReader) -> UInt64? {
        switch reader.readInteger(UInt8.self) {
        case 1?: return 0
        case 2?: return reader.readVarint()
        default: return nil
        }
    }

    /// The newest record format this build reads.
    static let newestFormat: UInt8 = 2

    /// Why the record of `id` (its stored bytes: `first` is the format) did
    /// not decode: ``StrataError/Code/unsupportedFormat`` when a newer
    /// Strata wrote it in a format this build does not know — the store is
    /// sound, the application is old — else ``StrataError/Code/corruptRecord``.
    static func undecodable(_ id: ObjectID, format: UInt8?) -> StrataError {
        undecodable("the record of \(id)", format: format)
    }

    /// ``undecodable(_:format:)`` for a record named otherwise ("a record of Note").
    static func undecodable(_ record: String, format: UInt8?, under what: String = "the model") -> StrataError {
        if let format, format > newestFormat {
            return StrataError(
                .unsupportedFormat,
                "\(record) is in format \(format), written by a newer Strata; this build reads record formats 1 to \(newestFormat)")
        }
        return StrataError(.corruptRecord, "\(record) does not decode under \(what)")
    }

    /// The schema generation a record was written under; nil for a format
    /// this build does not know.
    static func generation(ofRecord bytes: [UInt8]) -> UInt64? {
        bytes.withUnsafeBytes { raw in
            var reader = ByteReader(raw)
            return readGeneration(&reader)
        }
    }

    /// The store version in a record's header; nil for a format this build
    /// does not know or a header cut short.
    static func version(ofRecord bytes: [UInt8]) -> UInt64? {
        bytes.withUnsafeBytes { raw in
            var reader = ByteReader(raw)
            guard readGeneration(&reader) != nil else { return nil }
            return reader.readVarint()
        }
    }

    /// Whether `a` and `b` are stored as the same bytes: what a record
    /// patch takes for "unchanged" (a string in another normalization, or
    /// -0.0 against 0.0, is a change; a NaN against the same NaN is not).
    static func encodesAlike(_ a: PropertyValue, _ b: PropertyValue) -> Bool {
        var encodedA: [UInt8] = [], encodedB: [UInt8] = []
        appendValue(a, into: &encodedA)
        appendValue(b, into: &encodedB)
        return encodedA == encodedB
    }

    /// Appends one property value: a tag byte and its payload.
    static func appendValue(_ value: PropertyValue, into out: inout [UInt8]) {
        out.append(written: ValueBytes(value))
    }

    /// Decodes a record of `entity`, checking every tag, length and
    /// relationship target against the model; nil when anything is off.
    package static func decode(_ bytes: [UInt8], entity: EntityDescription, model: ManagedObjectModel) -> Snapshot? {
        bytes.withUnsafeBytes { decode($0, entity: entity) }
    }

    /// ``decode(_:entity:model:)`` of bytes lent by a scan.
    package static func decode(_ raw: UnsafeRawBufferPointer, entity: EntityDescription) -> Snapshot? {
        var reader = ByteReader(raw)
        guard readGeneration(&reader) != nil, let version = reader.readVarint(),
              let count = reader.readLength(limit: 1 << 16), count == entity.properties.count
        else { return nil }
        let destinations = entity.destinations
        var values: [PropertyValue] = []
        values.reserveCapacity(count)
        for i in 0..<count {
            guard let rawTag = reader.readInteger(UInt8.self), let tag = Tag(rawValue: rawTag),
                  let value = readValue(tag, &reader, destination: destinations[i]),
                  fits(value, entity.properties[i])
            else { return nil }
            values.append(value)
        }
        guard reader.isAtEnd else { return nil }
        return Snapshot(values: values, version: version)
    }

    /// The payload after a tag byte, read and checked; nil when it is
    /// malformed or names an object outside `destination`.
    @inline(__always)
    static func readValue(_ tag: Tag, _ reader: inout ByteReader, destination: EntityDescription?) -> PropertyValue? {
        switch tag {
        case .null: return .null
        case .string:
            guard let length = reader.readLength(limit: reader.remaining), let bytes = reader.readBytes(length),
                  let string = String(validating: bytes, as: UTF8.self) else { return nil }
            return .string(string)
        case .integer:
            guard let z = reader.readVarint() else { return nil }
            return .integer(unzigzag(z))
        case .double:
            guard let bits = reader.readInteger(UInt64.self) else { return nil }
            return .double(Double(bitPattern: bits))
        case .boolFalse: return .bool(false)
        case .boolTrue: return .bool(true)
        case .date:
            guard let bits = reader.readInteger(UInt64.self) else { return nil }
            return .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: bits)))
        case .data:
            guard let length = reader.readLength(limit: reader.remaining), let bytes = reader.readBytes(length) else { return nil }
            return .data(Data(bytes))
        case .uuid:
            guard let bytes = reader.readBytes(16) else { return nil }
            var uuid = UUID().uuid
            withUnsafeMutableBytes(of: &uuid) { $0.copyMemory(from: bytes) }
            return .uuid(UUID(uuid: uuid))
        case .object:
            guard let destination, let id = readID(&reader, destination) else { return nil }
            return .object(id)
        case .objects:
            guard let destination, let n = reader.readLength(limit: reader.remaining / 2) else { return nil }
            var ids = Set<ObjectID>(minimumCapacity: n)
            for _ in 0..<n {
                guard let id = readID(&reader, destination) else { return nil }
                ids.insert(id)
            }
            return .objects(ids)
        }
    }

    @inline(__always)
    static func unzigzag(_ z: UInt64) -> Int64 { Int64(bitPattern: z >> 1) ^ -Int64(bitPattern: z & 1) }

    static func readID(_ reader: inout ByteReader, _ destination: EntityDescription) -> ObjectID? {
        guard let index = reader.readVarint(), index == UInt64(destination.index), let pk = reader.readVarint() else { return nil }
        return ObjectID(entity: destination, primaryKey: pk, isTemporary: false)
    }

    private static func fits(_ value: PropertyValue, _ property: PropertyDescription) -> Bool {
        switch (property, value) {
        case (.attribute, .null): return true
        case (.attribute(let a), _): return a.type.accepts(value)
        case (.relationship(let r), .null): return !r.isToMany
        case (.relationship(let r), .object): return !r.isToMany
        case (.relationship(let r), .objects): return r.isToMany
        default: return false
        }
    }

    // MARK: Metadata

    /// The `model` record: the version hash (16 ASCII hex digits) then the schema.
    package static func modelRecord(_ model: ManagedObjectModel) -> [UInt8] { Array(model.versionHash.utf8) + model.schema }

    package static func hash(inModelRecord record: [UInt8]) -> String? {
        guard record.count >= 16 else { return nil }
        return String(decoding: record[0..<16], as: UTF8.self)
    }

    /// The `keys` record: for each entity, the next primary key never handed out.
    package static func keysRecord(_ next: [UInt64]) -> [UInt8] {
        var out: [UInt8] = []
        out.appendVarint(UInt64(next.count))
        for value in next { out.appendVarint(value) }
        return out
    }

    package static func decodeKeys(_ bytes: [UInt8]) -> [UInt64]? {
        bytes.withUnsafeBytes { raw in
            var reader = ByteReader(raw)
            guard let count = reader.readLength(limit: 1 << 16) else { return nil }
            var result: [UInt64] = []
            for _ in 0..<count {
                guard let value = reader.readVarint() else { return nil }
                result.append(value)
            }
            return reader.isAtEnd ? result : nil
        }
    }
}
