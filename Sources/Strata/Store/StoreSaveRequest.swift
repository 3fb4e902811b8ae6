internal import StrataStore

/// What a coordinator's save asks of its store, once the coordinator has
/// decided it: conflicts resolved, uniqueness checked, versions numbered.
/// The store writes all of it or none (contract C11): the inserts at
/// version 1, each update at its version, the deletes, its own indexes,
/// and — when it records history — the transaction.
struct StoreSaveRequest {
    /// An object whose values the save writes.
    struct Update {
        var id: ObjectID
        var values: [PropertyValue]
        /// The version written: one past the stored one.
        var version: UInt64
        /// The properties whose values changed, by index (the history's).
        var changedProperties: [Int]
        /// The values stored now, when the saver read them under the save
        /// lock (a batch request); nil: ``StoreSaveRequest/storedValues`` reads them.
        var storedValues: [PropertyValue]?
    }

    /// An object the save deletes, stored until now.
    struct Delete {
        var id: ObjectID
        /// As ``Update/storedValues``.
        var storedValues: [PropertyValue]?
    }

    var inserted: [ObjectID] = []
    var insertedValues: [[PropertyValue]] = []
    var updated: [Update] = []
    var deleted: [Delete] = []
    /// Updates a batch request patched in the stored records themselves
    /// (the log store's own form, changing no indexed value), with the
    /// properties each changed.
    var patched: [PatchedRecord] = []
    var patchedRecords = WriteBatch()
    /// Who saved, for the history.
    var author: String?
    var contextName: String?
    /// The key counters to record (each entity's next primary key), nil
    /// when the store holds them already.
    var keyCounters: [UInt64]?
    /// The values stored now of an object the save updates or deletes,
    /// through the coordinator's row cache; nil when it is not stored.
    var storedValues: (ObjectID) throws(StrataError) -> [PropertyValue]?

    init(storedValues: @escaping (ObjectID) throws(StrataError) -> [PropertyValue]?) {
        self.storedValues = storedValues
    }

    /// The values stored now of the object `update` writes.
    func stored(_ update: Update) throws(StrataError) -> [PropertyValue]? {
        if let stored = update.storedValues { return stored }
        return try storedValues(update.id)
    }

    /// The values stored now of the object `delete` removes.
    func stored(_ delete: Delete) throws(StrataError) -> [PropertyValue]? {
        if let stored = delete.storedValues { return stored }
        return try storedValues(delete.id)
    }

    /// Whether it writes no object.
    var changesNoObject: Bool { inserted.isEmpty && updated.isEmpty && deleted.isEmpty && patched.isEmpty }
}
