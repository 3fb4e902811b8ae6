public import StrataStore
import Dispatch
import Synchronization

/// The recommended stack, ready-made (contract C16–C17): a
/// `.privateQueue` *writer* context owns the coordinator and does the disk
/// work; the `.mainQueue` ``viewContext`` is its child, so saving it is an
/// in-memory hand-off; background contexts are children of those.
///
/// ```swift
/// let container = try PersistentContainer(name: "Recipes", model: model, directory: path)
/// container.performBackgroundTask { context in
///     let soup = Recipe(context: context)
///     soup.name = "Soup"
///     try? context.save()                    // into the view context
///     container.save(wait: false)            // view → writer → disk, off the main queue
/// }
/// ```
///
/// A server or a command-line tool whose main thread never drains the main
/// queue (no `RunLoop.main`, no `dispatchMain()`) passes
/// `viewContext: .privateQueue`: the view context then has a queue of its
/// own, and no context of the container ever needs the main queue.
///
/// ```swift
/// let container = try PersistentContainer(name: "Orders", model: model, directory: path, viewContext: .privateQueue)
/// let orders = try container.viewContext.performAndWait { try container.viewContext.fetch(FetchRequest<Order>()) }
/// ```
public final class PersistentContainer: Sendable {
    /// The queue ``viewContext`` runs on.
    public enum ViewContextQueue: Sendable, Hashable {
        /// The main queue: an app with a UI, or anything that runs the main
        /// run loop or `dispatchMain()`. The recommended stack (the default).
        case main
        /// A private queue: servers and command-line tools. Nothing in the
        /// container waits for the main queue; block-save completions run
        /// on a serial queue of the container's.
        case privateQueue
    }

    /// The container's name, for messages and its contexts' names (`name.writer`, `name.view`); it
    /// names no file.
    public let name: String
    /// The model of the container's store and contexts.
    public let model: ManagedObjectModel
    /// The coordinator that owns the store, with ``writerContext`` attached to it.
    public let coordinator: PersistentStoreCoordinator
    /// The private-queue context attached to the coordinator: its saves go to disk.
    public let writerContext: ManagedObjectContext
    /// The main-queue context for the UI (or a private-queue one, see
    /// ``ViewContextQueue``), a child of ``writerContext``. It merges the
    /// writer's other children's saves automatically.
    public let viewContext: ManagedObjectContext
    /// Where block-save completions run when the view context is private: a
    /// serial queue (in order; it gets a thread even while Dispatch's
    /// shared pool is busy, as a queue of one's own does).
    let completionQueue: DispatchQueue
    /// Whether the store is on disk (an in-memory store keeps nothing past the container).
    private let isOnDisk: Bool
    /// Whether save blocks run on contexts attached to the coordinator
    /// rather than children of the writer: over a store other processes
    /// write too (``newBlockContext()``).
    let savesBlocksDirectly: Bool
    /// Set by ``close()``; read by `deinit`, which warns about changes a container
    /// that was never closed leaves unsaved.
    private let closed = Atomic<Bool>(false)
    /// Callers that wait for the writer's changes to reach disk share its
    /// saves (``WriterSaveGroups``).
    let writerSaves: WriterSaveGroups

    /// Opens (or creates) the store in `directory` (the log store), or an
    /// in-memory store when `directory` is nil; `viewContext` chooses the
    /// view context's queue (the main queue unless you say otherwise);
    /// `rowCacheBudget` bounds the coordinator's cache of committed
    /// snapshots (``PersistentStoreCoordinator/init(model:rowCacheBudget:)``);
    /// `migrationPlan` takes a store of an earlier model version through
    /// each later one (see <doc:ModelEvolution>), and `migrationProgress`
    /// hears how far a migration's index building has come; `history` says
    /// whether saves record their transactions and how long the store keeps
    /// them (see <doc:History>).
    public convenience init(
        name: String, model: ManagedObjectModel, directory: String?, options: StoreOptions = StoreOptions(),
        viewContext queue: ViewContextQueue = .main, rowCacheBudget: Int = 32 << 20, migrationPlan: MigrationPlan? = nil,
        migrationProgress: MigrationProgressHandler? = nil, history: PersistentHistory = .default
    ) throws(StrataError) {
        let coordinator = PersistentStoreCoordinator(model: model, rowCacheBudget: rowCacheBudget)
        if let directory {
            try coordinator.addPersistentStore(
                .log, directory: directory, options: options, migrationPlan: migrationPlan, migrationProgress: migrationProgress,
                history: history)
        } else {
            try coordinator.addPersistentStore(.inMemory, history: history)
        }
        self.init(name: name, coordinator: coordinator, isOnDisk: directory != nil, sharedStore: false, viewContext: queue)
    }

