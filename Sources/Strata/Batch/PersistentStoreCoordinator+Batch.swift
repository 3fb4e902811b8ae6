import Foundation

extension PersistentStoreCoordinator {
    /// Runs `request`: selects the objects as a fetch in a context of its
    /// own would (through an index when the predicate allows), then writes
    /// their new values in batches of ``BatchUpdateRequest/batchSize``,
    /// each one atomic store save (see ``BatchUpdateRequest``). An object
    /// another save changed meanwhile keeps that save's other properties
    /// (the request's are merged over them, property by property); one
    /// deleted meanwhile is passed by. It writes to the store and waits
    /// for it: call it off the main queue.
    ///
    /// Throws ``StrataError/Code/invalidArgument`` for a name that is not an
    /// attribute of the entity, or a value its type does not take;
    /// ``StrataError/Code/validationFailed`` for nil in a required
    /// attribute; ``StrataError/Code/constraintConflict`` when the new
    /// values would give two objects the values of a uniqueness
    /// constraint (that batch and the ones after it are not written).
    @discardableResult
    public func execute<Object: ManagedObject>(_ request: BatchUpdateRequest<Object>) throws(StrataError) -> BatchResult {
        guard let entity = model.entity(for: Object.self) else {
            throw StrataError(.invalidArgument, "no single entity of the model has class \(Object.self)")
        }
        var updates: [(index: Int, value: PropertyValue)] = []
        for (name, value) in request.propertiesToUpdate.sorted(by: { $0.key < $1.key }) {
            guard let index = entity.indexOfProperty(name), case .attribute = entity.properties[index] else {
                throw StrataError(.invalidArgument, "\(entity.name) has no attribute \(name) (a batch update sets attributes, not relationships)")
            }
            if case .null = value, entity.requiredIndices.contains(index) {
                throw StrataError(.validationFailed, "\(entity.name).\(name) is required: a batch update cannot set it to nil")
            }
            guard entity.accepts(value, at: index) else {
                throw StrataError(.invalidArgument, "\(entity.name).\(name) does not take \(value)")
            }
            updates.append((index, value))
        }
        // The selection: a context of the request's own, attached here.
        let context = ManagedObjectContext(.privateQueue, coordinator: self, name: "batch update of \(entity.name)")
        let selected = try context.performAndWait { () throws(StrataError) -> [ObjectID] in
            try context.fetchObjectIDs(FetchRequest<Object>(predicate: request.predicate))
        }
        var result = BatchResult()
        var authors = TransactionAuthors()
        if let author = request.author { authors.names = [author] } else { authors.unnamed = true }
        let batchSize = max(request.batchSize, 1)
        for start in stride(from: 0, to: selected.count, by: batchSize) {
            var changes = ChangeSet()
            // Over a save that came in between the selection and this write:
            // the request's properties win, the others stay.
            changes.mergePolicy = .mergeByPropertyObjectTrump
            changes.authors = authors
            for id in selected[start..<min(start + batchSize, selected.count)] {
                guard let stored = try snapshot(for: id) else { continue }
                var values = stored.values
                for (index, value) in updates { values[index] = value }
                guard values != stored.values else { continue }
                changes.updated.append(id)
                changes.updatedValues.append(values)
                changes.updatedBase.append(stored.values)
                changes.updatedVersions.append(stored.version)
            }
            guard !changes.updated.isEmpty else { continue }
            let outcome = try save(changes, from: context)
            // (Object trump writes every update but those deleted meanwhile.)
            var written = ObjectChanges()
            for (i, id) in changes.updated.enumerated() where !outcome.droppedUpdates.contains(i) { written.updated.append(id) }
            result.objectIDs += written.updated
            // The save merged it into the attached contexts that merge; their
            // children that merge, and those of the ones that do not (the
            // writer of the ready-made stack), merge it too, as after another
            // process's save.
            for root in liveRootContexts where root !== context {
                Self.mergeRemote(written, into: root, includingItself: false)
            }
        }
        result.historyToken = try currentHistoryToken()
        return result
    }
}
