/// An object in the graph: an instance of an entity, registered in one
/// context and used only on that context's queue (contract C15).
///
/// Subclass it and declare typed properties with ``Attribute`` and
/// ``Relationship``; the names are the model's property names.
///
/// ```swift
/// final class Recipe: ManagedObject {
///     @Attribute("name") var name: String
///     @Attribute("servings") var servings: Int
///     @Relationship("ingredients") var ingredients: Set<Ingredient>
/// }
///
/// let soup = Recipe(context: context)
/// soup.name = "Soup"
/// ```
///
/// Properties can also be read and written by name: ``value(forKey:)``,
/// ``setValue(_:forKey:)``, ``propertyValue(forKey:)``.
///
/// A managed object is deliberately not `Sendable`: hand its ``objectID`` to
/// another queue instead.
open class ManagedObject: Hashable, CustomStringConvertible {
    /// The entity the object is an instance of.
    public final let entity: EntityDescription

    // Everything below is guarded by the owning context's queue (or, before
    // insertion, by whoever created the object). That queue already rules
    // out overlapping access, so the per-access dynamic exclusivity checks
    // (a measurable share of every property read and write) are off.

    /// Assigned when the object is inserted into (or materialized by) a context.
    @exclusivity(unchecked) final var primaryKey: UInt64 = 0
    @exclusivity(unchecked) final var isTemporary = true
    /// The registering context's link (see ``ContextLink``: not a weak
    /// reference, which cost every property write two atomic side-table
    /// operations); the context owns its registered objects, not the other
    /// way round.
    @exclusivity(unchecked) final var link: ContextLink?
    /// The registering context, retained for the caller (nil once it is gone
    /// or the object left it). Hot paths use ``link`` at +0 instead.
    final var context: ManagedObjectContext? {
        get { link?.context }
        set { link = newValue?.link }
    }
    /// The current values, one per property in the entity's order; empty while a fault.
    @exclusivity(unchecked) final var values: [PropertyValue]
    /// The values this context's source (parent or store) held when the object
    /// was registered or last saved or refreshed; nil for an inserted object.
    @exclusivity(unchecked) final var committed: [PropertyValue]?
    /// The source's version of the object that ``committed`` corresponds to:
    /// what the next save checks for conflicts (0 for an inserted object).
    @exclusivity(unchecked) final var version: UInt64 = 0
    /// The version this context shows its children; changes whenever the
    /// values change here, so a child that saw an older state conflicts.
    @exclusivity(unchecked) final var exposedVersion: UInt64 = 0
    @exclusivity(unchecked) final var flags: Flags = []
    /// The context's change generation at this object's last change (see
    /// ``ManagedObjectContext/childAccess(_:)``: a save that wrote while a
    /// child changed the object keeps it dirty).
    @exclusivity(unchecked) final var changeStamp: UInt64 = 0
    /// Swift Observation's registrar and the properties read through it,
    /// made by the first read while the context tracks observation (nil
    /// for every object nobody observed).
    @exclusivity(unchecked) final var observation: ObjectObservation?

    struct Flags: OptionSet {
        let rawValue: UInt8
        static let fault = Flags(rawValue: 1)
        static let inserted = Flags(rawValue: 2)
        static let deleted = Flags(rawValue: 4)
        /// Changed since the last save (in the context's `updated` table unless inserted).
        static let dirty = Flags(rawValue: 8)
        /// Queued for the next objects-did-change notification.
        static let pendingNotification = Flags(rawValue: 16)
        /// Changed since a child last saw ``exposedVersion``: the next change
        /// must not bump it again.
        static let exposedVersionFresh = Flags(rawValue: 32)
        /// The object no longer exists in its source (an inaccessible fault, or
        /// deleted by a merge): reads return defaults, and it cannot be saved.
        static let invalidated = Flags(rawValue: 64)
        /// Holds exactly the values a child saved into this context after
        /// validating them, unchanged here since: this context's own save
        /// need not check them again (only against its own deletions).
        static let validatedByChild = Flags(rawValue: 128)
    }

    /// Creates an object of `entity` and, when `context` is given, inserts it.
    ///
    /// Subclasses inherit this initializer; one that declares initializers of
    /// its own must also implement this one (Strata uses it to materialize
    /// objects it reads).
    public required init(entity: EntityDescription, insertInto context: ManagedObjectContext?) {
        self.entity = entity
        self.values = entity.initialValues
        if let context { context.insert(self) }
    }

    /// Creates an object of the entity whose class is this class, inserted into `context`.
    ///
    /// ```swift
    /// let soup = Recipe(context: context)
    /// ```
    public convenience init(context: ManagedObjectContext) {
        guard let entity = context.model.entity(for: Self.self) else {
            preconditionFailure("Strata: no single entity of the model has class \(Self.self); use init(entity:insertInto:)")
        }
        self.init(entity: entity, insertInto: context)
    }

    // MARK: State

    /// The object's ID: temporary until it reaches the store, then permanent.
    public final var objectID: ObjectID {
        ObjectID(entity: entity, primaryKey: primaryKey, isTemporary: isTemporary)
    }

    /// The context the object is registered in (nil once deleted and saved,
    /// after `reset()`, or before insertion).
    public final var managedObjectContext: ManagedObjectContext? { context }

    /// Inserted into its context and not yet saved.
    public final var isInserted: Bool { checkQueue(); return flags.contains(.inserted) }
    /// Deleted in its context and not yet saved, or found deleted elsewhere
    /// (by a merge, or when its fault could not be loaded).
    public final var isDeleted: Bool { checkQueue(); return !flags.isDisjoint(with: [.deleted, .invalidated]) }
    /// Changed since it was last saved (and neither inserted nor deleted).
    public final var isUpdated: Bool {
        checkQueue()
        return flags.contains(.dirty) && !flags.contains(.inserted) && !flags.contains(.deleted)
    }
    /// Whether its values have not been loaded yet.
    public final var isFault: Bool { checkQueue(); return flags.contains(.fault) }
    /// Inserted, deleted or changed.
    public final var hasChanges: Bool {
        checkQueue()
        return !flags.intersection([.inserted, .deleted, .dirty]).isEmpty
    }

    // MARK: Hashable (by identity, as Core Data's objects are)

    public static func == (a: ManagedObject, b: ManagedObject) -> Bool { a === b }
    public final func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    open var description: String {
        let state = flags.contains(.fault) ? " (fault)" : ""
        return "<\(type(of: self)) \(objectID)\(state)>"
    }

    // MARK: Internal plumbing

    /// With the concurrency debug switch on, traps unless the caller is on the
    /// queue of the object's context (contract C22).
    @inline(__always)
    final func checkQueue() {
        if ConcurrencyDebug.isEnabled, let context { context.checkQueue(function: "a managed object") }
    }

    /// Loads the values of a fault from the context's source, with the
    /// context at +0 as the write path has it (``ContextLink``): a retain of
    /// a context takes the slow, side-table path, once per fault read.
    @inline(__always)
    final func fulfill() {
        if flags.contains(.fault), let unmanaged = link?.unmanaged { unmanaged._withUnsafeGuaranteedRef { $0.fulfillFault(self) } }
    }
}
