@_spi(StoreImplementation) public import Strata

extension PersistentContainer {
    /// The recommended stack over a PostgreSQL database that several
    /// processes share — replicas of a server, a worker beside it: the
    /// model's tables are made in the database if it has none, or checked
    /// against the model (``Strata/StrataError/Code/modelMismatch`` naming
    /// each difference); each process's saves reach the others' contexts as
    /// a save of their own would (the view context merges them,
    /// ``Strata/PersistentStoreCoordinator/storeDidChangeRemotely`` is
    /// posted); an edit of an object another process changed first is a
    /// ``Strata/StrataError/Code/mergeConflict``, a unique value another
    /// process holds a ``Strata/StrataError/Code/constraintConflict``.
    ///
    /// ```swift
    /// let configuration = PostgresConfiguration(
    ///     endpoint: .tcp(host: "db.internal", port: 5432), username: "app", password: secret, database: "bookmarks",
    ///     tls: .require(.makeClientConfiguration()))
    /// let container = try PersistentContainer(name: "Bookmarks", model: model, postgres: configuration, viewContext: .privateQueue)
    /// ```
    ///
    /// `sessions` bounds the connections the store opens for its reads and
    /// saves (one more follows the other processes' saves); `history` says
    /// how long the history of saves is kept (``Strata/PersistentHistory``:
    /// by age and count only — it is also how the processes learn of each
    /// other's saves, so leave it on); `onFollowError` hears what
    /// interrupted that following — a lost connection, retried by itself,
    /// missing nothing, or a process so far behind that the history it
    /// needed was pruned (``Strata/StrataError/Code/historyExpired``).
    /// ``close()`` closes every connection.
    public convenience init(
        name: String, model: ManagedObjectModel, postgres configuration: PostgresConfiguration, sessions: Int = 8,
        history: PersistentHistory = .default, viewContext queue: ViewContextQueue = .main, rowCacheBudget: Int = 32 << 20,
        onFollowError: @escaping @Sendable (StrataError) -> Void = { _ in }
    ) throws(StrataError) {
        let store = try PostgresStore(configuration, model: model, sessions: sessions, history: history)
        do {
            try self.init(name: name, model: model, store: store, viewContext: queue, rowCacheBudget: rowCacheBudget, onFollowError: onFollowError)
        } catch {
            store.close()
            throw error
        }
    }
}

extension PersistentStoreCoordinator {
    /// Opens the PostgreSQL store of the coordinator's model in the database
    /// `configuration` names, as the coordinator's one store (see
    /// ``Strata/PersistentContainer/init(name:model:postgres:sessions:history:viewContext:rowCacheBudget:onFollowError:)``
    /// for what it does and what `sessions`, `history` and `onFollowError` are).
    public func addPostgresStore(
        _ configuration: PostgresConfiguration, sessions: Int = 8, history: PersistentHistory = .default,
        onFollowError: @escaping @Sendable (StrataError) -> Void = { _ in }
    ) throws(StrataError) {
        let store = try PostgresStore(configuration, model: model, sessions: sessions, history: history)
        do {
            try addPersistentStore(store, onFollowError: onFollowError)
        } catch {
            store.close()
            throw error
        }
    }
}
