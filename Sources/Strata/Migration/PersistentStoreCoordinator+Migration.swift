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
                    try currentStore().upgradeRecords(from: start, batchSize: batchSize)
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
