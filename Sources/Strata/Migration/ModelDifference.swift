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
        case entityAdded
        case entityRemoved
        case entityRenamed(from: String)
        case propertyAdded
        case propertyRemoved
        case propertyRenamed(from: String)
        /// An attribute's type, or a property's kind (attribute, to-one, to-many).
        case typeChanged(from: String, to: String)
        case becameOptional
        case becameRequired
        case destinationChanged(from: String, to: String)
        case inverseChanged
        case deleteRuleChanged
        case defaultValueChanged
        case indexAdded(IndexDescription)
        case indexRemoved(IndexDescription)
        case hashModifierChanged
    }

    /// The entity's name in the new model (in the old one for a removed entity).
    public var entity: String
    /// The property's name in the new model (in the old one for a removed
    /// property); nil for a change to the entity itself.
    public var property: String?
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
