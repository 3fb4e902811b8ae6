/// The type of an attribute.
public enum AttributeType: UInt8, Sendable, Hashable, CaseIterable {
    case string = 1, integer16, integer32, integer64, double, bool, date, binaryData, uuid

    /// Whether `value` (non-null) is a value of this type.
    func accepts(_ value: PropertyValue) -> Bool {
        switch (self, value) {
        case (.string, .string), (.double, .double), (.bool, .bool), (.date, .date),
             (.binaryData, .data), (.uuid, .uuid):
            return true
        case (.integer16, .integer(let i)): return Int16(exactly: i) != nil
        case (.integer32, .integer(let i)): return Int32(exactly: i) != nil
        case (.integer64, .integer): return true
        default: return false
        }
    }
}

/// One attribute of an entity: a name, a type, whether it may be nil, and
/// the value a newly inserted object starts with.
public struct AttributeDescription: Sendable, Hashable {
    public var name: String
    public var type: AttributeType
    /// An optional attribute may hold no value when saved; a required one
    /// fails validation (``ValidationFailure/Reason/missingValue``).
    public var isOptional: Bool
    /// What a new object holds until it is set (`.null` when there is none).
    public var defaultValue: PropertyValue

    public init(name: String, type: AttributeType, isOptional: Bool = false, defaultValue: PropertyValue = .null) {
        self.name = name
        self.type = type
        self.isOptional = isOptional
        self.defaultValue = defaultValue
    }
}

/// What deleting an object does to the objects a relationship holds.
public enum DeleteRule: UInt8, Sendable, Hashable {
    /// Remove the deleted object from the other side (the default).
    case nullify = 1
    /// Delete the objects the relationship holds as well.
    case cascade
    /// Refuse the save while the relationship still holds objects.
    case deny
    /// Do nothing: the other side must be fixed before saving, or the save
    /// fails with ``ValidationFailure/Reason/targetDeleted`` (Core Data would
    /// store a dangling reference instead).
    case noAction
}

/// One relationship of an entity: to-one or to-many, to a destination entity,
/// usually with an inverse that Strata keeps in step on both sides.
public struct RelationshipDescription: Sendable, Hashable {
    public var name: String
    public var destinationEntityName: String
    /// The relationship on the destination that points back; nil for none.
    public var inverseName: String?
    public var isToMany: Bool
    /// A required to-one relationship must hold an object when saved.
    public var isOptional: Bool
    public var deleteRule: DeleteRule

    public init(
        name: String, destination: String, inverse: String?, toMany: Bool,
        isOptional: Bool = true, deleteRule: DeleteRule = .nullify
    ) {
        self.name = name
        self.destinationEntityName = destination
        self.inverseName = inverse
        self.isToMany = toMany
        self.isOptional = isOptional
        self.deleteRule = deleteRule
    }
}

/// An attribute or a relationship, in the order the entity declares them
/// (which is the order records store their values in).
public enum PropertyDescription: Sendable, Hashable {
    case attribute(AttributeDescription)
    case relationship(RelationshipDescription)

    public var name: String {
        switch self {
        case .attribute(let a): return a.name
        case .relationship(let r): return r.name
        }
    }

    /// An attribute.
    ///
    /// ```swift
    /// .attribute("servings", .integer64, defaultValue: .integer(1))
    /// ```
    public static func attribute(
        _ name: String, _ type: AttributeType, optional: Bool = false, defaultValue: PropertyValue = .null
    ) -> PropertyDescription {
        .attribute(AttributeDescription(name: name, type: type, isOptional: optional, defaultValue: defaultValue))
    }

    /// A to-one relationship.
    public static func toOne(
        _ name: String, _ destination: String, inverse: String?, optional: Bool = true, deleteRule: DeleteRule = .nullify
    ) -> PropertyDescription {
        .relationship(RelationshipDescription(
            name: name, destination: destination, inverse: inverse, toMany: false,
            isOptional: optional, deleteRule: deleteRule))
    }

    /// A to-many relationship.
    public static func toMany(
        _ name: String, _ destination: String, inverse: String?, deleteRule: DeleteRule = .nullify
    ) -> PropertyDescription {
        .relationship(RelationshipDescription(
            name: name, destination: destination, inverse: inverse, toMany: true, deleteRule: deleteRule))
    }
}
