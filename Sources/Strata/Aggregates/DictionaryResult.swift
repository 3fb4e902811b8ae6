/// One result of a ``DictionaryFetchRequest``: a value for each of its
/// ``DictionaryFetchRequest/propertiesToFetch``, by key (Core Data's
/// dictionary result type). Values only: no object is registered to build it.
///
/// ```swift
/// let total = row.value(.sum("minutes"), as: Int.self)   // the column as requested
/// let servings = row["servings"]                          // PropertyValue?
/// let count = try row.require("count", as: Int.self)      // throws, naming the keys, when there is no such column
/// ```
public struct DictionaryResult: Sendable, Hashable, CustomStringConvertible {
    /// Every column's value; nil values are `.null`.
    public let values: [String: PropertyValue]

    public init(_ values: [String: PropertyValue]) {
        self.values = values
    }

    /// Column `key`'s value; nil when the request has no such column.
    public subscript(key: String) -> PropertyValue? { values[key] }

    /// The value of `property`'s column, the property as it was requested
    /// (`.count(of: "tags")`, `.sum("minutes")`): no key to guess.
    public subscript(property: FetchedProperty) -> PropertyValue? { values[property.key] }

    /// `property`'s column as `type` (see `value(_:as:)`).
    public func value<T: AttributeValueConvertible>(_ property: FetchedProperty, as type: T.Type) -> T? {
        value(property.key, as: type)
    }

    /// Column `key`'s value as `type`, nil when it holds nil; throws when
    /// the row has no such column (saying which it has) or the value is of
    /// another kind — where `value(_:as:)` answers nil for all three.
    public func require<T: AttributeValueConvertible>(_ key: String, as type: T.Type) throws(StrataError) -> T? {
        guard let value = values[key] else {
            let keys = values.keys.sorted().map { "\"\($0)\"" }.joined(separator: ", ")
            throw StrataError(.invalidArgument, "the row has no column \"\(key)\"; its columns are \(keys)")
        }
        if case .null = value { return nil }
        let converted = T.fromPropertyValue(value)
        guard converted.propertyValue == value else {
            throw StrataError(.invalidArgument, "column \"\(key)\" holds \(value), not a value of \(T.self)")
        }
        return converted
    }

    /// `property`'s column as `type` (see `require(_:as:)`).
    public func require<T: AttributeValueConvertible>(_ property: FetchedProperty, as type: T.Type) throws(StrataError) -> T? {
        try require(property.key, as: type)
    }

    /// Column `key`'s value as `type`; nil when the column is missing, nil,
    /// or of another kind (a count is an `Int`, an average a `Double`).
    public func value<T: AttributeValueConvertible>(_ key: String, as type: T.Type) -> T? {
        guard let value = values[key] else { return nil }
        if case .null = value { return nil }
        let converted = T.fromPropertyValue(value)
        return converted.propertyValue == value ? converted : nil
    }

    public var description: String {
        "{" + values.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "}"
    }
}
