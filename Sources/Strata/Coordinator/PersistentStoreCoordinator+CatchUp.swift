public import Foundation
internal import StrataStore

extension PersistentStoreCoordinator {
    /// Posted by a coordinator whose store was opened read-only
    /// (`StoreOptions.readOnly`) when it has caught up with saves another
    /// process made to the store (``catchUpWithStore()``); the object is the
    /// coordinator, the payload an ``ObjectChanges`` with the objects
    /// inserted, updated and deleted, and under ``HistoryToken/userInfoKey``
    /// the token of the newest transaction the store's history holds (when
    /// the writer records history).
    ///
    /// ```swift
    /// NotificationCenter.default.addObserver(
    ///     forName: PersistentStoreCoordinator.storeDidChangeRemotely, object: container.coordinator, queue: nil
    /// ) { note in
    ///     guard let changes = ObjectChanges(note) else { return }
    ///     print("\(changes.inserted.count) new objects from the importer")
    /// }
    /// ```
    public static let storeDidChangeRemotely = Notification.Name("StrataStoreDidChangeRemotely")

    /// Brings a store opened read-only beside the process that writes it up
    /// to date with that process's saves, and tells this process's contexts
    /// as a save here would: the row cache lets go of the changed objects;
    /// every context that merges changes automatically
    /// (``ManagedObjectContext/automaticallyMergesChangesFromParent``) —
    /// attached to this coordinator, or the child of one — merges them on
    /// its queue (objects it holds are refreshed, deleted ones let go of);
    /// and ``storeDidChangeRemotely`` is posted. Returns the changes (empty
    /// when nothing came in).
    ///
    /// ```swift
    /// var options = StoreOptions()
    /// options.readOnly = true
    /// let container = try PersistentContainer(name: "Bookmarks", model: model, directory: path, options: options)
    /// // … the app's importer saves in its own process …
    /// let changes = try container.coordinator.catchUpWithStore()
    /// ```
    ///
    /// Each of the other process's saves comes in whole, in order, once its
    /// batch is complete in the store's log. ``followStore(onError:)`` calls
    /// this whenever the store's files change. Throws
    /// ``StrataError/Code/invalidArgument`` for a store open for writing or
    /// in memory (which have no one else's saves to catch up with),
    /// ``StrataError/Code/modelMismatch`` when the writing process changed
    /// the store's model (open the store again), and
    /// ``StrataError/Code/storage`` when the store cannot be read.
    @discardableResult
    public func catchUpWithStore() throws(StrataError) -> ObjectChanges {
        let caughtUp = try catchUpWithoutNotifying()
        postStoreDidChangeRemotely(caughtUp)
        return caughtUp.changes
    }

    /// What a catch-up brought in: the changes, the newest transaction the
    /// store's history holds after them, and how many of the writer's saves
    /// (transactions) it read in.
    struct CaughtUp {
        let changes: ObjectChanges
        let token: HistoryToken?
        let batches: UInt64
    }

    /// ``catchUpWithStore()`` but for its notification: it calls none of
    /// the app's callbacks (the contexts' merges are queued on their queues).
    func catchUpWithoutNotifying() throws(StrataError) -> CaughtUp {
        let (changes, token, batches) = try catchUpLock.withLock { () throws(StrataError) -> (ObjectChanges, HistoryToken?, UInt64) in
            let store = try currentStore()
            guard store.followsAnotherWriter else { throw Self.notFollowable }
            // The store's version counts the writer's saves read in.
            let before = store.records.readVersion
            // What it reads in is readable before the row cache lets go of
            // their rows (in `takeIn`).
            let (changes, token) = try changingStoreAheadOfCache(store) { () throws(StrataError) -> (ObjectChanges, HistoryToken?) in
                let changes: ObjectChanges
                let modelChanged: Bool
                do throws(StrataError) {
                    (changes, modelChanged) = try store.catchUp()
                } catch {
                    // The store may have moved on before the failure: no cached
                    // row, no object loaded before, is trusted any more.
                    forgetAllCachedRows()
                    changeLog.recordUnknownChange()
                    throw error
                }
                if modelChanged {
                    forgetAllCachedRows()
                    changeLog.recordUnknownChange()
                    throw StrataError(.modelMismatch, "the process writing the store changed its model (a migration) since this one opened it: open the store again")
                }
                guard !changes.isEmpty else { return (changes, nil) }
                takeIn(changes)
                // The newest transaction of what was just read in.
                return (changes, try? currentHistoryToken())
            }
            // It goes back where the writer lost a log tail this one had read.
            let after = store.records.readVersion
            return (changes, token, after > before ? after - before : 0)
        }
        return CaughtUp(changes: changes, token: token, batches: batches)
    }

    /// Transactions of another store, delivered by its following
    /// (``addPersistentStore(_:onFollowError:)``): those other coordinators
    /// saved come in as a catch-up's changes do — the read version moves
    /// on, the row cache lets go of the objects, the contexts that merge
    /// automatically merge them, ``storeDidChangeRemotely`` is posted. This
    /// coordinator's own are passed over (their saves merged them). Under
    /// the save lock, so a save's identifier is known as its own before
    /// its delivery is looked at.
    func receive(_ transactions: [StoreTransaction], from external: ExternalStore) {
        let caughtUp = saveLock.withLock {
            catchUpLock.withLock { () -> CaughtUp? in
                // A store closed or replaced since the delivery began.
                guard externalStore === external, let last = transactions.last else { return nil }
                let changes = Self.netChanges(of: transactions.filter { !external.isOwn($0) })
                guard !changes.isEmpty else { return nil }
                external.readVersion.add(1, ordering: .releasing)
                takeIn(changes)
                let token = storeIdentifier.map { HistoryToken(storeIdentifier: $0, transactionNumber: last.number) }
                return CaughtUp(changes: changes, token: token, batches: UInt64(transactions.count))
            }
        }
        if let caughtUp { postStoreDidChangeRemotely(caughtUp) }
    }

