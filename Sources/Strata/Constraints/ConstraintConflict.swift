/// One object of a save whose values in a uniqueness constraint another
/// object already holds (``StrataError/Code/constraintConflict``).
///
/// ```swift
/// do {
///     try context.save()
/// } catch let error where error.code == .constraintConflict {
///     for conflict in error.constraintConflicts {
///         print(conflict.constraint, conflict.values, conflict.conflictingObjectIDs)
///     }
/// }
/// ```
public struct ConstraintConflict: Sendable, Hashable, CustomStringConvertible {
    /// The saving context's object.
    public var objectID: ObjectID
    /// The constraint's attributes.
    public var constraint: [String]
    /// The values the object holds in them.
    public var values: [PropertyValue]
    /// The objects that hold the same values: at the destination (the
    /// parent context, its ancestors or the store), or elsewhere in the same save.
    public var conflictingObjectIDs: [ObjectID]

    public var description: String {
        let pairs = zip(constraint, values).map { "\($0) = \($1)" }.joined(separator: ", ")
        return "\(objectID): (\(pairs)) is held by \(conflictingObjectIDs.map(String.init(describing:)).joined(separator: ", "))"
    }
}
