public import Foundation

/// Typed finders, MagicalRecord's `MR_findAll…`, `MR_findFirst…` and
/// `MR_countOf…`, over ``FetchRequest`` and ``ManagedObjectContext/fetch(_:)``:
/// they see the context's unsaved changes and its ancestors' (contract C13).
///
/// Each takes the context explicitly (`in:`) and must be called on that
/// context's queue; anywhere else it throws ``StrataError/Code/contextMisuse``
/// (whether or not the concurrency debug switch is on). The forms without
/// `in:` use ``ManagedObjectContext/default`` and so run only on the main
/// queue (or inside a block of the default context).
extension FetchableObject {
    /// Every object of this class's entity that matches `predicate`, in the
    /// order of `sortDescriptors` (store order when empty).
    ///
    /// ```swift
    /// let hearty = try Recipe.all(in: context,
    ///                             where: #Predicate { $0.servings > 2 },
    ///                             sortedBy: [SortDescriptor(\.name)])
    /// ```
    public static func all(
        in context: ManagedObjectContext,
        where predicate: Predicate<Self>? = nil,
        sortedBy sortDescriptors: [SortDescriptor<Self>] = []
    ) throws(StrataError) -> [Self] {
        try checkDirectUse(of: context, "\(Self.self).all(in:)")
        return try context.fetch(FetchRequest<Self>(predicate: predicate, sortBy: sortDescriptors))
    }

    /// The first object matching `predicate` in the order of
    /// `sortDescriptors`, or nil when none matches. Without a sort order
    /// "first" is the store's order (primary keys, then unsaved inserts),
    /// which is not meaningful: pass one.
    ///
    /// ```swift
    /// let newest = try Recipe.first(in: context, sortedBy: [SortDescriptor(\.created, order: .reverse)])
    /// ```
    public static func first(
        in context: ManagedObjectContext,
        where predicate: Predicate<Self>? = nil,
        sortedBy sortDescriptors: [SortDescriptor<Self>] = []
    ) throws(StrataError) -> Self? {
        try checkDirectUse(of: context, "\(Self.self).first(in:)")
        // Without an order, any match is the first.
        if sortDescriptors.isEmpty, let predicate { return try firstMatch(of: predicate, in: context) }
        var request = FetchRequest<Self>(predicate: predicate, sortBy: sortDescriptors)
        request.fetchLimit = 1
        return try context.fetch(request).first
    }

    /// An object matching `predicate`, or nil when none does: with no order
    /// asked for, any match is the first — the lookup of a find-or-create,
    /// made as ``first(in:where:equals:)`` makes it where the predicate
    /// translates. ``first(in:where:sortedBy:)`` with no sort order.
    ///
    /// ```swift
    /// let item = try Item.first(in: context, where: #Predicate { $0.remoteID == 42 })
    /// ```
    public static func first(in context: ManagedObjectContext, where predicate: Predicate<Self>) throws(StrataError) -> Self? {
        // An overload of its own: through first(in:where:sortedBy:), generic
        // and unspecialized in the caller's module, every lookup of a
        // find-or-create looked up its optional and array arguments' types
        // at run time and copied the predicate through its value witness.
        try checkDirectUse(of: context, "\(Self.self).first(in:where:)")
        return try firstMatch(of: predicate, in: context)
    }

    /// The lookup `first(in:where:equals:)` makes, for the translated
    /// predicate; a fetch of one otherwise.
    private static func firstMatch(of predicate: Predicate<Self>, in context: ManagedObjectContext) throws(StrataError) -> Self? {
        if let entity = context.model.entity(for: Self.self), let test = ValueTest.compile(predicate, entity: entity) {
            return try context.firstObject(of: Self.self, entity: entity, passing: test)
        }
        var request = FetchRequest<Self>(predicate: predicate)
        request.fetchLimit = 1
        return try context.fetch(request).first
    }

