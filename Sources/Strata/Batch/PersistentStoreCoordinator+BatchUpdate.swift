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
        let patch = updates.allSatisfy { !indexed.contains($0.index) } ? RecordCoding.RecordPatch(updates) : nil
        if patch != nil { selected.sort { $0.primaryKey < $1.primaryKey } }
        for start in stride(from: 0, to: selected.count, by: batchSize) {
            let ids = Array(selected[start..<min(start + batchSize, selected.count)])
            let written = if let patch {
                try writeBatch(from: context) { () throws(StrataError) -> ObjectChanges? in
                    try writePatches(patch, to: ids, from: context, authors: authors)
                }
            } else {
                try writeBatch(from: context, uniquenessChecked: updatesNoUniqueKey(updates, of: entity)) { () throws(StrataError) -> ChangeSet in
                    try updating(ids, setting: updates, authors: authors)
                }
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
    private func updating(
        _ ids: [ObjectID], setting updates: [(index: Int, value: PropertyValue)], authors: TransactionAuthors
    ) throws(StrataError) -> ChangeSet {
        var changes = ChangeSet()
        changes.authors = authors
        for (id, stored) in zip(ids, try storedSnapshots(ids)) {
            guard let stored else { continue }
            var values = stored.values
            for (index, value) in updates { values[index] = value }
            if values != stored.values { changes.update(id, from: stored, to: values) }
        }
        changes.basesAreStored = true
        return changes
    }

    /// Under the save lock: applies `patch` to the stored record of each of
    /// `ids` (ascending) that it changes, as one atomic store write with its
    /// history, and returns the save's payload (nil: nothing changed). An
    /// object gone is passed by; one that holds the values already is not
    /// written. No record is decoded: the row cache lets go of the objects
    /// written, and the payload carries no values, so a context that merges
    /// it reads those of the objects it holds.
    private func writePatches(
        _ patch: RecordCoding.RecordPatch, to ids: [ObjectID], from context: ManagedObjectContext, authors: TransactionAuthors
    ) throws(StrataError) -> ObjectChanges? {
        let store = try currentStore()
        let generation = schemaGeneration
        let recordsHistory = withHistoryState { $0?.settings.isEnabled ?? false }
        var patch = patch
        var batch = WriteBatch()
        var written: [ObjectID] = []
        var historyUpdates: [(ObjectID, [Int])] = []
        var yields = YieldPoints()
        for id in ids {
            yields.pass()
            recordsRead.add(1, ordering: .relaxed)
            guard let record = try store.get(RecordCoding.key(id)) else { continue }
            try record.withBytes { (raw) throws(StrataError) in
                guard patch.read(raw, entity: id.entity) else { throw RecordCoding.undecodable(id, format: record.first) }
                let changed = patch.changedProperties(in: raw)
                guard !changed.isEmpty else { return }
                batch.put(RecordCoding.KeyBytes(id), patch.patched(raw, generation: generation))
                written.append(id)
                if recordsHistory { historyUpdates.append((id, changed)) }
            }
        }
        guard !written.isEmpty else { return nil }
        var changes = ChangeSet()
        changes.authors = authors
        let history = try recordTransaction(of: changes, updated: historyUpdates, deleted: [], tombstones: [], from: context, store: store, into: &batch)
        try commit(&batch, history: history, to: store, changing: written)
        forgetCachedRows(written)
        var payload = ObjectChanges(updated: written)
        payload.sourceSerial = context.serial
        return payload
    }
}
