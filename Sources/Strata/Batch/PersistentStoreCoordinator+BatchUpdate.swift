@_spi(Coding) internal import StrataStore

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
        let context = batchContext(named: "batch update of \(entity.name)")
        var selected = try context.performAndWait { () throws(StrataError) -> [ObjectID] in
            try context.fetchObjectIDs(FetchRequest<Object>(predicate: request.predicate))
        }
        var result = BatchResult()
        let authors = TransactionAuthors(batchAuthor: request.author)
        let batchSize = max(request.batchSize, 1)
        // Attributes no index holds: the records are patched where they lie.
        let indexed = Set(entity.indexedProperties.joined())
        let inPlace = updates.allSatisfy { !indexed.contains($0.index) }
        if inPlace { selected.sort { $0.primaryKey < $1.primaryKey } }
        let uniquenessChecked = updatesNoUniqueKey(updates, of: entity)
        for start in stride(from: 0, to: selected.count, by: batchSize) {
            let ids = Array(selected[start..<min(start + batchSize, selected.count)])
            let written = try writeBatch(from: context) { () throws(StrataError) -> ChangeSet in
                var changes = inPlace ? patching(ids, setting: updates) : try updating(ids, setting: updates)
                changes.authors = authors
                changes.uniquenessChecked = uniquenessChecked
                return changes
            }
            result.add(written)
            request.progress?(BatchProgress(completedCount: min(start + batchSize, selected.count), totalCount: selected.count, result: result))
        }
        result.historyToken = try currentHistoryToken()
        return result
    }

    /// Whether `updates` set no value of a unique index: no key to look up again.
    private func updatesNoUniqueKey(_ updates: [(index: Int, value: PropertyValue)], of entity: EntityDescription) -> Bool {
        entity.uniqueIndexNumbers.allSatisfy { index in
            !entity.indexedProperties[index].contains { property in updates.contains { $0.index == property } }
        }
    }

    /// The changes setting `updates` on `ids`, from their stored values
    /// (read under the save lock; an object gone is passed by, one that
    /// holds the values already is left out).
    private func updating(_ ids: [ObjectID], setting updates: [(index: Int, value: PropertyValue)]) throws(StrataError) -> ChangeSet {
        var changes = ChangeSet()
        for (id, stored) in zip(ids, try storedSnapshots(ids)) {
            guard let stored else { continue }
            var values = stored.values
            for (index, value) in updates { values[index] = value }
            if values != stored.values { changes.update(id, from: stored, to: values) }
        }
        changes.basesAreStored = true
        return changes
    }

    /// The changes setting `updates` on the stored objects `ids`
    /// (ascending), as partial updates the store applies under the save
    /// lock: no record decoded, the row cache letting go of those written,
    /// and the save's payload carrying no values, so a context that merges
    /// it reads those of the objects it holds. An object gone is passed by;
    /// one that holds the values already is left out.
    private func patching(_ ids: [ObjectID], setting updates: [(index: Int, value: PropertyValue)]) -> ChangeSet {
        var changes = ChangeSet()
        changes.partialUpdates = PartialUpdates(ids, .same(updates), requiresStored: false)
        return changes
    }
}