    /// Another process's `changes`, now in the store, taken in: objects
    /// loaded before this are listed as changed since (see
    /// ``StoreChangeLog``), no cached row outlives its change, and the
    /// contexts that merge are told. Under `catchUpLock`, so each context
    /// merges them in order.
    private func takeIn(_ changes: ObjectChanges) {
        changeLog.record(changes.inserted + changes.updated + changes.deleted)
        forgetCachedRows(changes.updated + changes.deleted)
        for root in liveRootContexts { Self.mergeRemote(changes, into: root) }
    }

    /// What `transactions`, in order, did to each object: inserted (and
    /// perhaps updated since), updated, or deleted (an object inserted and
    /// deleted among them is left out: no one here can hold it).
    static func netChanges(of transactions: [StoreTransaction]) -> ObjectChanges {
        enum Net { case inserted, updated, deleted, gone }
        var net: [ObjectID: Net] = [:]
        var order: [ObjectID] = []
        func note(_ id: ObjectID, _ change: Net) {
            guard let before = net[id] else {
                net[id] = change
                order.append(id)
                return
            }
            switch (before, change) {
            case (.inserted, .deleted): net[id] = .gone
            case (.inserted, _), (.gone, _): break
            default: net[id] = change
            }
        }
        for transaction in transactions {
            for id in transaction.inserted { note(id, .inserted) }
            for id in transaction.updated { note(id, .updated) }
            for id in transaction.deleted { note(id, .deleted) }
        }
        var changes = ObjectChanges()
        for id in order {
            switch net[id] {
            case .inserted?: changes.inserted.append(id)
            case .updated?: changes.updated.append(id)
            case .deleted?: changes.deleted.append(id)
            case .gone?, nil: break
            }
        }
        return changes
    }

    /// Posts ``storeDidChangeRemotely`` for `caughtUp`, when it brought
    /// something in. Outside the catch-up's lock: an observer may catch up again.
    func postStoreDidChangeRemotely(_ caughtUp: CaughtUp) {
        guard !caughtUp.changes.isEmpty else { return }
        var userInfo: [String: any Sendable] = [ObjectChanges.userInfoKey: caughtUp.changes]
        if let token = caughtUp.token { userInfo[HistoryToken.userInfoKey] = token }
        NotificationCenter.default.post(name: Self.storeDidChangeRemotely, object: self, userInfo: userInfo)
    }

    /// Merges `changes` into `context` if it merges automatically (and
    /// `includingItself`), then into its children that do, each on its own
    /// queue and after its parent. A context with no queue of its own
    /// (`.confinement`) is passed by: its thread merges when it chooses
    /// (the notification).
    static func mergeRemote(_ changes: ObjectChanges, into context: ManagedObjectContext, includingItself: Bool = true) {
        let merges = includingItself && context.automaticallyMergesChangesFromParent
        let children = context.mergingChildren(excluding: nil)
        guard context.concurrencyType != .confinement, merges || !children.isEmpty else { return }
        context.perform {
            if merges { context.mergeChanges(fromContextDidSave: changes) }
            for child in children { mergeRemote(changes, into: child, includingItself: true) }
        }
    }

    /// Follows the store this coordinator opened read-only: whenever its
    /// files change — the writing process appended a batch to its log,
    /// flushed or compacted — calls ``catchUpWithStore()`` on a thread of
    /// its own, until the returned ``StoreFollowing`` is cancelled or let
    /// go of, or the coordinator is closed. `onError` hears each catch-up
    /// that failed (the next change tries again).
    ///
    /// ```swift
    /// let following = try container.coordinator.followStore()
    /// // the view context merges the importer's saves as they land
    /// ```
    ///
    /// On Linux the store's directory is watched with inotify; elsewhere,
    /// or when inotify cannot be had (`onError` hears why, once), it is
    /// looked at every 10 ms (``StoreFollowing/watchesDirectory``). Throws
    /// ``StrataError/Code/invalidArgument`` for a store open for writing or
    /// in memory.
    public func followStore(onError: @escaping @Sendable (StrataError) -> Void = { _ in }) throws(StrataError) -> StoreFollowing {
        try followStore(onError: onError, makeWatch: DirectoryWatch.makeWatch)
    }

    /// ``followStore(onError:)``, with the seam that makes the inotify
    /// instance (tests make it fail).
    func followStore(onError: @escaping @Sendable (StrataError) -> Void, makeWatch: () -> Int32) throws(StrataError) -> StoreFollowing {
        guard let (signal, unavailable) = try currentStore().changeSignal(makeWatch: makeWatch) else { throw Self.notFollowable }
        return try StoreFollowing(signal: signal, unavailable: unavailable, coordinator: self, onError: onError)
    }

    private static var notFollowable: StrataError {
        StrataError(.invalidArgument, """
            only a store opened read-only (StoreOptions.readOnly) catches up with another process: this one is open for writing, \
            and holds every save already, or in memory
            """)
    }
}
