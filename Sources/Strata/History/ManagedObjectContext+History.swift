extension ManagedObjectContext {
    /// Brings this context up to date with `transactions` as it would be
    /// by their saves' did-save notifications: registered objects they
    /// updated are refreshed (this context's unsaved changes stay on
    /// top), those they deleted leave it. Call it on the context's queue.
    ///
    /// ```swift
    /// let missed = try container.coordinator.fetchHistory(HistoryRequest(after: lastToken))
    /// container.viewContext.perform { container.viewContext.mergeChanges(fromHistory: missed) }
    /// ```
    ///
    /// The objects take the values the source holds now, not those of the
    /// transaction (history records which objects changed, not how).
    public func mergeChanges(fromHistory transactions: [HistoryTransaction]) {
        var all = ObjectChanges()
        for transaction in transactions {
            let changes = transaction.objectChanges
            all.inserted += changes.inserted
            all.updated += changes.updated
            all.deleted += changes.deleted
        }
        mergeChanges(fromContextDidSave: all)
    }
}
