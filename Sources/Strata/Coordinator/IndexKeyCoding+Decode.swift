import Foundation

/// Reading values back out of index entries (see ``IndexKeyCoding``), for
/// answers an index gives without the records: counts per group.
extension IndexKeyCoding {
    /// The offset just past the encoded value of an attribute of `type`
    /// that starts at `offset` in `entry`; nil when the entry is malformed.
    static func end(ofValueAt offset: Int, in entry: UnsafeRawBufferPointer, type: AttributeType) -> Int? {
        guard offset < entry.count else { return nil }
        if entry[offset] == 0 { return offset + 1 }
        guard entry[offset] == 1 else { return nil }
        let width: Int
        switch type {
        case .integer16, .integer32, .integer64, .double, .date: width = 8
        case .bool: width = 1
        case .uuid: width = 16
        case .string, .binaryData:
            var i = offset + 1
            while i + 1 < entry.count {
                if entry[i] == 0 {
                    if entry[i + 1] == 0 { return i + 2 }
                    guard entry[i + 1] == 0xFF else { return nil }
                    i += 2
                } else {
                    i += 1
                }
            }
            return nil
        }
        return offset + 1 + width <= entry.count ? offset + 1 + width : nil
    }

    /// The value of an attribute of `type` encoded at `offset` in `entry`,
    /// and the offset just past it. A string comes back in canonical
    /// composition (NFC), the form the index holds — equal, as Swift's `==`
    /// says, to the one stored.
    static func value(at offset: Int, in entry: UnsafeRawBufferPointer, type: AttributeType) -> (PropertyValue, end: Int)? {
        guard let end = end(ofValueAt: offset, in: entry, type: type) else { return nil }
        return (decodedValue(at: offset, end: end, in: entry, type: type), end)
    }

    private static func decodedValue(at offset: Int, end: Int, in entry: UnsafeRawBufferPointer, type: AttributeType) -> PropertyValue {
        if entry[offset] == 0 { return .null }
        let payload = UnsafeRawBufferPointer(rebasing: entry[(offset + 1)..<end])
        func bigEndian() -> UInt64 { UInt64(bigEndian: payload.loadUnaligned(as: UInt64.self)) }
        func double() -> Double {
            let bits = bigEndian()
            return Double(bitPattern: bits & (1 << 63) != 0 ? bits ^ (1 << 63) : ~bits)
        }
        func unescaped() -> [UInt8] {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(payload.count - 2)
            var i = 0
            while i < payload.count - 2 {
                bytes.append(payload[i])
                i += payload[i] == 0 ? 2 : 1
            }
            return bytes
        }
        switch type {
        case .integer16, .integer32, .integer64: return .integer(Int64(bitPattern: bigEndian() ^ (1 << 63)))
        case .double: return .double(double())
        case .date: return .date(Date(timeIntervalSinceReferenceDate: double()))
        case .bool: return .bool(payload[0] != 0)
        case .uuid: return .uuid(UUID(uuid: payload.loadUnaligned(as: uuid_t.self)))
        case .string: return .string(String(decoding: unescaped(), as: UTF8.self))
        case .binaryData: return .data(Data(unescaped()))
        }
    }
}
