/// One change between the model a store was written with and the model it
/// is opened with: which entity, which property, what changed, and whether
/// Strata can migrate it by itself (an *inferred* migration).
///
/// A store whose model changed in a way that cannot be inferred is refused
/// with ``StrataError/Code/modelMismatch``, the differences in
/// ``StrataError/modelDifferences``:
///
/// ```swift
/// do {
///     try coordinator.addPersistentStore(directory: path)
/// } catch let error where error.code == .modelMismatch {
///     for difference in error.modelDifferences where !difference.isInferable {
///         print(difference)  // Recipe.servings: type changed from string to integer64 — not inferable: …
///     }
/// }
/// ```
public struct ModelDifference: Sendable, Hashable, CustomStringConvertible {
    /// What changed.
    public enum Change: Sendable, Hashable {
        /// An entity the stored model lacks: the store starts with none of its objects.
        case entityAdded
        /// An entity of the stored model that the new one no longer has: its stored objects are not
        /// carried over.
        case entityRemoved
        /// The entity was renamed; `from` is its name in the stored model (see
        /// ``EntityDescription/renamingIdentifier``).
        case entityRenamed(from: String)
        /// A property the stored model lacks. Not inferable for a required attribute without a
        /// default value, or a required to-one relationship: stored objects would have nothing to
        /// hold.
        case propertyAdded
        /// A property of the stored model that the entity no longer has: its stored values are not
        /// carried over.
        case propertyRemoved
        /// The property was renamed; `from` is its name in the stored model (see
        /// ``AttributeDescription/renamingIdentifier``).
        case propertyRenamed(from: String)
        /// An attribute's type, or a property's kind (attribute, to-one, to-many).
        case typeChanged(from: String, to: String)
        /// A required attribute or to-one relationship became optional.
        case becameOptional
        /// An optional attribute or to-one relationship became required. Stored objects without a
        /// value get the attribute's default; where there is none, the migration checks that every
        /// stored object holds a value.
        case becameRequired
        /// A relationship's destination entity changed, from the entity named `from` to the one
        /// named `to`; inferable only when it is the same entity, renamed.
        case destinationChanged(from: String, to: String)
        /// A relationship's inverse changed (another one, a new one, or none).
        case inverseChanged
        /// A relationship's delete rule changed.
        case deleteRuleChanged
        /// An attribute's default value changed.
        case defaultValueChanged
        /// The entity declares an index the stored model lacks: the migration builds its entries
        /// (see ``MigrationProgress``).
        case indexAdded(IndexDescription)
        /// An index of the stored model that the entity no longer declares: its entries are
        /// discarded.
        case indexRemoved(IndexDescription)
        /// The entity's ``EntityDescription/versionHashModifier`` changed: no value changes, but
        /// the store moves to the new model's version.
        case hashModifierChanged
    }

    /// The entity's name in the new model (in the old one for a removed entity).
    public var entity: String
    /// The property's name in the new model (in the old one for a removed
    /// property); nil for a change to the entity itself.
    public var property: String?
    /// What changed.
    public var change: Change
    /// Whether an inferred migration handles it.
    public var isInferable: Bool
    /// For a change that is not inferable: why, and what would make it so.
    public var reason: String?

    public var description: String {
        var text = property.map { "\(entity).\($0)" } ?? entity
        switch change {
        case .entityAdded: text += ": entity added"
        case .entityRemoved: text += ": entity removed"
        case .entityRenamed(let old): text += ": renamed from \(old)"
        case .propertyAdded: text += ": added"
        case .propertyRemoved: text += ": removed"
        case .propertyRenamed(let old): text += ": renamed from \(old)"
        case .typeChanged(let old, let new): text += ": type changed from \(old) to \(new)"
        case .becameOptional: text += ": became optional"
        case .becameRequired: text += ": became required"
        case .destinationChanged(let old, let new): text += ": destination changed from \(old) to \(new)"
        case .inverseChanged: text += ": inverse changed"
        case .deleteRuleChanged: text += ": delete rule changed"
        case .defaultValueChanged: text += ": default value changed"
        case .indexAdded(let index): text += ": index \(index) added"
        case .indexRemoved(let index): text += ": index \(index) removed"
        case .hashModifierChanged: text += ": version hash modifier changed"
        }
        if let reason { text += " — not inferable: \(reason)" }
        return text
    }
}