    /// How many objects of this class's entity match `predicate`.
    ///
    /// ```swift
    /// let vegetarian = try Recipe.count(in: context, where: #Predicate { $0.vegetarian })
    /// ```
    public static func count(in context: ManagedObjectContext, where predicate: Predicate<Self>? = nil) throws(StrataError) -> Int {
        try checkDirectUse(of: context, "\(Self.self).count(in:)")
        return try context.count(for: FetchRequest<Self>(predicate: predicate))
    }

    /// The object matching `predicate`, or a new one that `configure` fills
    /// in (MagicalRecord's `MR_findFirstOrCreateByAttribute:`): the lookup
    /// sees the context's unsaved objects and its ancestors', and reads an
    /// index when `predicate` tests indexed attributes.
    ///
    /// ```swift
    /// let item = try Item.findOrCreate(where: #Predicate { $0.remoteID == 42 }, in: context) { item in
    ///     item.remoteID = 42
    /// }
    /// ```
    ///
    /// Two contexts may both create the object before either saves. Declare
    /// a uniqueness constraint on the attributes `predicate` tests: then the
    /// second save throws ``StrataError/Code/constraintConflict`` under
    /// ``MergePolicy/error``, or merges its object into the first under an
    /// upsert policy (``MergePolicy/mergeByPropertyObjectTrump``) — either
    /// way the store never holds two.
    public static func findOrCreate(
        where predicate: Predicate<Self>,
        in context: ManagedObjectContext,
        configure: (Self) throws -> Void
    ) throws -> Self {
        if let found = try first(in: context, where: predicate) { return found }
        let created = Self(entity: try entity(in: context), insertInto: context)
        try configure(created)
        return created
    }

    // MARK: By one attribute's value

    /// The object whose attribute `keyPath` equals `value` (MagicalRecord's
    /// `MR_findFirstByAttribute:withValue:`), or nil when none does: what
    /// ``first(in:where:sortedBy:)`` finds for `#Predicate { $0.sku == sku }`,
    /// seeing the context's unsaved objects and its ancestors', but with no
    /// predicate to translate on every call — the lookup an import makes
    /// once per record.
    ///
    /// ```swift
    /// let item = try Item.first(in: context, where: \.remoteID, equals: 42)
    /// ```
    ///
    /// `keyPath` must read one stored attribute (an `@Attribute` property);
    /// anything else throws ``StrataError/Code/invalidArgument``. When
    /// several objects hold the value, which one comes back is not defined:
    /// declare a uniqueness constraint on the attribute.
    public static func first<Value: AttributeValueConvertible>(
        in context: ManagedObjectContext, where keyPath: KeyPath<Self, Value>, equals value: Value
    ) throws(StrataError) -> Self? {
        try checkDirectUse(of: context, "\(Self.self).first(in:where:equals:)")
        let entity = try entity(in: context)
        let read = try attribute(read: keyPath, of: entity, in: context)
        return try context.firstObject(of: Self.self, entity: entity, property: read.index, null: read.null, equalTo: value.propertyValue)
    }

    /// The object whose attribute `keyPath` equals `value`, or a new one
    /// with that value that `configure` fills in (MagicalRecord's
    /// `MR_findFirstOrCreateByAttribute:withValue:`): the lookup of
    /// ``first(in:where:equals:)``, then an insert. The constraint advice
    /// of ``findOrCreate(where:in:configure:)`` holds here too.
    ///
    /// ```swift
    /// for record in batch {
    ///     let item = try Item.findOrCreate(where: \.remoteID, equals: record.id, in: context)
    ///     item.title = record.title
    /// }
    /// ```
    public static func findOrCreate<Value: AttributeValueConvertible>(
        where keyPath: ReferenceWritableKeyPath<Self, Value>, equals value: Value, in context: ManagedObjectContext,
        configure: (Self) throws -> Void = { _ in }
    ) throws -> Self {
        try checkDirectUse(of: context, "\(Self.self).findOrCreate(where:equals:in:)")
        let entity = try entity(in: context)
        let read = try attribute(read: keyPath, of: entity, in: context)
        let stored = value.propertyValue
        if let found = try context.firstObject(of: Self.self, entity: entity, property: read.index, null: read.null, equalTo: stored) {
            return found
        }
        let created = Self(entity: entity, insertInto: context)
        // Through the attribute the key path was found to read, not the key
        // path: that goes through the wrapper's generic setter and a
        // writeback buffer. A value the attribute does not take traps
        // there, as any setter does.
        if entity.accepts(stored, at: read.index) { created.setStoredValue(stored, at: read.index) } else { created[keyPath: keyPath] = value }
        try configure(created)
        return created
    }

