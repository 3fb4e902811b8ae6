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
/// `@unchecked Sendable`: the resolved tables below are written once, by
/// ``ManagedObjectModel/init(entities:)`` before the model (and so the entity)
/// can be shared, and only read afterwards.
public final class EntityDescription: @unchecked Sendable, CustomStringConvertible {
    /// The entity's name, unique in its model: what fetch requests, object IDs and relationships'
    /// destinations name it by.
    public let name: String
    /// The class a context makes the entity's objects as, when it fetches or faults them;
    /// `ManagedObject` itself for an entity with no class of its own, such as one of an older model
    /// version kept for a ``MigrationPlan``.
    public let managedObjectClass: ManagedObject.Type
    /// Attributes and relationships, in declaration order.
    public let properties: [PropertyDescription]
    let propertyIndex: [String: Int]
    /// Per property: the attribute's type, nil for a relationship.
    let attributeTypes: [AttributeType?]
    /// Per property: whether it is a to-many relationship.
    let toManyFlags: [Bool]
    private let propertyNames: [String]
    /// The property each `@Attribute` or `@Relationship` wrapper of the
    /// entity's class stands for, by the wrapper's key path.
    let wrapperIndexes: WrapperIndexes
    /// The attribute indexes, in declaration order, then those that back
    /// uniqueness constraints no declared index already covers; an index's
    /// position is part of its keys in the store.
    public let indexes: [IndexDescription]
    /// Per index: the positions of its attributes (checked by the model).
    @exclusivity(unchecked) private(set) var indexedProperties: [[Int]] = []
    /// The positions in ``indexes`` of the unique ones.
    let uniqueIndexNumbers: [Int]
    /// The name this entity had in an earlier model version: a migration
    /// carries the stored objects of that entity over (Core Data's rule:
    /// give every later version the *first* name, so that a store of any
    /// earlier version migrates straight to this one).
    public let renamingIdentifier: String?
    /// Changes the entity's ``versionHash`` without changing its layout,
    /// forcing a migration step (Core Data's `versionHashModifier`): for a
    /// change of meaning the layout does not show.
    public let versionHashModifier: String?

    /// The name a migration matches this entity by across model versions.
    public var canonicalName: String { renamingIdentifier ?? name }

