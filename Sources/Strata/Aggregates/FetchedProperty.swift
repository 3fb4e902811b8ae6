/// One column of a ``DictionaryFetchRequest``'s results: an attribute's
/// value, or a function of a group of objects (count, sum, minimum,
/// maximum, average), or the number of objects a to-many relationship
/// holds, or the object's ID.
///
/// ```swift
/// var request = DictionaryFetchRequest<Recipe>(
///     propertiesToFetch: ["servings", .count(), .average("minutes")],
///     groupBy: ["servings"])
/// for row in try context.fetch(request) {
///     print(row["servings"]!, row.value("count", as: Int.self)!)
/// }
/// ```
///
/// A string literal names an attribute (or a to-one relationship, whose
/// value is the object's ID). As in SQL, sum, minimum, maximum and average
/// pass over nil values; ``count(as:)`` counts objects.
public struct FetchedProperty: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    enum Function: Sendable, Hashable {
        case value, count, sum, minimum, maximum, average, relationshipCount, objectID
    }

    let function: Function
    /// The attribute or relationship read; nil for ``count(as:)``.
    let property: String?
    /// The key of this column in each result.
    public let key: String

    private init(function: Function, property: String?, key: String) {
        self.function = function
        self.property = property
        self.key = key
    }

    /// The value of attribute (or to-one relationship) `name`, under its name.
    public static func attribute(_ name: String) -> FetchedProperty {
        FetchedProperty(function: .value, property: name, key: name)
    }

    public init(stringLiteral name: String) {
        self = .attribute(name)
    }

    /// How many objects a result stands for (all the matches, or a group's).
    public static func count(as key: String = "count") -> FetchedProperty {
        FetchedProperty(function: .count, property: nil, key: key)
    }

    /// The sum of an integer or double attribute (0 when no object holds a
    /// value): an integer sum is exact or the fetch throws.
    public static func sum(_ attribute: String, as key: String? = nil) -> FetchedProperty {
        FetchedProperty(function: .sum, property: attribute, key: key ?? "sum(\(attribute))")
    }

    /// The smallest value of an integer, double, string or date attribute
    /// (nil when no object holds a value).
    public static func min(_ attribute: String, as key: String? = nil) -> FetchedProperty {
        FetchedProperty(function: .minimum, property: attribute, key: key ?? "min(\(attribute))")
    }

    /// The largest value of an integer, double, string or date attribute
    /// (nil when no object holds a value).
    public static func max(_ attribute: String, as key: String? = nil) -> FetchedProperty {
        FetchedProperty(function: .maximum, property: attribute, key: key ?? "max(\(attribute))")
    }

    /// The mean of an integer or double attribute, as a double (nil when no
    /// object holds a value).
    public static func average(_ attribute: String, as key: String? = nil) -> FetchedProperty {
        FetchedProperty(function: .average, property: attribute, key: key ?? "average(\(attribute))")
    }

    /// How many objects the to-many relationship `name` of each object
    /// holds, read from the object's record: its targets are not loaded.
    /// A per-object column: not in a request that groups or aggregates.
    public static func count(of relationship: String, as key: String? = nil) -> FetchedProperty {
        FetchedProperty(function: .relationshipCount, property: relationship, key: key ?? "count(\(relationship))")
    }

    /// Each object's ID (Core Data's `objectID` expression), as
    /// ``PropertyValue/object(_:)``: a key → ID map without registering an
    /// object. A per-object column: not in a request that groups or
    /// aggregates. An object inserted and not yet saved has a temporary ID
    /// (``ObjectID/isTemporaryID``), as ``ManagedObject/objectID`` does.
    ///
    /// ```swift
    /// let rows = try context.fetch(DictionaryFetchRequest<Item>(propertiesToFetch: ["sku", .objectID()]))
    /// let ids = Dictionary(uniqueKeysWithValues: rows.map { ($0.value("sku", as: String.self)!, $0.objectID()!) })
    /// ```
    public static func objectID(as key: String = "objectID") -> FetchedProperty {
        FetchedProperty(function: .objectID, property: nil, key: key)
    }

    /// Whether the column is computed over a group of objects.
    var isAggregate: Bool {
        switch function {
        case .value, .relationshipCount, .objectID: false
        case .count, .sum, .minimum, .maximum, .average: true
        }
    }

    public var description: String { key }
}

/// An order for the results of a ``DictionaryFetchRequest``, by one of
/// their keys. Nil sorts first, as in an index.
///
/// ```swift
/// request.sortBy = [.descending("count"), .ascending("servings")]
/// ```
public struct ResultOrder: Sendable, Hashable {
    /// The key of the column to sort by (``FetchedProperty/key``).
    public let key: String
    /// Whether smaller values come first.
    public let ascending: Bool

    /// By column `key`, smaller values first.
    public static func ascending(_ key: String) -> ResultOrder { ResultOrder(key: key, ascending: true) }
    /// By column `key`, larger values first.
    public static func descending(_ key: String) -> ResultOrder { ResultOrder(key: key, ascending: false) }
}
