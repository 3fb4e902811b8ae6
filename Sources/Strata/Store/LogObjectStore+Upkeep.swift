internal import StrataStore

/// Keeping the log store lean: records an older schema generation wrote,
/// upgraded in place; the log compacted; the engine's counters.
extension LogObjectStore {
    /// Rewrites, as the current model writes them, at most `batchSize`
    /// records an older schema generation wrote, from the record key
    /// `start` (an entity's prefix, or where the last call stopped) to the
    /// end of that entity's records, in one atomic batch. Returns how many
    /// it rewrote and where to go on (nil: the entity is done). Under the
    /// coordinator's `saveLock`: no save changes a record in between.
    func upgradeRecords(from start: [UInt8], batchSize: Int) throws(StrataError) -> (rewritten: Int, next: [UInt8]?) {
        guard let store = records as? MigratedRecordStore else { return (0, nil) }
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

    /// Writes the log out to segments and reclaims the space of dead
    /// records (nothing to do in memory).
    func compact() throws(StrataError) {
        try records.compact()
    }

    /// The storage engine's counters (nil in memory).
    var statistics: StoreStatistics? { records.statistics }
}
