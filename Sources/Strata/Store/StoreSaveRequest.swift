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
        /// Its values and version at the store as the save found them
        /// (under the save lock): the store writes version + 1 and moves
        /// the index entries of the values it replaces.
        var stored: Snapshot
        /// The properties whose values changed, by index (the history's).
        var changedProperties: [Int]

        /// The version written.
        var version: UInt64 { stored.version + 1 }
    }

    /// An object the save deletes.
    struct Delete {
        var id: ObjectID
        /// As ``Update/stored``.
        var stored: Snapshot
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
    /// Whether it writes no object.
    var changesNoObject: Bool { inserted.isEmpty && updated.isEmpty && deleted.isEmpty && patched.isEmpty }
}
