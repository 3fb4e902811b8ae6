import Foundation
internal import StrataStore

extension LogObjectStore {
    /// Writes `request` as ONE atomic batch (contract C11): the records,
    /// their index entries, the history's transaction and what pruning lets
    /// go of, and the key counters when keys were handed out since they were
    /// last recorded. Called under the coordinator's
    /// `saveLock`. Nothing is written if it throws, or if the save changes
    /// no object (partial updates that find every value in place).
    func save(_ request: StoreSaveRequest) throws(StrataError) -> StoreSaveResult {
        let generation = schemas.current
        var batch = WriteBatch()
        var indexEntries = IndexMaintenance()
        var result = StoreSaveResult()
        // First, as the records they read lie: their patched records go
        // to the engine as an ascending run of their own.
        if !request.partialUpdates.ids.isEmpty {
            result.partiallyUpdated = try applyPartialUpdates(
                request.partialUpdates, generation: generation, into: &batch, indexEntries: &indexEntries)
        }
        result.wroteObjects = !request.inserted.isEmpty || !request.updated.isEmpty || !request.deleted.isEmpty
            || !result.partiallyUpdated.isEmpty
        guard result.wroteObjects else { return result }
        // Yield points under `saveLock`: only saves to the coordinator
        // take it — in the recommended stack, the writer's alone — and a
        // reader never does, so a yield here keeps no read waiting.
        var yields = YieldPoints()
        // In key order (a context's change set is in it already; one made
        // otherwise is sorted): the engine's index then takes an import's
        // keys as appends at its right edge, not as descents to random places.
        for i in KeyOrder.positions(of: request.inserted) {
            yields.pass()
            let id = request.inserted[i]
            RecordCoding.put(id, request.insertedValues[i], version: 1, generation: generation, into: &batch)
            if !id.entity.indexes.isEmpty { indexEntries.insert(request.insertedValues[i], of: id) }
        }
        for update in request.updated {
            yields.pass()
            RecordCoding.put(update.id, update.values, version: update.version, generation: generation, into: &batch)
            if !update.id.entity.indexes.isEmpty {
                indexEntries.update(from: update.stored.values, to: update.values, of: update.id)
            }
        }
        let recordsHistory = self.recordsHistory
        // The values a delete's history keeps, by position among the deletes.
        var tombstones: [(delete: Int, values: [(index: Int, value: PropertyValue)])] = []
        for (i, delete) in request.deleted.enumerated() {
            batch.delete(RecordCoding.key(delete.id))
            let stored = delete.stored.values
            if !delete.id.entity.indexes.isEmpty { indexEntries.delete(stored, of: delete.id) }
            if recordsHistory, case let kept = delete.id.entity.tombstoneIndices, !kept.isEmpty {
                tombstones.append((i, kept.map { ($0, stored[$0]) }))
            }
        }
        indexEntries.write(into: &batch)
        let history = recordsHistory
            ? try recordTransaction(of: request, partiallyUpdated: result.partiallyUpdated, tombstones: tombstones, into: &batch) : nil
        // Every key this save's objects hold was handed out before it began.
        let keys = keysToRecord()
        if let keys { batch.put(RecordCoding.keysKey, RecordCoding.keysRecord(keys)) }
        if !batch.isEmpty {
            // Marked before the write can be seen, settled after, written or not.
            indexKeyWrites.willWrite(keyCount: indexEntries.touchedKeyCount) { indexEntries.touchedKeyHashes }
            defer { indexKeyWrites.didWrite(visibleAt: records.readVersion) }
            try records.write(batch)
        }
        if let keys { recorded(keys) }
        if let history { recordedTransaction(history) }
        return result
    }

    // MARK: History

    /// Puts the transaction `request` makes (its partial updates as
    /// `partiallyUpdated` says they went) into its `batch`, with the
    /// removal of what pruning lets go of now; nil (and nothing put) when
    /// history is off.
    private func recordTransaction(
        of request: StoreSaveRequest, partiallyUpdated: [StoreSaveResult.PartialUpdate],
        tombstones: [(delete: Int, values: [(index: Int, value: PropertyValue)])], into batch: inout WriteBatch
    ) throws(StrataError) -> HistoryState? {
        guard var state = withHistoryState({ $0 }), state.settings.isEnabled else { return nil }
        let now = Date()
        let number = state.next
        var updated = request.updated.map { ($0.id, $0.changedProperties) }
        for partial in partiallyUpdated { updated.append((partial.id, partial.changedProperties)) }
        batch.put(HistoryCoding.key(number), HistoryCoding.encode(HistoryCoding.Written(
            timestamp: now, author: request.author, contextName: request.contextName,
            inserted: request.inserted, updated: updated, deleted: request.deleted.map(\.id), tombstones: tombstones)))
        state.next = number + 1
        if state.oldestTimestamp == nil { state.oldestTimestamp = now }
        // A transaction that cannot be read stops pruning by age there
        // (`strata-dump verify` reports it); it never fails the save.
        if let pruning = state.pruning(newest: number, now: now, timestamps: { n in
            (try? records.get(HistoryCoding.key(n)))?.flatMap(HistoryCoding.timestamp(of:))
        }) {
            for n in pruning { batch.delete(HistoryCoding.key(n)) }
            state.pruned = max(state.pruned, pruning.upperBound)
            batch.put(HistoryCoding.prunedKey, HistoryCoding.numberValue(state.pruned))
            state.oldest = pruning.upperBound + 1
            // Read once the batch is in (``recordedTransaction(_:)``).
            state.oldestTimestamp = nil
        }
        return state
    }

    /// After the batch of ``recordTransaction(of:partiallyUpdated:tombstones:into:)`` is in the store.
    private func recordedTransaction(_ state: HistoryState) {
        var state = state
        if state.oldestTimestamp == nil {
            state.oldestTimestamp = (try? records.get(HistoryCoding.key(state.oldest)))?.flatMap(HistoryCoding.timestamp(of:))
        }
        withHistoryState { $0 = state }
    }
}
