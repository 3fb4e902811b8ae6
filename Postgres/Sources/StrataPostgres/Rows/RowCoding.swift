import Foundation
@_spi(StoreImplementation) import Strata
import PostgresNIO

/// An object's values as PostgreSQL's parameters and cells, by the
/// attribute types the columns were made for (``StoreSchema``): every value
/// travels as a bind parameter, in binary, never as SQL text.
///
/// Two things PostgreSQL keeps otherwise than Strata's log store:
/// - a `Date` is kept to the microsecond (`timestamp with time zone`);
/// - text cannot hold the NUL character: a string with one is refused, with
///   the object and attribute named.
enum RowCoding {
    /// Appends `value`, of attribute or to-one `property` of `id`'s entity, to `bindings`.
    static func bind(
        _ value: PropertyValue, of property: PropertyDescription, for id: ObjectID, to bindings: inout PostgresBindings
    ) throws(StrataError) {
        try check(value, of: property, for: id)
        switch (value, property) {
        case (.null, _): bindings.appendNull()
        case (.string(let string), .attribute): bindings.append(string)
        case (.integer(let integer), .attribute(let attribute)):
            switch attribute.type {
            case .integer16: bindings.append(Int16(truncatingIfNeeded: integer))
            case .integer32: bindings.append(Int32(truncatingIfNeeded: integer))
            default: bindings.append(integer)
            }
        case (.double(let double), .attribute): bindings.append(double)
        case (.bool(let bool), .attribute): bindings.append(bool)
        case (.date(let date), .attribute): bindings.append(date)
        case (.data(let data), .attribute): bindings.append(ByteBuffer(bytes: data))
        case (.uuid(let uuid), .attribute): bindings.append(uuid)
        case (.object(let target), .relationship): bindings.append(Int64(bitPattern: target.storedPrimaryKey))
        default: throw unsupported(value, of: property, for: id)
        }
    }

    /// Throws for a value PostgreSQL cannot keep as Strata holds it: a
    /// string with a NUL character, a date beyond what a timestamp holds.
    static func check(_ value: PropertyValue, of property: PropertyDescription, for id: ObjectID) throws(StrataError) {
        switch value {
        case .string(let string):
            guard !string.utf8.contains(0) else {
                throw StrataError(code: .invalidArgument, message: """
                    \(id).\(property.name) holds a string with a NUL character, which PostgreSQL's text cannot keep: \
                    take it out, or keep such values as binary data
                    """)
            }
        case .date(let date):
            // postgres-nio would trap on a date past an Int64 of microseconds.
            guard microseconds(date) != nil else {
                throw StrataError(code: .invalidArgument, message: """
                    \(id).\(property.name) holds \(date.timeIntervalSinceReferenceDate) s from 2001, farther than \
                    PostgreSQL keeps dates (4713 BC to 294276 AD)
                    """)
            }
        default:
            break
        }
    }

    /// The error for a value `property` cannot hold in its column.
    static func unsupported(_ value: PropertyValue, of property: PropertyDescription, for id: ObjectID) -> StrataError {
        StrataError(code: .invalidArgument, message: "\(id).\(property.name) cannot hold \(value) in PostgreSQL")
    }

    /// The value of attribute `attribute` in `cell`.
    static func attributeValue(_ cell: PostgresCell, _ attribute: AttributeDescription, of id: ObjectID) throws(StrataError) -> PropertyValue {
        try attributeValue(cell, attribute, of: "\(id)")
    }

