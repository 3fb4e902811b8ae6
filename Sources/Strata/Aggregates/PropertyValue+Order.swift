import Foundation

extension PropertyValue {
    /// A total order over values, for sorting results: nil first, then each
    /// kind in Swift's order for it (NaN last among doubles), kinds apart.
    static func precedes(_ a: PropertyValue, _ b: PropertyValue) -> Bool {
        switch (a, b) {
        case (.integer(let x), .integer(let y)): return x < y
        case (.double(let x), .double(let y)):
            if x.isNaN { return false }
            return y.isNaN || x < y
        case (.string(let x), .string(let y)): return x < y
        case (.date(let x), .date(let y)): return x < y
        case (.bool(let x), .bool(let y)): return !x && y
        case (.data(let x), .data(let y)): return x.lexicographicallyPrecedes(y)
        case (.uuid(let x), .uuid(let y)): return x.uuidString < y.uuidString
        case (.object(let x), .object(let y)):
            return (x.entity.index, x.isTemporaryID ? 1 : 0, x.primaryKey) < (y.entity.index, y.isTemporaryID ? 1 : 0, y.primaryKey)
        default: return a.kindRank < b.kindRank
        }
    }

    /// Where `a` stands against `b` in the order of ``precedes(_:_:)``
    /// (two NaNs are the same), comparing a number, date or string once.
    static func compare(_ a: PropertyValue, _ b: PropertyValue) -> ComparisonResult {
        func order<T: Comparable>(_ x: T, _ y: T) -> ComparisonResult {
            x < y ? .orderedAscending : y < x ? .orderedDescending : .orderedSame
        }
        switch (a, b) {
        case (.integer(let x), .integer(let y)): return order(x, y)
        case (.double(let x), .double(let y)) where !x.isNaN && !y.isNaN: return order(x, y)
        case (.string(let x), .string(let y)): return order(x, y)
        case (.date(let x), .date(let y)): return order(x, y)
        default: return precedes(a, b) ? .orderedAscending : precedes(b, a) ? .orderedDescending : .orderedSame
        }
    }

    private var kindRank: Int {
        switch self {
        case .null: 0
        case .bool: 1
        case .integer: 2
        case .double: 3
        case .string: 4
        case .date: 5
        case .data: 6
        case .uuid: 7
        case .object: 8
        case .objects: 9
        }
    }
}
