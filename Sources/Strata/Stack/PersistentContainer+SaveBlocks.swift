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
    /// block changed nothing (``BlockSaveResult/nothingToSave``) or threw.
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
        completion: (@Sendable (Result<BlockSaveResult, StrataError>) -> Void)? = nil
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
    /// changes are on disk. Do not call it on the writer's queue.
    @discardableResult
    public func saveAndWait(_ block: (ManagedObjectContext) throws -> Void) throws(StrataError) -> BlockSaveResult {
        let context = newBackgroundContext(childOfWriter: true)
        return try context.performAndWait { () throws(StrataError) -> BlockSaveResult in
            try Self.runSaveBlock(block, in: context, writerSaves: writerSaves).get()
        }
    }

    private static func runSaveBlock(
        _ block: (ManagedObjectContext) throws -> Void, in context: ManagedObjectContext, writerSaves: WriterSaveGroups
    ) -> Result<BlockSaveResult, StrataError> {
        do {
            try block(context)
        } catch let error as StrataError {
            return .failure(error)
        } catch {
            return .failure(StrataError(.invalidArgument, "the save block threw: \(error)", cause: SendableDescription(error)))
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

/// An error's description, for wrapping a non-Sendable error as a cause.
struct SendableDescription: Error, Sendable, CustomStringConvertible {
    let description: String
    init(_ error: any Error) { description = "\(error)" }
}
