import Foundation
@_spi(Coding) internal import StrataStore

extension PersistentStoreCoordinator {
    /// The one entity of the model whose class is `type`.
    static func entity(of type: ManagedObject.Type, in model: ManagedObjectModel) throws(StrataError) -> EntityDescription {
        guard let entity = model.entity(for: type) else {
            throw StrataError(.invalidArgument, "no single entity of the model has class \(type)")
        }
        return entity
    }

    /// A context of a batch request's own, attached here: the saving
    /// context its history records (by `name`), and the one a selection
    /// by predicate fetches in.
    func batchContext(named name: String) -> ManagedObjectContext {
        ManagedObjectContext(.privateQueue, coordinator: self, name: name)
    }

    /// Writes one atomic batch of a batch request. `build` runs under the
    /// save lock — no save comes in between what it reads of the store and
    /// the write — and returns the changes (none, or none the store finds
    /// to make: nothing is written and no context told).
    /// Then every context that merges is told, as after a save here: the
    /// attached ones that merge automatically merge the save's payload;
    /// their children that merge, and the children of those that do not
    /// (the writer of the ready-made stack), merge it as they would
    /// another process's save. `written` runs under the save lock too,
    /// once the write is done or found nothing to write (not after a
    /// failure). Returns what was written.
    func writeBatch(
        from context: ManagedObjectContext, _ build: () throws(StrataError) -> ChangeSet, written: () -> Void = {}
    ) throws(StrataError) -> ObjectChanges {
        let payload = try saveLock.withLock { () throws(StrataError) -> ObjectChanges? in
            let changes = try build()
            guard !changes.isEmpty else {
                written()
                return nil
            }
            // (Batch requests are the log store's: no other process races them.)
            guard case .success(let (_, payload)) = try write(changes, from: context) else {
                throw StrataError(.mergeConflict, "another process saved objects this batch read: nothing was saved; run it again")
            }
            written()
            // Partial updates that found every value in place: nothing written.
            return payload.isEmpty ? nil : payload
        }
        guard let payload else { return ObjectChanges() }
        let roots = liveRootContexts.filter { $0 !== context }
        for listener in roots where listener.automaticallyMergesChangesFromParent {
            listener.perform { listener.mergeChanges(fromContextDidSave: payload) }
        }
        let written = ObjectChanges(inserted: payload.inserted, updated: payload.updated, deleted: payload.deleted)
        for root in roots { Self.mergeRemote(written, into: root, includingItself: false) }
        return written
    }
}

extension TransactionAuthors {
    /// A batch request's authors: its ``BatchUpdateRequest/author`` (or
    /// the like), else unnamed.
    init(batchAuthor author: String?) {
        self.init()
        if let author { names = [author] } else { unnamed = true }
    }
}
