extension PersistentStoreCoordinator {
    /// Runs `request`: checks every row against the model, then writes them
    /// in batches of ``BatchInsertRequest/batchSize``, each one atomic store
    /// save (see ``BatchInsertRequest``). Each batch meets the holders of
    /// its rows' unique values as the store holds them under the
    /// coordinator's save lock, so a row meets what every save before it
    /// stored, earlier batches of the request included. (It looks them up
    /// as it is built, ahead of its write, and under the lock again those
    /// a write since may have given another holder.) It writes to the
    /// store and waits for it: call it off the main queue.
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
        func add(_ written: ObjectChanges, _ rows: Range<Int>, of total: Int) {
            result.add(written)
            request.progress?(BatchProgress(completedCount: rows.upperBound, totalCount: total, result: result))
        }
        if let (count, fill) = request.filled {
            // The closure is called in order on this thread (as documented),
            // filling batch i + 1, and the batch is made into objects and
            // its keys looked up, while a thread of the global queue writes
            // batch i; each write is joined, and its progress told, here.
            let scratch = Object(entity: entity, insertInto: nil)
            typealias Written = (changes: ObjectChanges, keys: WrittenUniqueKeys?)
            var writing: (rows: Range<Int>, job: BackgroundJob<Result<Written, StrataError>>)?
            var previous: WrittenUniqueKeys?
            func joinWriting() throws(StrataError) {
                guard let (rows, job) = writing.take() else { return }
                let written = try job.join().get()
                previous = written.keys
                add(written.changes, rows, of: count)
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
                var batch = BatchInsertion(entity: entity, filledRows: values)
                values = []
                batch.lookUpHoldersAhead(at: self)
                try joinWriting()
                writing = (rows, BackgroundJob { [self, batch, previous] in
                    do throws(StrataError) {
                        var keys = previous
                        let changes = try writeInsertion(batch, from: context, authors: authors, after: &keys)
                        return .success((changes, keys))
                    } catch {
                        return .failure(error)
                    }
                })
            }
            try joinWriting()
        } else {
            let objects = request.objects
            try BatchValues.checkInsert(objects, of: entity)
            // Each batch looks its keys up as it is built, ahead of its write.
            let batches = BatchesAhead(total: objects.count, batchSize: request.batchSize) { [self] rows in
                var batch = BatchInsertion(entity: entity, rows: objects[rows])
                batch.lookUpHoldersAhead(at: self)
                return batch
            }
            var previous: WrittenUniqueKeys?
            try batches.forEach { (rows, batch) throws(StrataError) in
                add(try writeInsertion(batch, from: context, authors: authors, after: &previous), rows, of: objects.count)
            }
        }
        result.historyToken = try currentHistoryToken()
        return result
    }

    /// Writes one batch of a batch insert from `context` (the request's).
    /// `previous` is what the request's batch before it wrote, and becomes
    /// what this one wrote: the next batch's answer looked up ahead is
    /// checked against it.
    func writeInsertion(
        _ batch: BatchInsertion, from context: ManagedObjectContext, authors: TransactionAuthors, after previous: inout WrittenUniqueKeys?
    ) throws(StrataError) -> ObjectChanges {
        var before: StoreReadVersion?
        let earlier = previous
        previous = nil
        return try writeBatch(from: context) { () throws(StrataError) -> ChangeSet in
            let now = try storeReadVersion()
            before = now
            return try batch.changes(at: self, authors: authors, now: now, after: earlier)
        } written: {
            if let before, let after = try? storeReadVersion() {
                previous = WrittenUniqueKeys(sortedKeys: batch.sortedKeys, before: before, after: after)
            }
        }
    }
}
