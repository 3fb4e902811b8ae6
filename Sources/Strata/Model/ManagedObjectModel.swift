@_spi(Coding) internal import StrataStore

/// The schema of an object graph: its entities and how they relate.
///
/// ```swift
/// let model = try ManagedObjectModel(entities: [
///     EntityDescription(name: "Recipe", managedObjectClass: Recipe.self, properties: [
///         .attribute("name", .string),
///         .toMany("ingredients", "Ingredient", inverse: "recipe", deleteRule: .cascade),
///     ]),
///     EntityDescription(name: "Ingredient", managedObjectClass: Ingredient.self, properties: [
///         .attribute("name", .string),
///         .toOne("recipe", "Recipe", inverse: "ingredients"),
///     ]),
/// ])
/// ```
///
/// The store records the model's ``versionHash`` and refuses to open with a
/// model whose hash differs (``StrataError/Code/modelMismatch``).
///
/// A model, once made, lives until the process ends (an app has one or a
/// few): ``ObjectID``s refer to their entity without reference counting.
public final class ManagedObjectModel: Sendable {
    /// Sorted by name: an entity's position is part of every key it stores.
    public let entities: [EntityDescription]
    private let byName: [String: EntityDescription]
    private let byClass: [ObjectIdentifier: EntityDescription]
    /// A hash of everything the stored records depend on (entity and
    /// property names, kinds and types, in order), as 16 hex digits.
    public let versionHash: String
    /// The whole schema, encoded; stored beside the data so that tools can
    /// decode a store without the application's classes.
    package let schema: [UInt8]

    /// Checks and resolves `entities`: names are unique, every relationship's
    /// destination exists, inverses exist and point back, defaults have the
    /// attribute's type, and each entity's class agrees with it — every
    /// `@Attribute` and `@Relationship` key is a property of the entity, of
    /// that kind, and the property's Swift type holds its values (an
    /// attribute's type and optionality; a relationship's direction and its
    /// destination's class). Throws ``StrataError/Code/invalidModel``
    /// otherwise, naming the class, the property and both types. To read a
    /// class's declarations it makes one instance of it, inserted nowhere
    /// (``ManagedObject/init(entity:insertInto:)`` with no context).
    ///
    /// An older version of a model, kept for a ``MigrationPlan``, that no
    /// longer agrees with today's classes names no class
    /// (`managedObjectClass` left out): a migration reads its values
    /// through ``MigratingObject``.
    public init(entities: [EntityDescription]) throws(StrataError) {
        let sorted = entities.sorted { $0.name < $1.name }
        guard sorted.count <= Int(UInt16.max) else { throw StrataError(.invalidModel, "too many entities") }
        var byName: [String: EntityDescription] = [:]
        for entity in sorted {
            guard !entity.isResolved else {
                throw StrataError(.invalidModel, "entity \(entity.name) already belongs to another model")
            }
            guard !entity.name.isEmpty, byName.updateValue(entity, forKey: entity.name) == nil else {
                throw StrataError(.invalidModel, "entity name \(String(reflecting: entity.name)) is empty or used twice")
            }
            guard entity.propertyIndex.count == entity.properties.count else {
                throw StrataError(.invalidModel, "entity \(entity.name) declares a property name twice")
            }
            guard entity.indexes.count <= 255, Set(entity.indexes.map(\.attributeNames)).count == entity.indexes.count else {
                throw StrataError(.invalidModel, "entity \(entity.name) declares an index twice, or more than 255")
            }
            for index in entity.indexes {
                guard !index.attributeNames.isEmpty, Set(index.attributeNames).count == index.attributeNames.count else {
                    throw StrataError(.invalidModel, "\(entity.name) index \(index): no attributes, or one named twice")
                }
                for name in index.attributeNames {
                    guard let i = entity.propertyIndex[name], case .attribute = entity.properties[i] else {
                        throw StrataError(.invalidModel, "\(entity.name) index \(index): \(name) is not an attribute of \(entity.name)")
                    }
                }
            }
        }
        var resolvedAll: [EntityDescription.Resolved] = []
        for (i, entity) in sorted.enumerated() {
            var destinations: [EntityDescription?] = []
            var inverses: [Int?] = []
            var initial: [PropertyValue] = []
            for property in entity.properties {
                switch property {
                case .attribute(let a):
                    guard a.defaultValue == .null || a.type.accepts(a.defaultValue) else {
                        throw StrataError(.invalidModel, "\(entity.name).\(a.name): default value \(a.defaultValue) is not a \(a.type)")
                    }
                    destinations.append(nil); inverses.append(nil); initial.append(a.defaultValue)
                case .relationship(let r):
                    guard let destination = byName[r.destinationEntityName] else {
                        throw StrataError(.invalidModel, "\(entity.name).\(r.name): no entity named \(r.destinationEntityName)")
                    }
                    var inverseIndex: Int?
                    if let inverseName = r.inverseName {
                        guard let j = destination.propertyIndex[inverseName],
                              case .relationship(let inverse) = destination.properties[j],
                              inverse.destinationEntityName == entity.name, inverse.inverseName == r.name
                        else {
                            throw StrataError(.invalidModel, "\(entity.name).\(r.name): inverse \(destination.name).\(inverseName) is missing or does not point back")
                        }
                        inverseIndex = j
                    }
                    destinations.append(destination); inverses.append(inverseIndex)
                    initial.append(r.isToMany ? .objects([]) : .null)
                }
            }
            resolvedAll.append(.init(index: UInt16(i), destinations: destinations, inverses: inverses, initialValues: initial))
        }
        for (entity, resolved) in zip(sorted, resolvedAll) { entity.resolve(resolved) }
        for entity in sorted { try DeclaredProperties.check(entity) }
        var byClass: [ObjectIdentifier: EntityDescription] = [:]
        var ambiguous: Set<ObjectIdentifier> = []
        for entity in sorted where entity.managedObjectClass != ManagedObject.self {
            let key = ObjectIdentifier(entity.managedObjectClass)
            if byClass.updateValue(entity, forKey: key) != nil { ambiguous.insert(key) }
        }
        for key in ambiguous { byClass[key] = nil }
        self.entities = sorted
        self.byName = byName
        self.byClass = byClass
        self.schema = ModelSchema.encode(sorted)
        self.versionHash = ModelSchema.hash(sorted)
        ModelSchema.keepAlive(self)
    }

