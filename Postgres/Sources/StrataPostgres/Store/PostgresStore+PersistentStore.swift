@_spi(StoreImplementation) import Strata

/// The PostgreSQL store behind Strata's store seam: what the coordinator
/// asks, answered with the pieces above.
extension PostgresStore: PersistentStore {
    func snapshots(of ids: [ObjectID]) throws(StrataError) -> [StoredSnapshot?] {
        try rows(of: ids).map { $0.map { StoredSnapshot(values: $0.values, version: $0.version) } }
    }

    func forEachStored(
        of entity: EntityDescription, matching predicate: StorePredicate?, _ body: (ObjectID, StoredSnapshot) throws(StrataError) -> Bool
    ) throws(StrataError) -> Bool {
        let (rows, isExact) = try fetch(entity, matching: predicate)
        for (id, row) in rows {
            guard try body(id, StoredSnapshot(values: row.values, version: row.version)) else { break }
        }
        return isExact
    }

    func save(_ changes: StoreChanges) throws(StrataError) -> StoreSaveOutcome {
        var rows = RowChanges()
        rows.inserted = changes.inserted
        rows.updated = changes.updated.map {
            RowChanges.Update(id: $0.id, values: $0.values, expectedVersion: $0.expectedVersion, changedProperties: $0.changedProperties)
        }
        rows.deleted = changes.deleted.map { RowChanges.Delete(id: $0.id, expectedVersion: $0.expectedVersion) }
        rows.author = changes.author
        rows.contextName = changes.contextName
        switch try write(rows) {
        case .written: return .written
        case .conflicts(let ids): return .conflicts(ids)
        }
    }
}
