extension PersistentContainer {
    /// A new `.privateQueue` context whose saves go into `parent` — by
    /// default the main-queue ``viewContext`` (MagicalRecord's `MR_newContext`
    /// and `MR_newContextWithParent:`). Use it through `perform` /
    /// `performAndWait`; its `save()` is an in-memory hand-off to `parent`
    /// (contract C9).
    ///
    /// ```swift
    /// let editor = try container.newContext()                    // child of the view context
    /// let scratch = try container.newContext(parent: editor)     // child of the editor
    /// editor.perform {
    ///     let soup = Recipe(context: editor)
    ///     soup.name = "Soup"
    ///     try? editor.save()                                     // into the view context
    /// }
    /// ```
    ///
    /// Throws ``StrataError/Code/invalidArgument`` when `parent` belongs to
    /// another coordinator, and ``StrataError/Code/contextMisuse`` when it is
    /// a `.confinement` context (which cannot be a parent: contract C3–C4).
    public func newContext(parent: ManagedObjectContext? = nil, name: String? = nil) throws(StrataError) -> ManagedObjectContext {
        let parent = parent ?? viewContext
        guard parent.persistentStoreCoordinator === coordinator else {
            throw StrataError(.invalidArgument, "\(parent.name) belongs to another coordinator than container \(self.name)")
        }
        guard parent.concurrencyType != .confinement else {
            throw StrataError(.contextMisuse, "\(parent.name) is a .confinement context and cannot be a parent")
        }
        return ManagedObjectContext(.privateQueue, parent: parent, name: name ?? "\(self.name).context")
    }

    /// A new `.mainQueue` context, a child of ``writerContext`` like
    /// ``viewContext``, that merges its parent's other saves automatically
    /// (MagicalRecord's `MR_newMainQueueContext`). Use it directly on the main
    /// queue, through `perform` elsewhere. Its saves reach the writer in
    /// memory: the main queue never waits on disk (Rule 6).
    ///
    /// ```swift
    /// let screen = container.newMainQueueContext()
    /// // on the main queue:
    /// let recipes = try Recipe.all(in: screen, sortedBy: [SortDescriptor(\.name)])
    /// ```
    public func newMainQueueContext(name: String? = nil) -> ManagedObjectContext {
        let context = ManagedObjectContext(.mainQueue, parent: writerContext, name: name ?? "\(self.name).main")
        context.automaticallyMergesChangesFromParent = true
        return context
    }

    /// A new `.privateQueue` context, a child of ``writerContext``
    /// (MagicalRecord's `MR_newPrivateQueueContext`): work in it never touches
    /// the main queue; its saves reach the view context by automatic merge
    /// and the disk with the writer's next save.
    ///
    /// ```swift
    /// let importer = container.newPrivateQueueContext()
    /// try await importer.perform {
    ///     for name in names { Recipe(context: importer).name = name }
    ///     try importer.save()                                   // into the writer
    /// }
    /// ```
    ///
    /// MagicalRecord attaches this context to the coordinator itself; in
    /// Strata's stack that would bypass the writer, whose later saves would
    /// then conflict with it, so it is the writer's child (as
    /// ``newBackgroundContext(childOfWriter:)`` with `true`).
    public func newPrivateQueueContext(name: String? = nil) -> ManagedObjectContext {
        ManagedObjectContext(.privateQueue, parent: writerContext, name: name ?? "\(self.name).private")
    }
}
