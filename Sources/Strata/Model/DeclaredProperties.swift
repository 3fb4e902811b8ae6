import Foundation

/// The check that a class's `@Attribute` and `@Relationship` properties
/// agree with the entity that names the class: each key is a property of
/// the entity, of the kind the wrapper is, holding values of the Swift
/// type (an attribute's type and optionality, a relationship's direction
/// and destination class). A class and a description that disagree fail
/// when the model is made, naming both sides, instead of at the first read
/// or write.
enum DeclaredProperties {
    /// Throws ``StrataError/Code/invalidModel`` for the first property of
    /// `entity`'s class that disagrees with `entity` (resolved).
    static func check(_ entity: EntityDescription) throws(StrataError) {
        guard entity.managedObjectClass != ManagedObject.self else { return }
        let instance = entity.managedObjectClass.init(entity: entity, insertInto: nil)
        var mirror: Mirror? = Mirror(reflecting: instance)
        while let current = mirror {
            for child in current.children {
                guard let declared = child.value as? any DeclaredProperty else { continue }
                let swiftName = child.label.map { $0.hasPrefix("_") ? String($0.dropFirst()) : $0 } ?? declared.key
                let subject = "\(entity.managedObjectClass).\(swiftName) (\(declared.wrapperName)(\"\(declared.key)\") \(declared.swiftTypeName))"
                guard let i = entity.propertyIndex[declared.key] else {
                    let names = entity.properties.map(\.name).sorted().joined(separator: ", ")
                    throw StrataError(.invalidModel, """
                        \(subject) names no property of entity \(entity.name), whose properties are \(names): \
                        make the key one of them, or add it to the entity
                        """)
                }
                if let mismatch = declared.mismatch(with: entity.properties[i], destination: entity.destinations[i]) {
                    throw StrataError(.invalidModel, "\(subject) does not fit \(entity.name).\(declared.key), \(mismatch): make the two agree")
                }
            }
            mirror = current.superclassMirror
        }
    }

    /// What a Swift attribute type can hold: the attribute types whose
    /// every value it reads back unchanged, and whether it holds nil. Nil
    /// for a type of the user's own (its conformance decides).
    static func shape(of type: Any.Type) -> (types: [AttributeType], optional: Bool)? {
        if let optional = type as? any OptionalAttribute.Type {
            return shape(of: optional.wrappedType).map { ($0.types, true) }
        }
        switch ObjectIdentifier(type) {
        case ObjectIdentifier(String.self): return ([.string], false)
        case ObjectIdentifier(Int.self), ObjectIdentifier(Int64.self): return ([.integer16, .integer32, .integer64], false)
        case ObjectIdentifier(Int32.self): return ([.integer16, .integer32], false)
        case ObjectIdentifier(Int16.self): return ([.integer16], false)
        case ObjectIdentifier(Double.self): return ([.double], false)
        case ObjectIdentifier(Bool.self): return ([.bool], false)
        case ObjectIdentifier(Date.self): return ([.date], false)
        case ObjectIdentifier(Data.self): return ([.binaryData], false)
        case ObjectIdentifier(UUID.self): return ([.uuid], false)
        default: return nil
        }
    }
}

/// An `@Attribute` or `@Relationship` property's storage, as a class's
/// mirror shows it.
protocol DeclaredProperty {
    var key: String { get }
    var wrapperName: String { get }
    var swiftTypeName: String { get }
    /// Why `property` (with `destination`, for a relationship) cannot hold
    /// this property's values; nil when it can.
    func mismatch(with property: PropertyDescription, destination: EntityDescription?) -> String?
}

extension Attribute: DeclaredProperty {
    var wrapperName: String { "@Attribute" }
    var swiftTypeName: String { "\(Value.self)" }

    func mismatch(with property: PropertyDescription, destination: EntityDescription?) -> String? {
        guard case .attribute(let attribute) = property else { return "which is a relationship" }
        guard let shape = DeclaredProperties.shape(of: Value.self) else { return nil }
        let declared = "a\(attribute.isOptional ? "n optional" : "") \(attribute.type) attribute"
        if !shape.types.contains(attribute.type) {
            let fitting = shape.types.map { "\($0)" }.joined(separator: " or ")
            return "which is \(declared) (\(Value.self) holds \(fitting))"
        }
        if shape.optional != attribute.isOptional {
            return shape.optional
                ? "which is \(declared): a nil would fail at save (declare it optional: true, or the property non-optional)"
                : "which is \(declared): a stored nil would read as a made-up value (declare the property \(Value.self)?)"
        }
        return nil
    }
}

extension Relationship: DeclaredProperty {
    var wrapperName: String { "@Relationship" }
    var swiftTypeName: String { "\(Value.self)" }

    func mismatch(with property: PropertyDescription, destination: EntityDescription?) -> String? {
        guard case .relationship(let relationship) = property, let destination else { return "which is an attribute" }
        let direction = relationship.isToMany ? "to-many" : "to-one"
        let target: any DeclaredRelationshipTarget.Type
        if let toOne = Value.self as? any ToOneTarget.Type {
            guard !relationship.isToMany else { return "which is to-many (declare the property Set<\(toOne.targetName)>)" }
            target = toOne
        } else if let toMany = Value.self as? any ToManyTarget.Type {
            guard relationship.isToMany else { return "which is to-one (declare the property \(toMany.targetName)?)" }
            target = toMany
        } else {
            return nil
        }
        guard target.holds(destination.managedObjectClass) else {
            return "a \(direction) relationship to \(destination.name), whose objects are \(destination.managedObjectClass), not \(target.targetName)"
        }
        return nil
    }
}

/// `T?`, whatever `T` is: how ``DeclaredProperties/shape(of:)`` sees
/// through an optional attribute type.
protocol OptionalAttribute {
    static var wrappedType: Any.Type { get }
}

extension Optional: OptionalAttribute {
    static var wrappedType: Any.Type { Wrapped.self }
}

/// What a relationship property's type holds: objects of one class.
protocol DeclaredRelationshipTarget {
    static var targetName: String { get }
    /// Whether objects of `type` are the property's.
    static func holds(_ type: ManagedObject.Type) -> Bool
}

protocol ToOneTarget: DeclaredRelationshipTarget {}
protocol ToManyTarget: DeclaredRelationshipTarget {}

extension Optional: DeclaredRelationshipTarget, ToOneTarget where Wrapped: ManagedObject {
    static var targetName: String { "\(Wrapped.self)" }
    static func holds(_ type: ManagedObject.Type) -> Bool { type is Wrapped.Type }
}

extension Set: DeclaredRelationshipTarget, ToManyTarget where Element: ManagedObject {
    static var targetName: String { "\(Element.self)" }
    static func holds(_ type: ManagedObject.Type) -> Bool { type is Element.Type }
}
