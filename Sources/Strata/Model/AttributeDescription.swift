/// The type of an attribute.
public enum AttributeType: UInt8, Sendable, Hashable, CaseIterable {
    /// The types an attribute can hold: `string`, a `String`; `integer16`, `integer32` and
    /// `integer64`, signed integers of 16, 32 and 64 bits (each held as
    /// ``PropertyValue/integer(_:)``, read into a Swift integer at least as wide); `double`, a
    /// `Double`; `bool`, a `Bool`; `date`, a `Date`; `binaryData`, a `Data`; `uuid`, a `UUID`.
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
    /// The attribute's name, unique among the entity's properties: the key it is read and written
    /// by.
    public var name: String
    /// The type of value it holds.
    public var type: AttributeType
    /// An optional attribute may hold no value when saved; a required one
    /// fails validation (``ValidationFailure/Reason/missingValue``).
    public var isOptional: Bool
    /// What a new object holds until it is set (`.null` when there is none),
    /// and what a migration gives the objects already stored when the
    /// attribute is added or becomes required.
    public var defaultValue: PropertyValue
    /// The name this attribute had in an earlier model version: a migration
    /// carries the stored values over from the attribute of that name (see
    /// ``EntityDescription/renamingIdentifier``).
    public var renamingIdentifier: String?
    /// Whether the persistent history keeps this attribute's value when an
    /// object is deleted, in the delete's ``HistoryChange/tombstone`` — a
    /// key a consumer needs to find its own copy of the object by (Core
    /// Data's `preservesValueInHistoryOnDeletion`). No migration follows
    /// a change of it.
    public var preservesValueInHistoryOnDeletion: Bool

    /// An attribute named `name` holding values of `type`. `isOptional` lets a saved object hold no
    /// value; `defaultValue` is what a new object starts with (`.null` for none);
    /// `renamingIdentifier` is the attribute's name in an earlier model version, when it was
    /// renamed; `preservesValueInHistoryOnDeletion` keeps its value in the history of a delete.
    public init(
        name: String, type: AttributeType, isOptional: Bool = false, defaultValue: PropertyValue = .null,
        renamingIdentifier: String? = nil, preservesValueInHistoryOnDeletion: Bool = false
    ) {
        self.name = name
        self.type = type
        self.isOptional = isOptional
        self.defaultValue = defaultValue
        self.renamingIdentifier = renamingIdentifier
        self.preservesValueInHistoryOnDeletion = preservesValueInHistoryOnDeletion
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
    /// The relationship's name, unique among the entity's properties: the key it is read and
    /// written by.
    public var name: String
    /// The name of the entity whose objects it holds.
    public var destinationEntityName: String
    /// The relationship on the destination that points back; nil for none.
    public var inverseName: String?
    /// Whether it holds a set of objects (to-many) rather than at most one (to-one).
    public var isToMany: Bool
    /// A required to-one relationship must hold an object when saved.
    public var isOptional: Bool
    /// What deleting an object does to the objects this relationship holds.
    public var deleteRule: DeleteRule
    /// The name this relationship had in an earlier model version (see
    /// ``EntityDescription/renamingIdentifier``).
    public var renamingIdentifier: String?

    /// A relationship named `name` to the entity named `destination`, whose relationship `inverse`
    /// points back (nil for none); `toMany` makes it hold a set of objects. `isOptional` matters
    /// for a to-one relationship only (a required one must hold an object when saved);
    /// `renamingIdentifier` is its name in an earlier model version, when it was renamed.
    public init(
        name: String, destination: String, inverse: String?, toMany: Bool,
        isOptional: Bool = true, deleteRule: DeleteRule = .nullify, renamingIdentifier: String? = nil
    ) {
        self.name = name
        self.destinationEntityName = destination
        self.inverseName = inverse
        self.isToMany = toMany
        self.isOptional = isOptional
        self.deleteRule = deleteRule
        self.renamingIdentifier = renamingIdentifier
    }
}

/// An attribute or a relationship, in the order the entity declares them
/// (which is the order records store their values in).
public enum PropertyDescription: Sendable, Hashable {
    /// An attribute.
    case attribute(AttributeDescription)
    /// A relationship, to-one or to-many.
    case relationship(RelationshipDescription)

    /// The attribute's or the relationship's name.
    public var name: String {
        switch self {
        case .attribute(let a): return a.name
        case .relationship(let r): return r.name
        }
    }

    /// The name a migration matches this property by across model versions:
    /// its ``AttributeDescription/renamingIdentifier`` (or the
    /// relationship's), else its name.
    public var canonicalName: String {
        switch self {
        case .attribute(let a): return a.renamingIdentifier ?? a.name
        case .relationship(let r): return r.renamingIdentifier ?? r.name
        }
    }

    var renamingIdentifier: String? {
        switch self {
        case .attribute(let a): return a.renamingIdentifier
        case .relationship(let r): return r.renamingIdentifier
        }
    }

    /// An attribute.
    ///
    /// ```swift
    /// .attribute("servings", .integer64, defaultValue: .integer(1))
    /// .attribute("remoteID", .string, preservesValueInHistoryOnDeletion: true)
    /// ```
    public static func attribute(
        _ name: String, _ type: AttributeType, optional: Bool = false, defaultValue: PropertyValue = .null,
        renamedFrom renamingIdentifier: String? = nil, preservesValueInHistoryOnDeletion: Bool = false
    ) -> PropertyDescription {
        .attribute(AttributeDescription(
            name: name, type: type, isOptional: optional, defaultValue: defaultValue, renamingIdentifier: renamingIdentifier,
            preservesValueInHistoryOnDeletion: preservesValueInHistoryOnDeletion))
    }

    /// A to-one relationship.
    public static func toOne(
        _ name: String, _ destination: String, inverse: String?, optional: Bool = true, deleteRule: DeleteRule = .nullify,
        renamedFrom renamingIdentifier: String? = nil
    ) -> PropertyDescription {
        .relationship(RelationshipDescription(
            name: name, destination: destination, inverse: inverse, toMany: false,
            isOptional: optional, deleteRule: deleteRule, renamingIdentifier: renamingIdentifier))
    }

    /// A to-many relationship.
    public static func toMany(
        _ name: String, _ destination: String, inverse: String?, deleteRule: DeleteRule = .nullify,
        renamedFrom renamingIdentifier: String? = nil
    ) -> PropertyDescription {
        .relationship(RelationshipDescription(
            name: name, destination: destination, inverse: inverse, toMany: true, deleteRule: deleteRule,
            renamingIdentifier: renamingIdentifier))
    }
}