    /// A hash of everything about the entity a store or its objects depend
    /// on — name, each property's name, kind, type, optionality, default,
    /// destination, inverse and delete rule, the indexes and constraints,
    /// the hash modifier — as 16 hex digits (not renaming identifiers,
    /// which say where a property came from, not what it is). Two versions
    /// of an entity with the same hash need no migration.
    public var versionHash: String {
        var text = name + "\u{0}" + (versionHashModifier ?? "")
        for property in properties {
            switch property {
            case .attribute(let a):
                text += "\u{1}a\(a.name)\u{0}\(a.type.rawValue)\(a.isOptional ? 1 : 0)\(a.defaultValue)"
            case .relationship(let r):
                text += "\u{1}r\(r.name)\u{0}\(r.destinationEntityName)\u{0}\(r.inverseName ?? "")\u{0}\(r.isToMany ? 1 : 0)\(r.isOptional ? 1 : 0)\(r.deleteRule.rawValue)"
            }
        }
        for index in indexes { text += "\u{2}\(index)" }
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 { h = (h ^ UInt64(byte)) &* 0x100_0000_01b3 }
        let hex = String(h, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

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

    // Written once by `resolve(_:)` inside `ManagedObjectModel.init`, before
    // the entity is shared; read-only afterwards, so the per-access dynamic
    // exclusivity check (on every property read and write of every object)
    // is switched off.
    @exclusivity(unchecked) package private(set) var index: UInt16 = 0
    @exclusivity(unchecked) private(set) var destinations: [EntityDescription?] = []
    @exclusivity(unchecked) private(set) var inverses: [Int?] = []
    @exclusivity(unchecked) private(set) var initialValues: [PropertyValue] = []
    /// Each property's key path for Swift's Observation (see ``ObjectObservation``).
    @exclusivity(unchecked) private(set) var observationKeyPaths: [KeyPath<ManagedObject, PropertyValue>] = []
    @exclusivity(unchecked) private(set) var isResolved = false
    /// Positions of non-optional attributes and to-one relationships.
    @exclusivity(unchecked) private(set) var requiredIndices: [Int] = []
    /// Positions of relationships.
    @exclusivity(unchecked) private(set) var relationshipIndices: [Int] = []
    /// Positions of relationships with the deny rule.
    @exclusivity(unchecked) private(set) var denyIndices: [Int] = []
    /// Positions of attributes whose values a delete's history keeps
    /// (``AttributeDescription/preservesValueInHistoryOnDeletion``).
    @exclusivity(unchecked) private(set) var tombstoneIndices: [Int] = []

    /// `uniquenessConstraints`: sets of attributes whose values no two
    /// objects may share (Core Data's), each backed by a unique index — an
    /// index of `indexes` on the same attributes becomes unique.
    ///
    /// ```swift
    /// EntityDescription(name: "Package", managedObjectClass: Package.self, properties: [
    ///     .attribute("name", .string),
    ///     .attribute("downloads", .integer64),
    /// ], indexes: [["downloads"]], uniquenessConstraints: [["name"]])
    /// ```
    public init(
        name: String, managedObjectClass: ManagedObject.Type = ManagedObject.self, properties: [PropertyDescription],
        indexes: [IndexDescription] = [], uniquenessConstraints: [[String]] = [],
        renamedFrom renamingIdentifier: String? = nil, versionHashModifier: String? = nil
    ) {
        self.name = name
        self.renamingIdentifier = renamingIdentifier
        self.versionHashModifier = versionHashModifier
        self.managedObjectClass = managedObjectClass
        self.properties = properties
        var all = indexes
        for names in uniquenessConstraints {
            if let i = all.firstIndex(where: { $0.attributeNames == names }) {
                all[i] = IndexDescription(names, isUnique: true)
            } else {
                all.append(IndexDescription(names, isUnique: true))
            }
        }
        self.indexes = all
        self.uniqueIndexNumbers = all.indices.filter { all[$0].isUnique }
        var index: [String: Int] = [:]
        for (i, p) in properties.enumerated() where index[p.name] == nil { index[p.name] = i }
        self.propertyIndex = index
        self.propertyNames = properties.map(\.name)
        self.wrapperIndexes = WrapperIndexes(capacity: max(8, properties.count * 2))
        self.attributeTypes = properties.map { if case .attribute(let a) = $0 { a.type } else { nil } }
        self.toManyFlags = properties.map { if case .relationship(let r) = $0 { r.isToMany } else { false } }
    }

    func resolve(_ resolved: Resolved) {
        index = resolved.index
        indexedProperties = indexes.map { $0.attributeNames.map { propertyIndex[$0]! } }  // checked by the model
        destinations = resolved.destinations
        inverses = resolved.inverses
        initialValues = resolved.initialValues
        observationKeyPaths = properties.indices.map { \ManagedObject.[observedProperty: $0] }
        for (i, property) in properties.enumerated() {
            switch property {
            case .attribute(let a):
                if !a.isOptional { requiredIndices.append(i) }
                if a.preservesValueInHistoryOnDeletion { tombstoneIndices.append(i) }
            case .relationship(let r):
                relationshipIndices.append(i)
                if !r.isToMany && !r.isOptional { requiredIndices.append(i) }
                if r.deleteRule == .deny { denyIndices.append(i) }
            }
        }
        isResolved = true
    }

    /// The position of the property named `key`. Typed accessors call this
    /// on every read and write: for the usual handful of properties a scan
    /// comparing small (inline) strings beats hashing the key.
    @inline(__always)
    func indexOfProperty(_ key: String) -> Int? {
        if propertyNames.count <= 16 {
            for i in propertyNames.indices where propertyNames[i] == key { return i }
            return nil
        }
        return propertyIndex[key]
    }

    /// Whether property `index` can hold `value` (type, entity, to-one or to-many).
    func accepts(_ value: PropertyValue, at index: Int) -> Bool {
        if let type = attributeTypes[index] {
            if case .null = value { return true }
            return type.accepts(value)
        }
        switch value {
        case .null: return !toManyFlags[index]
        case .object(let id): return !toManyFlags[index] && id.entity === destinations[index]
        case .objects(let ids):
            let destination = destinations[index]
            return toManyFlags[index] && ids.allSatisfy { $0.entity === destination }
        default: return false
        }
    }

    /// The attribute sets no two objects may share values in (the unique ``indexes``).
    public var uniquenessConstraints: [[String]] { uniqueIndexNumbers.map { indexes[$0].attributeNames } }

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
