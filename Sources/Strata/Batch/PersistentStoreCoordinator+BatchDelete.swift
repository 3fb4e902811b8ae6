extension PersistentStoreCoordinator {
    /// Runs `request`: selects the objects as a fetch in a context of its
    /// own would (or takes the IDs given), then deletes them in batches of
    /// ``BatchDeleteRequest/batchSize``, each with what its delete rules
    /// reach and one atomic store save (see ``BatchDeleteRequest``). Each
    /// batch reads the stored values under the coordinator's save lock, so
    /// the rules apply to what every save before it stored; an object
    /// deleted since the selection is passed by. It writes to the store and
    /// waits for it: call it off the main queue.
    ///
    /// An ID of an object not stored (never saved, or deleted since) is
    /// passed by. Throws ``StrataError/Code/invalidArgument`` for an ID of
    /// another entity;
    /// ``StrataError/Code/validationFailed`` (with the
    /// ``StrataError/validationFailures``) when a deny or no-action rule
    /// refuses, or nullify would empty a required to-one relationship
    /// (that batch and the ones after it are not written).
    @discardableResult
    public func execute<Object: ManagedObject>(_ request: BatchDeleteRequest<Object>) throws(StrataError) -> BatchResult {
        let entity = try Self.entity(of: Object.self, in: model)
        let context = batchContext(named: "batch delete of \(entity.name)")
        let chosen: [ObjectID]
        if let ids = request.objectIDs {
            if let foreign = ids.first(where: { $0.entity !== entity }) {
                throw StrataError(.invalidArgument, "\(foreign) is not a \(entity.name): a batch delete takes the IDs of its entity's objects")
            }
            chosen = ids
        } else {
            chosen = try context.performAndWait { () throws(StrataError) -> [ObjectID] in
                try context.fetchObjectIDs(FetchRequest<Object>(predicate: request.predicate))
            }
        }
        let authors = TransactionAuthors(batchAuthor: request.author)
        let batchSize = max(request.batchSize, 1)
        var result = BatchResult()
        for start in stride(from: 0, to: chosen.count, by: batchSize) {
            let written = try writeBatch(from: context) { () throws(StrataError) -> ChangeSet in
                try BatchDeletion.changes(deleting: chosen[start..<min(start + batchSize, chosen.count)], at: self, authors: authors)
            }
            result.add(written)
            request.progress?(BatchProgress(completedCount: min(start + batchSize, chosen.count), totalCount: chosen.count, result: result))
        }
        result.historyToken = try currentHistoryToken()
        return result
    }
}
