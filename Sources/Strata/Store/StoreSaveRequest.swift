/// What a coordinator's save asks of its store, once the coordinator has
/// decided it: conflicts resolved, uniqueness checked, versions numbered.
/// The store writes all of it or none (contract C11): the inserts at
/// version 1, each update at its version, the partial updates where they
/// change a stored value, the deletes, its own indexes, and — when it
/// records history — the transaction.
struct StoreSaveRequest {
    /// An object whose values the save writes.
    struct Update {
        var id: ObjectID
        var values: [PropertyValue]
        /// Its values and version at the store as the save found them
        /// (under the save lock): the store writes version + 1 and moves
        /// the index entries of the values it replaces.
        var stored: Snapshot
        /// The properties whose values changed (the history's).
        var changedProperties: PropertyIndexSet

        /// The version the save expects the store to hold: a store shared
        /// with other writers refuses the save when it holds another.
        var expectedVersion: UInt64 { stored.version }
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
    /// Attributes a batch request sets on stored objects whose values the
    /// coordinator did not read: the store applies them where they change
    /// a stored value and says which it changed (``StoreSaveResult``).
    var partialUpdates = PartialUpdates()
    /// Who saved, for the history.
    var author: String?
    var contextName: String?
}

/// Attributes a batch request sets on stored objects without reading them
/// first (a batch update of attributes no index holds; an upsert meeting
/// stored objects whose keys it settled itself): a store
/// applies each where the stored value differs, in place when it can, and
/// leaves an object that already holds them as it is — so a batch of
/// unchanged rows writes nothing.
struct PartialUpdates: Sendable {
    typealias Values = [(index: Int, value: PropertyValue)]

    /// The attributes set: one list for every object, or one per object.
    enum Settings: Sendable {
        case same(Values)
        case each([Values])
    }

    /// The objects, ascending by primary key (the store's records then go
    /// to its engine as one ascending run).
    var ids: [ObjectID] = []
    var settings = Settings.each([])
    /// Whether each object is known to be stored — found through the
    /// store's unique index under the save lock — so that one the store
    /// does not hold means the store is corrupt; otherwise (objects
    /// selected before the save lock was taken) it is passed by.
    var requiresStored = false

    init() {}

    init(_ ids: [ObjectID], _ settings: Settings, requiresStored: Bool) {
        self.ids = ids
        self.settings = settings
        self.requiresStored = requiresStored
    }

    /// The attributes the `i`-th object is given.
    func values(_ i: Int) -> Values {
        switch settings {
        case .same(let values): values
        case .each(let each): each[i]
        }
    }
}

/// What a store's save did beyond what the request said.
struct StoreSaveResult {
    /// An object a partial update changed.
    struct PartialUpdate {
        let id: ObjectID
        /// The properties whose values it changed.
        let changedProperties: PropertyIndexSet
        /// Its values and version as written, when the store read them
        /// (it had to: the update moves an index entry); nil when it
        /// patched the record without decoding it.
        let written: Snapshot?
    }

    /// The partial updates that changed an object, in the request's order.
    var partiallyUpdated: [PartialUpdate] = []
    /// Whether the save wrote any object (false: it wrote nothing at all).
    var wroteObjects = false
}
