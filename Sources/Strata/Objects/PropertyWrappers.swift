public import Foundation

/// A Swift type an attribute can be read and written as.
public protocol AttributeValueConvertible {
    /// The value for a stored `PropertyValue`; non-optional types read a
    /// missing value as their zero (`""`, `0`, `false`, …).
    static func fromPropertyValue(_ value: PropertyValue) -> Self
    /// The value as stored: the ``PropertyValue`` case of its type (`.null` for nil).
    var propertyValue: PropertyValue { get }
}

extension String: AttributeValueConvertible {
    public static func fromPropertyValue(_ value: PropertyValue) -> String { if case .string(let v) = value { v } else { "" } }
    public var propertyValue: PropertyValue { .string(self) }
}
extension Bool: AttributeValueConvertible {
    public static func fromPropertyValue(_ value: PropertyValue) -> Bool { if case .bool(let v) = value { v } else { false } }
    public var propertyValue: PropertyValue { .bool(self) }
}
extension Double: AttributeValueConvertible {
    public static func fromPropertyValue(_ value: PropertyValue) -> Double { if case .double(let v) = value { v } else { 0 } }
    public var propertyValue: PropertyValue { .double(self) }
}
extension Date: AttributeValueConvertible {
    public static func fromPropertyValue(_ value: PropertyValue) -> Date {
        if case .date(let v) = value { v } else { Date(timeIntervalSinceReferenceDate: 0) }
    }
    public var propertyValue: PropertyValue { .date(self) }
}
extension Data: AttributeValueConvertible {
    public static func fromPropertyValue(_ value: PropertyValue) -> Data { if case .data(let v) = value { v } else { Data() } }
    public var propertyValue: PropertyValue { .data(self) }
}
extension UUID: AttributeValueConvertible {
    public static func fromPropertyValue(_ value: PropertyValue) -> UUID {
        if case .uuid(let v) = value { v } else { UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)) }
    }
    public var propertyValue: PropertyValue { .uuid(self) }
}
extension Int: AttributeValueConvertible {
    public static func fromPropertyValue(_ value: PropertyValue) -> Int { if case .integer(let v) = value { Int(v) } else { 0 } }
    public var propertyValue: PropertyValue { .integer(Int64(self)) }
}
extension Int64: AttributeValueConvertible {
    public static func fromPropertyValue(_ value: PropertyValue) -> Int64 { if case .integer(let v) = value { v } else { 0 } }
    public var propertyValue: PropertyValue { .integer(self) }
}
extension Int32: AttributeValueConvertible {
    public static func fromPropertyValue(_ value: PropertyValue) -> Int32 {
        if case .integer(let v) = value { Int32(truncatingIfNeeded: v) } else { 0 }
    }
    public var propertyValue: PropertyValue { .integer(Int64(self)) }
}
extension Int16: AttributeValueConvertible {
    public static func fromPropertyValue(_ value: PropertyValue) -> Int16 {
        if case .integer(let v) = value { Int16(truncatingIfNeeded: v) } else { 0 }
    }
    public var propertyValue: PropertyValue { .integer(Int64(self)) }
}
extension Optional: AttributeValueConvertible where Wrapped: AttributeValueConvertible {
    public static func fromPropertyValue(_ value: PropertyValue) -> Wrapped? {
        value == .null ? nil : Wrapped.fromPropertyValue(value)
    }
    public var propertyValue: PropertyValue { self?.propertyValue ?? .null }
}

/// A typed attribute of a ``ManagedObject`` subclass, stored under the
/// model's property `key`.
///
/// ```swift
/// final class Recipe: ManagedObject {
///     @Attribute("name") var name: String
///     @Attribute("notes") var notes: String?
/// }
/// ```
@propertyWrapper
public struct Attribute<Value: AttributeValueConvertible> {
    /// The name of the entity's attribute the property is stored under, which may differ from the
    /// Swift property's name.
    public let key: String
    /// A property stored under the entity's attribute named `key`.
    public init(_ key: String) { self.key = key }

    /// A property declared with an initial value under `@Entity`
    /// (`var visits: Int = 0`), which makes that value the attribute's
    /// default in the model (``AttributeDescription/defaultValue``): a new
    /// object starts with it from there, so the wrapper keeps only the key.
    /// Written by the macro; by hand, `@Attribute("visits") var visits: Int = 0`
    /// does not compile (the default belongs in the `EntityDescription`).
    public init(wrappedValue: Value, modelDefault key: String) { self.key = key }

    @available(*, unavailable, message: "@Attribute is only for properties of ManagedObject subclasses")
    public var wrappedValue: Value {
        get { fatalError("unavailable") }
        set { fatalError("unavailable") }  // swiftlint:disable:this unused_setter_value
    }

