@_spi(StoreImplementation) import Strata

/// The PostgreSQL store behind Strata's store seam: keys, snapshots, the
/// narrowed scan and holders are its own methods; a save is ``write(_:)``.
extension PostgresStore: PersistentStore {
    /// Each uniqueness constraint of the model is the table's own `UNIQUE`
    /// constraint, checked at the commit (``StoreSchema``): a duplicate
    /// fails the save's transaction, whoever committed the value first.
    var refusesDuplicateUniqueValues: Bool { true }

    func save(_ changes: StoreChanges) throws(StrataError) -> StoreSaveOutcome {
        switch try write(changes) {
        case .written(let saveIdentifier): .written(saveIdentifier: saveIdentifier)
        case .conflicts(let ids): .conflicts(ids)
        }
    }

    /// The page statement of a scan, or of a read in `order`, as `explain`
    /// shows it (nil for an order PostgreSQL does not give as Swift does).
    func statement(
        of entity: EntityDescription, matching predicate: StorePredicate?, orderedBy order: [StoreSortKey]?
    ) throws(StrataError) -> String? {
        guard let order else { return try explain(entity, matching: predicate) }
        return try explain(entity, matching: predicate, orderedBy: order)
    }

    /// Follows the history every process's saves write (when this store
    /// records it), from `after` or the newest transaction now, through a
    /// ``PostgresChangeFollower`` of its own connection.
    func followTransactions(
        after: UInt64?, deliver: @escaping @Sendable ([StoreTransaction]) -> Void,
        passOver: @escaping @Sendable ([UInt64]) -> Bool, onError: @escaping @Sendable (StrataError) -> Void
    ) throws(StrataError) -> (any StoreTransactionFollowing)? {
        guard recordsHistory else { return nil }
        let start: UInt64
        if let after { start = after } else { start = try latestTransactionNumber() }
        let model = model
        return PostgresChangeFollower(self, pool.configuration, after: start, deliver: { stored in
            deliver(stored.map { $0.storeTransaction(in: model) })
        }, passOver: passOver, onError: onError)
    }
}

extension PostgresChangeFollower: StoreTransactionFollowing {}

extension PostgresStore {
    /// The history every save writes, read and pruned through Strata's
    /// history API; nil when this store records none.
    var history: (any StoreHistory)? { recordsHistory ? PostgresStoreHistory(store: self) : nil }
}

extension StoredTransaction {
    /// The transaction with its objects' IDs, those of entities `model`
    /// lacks left out (another model version's, written by another process).
    func storeTransaction(in model: ManagedObjectModel) -> StoreTransaction {
        var transaction = StoreTransaction(number: number, saveIdentifier: saveIdentifier)
        for change in changes {
            guard let entity = model.entity(named: change.entity) else { continue }
            let id = ObjectID(entity: entity, storedPrimaryKey: change.key)
            switch change.kind {
            case .insert: transaction.inserted.append(id)
            case .update: transaction.updated.append(id)
            case .delete: transaction.deleted.append(id)
            }
        }
        return transaction
    }
}
