import Dispatch

/// What a block save did.
public enum BlockSaveResult: Sendable, Equatable {
    /// The block's changes reached the store; these are the saved IDs.
    case saved(ObjectChanges)
    /// The block changed nothing; nothing was written.
    case nothingToSave
}

extension PersistentContainer {
    /// MagicalRecord's `saveWithBlock:completion:` (contract C18):
    /// `block` runs on a fresh private context off the main queue (a child of
    /// the writer), its changes are saved through to the store, and
    /// `completion` runs on the main queue (on a serial queue of the
    /// container's when its view context is private) with the result — also when the
    /// block changed nothing (``BlockSaveResult/nothingToSave``) or threw:
    /// an error the block throws comes back as itself, a failed save as a
    /// ``StrataError``.
    ///
    /// ```swift
    /// container.save { context in
    ///     let soup = Recipe(context: context)
    ///     soup.name = "Soup"
    /// } completion: { result in
    ///     if case .failure(let error) = result { print(error) }
    /// }
    /// ```
    public func save(
        _ block: @escaping @Sendable (ManagedObjectContext) throws -> Void,
        completion: (@Sendable (Result<BlockSaveResult, any Error>) -> Void)? = nil
    ) {
        let context = newBlockContext()
        context.perform {
            let result = self.runSaveBlock(block, in: context)
            guard let completion else { return }
            // No main queue to run on in a container made for servers and tools.
            let queue: DispatchQueue = self.viewContext.concurrencyType == .mainQueue ? .main : self.completionQueue
            queue.async { completion(result) }
        }
    }

    /// The blocking form of ``save(_:completion:)``: returns once the block's
    /// changes are on disk, or throws — the block's own error as itself, a
    /// failed save's as a ``StrataError``. Do not call it on the writer's queue.
    ///
    /// With `retryingConflicts`, a save refused because another context
    /// saved one of the same objects since this block read it
    /// (``StrataError/Code/mergeConflict``) runs the block again, that many
    /// times at most, on a fresh context that reads the objects as they are
    /// now: the block must be safe to run again (it changes objects and
    /// nothing outside them).
    ///
    /// ```swift
    /// try container.saveAndWait(retryingConflicts: 5) { context in
    ///     let note = try Note.first(in: context, where: #Predicate { $0.id == id })
    ///     note?.views += 1
    /// }
    /// ```
    @discardableResult
    public func saveAndWait(retryingConflicts retries: Int = 0, _ block: (ManagedObjectContext) throws -> Void) throws -> BlockSaveResult {
        var attempt = 0
        while true {
            let context = newBlockContext()
            do {
                return try context.performAndWait { () throws -> BlockSaveResult in
                    try runSaveBlock(block, in: context).get()
                }
            } catch let error as StrataError where error.code == .mergeConflict && attempt < retries {
                attempt += 1
            }
        }
    }

    /// Runs `block` on a fresh background context (a child of the writer),
    /// saves it, and returns the block's value once its changes are on disk
    /// — suspending, never blocking a thread: the form for a server's
    /// request handler or any task. Writes from many tasks at once share
    /// the writer's saves (one fsync for all that arrive while one is
    /// written). The block's own error comes back as itself, a failed
    /// save's as a ``StrataError``. After the block's error, or a save
    /// refused on its way into the writer (a conflict, a validation), none
    /// of its changes are anywhere; after a failed write to disk they stay
    /// in the writer, which writes them with its next save, as after any
    /// failed save of the writer.
    ///
    /// Two requests that edit the same object: the second save into the
    /// writer is refused with ``StrataError/Code/mergeConflict`` (the merge
    /// policy of the container's background contexts is
    /// ``MergePolicy/error``). With `retryingConflicts`, the block runs
    /// again, that many times at most, on a fresh context that reads the
    /// object as the first request left it — so the block must be safe to
    /// run again: it changes objects and nothing outside them.
    ///
    /// ```swift
    /// let count = try await container.write { context in
    ///     let soup = Recipe(context: context)
    ///     soup.name = "Soup"
    ///     return try Recipe.count(in: context)
    /// }
    /// try await container.write(retryingConflicts: 5) { context in
    ///     try Note.first(in: context, where: #Predicate { $0.id == id })?.views += 1
    /// }
    /// ```
    public func write<T: Sendable>(
        retryingConflicts retries: Int = 0, _ block: @escaping @Sendable (ManagedObjectContext) throws -> T
    ) async throws -> T {
        var attempt = 0
        while true {
            let context = newBlockContext()
            let value: T
            do {
                value = try await context.perform { () throws -> T in
                    let value = try block(context)
                    if let saved = try context.saveReportingChanges(parentEnteredNext: true), context.parent == nil { self.mergeIntoStack(saved) }
                    return value
                }
            } catch let error as StrataError where error.code == .mergeConflict && attempt < retries {
                attempt += 1
                continue
            }
            if context.parent != nil { try await writerSaves.saveDurablyAsync() }
            return value
        }
    }

    private func runSaveBlock(_ block: (ManagedObjectContext) throws -> Void, in context: ManagedObjectContext) -> Result<BlockSaveResult, any Error> {
        do {
            try block(context)
        } catch {
            return .failure(error)
        }
        do throws(StrataError) {
            guard let saved = try context.saveReportingChanges(parentEnteredNext: true) else { return .success(.nothingToSave) }
            if context.parent == nil {
                mergeIntoStack(saved)
            } else {
                try writerSaves.saveDurably()
            }
            return .success(.saved(saved))
        } catch {
            return .failure(error)
        }
    }

    /// The context a save block runs on: a child of the writer, whose saves
    /// share the writer's (group commit) — or, over a store other processes
    /// write too (PostgreSQL), a context attached to the coordinator, whose
    /// save is the store's transaction of its own. There a conflict with
    /// another process's save surfaces in the block's context, which holds
    /// the block's changes and nothing else: retried on a fresh context, the
    /// block reads the other process's values, and no change of a failed
    /// attempt lingers anywhere (in the writer it would, and be saved later).
    func newBlockContext() -> ManagedObjectContext {
        guard savesBlocksDirectly else { return newBackgroundContext(childOfWriter: true) }
        return ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "\(name).background")
    }

    /// A block context's save, attached to the coordinator, merged into the
    /// view context (and the writer's other children that merge) as a
    /// child's save into the writer would be. The writer itself merged it
    /// already: the coordinator merges a save into every attached context
    /// that merges automatically, which the writer over a shared store does;
    /// its children's merges are queued behind that one.
    func mergeIntoStack(_ saved: ObjectChanges) {
        PersistentStoreCoordinator.mergeRemote(saved, into: writerContext, includingItself: false)
    }
}
