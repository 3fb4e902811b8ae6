/// What a context reads as its source, taken on the context's own queue
/// without entering any other context: each ancestor's unsaved changes,
/// nearest first, over the store (SEMANTICS.md line 13).
///
/// Reading in that order, and the store last, misses nothing that is on
/// its way down to disk meanwhile: changes only move *towards* the store
/// (a child's save into its parent, a parent's save into the store), and
/// each level publishes what it took in before the level above drops it
/// (see ``PendingChangesPublication``). A change caught in flight is seen
/// at its older level or at its newer one, and the nearest wins.
///
/// What an ancestor contributes is O(its pending changes), never O(the
/// entity): a parent's unchanged objects are read from the store, not
/// materialized in the parent.
struct SourceView {
    /// One ancestor's contribution.
    struct Layer {
        let published: PublishedChanges
        /// Child saves the ancestor has yet to take in: new objects only,
        /// newer than anything published.
        let deferred: [DeferredChildSaves.Entry]

        func state(of id: ObjectID) -> PendingState? {
            if let state = published.objects[id] { return state }
            for entry in deferred {
                if let i = entry.changes.inserted.firstIndex(of: id) {
                    return .present(Snapshot(values: entry.changes.insertedValues[i], version: entry.firstVersion + UInt64(i)))
                }
            }
            return nil
        }
    }

    private let layers: [Layer]
    private let coordinator: PersistentStoreCoordinator

    /// The source of `context`: its ancestors' pending changes and the store.
    init(of context: ManagedObjectContext) throws(StrataError) {
        var layers: [Layer] = []
        var ancestor = context.parent
        while let level = ancestor {
            layers.append(try level.layerForChildren())
            ancestor = level.parent
        }
        self.layers = layers
        self.coordinator = context.persistentStoreCoordinator
    }

    /// The source's snapshot of `id`; nil when it does not exist there.
    func snapshot(for id: ObjectID) throws(StrataError) -> Snapshot? {
        for layer in layers {
            switch layer.state(of: id) {
            case .present(let snapshot): return snapshot
            case .removed: return nil
            case nil: continue
            }
        }
        return try coordinator.snapshot(for: id)
    }

    /// Calls `body` with every object of `entity` in the source and its
    /// snapshot: the store's objects in primary-key order, less those an
    /// ancestor changed or deleted, then the ones ancestors inserted or
    /// changed. The store is read at one read view.
    func forEach(of entity: EntityDescription, _ body: (ObjectID, Snapshot) throws(StrataError) -> Void) throws(StrataError) {
        var overlay: [ObjectID: PendingState] = [:]
        for layer in layers {
            for (id, state) in layer.published.objects where id.entity === entity && overlay[id] == nil {
                overlay[id] = state
            }
            for entry in layer.deferred {
                for (i, id) in entry.changes.inserted.enumerated() where id.entity === entity && overlay[id] == nil {
                    overlay[id] = .present(Snapshot(values: entry.changes.insertedValues[i], version: entry.firstVersion + UInt64(i)))
                }
            }
        }
        if overlay.isEmpty {
            try coordinator.forEachStored(of: entity, body)
            return
        }
        try coordinator.forEachStored(of: entity) { id, snapshot throws(StrataError) in
            if overlay[id] == nil { try body(id, snapshot) }
        }
        for (id, state) in overlay {
            if case .present(let snapshot) = state { try body(id, snapshot) }
        }
    }
}
