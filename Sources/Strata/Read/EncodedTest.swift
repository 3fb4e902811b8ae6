import Foundation
internal import StrataStore

/// A ``ValueTest`` prepared to judge records as the store lends them, still
/// encoded: each property it reads is found where it lies
/// (``RecordCoding/FieldOffsets``) and compared there — a string's bytes
/// with the constant's, an integer or a double as a machine number — so a
/// record that does not match costs no allocation and no decoding.
///
/// The answers are Swift's, as ``ValueTest/evaluate(_:)`` gives them on
/// decoded values: strings compare byte for byte only when both are ASCII
/// (where bytewise order and equality are Swift's); any other string, a
/// stored null, and every kind without a fast path are decoded and compared
/// as values.
indirect enum EncodedTest {
    case constant(Bool)
    case and(EncodedTest, EncodedTest)
    case or(EncodedTest, EncodedTest)
    case not(EncodedTest)
    /// Property `index` (reading a stored null as `null`) against a constant.
    case compareToConstant(index: Int, null: PropertyValue, ValueTest.Comparison, Constant)
    /// Anything else: both sides decoded.
    case compare(ValueTest.Operand, ValueTest.Comparison, ValueTest.Operand)
    /// A string property (a stored null reading as `null`) starting with a
    /// constant; anything else that starts with a string, decoded.
    case startsWithConstant(index: Int, null: PropertyValue, Constant)
    case startsWith(ValueTest.Operand, String)
    /// Property `index` (a stored null reading as `null`) in a set of constants.
    case isIn(index: Int, null: PropertyValue, Set<PropertyValue>)
    /// Anything else in a set of constants, decoded.
    case operandIsIn(ValueTest.Operand, Set<PropertyValue>)
    /// A to-one relationship naming one of `targets` (see ``ValueTest/relatedIn``).
    case relatedIn(index: Int, targets: Set<ObjectID>, whenNil: Bool)

    /// A constant in the form the comparison with stored bytes needs.
    struct Constant {
        let value: PropertyValue
        /// For a string: its UTF-8 bytes, and whether they are all ASCII.
        let utf8: [UInt8]
        let isASCII: Bool

        init(_ value: PropertyValue) {
            self.value = value
            if case .string(let string) = value {
                utf8 = Array(string.utf8)
                isASCII = utf8.allSatisfy { $0 < 0x80 }
            } else {
                utf8 = []
                isASCII = false
            }
        }
    }

    init(_ test: ValueTest) {
        switch test {
        case .constant(let result): self = .constant(result)
        case .and(let a, let b): self = .and(EncodedTest(a), EncodedTest(b))
        case .or(let a, let b): self = .or(EncodedTest(a), EncodedTest(b))
        case .not(let a): self = .not(EncodedTest(a))
        case .compare(.property(let index, let null), let comparison, .constant(let value)):
            self = .compareToConstant(index: index, null: null, comparison, Constant(value))
        case .compare(.constant(let value), let comparison, .property(let index, let null)):
            self = .compareToConstant(index: index, null: null, comparison.mirrored, Constant(value))
        case .compare(let lhs, let comparison, let rhs):
            self = .compare(lhs, comparison, rhs)
        case .startsWith(.property(let index, let null), let prefix):
            self = .startsWithConstant(index: index, null: null, Constant(.string(prefix)))
        case .startsWith(let operand, let prefix):
            self = .startsWith(operand, prefix)
        case .isIn(.property(let index, let null), let constants):
            self = .isIn(index: index, null: null, constants.set)
        case .isIn(let operand, let constants):
            self = .operandIsIn(operand, constants.set)
        case .relatedIn(let relationship, let targets, let whenNil):
            self = .relatedIn(index: relationship, targets: targets, whenNil: whenNil)
        case .related:
            preconditionFailure("Strata: a test through a relationship is encoded once resolved")
        }
    }

    /// Whether the record in `raw` passes, its fields located in `fields`;
    /// nil when a property the test reads is malformed.
    func evaluate(_ raw: UnsafeRawBufferPointer, _ fields: RecordCoding.FieldOffsets, entity: EntityDescription) -> Bool? {
        switch self {
        case .constant(let result):
            return result
        case .and(let a, let b):
            guard let first = a.evaluate(raw, fields, entity: entity) else { return nil }
            return first ? b.evaluate(raw, fields, entity: entity) : false
        case .or(let a, let b):
            guard let first = a.evaluate(raw, fields, entity: entity) else { return nil }
            return first ? true : b.evaluate(raw, fields, entity: entity)
        case .not(let a):
            return a.evaluate(raw, fields, entity: entity).map { !$0 }
        case .compareToConstant(let index, let null, let comparison, let constant):
            return Self.compare(index, null, comparison, constant, raw, fields, entity)
        case .compare(let lhs, let comparison, let rhs):
            guard let a = Self.value(lhs, raw, fields, entity), let b = Self.value(rhs, raw, fields, entity) else { return nil }
            return ValueTest.holds(a, comparison, b)
        case .startsWithConstant(let index, let null, let prefix):
            return Self.starts(index, null, prefix, raw, fields, entity)
        case .startsWith(let operand, let prefix):
            return Self.value(operand, raw, fields, entity).map { ValueTest.starts($0, with: prefix) }
        case .isIn(let index, let null, let constants):
            guard let value = RecordCoding.value(at: fields[index], in: raw, property: index, of: entity) else { return nil }
            if case .null = value { return constants.contains(null) }
            return constants.contains(value)
        case .operandIsIn(let operand, let constants):
            return Self.value(operand, raw, fields, entity).map { constants.contains($0) }
        case .relatedIn(let index, let targets, let whenNil):
            return RecordCoding.value(at: fields[index], in: raw, property: index, of: entity).map {
                ValueTest.names($0, of: targets, whenNil: whenNil)
            }
        }
    }

    /// Whether string property `index` starts with `prefix`. When both are
    /// ASCII, Characters are bytes — but for "\r\n", one Character, so a
    /// prefix ending in "\r" is left to Swift — and the bytes answer.
    @inline(__always)
    private static func starts(
        _ index: Int, _ null: PropertyValue, _ prefix: Constant,
        _ raw: UnsafeRawBufferPointer, _ fields: RecordCoding.FieldOffsets, _ entity: EntityDescription
    ) -> Bool? {
        let offset = fields[index]
        guard case .string(let string) = prefix.value else { return false }
        if RecordCoding.tag(at: offset, in: raw) == .string, prefix.isASCII, prefix.utf8.last != 0x0D {
            guard let bytes = RecordCoding.stringBytes(at: offset, in: raw) else { return nil }
            if isASCII(bytes) {
                guard bytes.count >= prefix.utf8.count else { return false }
                return prefix.utf8.withUnsafeBytes { compareBytes(UnsafeRawBufferPointer(rebasing: bytes[..<$0.count]), $0) } == 0
            }
        }
        guard let value = RecordCoding.value(at: offset, in: raw, property: index, of: entity) else { return nil }
        if case .null = value { return ValueTest.starts(null, with: string) }
        return ValueTest.starts(value, with: string)
    }

    @inline(__always)
    private static func compare(
        _ index: Int, _ null: PropertyValue, _ comparison: ValueTest.Comparison, _ constant: Constant,
        _ raw: UnsafeRawBufferPointer, _ fields: RecordCoding.FieldOffsets, _ entity: EntityDescription
    ) -> Bool? {
        let offset = fields[index]
        switch (RecordCoding.tag(at: offset, in: raw), constant.value) {
        case (.string, .string) where constant.isASCII:
            guard let bytes = RecordCoding.stringBytes(at: offset, in: raw) else { return nil }
            if comparison == .equal || comparison == .notEqual {
                let equal = constant.utf8.withUnsafeBytes { compareBytes(bytes, $0) == 0 }
                // Unequal bytes may still be equal strings (canonical
                // equivalence) unless both are ASCII.
                if equal || isASCII(bytes) { return equal == (comparison == .equal) }
            } else if isASCII(bytes) {
                return ValueTest.apply(comparison, constant.utf8.withUnsafeBytes { compareBytes(bytes, $0) }, 0)
            }
        case (.integer, .integer(let y)):
            guard let x = RecordCoding.integer(at: offset, in: raw), entity.accepts(.integer(x), at: index) else { return nil }
            return ValueTest.apply(comparison, x, y)
        case (.double, .double(let y)):
            guard let x = RecordCoding.doubleValue(at: offset, in: raw) else { return nil }
            return ValueTest.apply(comparison, x, y)
        case (.date, .date(let y)):
            guard let x = RecordCoding.doubleValue(at: offset, in: raw) else { return nil }
            return ValueTest.apply(comparison, x, y.timeIntervalSinceReferenceDate)
        default:
            break
        }
        guard let value = RecordCoding.value(at: offset, in: raw, property: index, of: entity) else { return nil }
        if case .null = value { return ValueTest.holds(null, comparison, constant.value) }
        return ValueTest.holds(value, comparison, constant.value)
    }

    private static func value(
        _ operand: ValueTest.Operand, _ raw: UnsafeRawBufferPointer, _ fields: RecordCoding.FieldOffsets, _ entity: EntityDescription
    ) -> PropertyValue? {
        switch operand {
        case .constant(let value):
            return value
        case .property(let index, let null):
            guard let value = RecordCoding.value(at: fields[index], in: raw, property: index, of: entity) else { return nil }
            if case .null = value { return null }
            return value
        }
    }

    /// Whether every byte is below 0x80, eight at a time.
    @inline(__always)
    private static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var i = 0
        var high: UInt64 = 0
        while i + 8 <= bytes.count {
            high |= bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            i += 8
        }
        while i < bytes.count {
            high |= UInt64(bytes[i])
            i += 1
        }
        return high & 0x8080_8080_8080_8080 == 0
    }
}

extension ValueTest.Comparison {
    /// The comparison with its sides swapped: `c < x` is `x > c`.
    var mirrored: ValueTest.Comparison {
        switch self {
        case .equal, .notEqual: self
        case .less: .greater
        case .lessOrEqual: .greaterOrEqual
        case .greater: .less
        case .greaterOrEqual: .lessOrEqual
        }
    }
}
