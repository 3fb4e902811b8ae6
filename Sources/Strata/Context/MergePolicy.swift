/// What a save does when an object it changes was changed at its destination
/// (the parent context or the store) since the saving context read it
/// (contract C21), and when a new object's values in a uniqueness
/// constraint are held by an existing object.
///
/// ```swift
/// context.mergePolicy = .mergeByPropertyObjectTrump
/// ```
///
/// For uniqueness constraints, ``error`` fails the save with
/// ``StrataError/Code/constraintConflict``; every other policy *upserts*:
/// the new object is merged into the existing one and leaves the context,
/// and its ID resolves to the existing object's in every context from then
/// on. ``mergeByPropertyObjectTrump`` and ``overwrite`` keep the new object's
/// attribute values (those it set: a value left as a new object has it
/// keeps the existing one's); ``mergeByPropertyStoreTrump`` and ``rollback``
/// keep the existing object's, taking the new one's only where the existing
/// holds nil. To-many relationships join. An *updated* object that takes
/// another's values is refused under every policy: there is nothing to merge.
public enum MergePolicy: Sendable, Hashable {
    /// Fail the save with ``StrataError/Code/mergeConflict``, listing every
    /// conflicting object and property; nothing is saved (the default).
    case error
    /// Property by property: what the destination changed wins; the saving
    /// context's other changes are kept.
    case mergeByPropertyStoreTrump
    /// Property by property: what the saving context changed wins; the
    /// destination's other changes are kept.
    case mergeByPropertyObjectTrump
    /// The saving context's whole object replaces the destination's.
    case overwrite
    /// The saving context's changes to conflicting objects are discarded; the
    /// objects take the destination's values.
    case rollback

    /// The values to save for an object whose destination moved from `base`
    /// to `destination` while this context changed it to `mine`; nil to drop
    /// the change (the object takes the destination's values).
    func resolve(base: [PropertyValue], mine: [PropertyValue], destination: [PropertyValue]) -> [PropertyValue]? {
        switch self {
        case .error: return nil
        case .overwrite: return mine
        case .rollback: return nil
        case .mergeByPropertyStoreTrump:
            return (0..<mine.count).map { destination[$0] != base[$0] ? destination[$0] : mine[$0] }
        case .mergeByPropertyObjectTrump:
            return (0..<mine.count).map { mine[$0] != base[$0] ? mine[$0] : destination[$0] }
        }
    }

    /// Whether a delete survives a destination that changed the object since.
    var deleteWinsOverChange: Bool { self == .overwrite || self == .mergeByPropertyObjectTrump }
}