    /// The stack over `store`, a store other than the log store (the
    /// PostgreSQL store's container is made with this); `onFollowError`
    /// hears what interrupted the following of other processes' saves (see
    /// ``PersistentStoreCoordinator/addPersistentStore(_:onFollowError:)``).
    @_spi(StoreImplementation)
    public convenience init(
        name: String, model: ManagedObjectModel, store: any PersistentStore, viewContext queue: ViewContextQueue = .main,
        rowCacheBudget: Int = 32 << 20, onFollowError: @escaping @Sendable (StrataError) -> Void = { _ in }
    ) throws(StrataError) {
        let coordinator = PersistentStoreCoordinator(model: model, rowCacheBudget: rowCacheBudget)
        try coordinator.addPersistentStore(store, onFollowError: onFollowError)
        self.init(name: name, coordinator: coordinator, isOnDisk: true, sharedStore: true, viewContext: queue)
    }

    /// The stack on `coordinator`, whose store is added; `sharedStore`: a
    /// store other processes write too, whose saves the writer merges (its
    /// objects would otherwise go stale under the view context, which reads
    /// through it) and whose conflicts save blocks meet on contexts of their
    /// own (``newBlockContext()``).
    private init(name: String, coordinator: PersistentStoreCoordinator, isOnDisk: Bool, sharedStore: Bool, viewContext queue: ViewContextQueue) {
        self.name = name
        self.model = coordinator.model
        self.isOnDisk = isOnDisk
        savesBlocksDirectly = sharedStore
        self.coordinator = coordinator
        writerContext = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "\(name).writer")
        writerContext.automaticallyMergesChangesFromParent = sharedStore
        viewContext = ManagedObjectContext(queue == .main ? .mainQueue : .privateQueue, parent: writerContext, name: "\(name).view")
        viewContext.automaticallyMergesChangesFromParent = true
        completionQueue = DispatchQueue(label: "strata.container.\(name).completions")
        writerSaves = WriterSaveGroups(writer: writerContext)
    }

    /// A new `.privateQueue` context for background work: a child of
    /// ``viewContext`` (its saves reach the UI at once; the recommended stack), or with
    /// `childOfWriter` a child of the writer (its saves bypass the main queue
    /// and reach the view context by automatic merge).
    public func newBackgroundContext(childOfWriter: Bool = false) -> ManagedObjectContext {
        ManagedObjectContext(.privateQueue, parent: childOfWriter ? writerContext : viewContext, name: "\(name).background")
    }

    /// Runs `block` on a new background context's queue.
    public func performBackgroundTask(childOfWriter: Bool = false, _ block: @escaping @Sendable (ManagedObjectContext) -> Void) {
        let context = newBackgroundContext(childOfWriter: childOfWriter)
        context.perform { block(context) }
    }

    /// Runs `block` on a new background context's queue and returns its value.
    public func performBackgroundTask<T: Sendable, E: Error>(
        childOfWriter: Bool = false, _ block: @escaping @Sendable (ManagedObjectContext) throws(E) -> T
    ) async throws(E) -> T {
        let context = newBackgroundContext(childOfWriter: childOfWriter)
        return try await context.perform { () throws(E) -> T in try block(context) }
    }

    /// Saves ``viewContext`` into the writer (on its queue, in memory),
    /// then the writer to disk (on the writer's queue). With `wait` the call
    /// returns once the data is durable (for shutdown); without, it returns
    /// after the in-memory hand-off and `completion` (if any) learns how the
    /// disk save went, on the writer's queue.
    public func save(wait: Bool, completion: (@Sendable (Result<Void, StrataError>) -> Void)? = nil) {
        let writer = writerContext
        if wait {
            do throws(StrataError) {
                try saveAndWait()
                completion?(.success(()))
            } catch {
                completion?(.failure(error))
            }
            return
        }
        do throws(StrataError) {
            try viewContext.performAndWait { () throws(StrataError) in try viewContext.save() }
        } catch {
            completion?(.failure(error))
            return
        }
        writer.perform {
            do throws(StrataError) {
                try writer.save()
                completion?(.success(()))
            } catch {
                completion?(.failure(error))
            }
        }
    }

    /// ``save(wait:completion:)`` with `wait`, throwing: returns once
    /// everything the view context and the writer hold is on disk. Callers
    /// on many threads at once share the writer's saves (one fsync for all
    /// whose changes reached it while the save before was being written).
    public func saveAndWait() throws(StrataError) {
        try viewContext.performAndWait { () throws(StrataError) in try viewContext.save() }
        try writerSaves.saveDurably()
    }

    /// Saves the view context into the writer and the writer to disk, and
    /// returns once it is durable — suspending, never blocking a thread
    /// (a server's request handler, a task): the view context's save runs
    /// on its queue, the writer's on the writer's. Callers at once share
    /// the writer's saves, as with ``saveAndWait()``.
    ///
    /// ```swift
    /// try await container.save()   // the view context's changes are on disk
    /// ```
    public func save() async throws(StrataError) {
        let view = viewContext
        try await view.perform { () throws(StrataError) in try view.save() }
        try await writerSaves.saveDurablyAsync()
    }

    /// Saves the view context and the writer, and closes the store (waits
    /// for pending writer work). A background context's unsaved changes are
    /// not saved: each context that held some when its last block ended is
    /// named on standard error, with how many objects it held changed.
    ///
    /// ```swift
    /// try await container.save()   // or a save of each background context first
    /// try container.close()
    /// ```
    public func close() throws(StrataError) {
        let unsaved = contextsWithUnsavedChanges()
        for context in unsaved.prefix(5) {
            FileHandleStandardError.write("""
                Strata: closing \(name) leaves \(context.changed) unsaved change(s) of '\(context.name)' behind \
                (as of its last block): close() saves the view context and the writer only. Save that context first.

                """)
        }
        if unsaved.count > 5 { FileHandleStandardError.write("Strata: … and \(unsaved.count - 5) more contexts with unsaved changes.\n") }
        try saveAndWait()
        try coordinator.close()
        closed.store(true, ordering: .relaxed)
    }

    /// A container of an on-disk store that ends without ``close()`` names
    /// the contexts whose changes are not on disk (the view context and the
    /// writer included, which only a save or ``close()`` writes out).
    deinit {
        guard isOnDisk, !closed.load(ordering: .relaxed) else { return }
        let unsaved = contextsWithUnsavedChanges(includingViewAndWriter: true)
        guard !unsaved.isEmpty else { return }
        let named = unsaved.prefix(5).map { "'\($0.name)' (\($0.changed))" }.joined(separator: ", ")
        FileHandleStandardError.write(
            "Strata: \(name) ended without close() while \(named)\(unsaved.count > 5 ? " and \(unsaved.count - 5) more" : "") "
            + "held changes not on disk (as of each one's last block); they are lost. Save, or close() the container, first.\n")
    }

    /// The contexts below the writer, the view context aside (``close()``
    /// saves both), that held unsaved changes when their last block ended,
    /// with how many objects each held changed; parents before children.
    /// With `includingViewAndWriter`, those two as well.
    func contextsWithUnsavedChanges(includingViewAndWriter: Bool = false) -> [(name: String, changed: Int)] {
        var found: [(name: String, changed: Int)] = []
        var level = includingViewAndWriter ? [writerContext] : writerContext.liveChildren
        while !level.isEmpty {
            var next: [ManagedObjectContext] = []
            for context in level {
                let changed = context.unsavedObjectCount.load(ordering: .relaxed)
                let savedByClose = context === viewContext || context === writerContext
                if changed > 0 && (includingViewAndWriter || !savedByClose) { found.append((context.name, changed)) }
                next += context.liveChildren
            }
            level = next
        }
        return found
    }
}
