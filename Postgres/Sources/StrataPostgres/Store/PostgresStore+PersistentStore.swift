@_spi(StoreImplementation) import Strata

/// The PostgreSQL store behind Strata's store seam: keys, snapshots, the
/// narrowed scan and holders are its own methods; a save is ``write(_:)``
/// without the history number.
extension PostgresStore: PersistentStore {
    func save(_ changes: StoreChanges) throws(StrataError) -> StoreSaveOutcome {
        switch try write(changes) {
        case .written: .written
        case .conflicts(let ids): .conflicts(ids)
        }
    }
}
