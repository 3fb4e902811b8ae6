import Foundation

extension PersistentStoreCoordinator {
    /// Runs `request`: selects the objects as a fetch in a context of its
    /// own would (through an index when the predicate allows), then writes
    /// their new values in batches of ``BatchUpdateRequest/batchSize``,
    /// each one atomic store save (see ``BatchUpdateRequest``). Each batch
    /// reads the objects' stored values under the coordinator's save lock,
    /// so a save that came in since the selection keeps its other
    /// properties; an object deleted since is passed by. It writes to the
    /// store and waits for it: call it off the main queue.
    ///
    /// Throws ``StrataError/Code/invalidArgument`` for a name that is not an
    /// attribute of the entity, or a value its type does not take;
    /// ``StrataError/Code/validationFailed`` for nil in a required
    /// attribute; ``StrataError/Code/constraintConflict`` when the new
    /// values would give two objects the values of a uniqueness
    /// constraint (that batch and the ones after it are not written).
    @discardableResult
    public func execute<Object: ManagedObject>(_ request: BatchUpdateRequest<Object>) throws(StrataError) -> BatchResult {
        let entity = try Self.entity(of: Object.self, in: model)
        var updates: [(index: Int, value: PropertyValue)] = []
        for (name, value) in request.propertiesToUpdate.sorted(by: { $0.key < $1.key }) {
            updates.append((try BatchValues.attribute(name, value, of: entity, request: "a batch update"), value))
            if case .null = value, entity.requiredIndices.contains(updates.last!.index) {
                throw StrataError(.validationFailed, "\(entity.name).\(name) is required: a batch update cannot set it to nil")
            }
        }
        // Values of no unique index change: no key to look up again.
        let keysUnchanged = entity.uniqueIndexNumbers.allSatisfy { index in
            !entity.indexedProperties[index].contains { property in updates.contains { $0.index == property } }
        }
        let context = batchContext(named: "batch update of \(entity.name)")
        let selected = try context.performAndWait { () throws(StrataError) -> [ObjectID] in
            try context.fetchObjectIDs(FetchRequest<Object>(predicate: request.predicate))
        }
        var result = BatchResult()
        let authors = TransactionAuthors(batchAuthor: request.author)
        let batchSize = max(request.batchSize, 1)
        for start in stride(from: 0, to: selected.count, by: batchSize) {
            let written = try writeBatch(from: context, uniquenessChecked: keysUnchanged) { () throws(StrataError) -> ChangeSet in
                var changes = ChangeSet()
                changes.authors = authors
                let ids = Array(selected[start..<min(start + batchSize, selected.count)])
                for (id, stored) in zip(ids, try storedSnapshots(ids)) {
                    guard let stored else { continue }
                    var values = stored.values
                    for (index, value) in updates { values[index] = value }
                    if values != stored.values { changes.update(id, from: stored, to: values) }
                }
                changes.basesAreStored = true
                return changes
            }
            result.add(written)
            request.progress?(BatchProgress(completedCount: min(start + batchSize, selected.count), totalCount: selected.count, result: result))
        }
        result.historyToken = try currentHistoryToken()
        return result
    }

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
    /// the write — and returns the changes (none: nothing is written).
    /// Then every context that merges is told, as after a save here: the
    /// attached ones that merge automatically merge the save's payload;
    /// their children that merge, and the children of those that do not
    /// (the writer of the ready-made stack), merge it as they would
    /// another process's save. Returns what was written.
    /// `uniquenessChecked`: the changes `build` makes need no uniqueness
    /// check (``write(_:from:uniquenessChecked:)``).
    func writeBatch(
        from context: ManagedObjectContext, uniquenessChecked: Bool = false, _ build: () throws(StrataError) -> ChangeSet
    ) throws(StrataError) -> ObjectChanges {
        let payload = try saveLock.withLock { () throws(StrataError) -> ObjectChanges? in
            let changes = try build()
            guard !changes.inserted.isEmpty || !changes.updated.isEmpty || !changes.deleted.isEmpty else { return nil }
            return try write(changes, from: context, uniquenessChecked: uniquenessChecked).1
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
