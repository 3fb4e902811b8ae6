/// One kind of object: a name, the `ManagedObject` subclass that represents
/// it, and its attributes and relationships.
///
/// ```swift
/// let recipe = EntityDescription(name: "Recipe", managedObjectClass: Recipe.self, properties: [
///     .attribute("name", .string),
///     .attribute("servings", .integer64, defaultValue: .integer(1)),
///     .toMany("ingredients", "Ingredient", inverse: "recipe", deleteRule: .cascade),
/// ])
/// ```
///
/// An entity belongs to the one ``ManagedObjectModel`` it is given to, which
/// resolves its relationships.
///
/// `@unchecked Sendable`: `resolved` is written once, by
/// ``ManagedObjectModel/init(entities:)`` before the model (and so the entity)
/// can be shared, and only read afterwards.
public final class EntityDescription: @unchecked Sendable, CustomStringConvertible {
    public let name: String
    public let managedObjectClass: ManagedObject.Type
    /// Attributes and relationships, in declaration order.
    public let properties: [PropertyDescription]
    let propertyIndex: [String: Int]

    struct Resolved {
        /// Position in the model, sorted by name; part of every record key.
        var index: UInt16
        /// For each property: its destination entity, for relationships.
        var destinations: [EntityDescription?]
        /// For each property: the inverse's position in the destination.
        var inverses: [Int?]
        /// What a newly inserted object holds.
        var initialValues: [PropertyValue]
    }
    private var _resolved: Resolved?
    var resolved: Resolved { _resolved! }
    var index: UInt16 { _resolved!.index }
    var isResolved: Bool { _resolved != nil }

    public init(name: String, managedObjectClass: ManagedObject.Type = ManagedObject.self, properties: [PropertyDescription]) {
        self.name = name
        self.managedObjectClass = managedObjectClass
        self.properties = properties
        var index: [String: Int] = [:]
        for (i, p) in properties.enumerated() where index[p.name] == nil { index[p.name] = i }
        self.propertyIndex = index
    }

    func resolve(_ resolved: Resolved) { _resolved = resolved }

    /// The attributes, in declaration order.
    public var attributes: [AttributeDescription] {
        properties.compactMap { if case .attribute(let a) = $0 { a } else { nil } }
    }

    /// The relationships, in declaration order.
    public var relationships: [RelationshipDescription] {
        properties.compactMap { if case .relationship(let r) = $0 { r } else { nil } }
    }

    /// The property named `name`, if the entity has one.
    public func property(named name: String) -> PropertyDescription? {
        propertyIndex[name].map { properties[$0] }
    }

    public var description: String { name }
}
