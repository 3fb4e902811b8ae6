import Foundation
internal import StrataStore

extension PersistentStoreCoordinator {
    /// Rewrites every record an older schema generation wrote as the
    /// current model writes it, `batchSize` records per atomic batch, and
    /// returns how many it rewrote. Reads never need it (old records are
    /// upgraded as they are read); it makes them as cheap as new ones and
    /// lets compaction drop the old bytes — ``compactStore()`` runs it first.
    ///
    /// Each batch is read and written under the save lock, so no save
    /// changes a record in between; saves wait at most one batch. The
    /// records keep their versions: contexts holding them see no change.
    /// `progress` gets the records rewritten so far after each batch.
    ///
    /// ```swift
    /// let rewritten = try coordinator.upgradeStoredRecords { done in print("\(done) records upgraded") }
    /// ```
    @discardableResult
    public func upgradeStoredRecords(batchSize: Int = 10_000, progress: ((Int) -> Void)? = nil) throws(StrataError) -> Int {
        guard batchSize > 0 else { throw StrataError(.invalidArgument, "batchSize must be positive, not \(batchSize)") }
        var total = 0
        for entity in model.entities {
            var start = RecordCoding.prefix(of: entity)
            while true {
                let (rewritten, next) = try saveLock.withLock { () throws(StrataError) -> (Int, [UInt8]?) in
                    guard let store = try currentStore() as? MigratedRecordStore else { return (0, nil) }
                    var batch = WriteBatch()
                    var count = 0, scanned = 0, next: [UInt8]?
                    var storedStart = start
                    store.schemas.translate(&storedStart, toStored: true)
                    let storedEnd = endOfPrefix(Array(storedStart.prefix(3)))
                    try store.base.forEachKey(in: [KeyRange(start: storedStart, end: storedEnd)]) { key, get throws(StrataError) -> Bool in
                        // Bounded in keys read as well as records written:
                        // a save waits for one batch, never for a whole entity.
                        scanned += 1
                        guard count < batchSize && scanned <= 4 * batchSize else {
                            var resume = Array(key)
                            store.schemas.translate(&resume, toStored: false)
                            next = resume
                            return false
                        }
                        let storedKey = Array(key)
                        guard let value = try get(storedKey), let upgraded = try store.schemas.upgraded(value, storedKey: key) else { return true }
                        batch.put(storedKey, upgraded)
                        count += 1
                        return true
                    }
                    if !batch.isEmpty { try store.base.write(batch) }
                    return (count, next)
                }
                total += rewritten
                if rewritten > 0 { progress?(total) }
                // `next` is where the batch stopped; nil when the entity is done.
                guard let next else { break }
                start = next
            }
        }
        return total
    }
}
