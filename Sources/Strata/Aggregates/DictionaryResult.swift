/// One result of a ``DictionaryFetchRequest``: a value for each of its
/// ``DictionaryFetchRequest/propertiesToFetch``, by key (Core Data's
/// dictionary result type). Values only: no object is registered to build it.
///
/// ```swift
/// let total = row.value(.sum("minutes"), as: Int.self)   // the column as requested
/// let servings = row["servings"]                          // PropertyValue?
/// let count = try row.require("count", as: Int.self)      // throws, naming the keys, when there is no such column
/// ```
///
/// The results of one fetch share their column keys: a result holds its
/// values in column order, not a dictionary of its own.
public struct DictionaryResult: Sendable, Hashable, CustomStringConvertible {
    /// The column keys of one fetch's results, and where each is.
    final class Columns: Sendable {
        let keys: [String]
        let position: [String: Int]

        init(_ keys: [String]) {
            self.keys = keys
            position = Dictionary(uniqueKeysWithValues: keys.enumerated().map { ($1, $0) })
        }
    }

    private let columns: Columns
    /// Each column's value, in the order of `columns.keys`.
    private let row: [PropertyValue]

    /// Every column's value; nil values are `.null`.
    public var values: [String: PropertyValue] {
        Dictionary(uniqueKeysWithValues: zip(columns.keys, row))
    }

    /// A result with one column per key of `values`: to write down the results a test expects. It
    /// equals a fetched result that has the same columns and values.
    public init(_ values: [String: PropertyValue]) {
        let keys = values.keys.sorted()
        columns = Columns(keys)
        row = keys.map { values[$0]! }
    }

    /// A result of a fetch whose columns are `columns`.
    init(columns: Columns, row: [PropertyValue]) {
        self.columns = columns
        self.row = row
    }

    public static func == (a: DictionaryResult, b: DictionaryResult) -> Bool {
        a.columns === b.columns ? a.row == b.row : a.values == b.values
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(values)
    }

    /// Column `key`'s value; nil when the request has no such column.
    public subscript(key: String) -> PropertyValue? { columns.position[key].map { row[$0] } }

    /// The value of `property`'s column, the property as it was requested
    /// (`.count(of: "tags")`, `.sum("minutes")`): no key to guess.
    public subscript(property: FetchedProperty) -> PropertyValue? { self[property.key] }

    /// `property`'s column as `type` (see `value(_:as:)`).
    public func value<T: AttributeValueConvertible>(_ property: FetchedProperty, as type: T.Type) -> T? {
        value(property.key, as: type)
    }

    /// Column `key`'s value as `type`, nil when it holds nil; throws when
    /// the row has no such column (saying which it has) or the value is of
    /// another kind — where `value(_:as:)` answers nil for all three.
    public func require<T: AttributeValueConvertible>(_ key: String, as type: T.Type) throws(StrataError) -> T? {
        guard let value = self[key] else {
            let keys = columns.keys.sorted().map { "\"\($0)\"" }.joined(separator: ", ")
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

    /// The object ID in column `key` (``FetchedProperty/objectID(as:)``, or
    /// a to-one relationship's); nil when the column is missing or holds no ID.
    public func objectID(_ key: String = "objectID") -> ObjectID? {
        if case .object(let id)? = self[key] { return id }
        return nil
    }

    /// Column `key`'s value as `type`; nil when the column is missing, nil,
    /// or of another kind (a count is an `Int`, an average a `Double`).
    public func value<T: AttributeValueConvertible>(_ key: String, as type: T.Type) -> T? {
        guard let value = self[key] else { return nil }
        if case .null = value { return nil }
        let converted = T.fromPropertyValue(value)
        return converted.propertyValue == value ? converted : nil
    }

    public var description: String {
        "{" + zip(columns.keys, row).sorted { $0.0 < $1.0 }.map { "\($0.0): \($0.1)" }.joined(separator: ", ") + "}"
    }
}
