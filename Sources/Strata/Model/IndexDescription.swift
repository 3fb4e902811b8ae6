/// An index on one or more attributes of an entity, declared in the model:
/// the coordinator keeps it in the store, in the same atomic batch as the
/// objects it indexes, and fetches whose predicate constrains its leading
/// attributes read it instead of every record (``ManagedObjectContext/explain(_:)``
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
public struct IndexDescription: Sendable, Hashable, CustomStringConvertible {
    /// The attributes, most significant first.
    public let attributeNames: [String]

    public init(_ attributeNames: String...) {
        self.attributeNames = attributeNames
    }

    public init(_ attributeNames: [String]) {
        self.attributeNames = attributeNames
    }

    public var description: String { "(" + attributeNames.joined(separator: ", ") + ")" }
}
