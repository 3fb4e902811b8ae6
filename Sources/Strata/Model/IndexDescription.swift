/// An index on one or more attributes of an entity, declared in the model:
/// the coordinator keeps it in the store, in the same atomic batch as the
/// objects it indexes, and fetches whose predicate constrains its leading
/// attributes read it instead of every record (``ManagedObjectContext/explain(_:)-(FetchRequest<Result>)``
/// says which).
///
/// ```swift
/// EntityDescription(name: "Item", managedObjectClass: Item.self, properties: [
///     .attribute("remoteID", .integer64),
///     .attribute("lastName", .string),
///     .attribute("firstName", .string),
/// ], indexes: [
///     IndexDescription("remoteID"),
///     IndexDescription("lastName", "firstName"),
/// ])
/// ```
///
/// Indexes are part of the model's ``ManagedObjectModel/versionHash``: a
/// store made without an index does not open with a model that declares it.
///
/// A *unique* index backs a uniqueness constraint (``EntityDescription``'s
/// `uniquenessConstraints:`): no two objects of the entity may hold the same
/// values in its attributes — unless one of them is nil, as in SQL.
public struct IndexDescription: Sendable, Hashable, CustomStringConvertible {
    /// The attributes, most significant first.
    public let attributeNames: [String]
    /// Whether it backs a uniqueness constraint.
    public let isUnique: Bool

    /// An index on `attributeNames`, most significant first.
    public init(_ attributeNames: String...) {
        self.init(attributeNames)
    }

    /// An index on `attributeNames`, most significant first; `isUnique`
    /// makes it back a uniqueness constraint (as `uniquenessConstraints:`
    /// on ``EntityDescription`` does).
    ///
    /// ```swift
    /// IndexDescription(["lastName", "firstName"])
    /// IndexDescription(["email"], isUnique: true)
    /// ```
    public init(_ attributeNames: [String], isUnique: Bool = false) {
        self.attributeNames = attributeNames
        self.isUnique = isUnique
    }

    public var description: String { (isUnique ? "UNIQUE " : "") + "(" + attributeNames.joined(separator: ", ") + ")" }
}
