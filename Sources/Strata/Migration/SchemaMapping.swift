/// How the objects of one model are read as objects of another: for each
/// entity of the new model, the entity of the old one it comes from and, for
/// each of its properties, where its value comes from. Inferred from the two
/// models (``infer(from:to:)``) by Core Data's rules for a lightweight
/// migration, matching entities and properties by their canonical names
/// (``EntityDescription/canonicalName``), so that a store of any earlier
/// version maps straight to the current one.
struct SchemaMapping {
    /// Where one property of a new-model object gets its value.
    struct PropertySource: Equatable {
        /// The old property's position; nil for a property the old entity lacked.
        var old: Int?
        /// A to-one relationship that became to-many: its target becomes the
        /// set's one member.
        var wrapsInSet = false
        /// A value for an old null (an attribute that became required).
        var fill: PropertyValue?
        /// What an object gets when the old entity lacked the property.
        var initial: PropertyValue = .null

        /// The value of this property for an object that held `oldValue`.
        func value(from oldValue: PropertyValue) -> PropertyValue {
            var value = oldValue
            if wrapsInSet {
                switch value {
                case .object(let id): value = .objects([id])
                case .null: value = .objects([])
                default: break
                }
            }
            if value == .null, let fill { value = fill }
            return value
        }
    }

    struct EntityMapping {
        /// The old entity; nil for an entity the old model lacked.
        var old: EntityDescription?
        /// Per property of the new entity.
        var sources: [PropertySource]
        /// Whether a record of the old entity holds exactly the bytes a new
        /// one would (same properties in the same places, same targets).
        var keepsLayout: Bool
        /// Whether the entity's index list changed (its indexes are rebuilt).
        var indexesChanged: Bool
    }

    var old: ManagedObjectModel
    let new: ManagedObjectModel
    /// Per entity of the new model, in its order.
    var entities: [EntityMapping]
    /// Per entity of the old model: its position in the new one (nil: removed).
    var newPosition: [Int?]
    /// Everything that changed, inferable or not.
    var differences: [ModelDifference]
    /// Properties that became required without a value to give stored
    /// objects: inferable only if no stored object lacks a value (Core
    /// Data's rule), which the migration checks (entity and property
    /// positions in the new model).
    var mustHoldValues: [(entity: Int, property: Int)] = []

    /// The changes no inferred migration handles.
    var unresolved: [ModelDifference] { differences.filter { !$0.isInferable } }

    /// Whether every record of the old model reads as the new one without a
    /// change (no entity's layout or position moved, none was removed).
    var keepsEveryRecord: Bool {
        entities.allSatisfy { $0.old == nil || $0.keepsLayout } && newPosition.enumerated().allSatisfy { $0.element == $0.offset }
    }

    /// Hands what inference cannot carry over to a custom stage: each such
    /// property starts at its initial value, for the stage to set (it reads
    /// the old value by name); the difference stays listed, no longer blocking.
    mutating func acceptUnresolved() {
        for (d, difference) in differences.enumerated() where !difference.isInferable {
            differences[d].isInferable = true
            differences[d].reason = nil
            guard let name = difference.property, let entity = new.entity(named: difference.entity),
                  let j = entity.propertyIndex[name] else { continue }
            entities[Int(entity.index)].sources[j] = PropertySource(initial: entity.initialValues[j])
            entities[Int(entity.index)].keepsLayout = false
        }
        mustHoldValues = []
    }
}

