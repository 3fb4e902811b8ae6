import Foundation

/// How attribute indexes are laid out in the store.
///
/// An index entry is a key alone (its value is empty): `i`, the entity's
/// position (2 bytes, big-endian), the index's position in the entity (1),
/// each indexed attribute's value in an order-preserving encoding, then the
/// object's primary key (8 bytes, big-endian). So the entries of one index
/// are one prefix, sorted by value and then by object, and a range of values
/// is a range of keys.
///
/// Each value encodes so that byte order is Swift's order of the values,
/// and equal values (as Swift's `==` says) encode equally:
/// - no value (null): `00`, before every value; a value: `01` then
/// - integers: 8 bytes big-endian with the sign bit flipped;
/// - doubles and dates (seconds since the reference date): the IEEE bits
///   big-endian, all flipped for a negative number, the sign bit flipped
///   otherwise; -0.0 is written as 0.0, which Swift holds equal;
/// - booleans: `00` or `01`; UUIDs: their 16 bytes;
/// - strings: UTF-8 of the canonical composition (NFC) — Swift compares
///   strings by canonical equivalence, so "é" and "e" + U+0301 must meet —
///   then data: bytes with `00` written `00 FF`, ended by `00 00`, so a
///   string sorts before its extensions.
enum IndexKeyCoding {
    static let indexTag: UInt8 = 0x69  // "i"

    /// The prefix of every entry of `entity`'s index number `index`.
    static func prefix(of entity: EntityDescription, index: Int) -> [UInt8] {
        var prefix: [UInt8] = []
        appendPrefix(of: entity, index: index, to: &prefix)
        return prefix
    }

    /// The length of ``prefix(of:index:)``.
    static let prefixLength = 4

    /// Calls `body` with ``prefix(of:index:)``'s bytes, without an array.
    static func withPrefix<Result>(of entity: EntityDescription, index: Int, _ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        var prefix = (indexTag, UInt8(entity.index >> 8), UInt8(entity.index & 0xFF), UInt8(index))
        return withUnsafeBytes(of: &prefix, body)
    }

    static func appendPrefix(of entity: EntityDescription, index: Int, to key: inout [UInt8]) {
        key.append(indexTag)
        key.append(UInt8(entity.index >> 8))
        key.append(UInt8(entity.index & 0xFF))
        key.append(UInt8(index))
    }

    /// The entry of the object `primaryKey` with `values` (all of its
    /// entity's properties) in `entity`'s index number `index`.
    static func key(_ values: [PropertyValue], of entity: EntityDescription, index: Int, primaryKey: UInt64) -> [UInt8] {
        var key: [UInt8] = []
        appendKey(values, of: entity, index: index, primaryKey: primaryKey, to: &key)
        return key
    }

    /// ``key(_:of:index:primaryKey:)`` appended to `bytes`: a save encodes
    /// every entry into one buffer, where a fresh array per entry cost four
    /// allocations.
    static func appendKey(_ values: [PropertyValue], of entity: EntityDescription, index: Int, primaryKey: UInt64, to bytes: inout [UInt8]) {
        appendPrefix(of: entity, index: index, to: &bytes)
        for property in entity.indexedProperties[index] { appendValue(values[property], to: &bytes) }
        appendBigEndian(primaryKey, to: &bytes)
    }

    /// An entry without its primary key: what every object holding the same
    /// values in index `index` shares — nil when one of them is null (no
    /// uniqueness constraint holds a null, as in SQL).
    static func uniqueKey(_ values: [PropertyValue], of entity: EntityDescription, index: Int) -> [UInt8]? {
        var key: [UInt8] = []
        key.reserveCapacity(48)  // most keys: one growth at most
        appendPrefix(of: entity, index: index, to: &key)
        for property in entity.indexedProperties[index] {
            if case .null = values[property] { return nil }
            appendValue(values[property], to: &key)
        }
        return key
    }

    /// The primary key an entry ends with.
    static func primaryKey(ofEntry key: UnsafeRawBufferPointer) -> UInt64? {
        guard key.count >= 4 + 1 + 8 else { return nil }
        return UInt64(bigEndian: key.loadUnaligned(fromByteOffset: key.count - 8, as: UInt64.self))
    }

    static func appendValue(_ value: PropertyValue, to key: inout [UInt8]) {
        switch value {
        case .null:
            key.append(0)
            return
        default:
            key.append(1)
        }
        switch value {
        case .null:
            break
        case .integer(let i):
            appendBigEndian(UInt64(bitPattern: i) ^ (1 << 63), to: &key)
        case .double(let d):
            appendDouble(d, to: &key)
        case .date(let date):
            appendDouble(date.timeIntervalSinceReferenceDate, to: &key)
        case .bool(let b):
            key.append(b ? 1 : 0)
        case .uuid(let u):
            withUnsafeBytes(of: u.uuid) { key.append(contentsOf: $0) }
        case .string(let s):
            appendString(s, to: &key)
        case .data(let d):
            appendEscaped(d, to: &key)
        case .object, .objects:
            preconditionFailure("relationships are not indexed (checked by the model)")
        }
    }