    /// The entity named `name`.
    public func entity(named name: String) -> EntityDescription? { byName[name] }

    /// The entity whose ``EntityDescription/managedObjectClass`` is `type`
    /// (nil when none is, or when several entities share the class).
    public func entity(for type: ManagedObject.Type) -> EntityDescription? {
        // `Recipe(context:)` asks on every insert: scanning a few entities
        // beats hashing the class.
        if entities.count <= 16 {
            let key = ObjectIdentifier(type)
            var found: EntityDescription?
            for entity in entities where ObjectIdentifier(entity.managedObjectClass) == key {
                if found != nil { return nil }  // ambiguous
                found = entity
            }
            return found
        }
        return byClass[ObjectIdentifier(type)]
    }

    /// Whether `entity` is one of this model's entities.
    func contains(_ entity: EntityDescription) -> Bool {
        entity.isResolved && Int(entity.index) < entities.count && entities[Int(entity.index)] === entity
    }

    func entity(at index: UInt16) -> EntityDescription? {
        Int(index) < entities.count ? entities[Int(index)] : nil
    }
}

/// The model in bytes: what the store keeps in its `model` record.
package enum ModelSchema {
    private static let lock = Lock()
    nonisolated(unsafe) private static var models: [ManagedObjectModel] = []  // guarded by `lock`

    /// Makes `model` immortal (see ``ManagedObjectModel``).
    static func keepAlive(_ model: ManagedObjectModel) { lock.withLock { models.append(model) } }

    static func encode(_ entities: [EntityDescription]) -> [UInt8] {
        // Format 1 has no indexes, format 2 no unique ones, format 3 no
        // renaming identifiers, hash modifiers or defaults: a model encodes
        // in the oldest format that holds it, as it always did.
        let hasIndexes = entities.contains { !$0.indexes.isEmpty }
        let hasUnique = entities.contains { !$0.uniqueIndexNumbers.isEmpty }
        let hasHistory = entities.contains { entity in
            entity.renamingIdentifier != nil || entity.versionHashModifier != nil || entity.properties.contains {
                if case .attribute(let a) = $0, a.defaultValue != .null { return true }
                return $0.renamingIdentifier != nil
            }
        }
        let format: UInt8 = hasHistory ? 4 : hasUnique ? 3 : hasIndexes ? 2 : 1
        var out: [UInt8] = [format]
        func string(_ s: String) { out.appendVarint(UInt64(s.utf8.count)); out.append(contentsOf: s.utf8) }
        out.appendVarint(UInt64(entities.count))
        for entity in entities {
            string(entity.name)
            if format >= 4 { string(entity.renamingIdentifier ?? ""); string(entity.versionHashModifier ?? "") }
            out.appendVarint(UInt64(entity.properties.count))
            for property in entity.properties {
                switch property {
                case .attribute(let a):
                    out.append(0); string(a.name); out.append(a.type.rawValue); out.append(a.isOptional ? 1 : 0)
                    if format >= 4 { string(a.renamingIdentifier ?? ""); RecordCoding.appendValue(a.defaultValue, into: &out) }
                case .relationship(let r):
                    out.append(r.isToMany ? 2 : 1); string(r.name); string(r.destinationEntityName)
                    string(r.inverseName ?? ""); out.append(r.isOptional ? 1 : 0); out.append(r.deleteRule.rawValue)
                    if format >= 4 { string(r.renamingIdentifier ?? "") }
                }
            }
            if format >= 2 {
                out.appendVarint(UInt64(entity.indexes.count))
                for index in entity.indexes {
                    out.appendVarint(UInt64(index.attributeNames.count))
                    for name in index.attributeNames { string(name) }
                    if format >= 3 { out.append(index.isUnique ? 1 : 0) }
                }
            }
        }
        return out
    }

    /// FNV-1a over what records depend on: entity order and names, property
    /// order, names, kinds and types, indexes and hash modifiers (not
    /// optionality, defaults or delete rules, which change no stored byte;
    /// ``EntityDescription/versionHash`` covers those).
    static func hash(_ entities: [EntityDescription]) -> String {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        func mix<S: Sequence<UInt8>>(_ bytes: S) { for b in bytes { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 } }
        for entity in entities {
            mix(entity.name.utf8); mix([0])
            for property in entity.properties {
                switch property {
                case .attribute(let a): mix([1, a.type.rawValue]); mix(a.name.utf8)
                case .relationship(let r): mix([r.isToMany ? 3 : 2]); mix(r.name.utf8); mix([0]); mix(r.destinationEntityName.utf8)
                }
                mix([0])
            }
            // Index keys are stored too (an entity without indexes hashes
            // as it always did).
            for index in entity.indexes {
                mix([index.isUnique ? 5 : 4])
                for name in index.attributeNames { mix(name.utf8); mix([0]) }
            }
            // As Core Data's `versionHashModifier`: only when set, so an
            // entity without one hashes as it always did.
            if let modifier = entity.versionHashModifier { mix([6]); mix(modifier.utf8); mix([0]) }
        }
        let hex = String(h, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