extension SchemaMapping {
    /// Matches the entities and properties of `new` to those of `old` and
    /// says what changed.
    static func infer(from old: ManagedObjectModel, to new: ManagedObjectModel) -> SchemaMapping {
        var differences: [ModelDifference] = []
        var newPosition = [Int?](repeating: nil, count: old.entities.count)
        var oldFor: [EntityDescription?] = []
        for entity in new.entities {
            // By canonical name; then the old entity the renaming identifier
            // names; then one of the same name (a later version may drop a
            // renaming identifier once every store has moved past it).
            let match = old.entities.first { $0.canonicalName == entity.canonicalName && newPosition[Int($0.index)] == nil }
                ?? entity.renamingIdentifier.flatMap { old.entity(named: $0) }
                ?? old.entity(named: entity.name)
            if let match, newPosition[Int(match.index)] == nil {
                newPosition[Int(match.index)] = Int(entity.index)
                oldFor.append(match)
                if match.name != entity.name {
                    differences.append(.init(entity: entity.name, change: .entityRenamed(from: match.name), isInferable: true))
                }
            } else {
                oldFor.append(nil)
                differences.append(.init(entity: entity.name, change: .entityAdded, isInferable: true))
            }
        }
        for entity in old.entities where newPosition[Int(entity.index)] == nil {
            differences.append(.init(entity: entity.name, change: .entityRemoved, isInferable: true))
        }
        var entities: [EntityMapping] = []
        var mustHoldValues: [(entity: Int, property: Int)] = []
        for (entity, oldEntity) in zip(new.entities, oldFor) {
            guard let oldEntity else {
                entities.append(EntityMapping(old: nil, sources: [], keepsLayout: false, indexesChanged: !entity.indexes.isEmpty))
                continue
            }
            var required: [Int] = []
            entities.append(mapEntity(entity, from: oldEntity, newPosition: newPosition, differences: &differences, mustHoldValues: &required))
            mustHoldValues += required.map { (Int(entity.index), $0) }
        }
        return SchemaMapping(
            old: old, new: new, entities: entities, newPosition: newPosition, differences: differences, mustHoldValues: mustHoldValues)
    }

    private static func mapEntity(
        _ entity: EntityDescription, from oldEntity: EntityDescription, newPosition: [Int?], differences: inout [ModelDifference],
        mustHoldValues: inout [Int]
    ) -> EntityMapping {
        func note(_ property: String?, _ change: ModelDifference.Change, unless reason: String? = nil) {
            differences.append(.init(entity: entity.name, property: property, change: change, isInferable: reason == nil, reason: reason))
        }
        var sources: [PropertySource] = []
        var used = Set<Int>()
        var keepsLayout = entity.properties.count == oldEntity.properties.count
        var oldNameFor: [String: String] = [:]  // new attribute name → old
        for (j, property) in entity.properties.enumerated() {
            let match = oldEntity.properties.indices.first { !used.contains($0) && oldEntity.properties[$0].canonicalName == property.canonicalName }
                ?? property.renamingIdentifier.flatMap { oldEntity.propertyIndex[$0] }
                ?? oldEntity.propertyIndex[property.name]
            guard let i = match, !used.contains(i) else {
                var source = PropertySource()
                source.initial = entity.initialValues[j]
                switch property {
                case .attribute(let a) where !a.isOptional && a.defaultValue == .null:
                    note(a.name, .propertyAdded, unless: "a required attribute added to stored objects needs a default value")
                case .relationship(let r) where !r.isToMany && !r.isOptional:
                    note(r.name, .propertyAdded, unless: "a required to-one relationship cannot be given to stored objects; add it optional")
                default:
                    note(property.name, .propertyAdded)
                }
                sources.append(source)
                keepsLayout = false
                continue
            }
            used.insert(i)
            var source = PropertySource(old: i)
            let oldProperty = oldEntity.properties[i]
            if oldProperty.name != property.name { note(property.name, .propertyRenamed(from: oldProperty.name)) }
            switch (oldProperty, property) {
            case (.attribute(let was), .attribute(let now)):
                oldNameFor[now.name] = was.name
                if was.type != now.type {
                    // Integers of every width are stored alike (a zigzag
                    // varint; 8 bytes in index keys): widening changes no byte.
                    let widths: [AttributeType: Int] = [.integer16: 16, .integer32: 32, .integer64: 64]
                    if let from = widths[was.type], let to = widths[now.type], from < to {
                        note(now.name, .typeChanged(from: "\(was.type)", to: "\(now.type)"))
                    } else {
                        note(now.name, .typeChanged(from: "\(was.type)", to: "\(now.type)"),
                             unless: "an attribute's type cannot be inferred; add a new attribute and copy the values in a custom stage")
                    }
                }
                if was.isOptional && !now.isOptional {
                    note(now.name, .becameRequired)
                    if now.defaultValue == .null { mustHoldValues.append(j) } else { source.fill = now.defaultValue }
                } else if !was.isOptional && now.isOptional {
                    note(now.name, .becameOptional)
                }
                if was.defaultValue != .null && was.defaultValue != now.defaultValue {
                    // Schemas before format 4 keep no defaults: a default
                    // the old schema lacks is unknown, not changed.
                    note(now.name, .defaultValueChanged)
                }
            case (.relationship(let was), .relationship(let now)):
                let oldDestination = oldEntity.destinations[i]!  // resolved by the old model
                let destination = entity.destinations[j]!
                if newPosition[Int(oldDestination.index)] != Int(destination.index) {
                    note(now.name, .destinationChanged(from: was.destinationEntityName, to: now.destinationEntityName),
                         unless: "a relationship's destination must be the same entity (renamed or not)")
                }
                if !was.isToMany && now.isToMany {
                    note(now.name, .typeChanged(from: "to-one", to: "to-many"))
                    source.wrapsInSet = true
                } else if was.isToMany && !now.isToMany {
                    note(now.name, .typeChanged(from: "to-many", to: "to-one"),
                         unless: "a to-many relationship cannot become to-one without choosing which object stays")
                }
                if !now.isToMany && was.isOptional && !now.isOptional {
                    note(now.name, .becameRequired)
                    mustHoldValues.append(j)
                } else if !now.isToMany && !was.isOptional && now.isOptional {
                    note(now.name, .becameOptional)
                }
                if (was.inverseName ?? "") != (now.inverseName ?? "") && !source.wrapsInSet {
                    note(now.name, .inverseChanged)
                }
                if was.deleteRule != now.deleteRule { note(now.name, .deleteRuleChanged) }
                if Int(destination.index) != Int(oldDestination.index) { keepsLayout = false }
            default:
                note(property.name, .typeChanged(from: kind(oldProperty), to: kind(property)),
                     unless: "an attribute cannot become a relationship or the other way round")
            }
            if i != j || source.wrapsInSet || source.fill != nil { keepsLayout = false }
            sources.append(source)
        }
        for (i, property) in oldEntity.properties.enumerated() where !used.contains(i) {
            note(property.name, .propertyRemoved)
            keepsLayout = false
        }
        // Indexes compare by the new names of the attributes they cover.
        let oldIndexes = oldEntity.indexes.map { index in
            // An attribute removed since cannot match any new one.
            IndexDescription(index.attributeNames.map { name in oldNameFor.first { $0.value == name }?.key ?? "\u{0}removed \(name)" }, isUnique: index.isUnique)
        }
        for index in entity.indexes where !oldIndexes.contains(index) { note(nil, .indexAdded(index)) }
        for (index, original) in zip(oldIndexes, oldEntity.indexes) where !entity.indexes.contains(index) {
            note(nil, .indexRemoved(original))
        }
        if oldEntity.versionHashModifier != entity.versionHashModifier { note(nil, .hashModifierChanged) }
        // An indexed attribute whose nulls become its default needs its
        // entries made again, from the values it now reads.
        let filled = Set(sources.indices.filter { sources[$0].fill != nil })
        let refilled = entity.indexedProperties.contains { !filled.isDisjoint(with: $0) }
        return EntityMapping(old: oldEntity, sources: sources, keepsLayout: keepsLayout, indexesChanged: oldIndexes != entity.indexes || refilled)
    }

