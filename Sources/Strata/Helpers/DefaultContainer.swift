internal import StrataStore

/// The process-wide default container; guarded by `lock`.
private enum DefaultStack {
    static let lock = Lock()
    nonisolated(unsafe) static var container: PersistentContainer?  // guarded by `lock`
}

extension PersistentContainer {
    /// The container the default-context helpers use: MagicalRecord's default
    /// stack (contract C18), as one settable value instead of a
    /// global set-up call. Nil until set; safe to read and set from any thread.
    ///
    /// ```swift
    /// PersistentContainer.default = try PersistentContainer(name: "Recipes", model: model, directory: path)
    /// // later, on the main queue:
    /// let recipes = try Recipe.all(sortedBy: [SortDescriptor(\.name)])
    /// ```
    ///
    /// Setting it does not close the previous default; whoever made that
    /// container still owns it.
    public static var `default`: PersistentContainer? {
        get { DefaultStack.lock.withLock { DefaultStack.container } }
        set { DefaultStack.lock.withLock { DefaultStack.container = newValue } }
    }
}

extension ManagedObjectContext {
    /// The default context: the ``PersistentContainer/viewContext`` of
    /// ``PersistentContainer/default`` (nil while there is no default
    /// container). It is a `.mainQueue` context, so it follows Rule 1 of the
    /// concurrency rules: use it directly only on the main queue, through
    /// `perform`/`performAndWait` anywhere else.
    ///
    /// ```swift
    /// // on the main queue
    /// if let context = ManagedObjectContext.default {
    ///     let soup = Recipe(context: context)
    ///     soup.name = "Soup"
    /// }
    /// ```
    ///
    /// Unlike MagicalRecord's `MR_setDefaultContext:`, the default context is
    /// not set on its own: a private-queue default would make every
    /// default-context helper unusable without `perform`. Set
    /// ``PersistentContainer/default`` instead.
    public static var `default`: ManagedObjectContext? { PersistentContainer.default?.viewContext }

    /// The default context, if the caller may use it directly here: on the
    /// main queue (or inside one of its blocks). Throws
    /// ``StrataError/Code/noPersistentStore`` without a default container and
    /// ``StrataError/Code/contextMisuse`` anywhere else.
    static func defaultForDirectUse(_ helper: String) throws(StrataError) -> ManagedObjectContext {
        guard let context = ManagedObjectContext.default else {
            throw StrataError(.noPersistentStore, "\(helper) uses the default context, but PersistentContainer.default is not set")
        }
        guard context.isCurrent else {
            throw StrataError(.contextMisuse, """
                \(helper) uses the default context (\(context.name), \(context.concurrencyType)) and must be called on its queue; \
                it was called from \(currentExecutionDescription). Pass a context (in:) and call it on that context's queue
                """)
        }
        return context
    }
}