    /// The value of attribute `attribute` in `cell`, read for `owner` (an
    /// object, or a group of them: what an error names).
    static func attributeValue(_ cell: PostgresCell, _ attribute: AttributeDescription, of owner: String) throws(StrataError) -> PropertyValue {
        do {
            switch attribute.type {
            case .string: return try cell.decode(String?.self).map(PropertyValue.string) ?? .null
            case .integer16: return try cell.decode(Int16?.self).map { .integer(Int64($0)) } ?? .null
            case .integer32: return try cell.decode(Int32?.self).map { .integer(Int64($0)) } ?? .null
            case .integer64: return try cell.decode(Int64?.self).map(PropertyValue.integer) ?? .null
            case .double: return try cell.decode(Double?.self).map(PropertyValue.double) ?? .null
            case .bool: return try cell.decode(Bool?.self).map(PropertyValue.bool) ?? .null
            case .date: return try cell.decode(Date?.self).map(PropertyValue.date) ?? .null
            case .binaryData: return try cell.decode(ByteBuffer?.self).map { .data(Data($0.readableBytesView)) } ?? .null
            case .uuid: return try cell.decode(UUID?.self).map(PropertyValue.uuid) ?? .null
            }
        } catch {
            throw StrataError(code: .corruptRecord, message: """
                \(owner).\(attribute.name) holds a value PostgreSQL cannot give as \(attribute.type) (\(error)): \
                was the column changed outside Strata?
                """)
        }
    }

    /// Appends `values` (none null) as one array of `type`'s column type;
    /// returns the array's SQL type, or nil when a value is not of `type`.
    static func appendArray(_ values: [PropertyValue], of type: AttributeType, to bindings: inout PostgresBindings) -> String? {
        /// The values as `T`s, bound as one array of `sqlType`; nil (nothing bound) when one is not a `T`.
        func bind<T: PostgresArrayEncodable & PostgresNonThrowingEncodable>(_ sqlType: String, _ convert: (PropertyValue) -> T?) -> String? {
            var array: [T] = []
            array.reserveCapacity(values.count)
            for value in values {
                guard let element = convert(value) else { return nil }
                array.append(element)
            }
            bindings.append(array)
            return sqlType
        }
        switch type {
        case .string: return bind("text[]") { if case .string(let s) = $0 { s } else { nil } }
        case .integer16, .integer32, .integer64: return bind("bigint[]") { if case .integer(let i) = $0 { i } else { nil } }
        case .double: return bind("double precision[]") { if case .double(let d) = $0 { d } else { nil } }
        case .bool: return bind("boolean[]") { if case .bool(let b) = $0 { b } else { nil } }
        case .date: return bind("timestamp with time zone[]") { if case .date(let d) = $0 { d } else { nil } }
        case .binaryData: return bind("bytea[]") { if case .data(let d) = $0 { ByteBuffer(bytes: d) } else { nil } }
        case .uuid: return bind("uuid[]") { if case .uuid(let u) = $0 { u } else { nil } }
        }
    }

    /// postgres-nio's epoch for dates: 2000-01-01, as PostgreSQL's.
    private static let postgresEpoch = Date(timeIntervalSince1970: 946_684_800)

    /// The microseconds since PostgreSQL's epoch postgres-nio sends for
    /// `date` (truncated), nil past what an `Int64` holds safely.
    static func microseconds(_ date: Date) -> Int64? {
        let microseconds = date.timeIntervalSince(postgresEpoch) * 1_000_000
        guard microseconds.isFinite, abs(microseconds) < 9e18 else { return nil }
        return Int64(microseconds)
    }

    /// The date postgres-nio reads for `microseconds` since PostgreSQL's epoch.
    static func date(microseconds: Int64) -> Date {
        Date(timeInterval: Double(microseconds) / 1_000_000, since: postgresEpoch)
    }

    /// The object a to-one column's `cell` names, of `destination`.
    static func target(_ cell: PostgresCell, in destination: EntityDescription) throws(StrataError) -> PropertyValue {
        do {
            guard let key = try cell.decode(Int64?.self) else { return .null }
            return .object(ObjectID(entity: destination, storedPrimaryKey: UInt64(bitPattern: key)))
        } catch {
            throw StrataError(code: .corruptRecord, message: "a relationship column to \(destination.name) holds no key (\(error))")
        }
    }
}