    /// The stored attribute `keyPath` reads.
    private static func attribute<Value>(
        read keyPath: KeyPath<Self, Value>, of entity: EntityDescription, in context: ManagedObjectContext
    ) throws(StrataError) -> PropertyProbe.Read {
        guard let read = context.keyLookups.attributes.read(keyPath, of: entity) else {
            throw StrataError(.invalidArgument, """
                \(keyPath) does not read one stored attribute of \(entity.name): look objects up by an @Attribute property \
                (or use first(in:where:sortedBy:) with a #Predicate)
                """)
        }
        return read
    }

    /// The entity whose class this is, in `context`'s model.
    private static func entity(in context: ManagedObjectContext) throws(StrataError) -> EntityDescription {
        guard let entity = context.model.entity(for: Self.self) else {
            throw StrataError(.invalidArgument, "no single entity of the model has class \(Self.self)")
        }
        return entity
    }

    // MARK: In the default context (main queue only)

    /// ``all(in:where:sortedBy:)`` in ``ManagedObjectContext/default``. Call
    /// it on the main queue: elsewhere it throws
    /// ``StrataError/Code/contextMisuse``; without a default container,
    /// ``StrataError/Code/noPersistentStore``.
    ///
    /// ```swift
    /// // on the main queue, after `PersistentContainer.default = container`
    /// let recipes = try Recipe.all(sortedBy: [SortDescriptor(\.name)])
    /// ```
    public static func all(
        where predicate: Predicate<Self>? = nil,
        sortedBy sortDescriptors: [SortDescriptor<Self>] = []
    ) throws(StrataError) -> [Self] {
        let context = try ManagedObjectContext.defaultForDirectUse("\(Self.self).all()")
        return try context.fetch(FetchRequest<Self>(predicate: predicate, sortBy: sortDescriptors))
    }

    /// ``first(in:where:sortedBy:)`` in ``ManagedObjectContext/default``; main queue only.
    ///
    /// ```swift
    /// let soup = try Recipe.first(where: #Predicate { $0.name == "Soup" })
    /// ```
    public static func first(
        where predicate: Predicate<Self>? = nil,
        sortedBy sortDescriptors: [SortDescriptor<Self>] = []
    ) throws(StrataError) -> Self? {
        let context = try ManagedObjectContext.defaultForDirectUse("\(Self.self).first()")
        var request = FetchRequest<Self>(predicate: predicate, sortBy: sortDescriptors)
        request.fetchLimit = 1
        return try context.fetch(request).first
    }

    /// ``count(in:where:)`` in ``ManagedObjectContext/default``; main queue only.
    ///
    /// ```swift
    /// let total = try Recipe.count()
    /// ```
    public static func count(where predicate: Predicate<Self>? = nil) throws(StrataError) -> Int {
        let context = try ManagedObjectContext.defaultForDirectUse("\(Self.self).count()")
        return try context.count(for: FetchRequest<Self>(predicate: predicate))
    }

    private static func checkDirectUse(of context: ManagedObjectContext, _ helper: @autoclosure () -> String) throws(StrataError) {
        guard context.isCurrent else {
            throw StrataError(.contextMisuse, """
                \(helper()) must be called on the queue of '\(context.name)' (\(context.concurrencyType)); \
                it was called from \(ManagedObjectContext.currentExecutionDescription)
                """)
        }
    }
}