    /// The string's UTF-8 in canonical composition; ASCII is its own.
    static func canonicalUTF8(_ s: String) -> [UInt8] {
        var s = s
        let composed = s.withUTF8 { utf8 in isComposed(utf8) }
        return Array((composed ? s : s.precomposedStringWithCanonicalMapping).utf8)
    }

    /// Whether UTF-8 is in canonical composition as it stands because
    /// every scalar is below U+0300 (ASCII, Latin-1, Latin Extended-A and
    /// -B): none of those decomposes under composition or combines with
    /// what precedes it, so composition leaves such text alone. Foundation's
    /// composition, which the rest needs, costs microseconds a string
    /// (most of a lookup by a key with an accent in it).
    @inline(__always)
    static func isComposed(_ utf8: UnsafeBufferPointer<UInt8>) -> Bool {
        scan(utf8).composed
    }

    /// Whether `byte` can be part of a scalar below U+0300: one byte, or a
    /// two-byte sequence led by C2…CB (``isComposed(_:)``).
    @inline(__always)
    private static func isComposedByte(_ byte: UInt8) -> Bool {
        byte < 0xC0 || (byte >= 0xC2 && byte <= 0xCB)
    }

    /// `canonicalUTF8(s)`, escaped: a string already composed (ASCII, the
    /// common case, among them) straight from its own storage, without a copy.
    private static func appendString(_ s: String, to key: inout [UInt8]) {
        var s = s
        let appended = s.withUTF8 { utf8 -> Bool in
            let (composed, zero) = scan(utf8)
            guard composed else { return false }
            if zero {
                appendEscaped(utf8, to: &key)
            } else {
                key.append(contentsOf: utf8)
                key.append(0)
                key.append(0)
            }
            return true
        }
        if !appended { appendEscaped(canonicalUTF8(s), to: &key) }
    }

    /// One pass for both questions ``appendString(_:to:)`` asks: whether
    /// `utf8` is composed as it stands (``isComposed(_:)``), and whether it
    /// holds a zero byte to escape. ASCII is read eight bytes at a time.
    @inline(__always)
    private static func scan(_ utf8: UnsafeBufferPointer<UInt8>) -> (composed: Bool, zero: Bool) {
        var zero = false
        var i = 0
        if let base = utf8.baseAddress {
            let raw = UnsafeRawPointer(base)
            while i + 8 <= utf8.count {
                let word = raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                // A byte of 0x80 or more: the rest byte by byte.
                if word & 0x8080_8080_8080_8080 != 0 { break }
                // Set in a byte's top bit only if some byte is zero (exact for ASCII).
                if (word &- 0x0101_0101_0101_0101) & ~word & 0x8080_8080_8080_8080 != 0 { zero = true }
                i += 8
            }
        }
        while i < utf8.count {
            let byte = utf8[i]
            guard isComposedByte(byte) else { return (false, zero) }
            zero = zero || byte == 0
            i += 1
        }
        return (true, zero)
    }

    private static func appendDouble(_ d: Double, to key: inout [UInt8]) {
        let bits = (d == 0 ? 0.0 : d).bitPattern
        appendBigEndian(bits & (1 << 63) != 0 ? ~bits : bits | (1 << 63), to: &key)
    }

    private static func appendBigEndian(_ v: UInt64, to key: inout [UInt8]) {
        withUnsafeBytes(of: v.bigEndian) { key.append(contentsOf: $0) }
    }

    private static func appendEscaped<C: Collection<UInt8>>(_ bytes: C, to key: inout [UInt8]) {
        if bytes.contains(0) {
            for byte in bytes {
                key.append(byte)
                if byte == 0 { key.append(0xFF) }
            }
        } else {
            key.append(contentsOf: bytes)  // nothing to escape (strings, mostly): one copy
        }
        key.append(0)
        key.append(0)
    }

    /// Whether a value of this kind can be looked up in an index of an
    /// attribute of `type` (the encoding is the type's).
    static func matches(_ value: PropertyValue, _ type: AttributeType) -> Bool {
        switch (value, type) {
        case (.integer, .integer16), (.integer, .integer32), (.integer, .integer64), (.double, .double), (.date, .date),
             (.bool, .bool), (.uuid, .uuid), (.string, .string), (.data, .binaryData):
            return true
        default:
            return false
        }
    }
}
