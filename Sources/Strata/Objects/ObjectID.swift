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
/// context (contract C14: better than Core Data, whose temporary IDs
/// stop resolving).
public struct ObjectID: Sendable, Hashable, CustomStringConvertible {
    /// Unowned: every model (and so every entity) lives for the rest of the
    /// process once made (see ``ManagedObjectModel``), and IDs are copied far
    /// too often — into every table and change set — to pay a reference
    /// count each time.
    public unowned(unsafe) let entity: EntityDescription
    package let primaryKey: UInt64
    /// True until the object reaches the store (or its ID is made permanent).
    /// Not part of equality.
    public let isTemporaryID: Bool

    package init(entity: EntityDescription, primaryKey: UInt64, isTemporary: Bool) {
        self.entity = entity
        self.primaryKey = primaryKey
        self.isTemporaryID = isTemporary
    }

    /// The permanent ID of the object a store other than the log store
    /// keeps as `storedPrimaryKey` of `entity` (the PostgreSQL store's
    /// `strata_id`).
    @_spi(StoreImplementation)
    public init(entity: EntityDescription, storedPrimaryKey: UInt64) {
        self.init(entity: entity, primaryKey: storedPrimaryKey, isTemporary: false)
    }

    /// The object's primary key within its entity, as a store keeps it.
    @_spi(StoreImplementation)
    public var storedPrimaryKey: UInt64 { primaryKey }

    public static func == (a: ObjectID, b: ObjectID) -> Bool {
        a.primaryKey == b.primaryKey && a.entity === b.entity
    }

    public func hash(into hasher: inout Hasher) {
        // One word: the primary key with the entity's position on top (IDs of
        // different models that collide here still differ under ==).
        hasher.combine(primaryKey ^ UInt64(entity.index) << 48)
    }

    /// What `Dictionary` and `Set` actually call. Contexts keep every object
    /// in tables keyed by ID (registered, inserted, updated, the row cache),
    /// so an import hashes each ID about ten times: a seeded 64-bit
    /// finalizer (MurmurHash3's fmix64) costs a small fraction of SipHash,
    /// which at that count is a visible share of the import's time. IDs
    /// are not chosen by an adversary, so flooding resistance is not needed.
    public func _rawHashValue(seed: Int) -> Int {
        var x = primaryKey ^ UInt64(entity.index) << 48 ^ UInt64(UInt(bitPattern: seed))
        x ^= x >> 33
        x &*= 0xFF51_AFD7_ED55_8CCD
        x ^= x >> 33
        x &*= 0xC4CE_B9FE_1A85_EC53
        x ^= x >> 33
        return Int(truncatingIfNeeded: x)
    }

    /// `x-strata:/Recipe/p42` (permanent) or `x-strata:/Recipe/t42`
    /// (temporary); ``PersistentStoreCoordinator/managedObjectID(forURIRepresentation:)``
    /// turns either back into this ID.
    ///
    /// The entity name is percent-encoded as one path component, "/" included:
    /// a name is any non-empty string (a model read back from a store can
    /// hold anything), and an unescaped "/" would split it in two, or, leading,
    /// make a path `URLComponents` cannot turn into a URL.
    public func uriRepresentation() -> URL {
        var components = URLComponents()
        components.scheme = "x-strata"
        components.percentEncodedPath = "/" + Self.escape(entity.name) + "/" + (isTemporaryID ? "t" : "p") + String(primaryKey)
        // Non-nil: the path starts with one "/" followed by a non-empty,
        // fully escaped name (entity names are never empty).
        return components.url!
    }

    /// The characters a path component keeps as they are: the path's, less "/".
    private static let componentAllowed: CharacterSet = {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove("/")
        return allowed
    }()

    /// `name` percent-encoded as one URI path component.
    static func escape(_ name: String) -> String {
        // addingPercentEncoding fails only for a string that is not valid
        // Unicode, which a Swift String never is.
        name.addingPercentEncoding(withAllowedCharacters: componentAllowed)!
    }

    public var description: String { "\(entity.name)/\(isTemporaryID ? "t" : "p")\(primaryKey)" }
}
