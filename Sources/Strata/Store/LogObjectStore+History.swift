import Foundation
internal import StrataStore

/// The store's persistent history outside a save: what the coordinator's
/// history API reads and writes (``PersistentStoreCoordinator/fetchHistoryPage(_:)``
/// and the rest); the coordinator checks tokens and filters.
extension LogObjectStore {
    /// Calls `body` with each transaction numbered `start` or later, oldest
    /// first — nil for one that does not decode — until it returns false.
    func forEachHistoryTransaction(
        from start: UInt64, _ body: (UInt64, HistoryTransaction?) throws(StrataError) -> Bool
    ) throws(StrataError) {
        let model = self.model
        let identifier = self.identifier
        try records.forEachKey(in: HistoryCoding.ranges(from: start), descending: false) { key, get throws(StrataError) -> Bool in
            guard let number = HistoryCoding.number(fromKey: key), let record = try get(Array(key)) else { return true }
            return try body(number, record.withUnsafeBytes { HistoryCoding.decode($0, number: number, store: identifier, model: model) })
        }
    }

    /// The newest transaction kept (nil: none), and every one up to
    /// `pruned` was removed (0: none was).
    func historyBounds() throws(StrataError) -> (newest: UInt64?, pruned: UInt64) {
        (try HistoryCoding.transactionNumber(in: records, newest: true), try historyPruned())
    }

    /// Every transaction up to this one was removed (0: none was).
    func historyPruned() throws(StrataError) -> UInt64 {
        try HistoryCoding.pruned(in: records)
    }

    /// The transaction the consumer `name` has read up to; nil without a cursor.
    func historyCursor(_ name: String) throws(StrataError) -> UInt64? {
        try records.get(HistoryCoding.cursorKey(name)).flatMap(HistoryCoding.number(fromValue:))
    }

    /// Records (or, for nil, removes) the consumer `name`'s cursor, durably.
    /// Under the coordinator's `saveLock`.
    func setHistoryCursor(_ name: String, to number: UInt64?) throws(StrataError) {
        var batch = WriteBatch()
        if let number { batch.put(HistoryCoding.cursorKey(name), HistoryCoding.numberValue(number)) } else { batch.delete(HistoryCoding.cursorKey(name)) }
        try records.write(batch)
        withHistoryState { $0?.cursors[name] = number }
    }

    /// Removes the transactions from the oldest kept through `number`, at
    /// most ``HistoryState/deleteBatch`` of them, never the newest (it
    /// numbers the next); how many it removed, 0 when none is left to.
    /// Under the coordinator's `saveLock`.
    func pruneHistoryStep(through number: UInt64) throws(StrataError) -> Int {
        guard let state = withHistoryState({ $0 }), state.oldest < state.next - 1 else { return 0 }
        let through = min(number, state.next - 2, state.oldest + UInt64(HistoryState.deleteBatch) - 1)
        guard through >= state.oldest else { return 0 }
        var batch = WriteBatch()
        for n in state.oldest...through { batch.delete(HistoryCoding.key(n)) }
        batch.put(HistoryCoding.prunedKey, HistoryCoding.numberValue(max(state.pruned, through)))
        try records.write(batch)
        // (Written already: a record that cannot be read leaves the age unknown, no more.)
        let timestamp = (try? records.get(HistoryCoding.key(through + 1)))?.flatMap(HistoryCoding.timestamp(of:))
        withHistoryState {
            $0?.pruned = max(state.pruned, through)
            $0?.oldest = through + 1
            $0?.oldestTimestamp = timestamp
        }
        return Int(through - state.oldest + 1)
    }

    /// How much history the store keeps.
    func historySummary() throws(StrataError) -> HistorySummary {
        var summary = try HistoryCoding.summarize { (prefix, body) throws(StrataError) in
            try records.forEachWhile(prefix: prefix) { key, value throws(StrataError) -> Bool in
                body(key, value)
                return true
            }
        }
        summary.isEnabled = recordsHistory
        return summary
    }
}