    private static func kind(_ property: PropertyDescription) -> String {
        switch property {
        case .attribute(let a): return "\(a.type)"
        case .relationship(let r): return r.isToMany ? "to-many" : "to-one"
        }
    }

    /// The mapping from `inner.old` to `self.new`: a record of the older
    /// model read through `inner`, then through `self`.
    func composed(after inner: SchemaMapping) -> SchemaMapping {
        var result = self
        result.old = inner.old
        result.newPosition = inner.newPosition.map { $0.flatMap { newPosition[$0] } }
        result.differences = inner.differences + differences
        result.entities = entities.map { mapping in
            guard let middle = mapping.old else { return mapping }
            let before = inner.entities[Int(middle.index)]
            var composed = mapping
            composed.old = before.old
            guard before.old != nil else { return EntityMapping(old: nil, sources: [], keepsLayout: false, indexesChanged: true) }
            composed.keepsLayout = mapping.keepsLayout && before.keepsLayout
            composed.indexesChanged = mapping.indexesChanged || before.indexesChanged
            composed.sources = mapping.sources.map { outer in
                guard let i = outer.old else { return outer }
                let first = before.sources[i]
                guard first.old != nil else { return PropertySource(initial: outer.value(from: first.initial)) }
                return PropertySource(old: first.old, wrapsInSet: first.wrapsInSet || outer.wrapsInSet, fill: first.fill ?? outer.fill)
            }
            return composed
        }
        return result
    }
}
