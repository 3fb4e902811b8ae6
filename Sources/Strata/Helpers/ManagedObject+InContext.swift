/// The helpers on managed object subclasses: ``FetchableObject/in(_:)`` and
/// the typed finders (``FetchableObject/all(in:where:sortedBy:)`` and the
/// rest). Every ``ManagedObject`` conforms; the protocol exists so that the
/// helpers can speak of the subclass they are called on (`Self`), which a
/// non-final class's own methods may not do in their parameters.
public protocol FetchableObject: ManagedObject {}

extension ManagedObject: FetchableObject {}

extension FetchableObject {
    /// The same object in `context` (MagicalRecord's `MR_inContext:`), without
    /// duplicating it: the object `context` already has registered for this
    /// ID, or one it loads from its parents or the store.
    ///
    /// ```swift
    /// // on the main queue, with `soup` from the view context:
    /// let editor = try container.newContext()
    /// let local = try soup.in(editor)
    /// try editor.performAndWait {
    ///     local.servings = 4                 // only on the editor's queue
    ///     try editor.save()
    /// }
    /// ```
    ///
    /// Which queue each part runs on:
    /// 1. Call it on the queue of the object's own context (it reads the
    ///    object); anywhere else it throws ``StrataError/Code/contextMisuse``.
    ///    There, if the object's ID is still temporary, it is made permanent
    ///    first (``ManagedObjectContext/obtainPermanentIDs(for:)``).
    /// 2. The ID is then resolved on `context`'s queue, through its
    ///    `performAndWait`: inline when the caller is already on it (both
    ///    contexts on the main queue, or nested in one of its blocks),
    ///    otherwise the caller waits for it. Resolving may read through
    ///    `context`'s parents, each on its own queue (Rule 5). So never call
    ///    it while `context`'s queue is itself waiting for the caller's (for
    ///    example with `context` a background context whose block is saving
    ///    into the main-queue context you call it from).
    /// 3. The result belongs to `context`: use it only on `context`'s queue —
    ///    inside its `perform`/`performAndWait`, or directly on the main queue
    ///    for a `.mainQueue` context. ``in(_:perform:)`` does that for you.
    ///
    /// Throws ``StrataError/Code/objectNotFound`` when `context` cannot see
    /// the object: it was inserted and not yet saved anywhere `context` reads
    /// from (save it into a common ancestor first), or it was deleted;
    /// ``StrataError/Code/invalidArgument`` when the object has no context or
    /// `context` belongs to another coordinator. In a save block, where the
    /// object cannot be captured (managed objects are not `Sendable`), capture
    /// its ``ManagedObject/objectID`` and use
    /// ``ManagedObjectContext/existingObject(with:as:)`` instead.
    public func `in`(_ context: ManagedObjectContext) throws(StrataError) -> Self {
        guard let id = try permanentID(for: context) else { return self }
        return try context.performAndWait { () throws(StrataError) -> Self in
            try context.existingObject(with: id, as: Self.self)
        }
    }

    /// ``in(_:)``, then `body` with the object, on `context`'s queue (inside
    /// its `performAndWait`), so the object is never touched anywhere else.
    /// Returns `body`'s value; call it on the queue of the object's context.
    ///
    /// ```swift
    /// // on the main queue, with `soup` from the view context:
    /// let editor = try container.newContext()
    /// try soup.in(editor) { local throws(StrataError) in
    ///     local.servings = 4
    ///     try editor.save()                  // into the view context
    /// }
    /// ```
    public func `in`<T>(_ context: ManagedObjectContext, perform body: (Self) throws(StrataError) -> T) throws(StrataError) -> T {
        guard let id = try permanentID(for: context) else {
            return try context.performAndWait { () throws(StrataError) -> T in try body(self) }
        }
        return try context.performAndWait { () throws(StrataError) -> T in
            try body(try context.existingObject(with: id, as: Self.self))
        }
    }

    /// Part 1 of ``in(_:)``, on the object's context's queue: the object's
    /// ID, made permanent if it was temporary; nil when `target` is the
    /// object's own context.
    private func permanentID(for target: ManagedObjectContext) throws(StrataError) -> ObjectID? {
        guard let source = managedObjectContext else {
            throw StrataError(.invalidArgument, "\(type(of: self)) is in no context (not inserted, reset, or deleted and saved)")
        }
        guard source.isCurrent else {
            throw StrataError(.contextMisuse, """
                in(_:) reads the object, so it must be called on the queue of its context '\(source.name)' \
                (\(source.concurrencyType)); it was called from \(ManagedObjectContext.currentExecutionDescription)
                """)
        }
        if source === target { return nil }
        guard source.persistentStoreCoordinator === target.persistentStoreCoordinator else {
            throw StrataError(.invalidArgument, "\(target.name) belongs to another coordinator than the object's context \(source.name)")
        }
        if isTemporary { try source.obtainPermanentIDs(for: [self]) }
        return objectID
    }
}

extension ManagedObjectContext {
    /// The object for `id`, loaded now and typed: ``existingObject(with:)``
    /// plus the cast. Throws ``StrataError/Code/objectNotFound`` when neither
    /// this context, its ancestors nor the store has it, and
    /// ``StrataError/Code/invalidArgument`` when it is not a `T`. Call it on
    /// the context's queue.
    ///
    /// ```swift
    /// let soupID = soup.objectID                  // Sendable: crosses queues
    /// container.save { context in
    ///     let local = try context.existingObject(with: soupID, as: Recipe.self)
    ///     local.servings = 4
    /// } completion: { result in print(result) }
    /// ```
    public func existingObject<T: ManagedObject>(with id: ObjectID, as type: T.Type) throws(StrataError) -> T {
        let object = try existingObject(with: id)
        guard let typed = object as? T else {
            throw StrataError(.invalidArgument, "\(id) is a \(Swift.type(of: object)), not a \(T.self)")
        }
        return typed
    }
}
