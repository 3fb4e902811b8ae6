extension PersistentStoreCoordinator {
    /// Runs `request`: checks every row against the model, then writes them
    /// in batches of ``BatchInsertRequest/batchSize``, each one atomic store
    /// save (see ``BatchInsertRequest``). Each batch looks its rows' unique
    /// values up under the coordinator's save lock, so a row meets what
    /// every save before it stored, earlier batches of the request
    /// included. It writes to the store and waits for it: call it off the
    /// main queue.
    ///
    /// Throws ``StrataError/Code/invalidArgument`` for a name that is not an
    /// attribute of the entity, or a value its type does not take, and
    /// ``StrataError/Code/validationFailed`` for a required attribute
    /// without a value (nothing is written then);
    /// ``StrataError/Code/constraintConflict`` when a row's values would
    /// give two objects the values of a uniqueness constraint (a row
    /// meeting one stored object on one constraint and another on a
    /// second; that batch and the ones after it are not written).
    @discardableResult
    public func execute<Object: ManagedObject>(_ request: BatchInsertRequest<Object>) throws(StrataError) -> BatchResult {
        let entity = try Self.entity(of: Object.self, in: model)
        let context = batchContext(named: "batch insert of \(entity.name)")
        let authors = TransactionAuthors(batchAuthor: request.author)
        var result = BatchResult()
        let written = { @Sendable [self] (batch: BatchInsertion) throws(StrataError) -> ObjectChanges in
            try writeBatch(from: context) { () throws(StrataError) -> ChangeSet in try batch.changes(at: self, authors: authors) }
        }
        func add(_ written: ObjectChanges, _ rows: Range<Int>, of total: Int) {
            result.add(written)
            request.progress?(BatchProgress(completedCount: rows.upperBound, totalCount: total, result: result))
        }
        if let (count, fill) = request.filled {
            // The closure is called in order on this thread (as documented),
            // filling batch i + 1 while a thread of the global queue makes
            // batch i into objects and writes it; each write is joined, and
            // its progress told, here.
            let scratch = Object(entity: entity, insertInto: nil)
            var writing: (rows: Range<Int>, job: BackgroundJob<Result<ObjectChanges, StrataError>>)?
            func joinWriting() throws(StrataError) {
                guard let (rows, job) = writing.take() else { return }
                add(try job.join().get(), rows, of: count)
            }
            let size = max(request.batchSize, 1)
            for start in stride(from: 0, to: count, by: size) {
                let rows = start..<min(start + size, count)
                var values: [[PropertyValue]] = []
                values.reserveCapacity(rows.count)
                do throws(StrataError) {
                    for row in rows {
                        scratch.values = entity.initialValues
                        fill(row, scratch)
                        try BatchValues.checkFilled(scratch.values, row: row, of: entity)
                        values.append(scratch.values)
                    }
                } catch {
                    // A batch that fails to fill stops the request once the
                    // one being written is (a failure of that one is the
                    // earlier, and the one thrown).
                    try joinWriting()
                    throw error
                }
                try joinWriting()
                writing = (rows, BackgroundJob { [values] in
                    do throws(StrataError) {
                        return .success(try written(BatchInsertion(entity: entity, filledRows: values)))
                    } catch {
                        return .failure(error)
                    }
                })
            }
            try joinWriting()
        } else {
            let objects = request.objects
            try BatchValues.checkInsert(objects, of: entity)
            let batches = BatchesAhead(total: objects.count, batchSize: request.batchSize) { rows in
                BatchInsertion(entity: entity, rows: objects[rows])
            }
            try batches.forEach { (rows, batch) throws(StrataError) in add(try written(batch), rows, of: objects.count) }
        }
        result.historyToken = try currentHistoryToken()
        return result
    }
}
