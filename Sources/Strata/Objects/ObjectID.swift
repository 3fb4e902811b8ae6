public import Foundation

/// The identity of a managed object, valid in every context of one
/// coordinator and safe to send across queues: the one way an object crosses
/// from one context to another (``ManagedObjectContext/object(with:)``).
///
/// ```swift
/// let id = recipe.objectID                      // on the import context's queue
/// mainContext.perform {
///     let same = mainContext.object(with: id) as! Recipe
/// }
/// ```
///
/// Strata gives an object its primary key when it is inserted, from a range
/// the coordinator reserves and never hands out again. An ID is *temporary*
/// (``isTemporaryID``) until the object is saved to the store or given a
/// permanent ID by ``ManagedObjectContext/obtainPermanentIDs(for:)``; the
/// temporary and the permanent ID of an object compare equal, so an ID held
/// from before the save keeps finding the same object afterwards, in every
/// context (SEMANTICS.md line 14: better than Core Data, whose temporary IDs
/// stop resolving).
public struct ObjectID: Sendable, Hashable, CustomStringConvertible {
    public let entity: EntityDescription
    let primaryKey: UInt64
    /// True until the object reaches the store (or its ID is made permanent).
    /// Not part of equality.
    public let isTemporaryID: Bool

    init(entity: EntityDescription, primaryKey: UInt64, isTemporary: Bool) {
        self.entity = entity
        self.primaryKey = primaryKey
        self.isTemporaryID = isTemporary
    }

    public static func == (a: ObjectID, b: ObjectID) -> Bool {
        a.primaryKey == b.primaryKey && a.entity === b.entity
    }

    public func hash(into hasher: inout Hasher) {
        // One word: the primary key with the entity's position on top (IDs of
        // different models that collide here still differ under ==).
        hasher.combine(primaryKey ^ UInt64(entity.index) << 48)
    }

    /// `x-strata:/Recipe/p42` (permanent) or `x-strata:/Recipe/t42`
    /// (temporary); ``PersistentStoreCoordinator/managedObjectID(forURIRepresentation:)``
    /// turns either back into this ID.
    public func uriRepresentation() -> URL {
        var components = URLComponents()
        components.scheme = "x-strata"
        components.path = "/" + entity.name + "/" + (isTemporaryID ? "t" : "p") + String(primaryKey)
        return components.url!
    }

    public var description: String { "\(entity.name)/\(isTemporaryID ? "t" : "p")\(primaryKey)" }
}