    @inlinable
    public static subscript<Object: ManagedObject>(
        _enclosingInstance object: Object,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<Object, Value>,
        storage storageKeyPath: ReferenceWritableKeyPath<Object, Self>
    ) -> Value {
        get {
            let index = object.propertyIndex(forWrapper: storageKeyPath) { object[keyPath: storageKeyPath].key }
            return Value.fromPropertyValue(object.storedValue(at: index))
        }
        set {
            let index = object.propertyIndex(forWrapper: storageKeyPath) { object[keyPath: storageKeyPath].key }
            do {
                try object.setPropertyValue(newValue.propertyValue, at: index)
            } catch {
                preconditionFailure("Strata: \(object.entity.name).\(object.entity.properties[index].name): \(error.message)")
            }
        }
    }
}

/// A Swift type a relationship can be read and written as: `T?` for to-one,
/// `Set<T>` for to-many, where `T` is a ``ManagedObject`` subclass.
public protocol RelationshipValueConvertible {
    /// The value for a stored relationship value: the objects whose IDs `value` holds, as `context`
    /// has them registered (or as faults, filled when first used); nil or an empty set when there
    /// is no context.
    static func fromPropertyValue(_ value: PropertyValue, in context: ManagedObjectContext?) -> Self
    /// The value as stored: the objects' IDs (``PropertyValue/object(_:)`` for to-one, `.null` for
    /// nil; ``PropertyValue/objects(_:)`` for to-many).
    var propertyValue: PropertyValue { get }
}

extension Optional: RelationshipValueConvertible where Wrapped: ManagedObject {
    public static func fromPropertyValue(_ value: PropertyValue, in context: ManagedObjectContext?) -> Wrapped? {
        guard case .object(let id) = value, let context else { return nil }
        return context.registeredOrFault(for: id) as? Wrapped
    }
    public var propertyValue: PropertyValue { self.map { .object($0.objectID) } ?? .null }
}

extension Set: RelationshipValueConvertible where Element: ManagedObject {
    public static func fromPropertyValue(_ value: PropertyValue, in context: ManagedObjectContext?) -> Set<Element> {
        guard case .objects(let ids) = value, let context else { return [] }
        var result = Set<Element>(minimumCapacity: ids.count)
        for id in ids { if let object = context.registeredOrFault(for: id) as? Element { result.insert(object) } }
        return result
    }
    /// Inlinable, so a `@Relationship` setter's call is specialized for its
    /// element type: generic, the loop would read each element through a
    /// witness table.
    @inlinable
    public var propertyValue: PropertyValue {
        var ids = Set<ObjectID>(minimumCapacity: count)
        for object in self { ids.insert(object.objectID) }
        return .objects(ids)
    }
}

/// A typed relationship of a ``ManagedObject`` subclass, stored under the
/// model's property `key`; setting it keeps the inverse in step.
///
/// ```swift
/// final class Ingredient: ManagedObject {
///     @Relationship("recipe") var recipe: Recipe?
/// }
/// final class Recipe: ManagedObject {
///     @Relationship("ingredients") var ingredients: Set<Ingredient>
/// }
/// ```
@propertyWrapper
public struct Relationship<Value: RelationshipValueConvertible> {
    /// The name of the entity's relationship the property is stored under, which may differ from
    /// the Swift property's name.
    public let key: String
    /// A property stored under the entity's relationship named `key`.
    public init(_ key: String) { self.key = key }

    /// A relationship declared empty under `@Entity` (`var tags: Set<Tag> = []`,
    /// `var folder: Folder? = nil`), as every new object's relationships start.
    /// Written by the macro, which accepts no other initial value.
    public init(wrappedValue: Value, modelDefault key: String) { self.key = key }

    @available(*, unavailable, message: "@Relationship is only for properties of ManagedObject subclasses")
    public var wrappedValue: Value {
        get { fatalError("unavailable") }
        set { fatalError("unavailable") }  // swiftlint:disable:this unused_setter_value
    }

    @inlinable
    public static subscript<Object: ManagedObject>(
        _enclosingInstance object: Object,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<Object, Value>,
        storage storageKeyPath: ReferenceWritableKeyPath<Object, Self>
    ) -> Value {
        get {
            let index = object.propertyIndex(forWrapper: storageKeyPath) { object[keyPath: storageKeyPath].key }
            return Value.fromPropertyValue(object.storedValue(at: index), in: object.managedObjectContext)
        }
        set {
            let index = object.propertyIndex(forWrapper: storageKeyPath) { object[keyPath: storageKeyPath].key }
            do {
                try object.setPropertyValue(newValue.propertyValue, at: index)
            } catch {
                preconditionFailure("Strata: \(object.entity.name).\(object.entity.properties[index].name): \(error.message)")
            }
        }
    }
}
