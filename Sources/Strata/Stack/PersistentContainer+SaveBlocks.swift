import Dispatch

/// What a block save did.
public enum BlockSaveResult: Sendable, Equatable {
    /// The block's changes reached the store; these are the saved IDs.
    case saved(ObjectChanges)
    /// The block changed nothing; nothing was written.
    case nothingToSave
}

extension PersistentContainer {
    /// MagicalRecord's `saveWithBlock:completion:` (SEMANTICS.md line 18):
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
        let context = newBackgroundContext(childOfWriter: true)
        context.perform {
            let result = Self.runSaveBlock(block, in: context, writerSaves: self.writerSaves)
            guard let completion else { return }
            // No main queue to run on in a container made for servers and tools.
            let queue: DispatchQueue = self.viewContext.concurrencyType == .mainQueue ? .main : self.completionQueue
            queue.async { completion(result) }
        }
    }

    /// The blocking form of ``save(_:completion:)``: returns once the block's
    /// changes are on disk, or throws — the block's own error as itself, a
    /// failed save's as a ``StrataError``. Do not call it on the writer's queue.
    @discardableResult
    public func saveAndWait(_ block: (ManagedObjectContext) throws -> Void) throws -> BlockSaveResult {
        let context = newBackgroundContext(childOfWriter: true)
        return try context.performAndWait { () throws -> BlockSaveResult in
            try Self.runSaveBlock(block, in: context, writerSaves: writerSaves).get()
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
    /// ```swift
    /// let count = try await container.write { context in
    ///     let soup = Recipe(context: context)
    ///     soup.name = "Soup"
    ///     return try Recipe.count(in: context)
    /// }
    /// ```
    public func write<T: Sendable>(_ block: @escaping @Sendable (ManagedObjectContext) throws -> T) async throws -> T {
        let context = newBackgroundContext(childOfWriter: true)
        let value = try await context.perform { () throws -> T in
            let value = try block(context)
            try context.save()
            return value
        }
        try await writerSaves.saveDurablyAsync()
        return value
    }

    private static func runSaveBlock(
        _ block: (ManagedObjectContext) throws -> Void, in context: ManagedObjectContext, writerSaves: WriterSaveGroups
    ) -> Result<BlockSaveResult, any Error> {
        do {
            try block(context)
        } catch {
            return .failure(error)
        }
        do throws(StrataError) {
            guard let saved = try context.saveReportingChanges() else { return .success(.nothingToSave) }
            try writerSaves.saveDurably()
            return .success(.saved(saved))
        } catch {
            return .failure(error)
        }
    }
}

