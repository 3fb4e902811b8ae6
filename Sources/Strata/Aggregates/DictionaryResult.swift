/// One result of a ``DictionaryFetchRequest``: a value for each of its
/// ``DictionaryFetchRequest/propertiesToFetch``, by key (Core Data's
/// dictionary result type). Values only: no object is registered to build it.
///
/// ```swift
/// let total = row.value("sum(minutes)", as: Int.self)
/// let servings = row["servings"]          // PropertyValue?
/// ```
public struct DictionaryResult: Sendable, Hashable, CustomStringConvertible {
    /// Every column's value; nil values are `.null`.
    public let values: [String: PropertyValue]

    public init(_ values: [String: PropertyValue]) {
        self.values = values
    }

    /// Column `key`'s value; nil when the request has no such column.
    public subscript(key: String) -> PropertyValue? { values[key] }

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
