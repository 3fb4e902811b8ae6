/// What a context reads as its source, taken on the context's own queue
/// without entering any other context: each ancestor's unsaved changes,
/// nearest first, over the store (contract C13).
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
        /// Child saves the ancestor has yet to take in (Rule 10), oldest
        /// first: each newer than anything published, so it wins over it.
        let deferred: [DeferredChildSaves.Entry]

        /// `deferred` may hold saves the publication already includes (taken
        /// in between the two reads): those are left out.
        init(published: PublishedChanges, deferred: [DeferredChildSaves.Entry]) {
            self.published = published
            self.deferred = deferred.filter { $0.sequence > published.takenInThrough }
        }

        func state(of id: ObjectID) -> PendingState? {
            var state = published.objects[id]
            for entry in deferred {
                if let change = entry.state(of: id) { state = Self.fold(state, change) }
            }
            return state
        }

        /// The IDs this level inserted or changed with values whose
        /// attribute `leading.property` encodes as one of its keys: through
        /// the published copy's key table, and each recorded child save's
        /// objects.
        func forEachID(of entity: EntityDescription, _ leading: QueryPlan.LeadingEquality, _ body: (ObjectID) -> Void) {
            let property = leading.property
            published.keys.ids(in: published.objects, entity: entity, property: property, keys: leading.encodings, body)
            for entry in deferred {
                entry.forEachState({ $0 === entity }) { id, state in
                    switch state {
                    case .inserted(let snapshot), .updated(let snapshot):
                        var key: [UInt8] = []
                        IndexKeyCoding.appendValue(snapshot.values[property], to: &key)
                        if leading.contains(key) { body(id) }
                    case .removed:
                        break
                    }
                }
            }
        }

        /// Whether this level changed nothing.
        var isEmpty: Bool { published.objects.isEmpty && deferred.isEmpty }

        /// How many objects this level changed, of every entity.
        var changeCount: Int { published.objects.count + deferred.reduce(0) { $0 + $1.changes.inserted.count + $1.changes.updated.count + $1.changes.deleted.count } }

        /// `earlier` followed by `later` at one level: an object inserted
        /// here stays inserted whatever values it takes after.
        static func fold(_ earlier: PendingState?, _ later: PendingState) -> PendingState {
            if case .inserted? = earlier, case .updated(let snapshot) = later { return .inserted(snapshot) }
            return later
        }

        /// Every object this level changed of the entities `including`
        /// accepts, with its state here.
        func forEachState(_ including: (EntityDescription) -> Bool, _ body: (ObjectID, PendingState) -> Void) {
            guard !deferred.isEmpty else {
                for (id, state) in published.objects where including(id.entity) { body(id, state) }
                return
            }
            var recorded: [ObjectID: PendingState] = [:]
            for entry in deferred {
                entry.forEachState(including) { id, change in recorded[id] = Self.fold(recorded[id] ?? published.objects[id], change) }
            }
            for (id, state) in published.objects where including(id.entity) && recorded[id] == nil { body(id, state) }
            for (id, state) in recorded { body(id, state) }
        }
    }

    let layers: [Layer]
    /// Not retained: a source view lives within one call on its context's
    /// queue, and the context holds its coordinator.
    unowned(unsafe) let coordinator: PersistentStoreCoordinator

    /// The source of `context`: its ancestors' pending changes and the store.
    /// (`context` is borrowed: an initializer takes its arguments owned, and
    /// a retain of a context takes the slow path, see below — once for
    /// every fault filled.)
    init(of context: __shared ManagedObjectContext) throws(StrataError) {
        var layers: [Layer] = []
        // The ancestors are walked without retaining them (each child holds
        // its parent): contexts are weakly referenced, so a retain of one
        // takes the slow, side-table path, and a lookup builds a view each time.
        var ancestor = context.parentReference
        while let level = ancestor {
            let layer = try level._withUnsafeGuaranteedRef { level in Result { () throws(StrataError) in try level.layerForChildren() } }.get()
            // A level with no change says nothing of any object: left out, a
            // lookup under a parent that saved all it had builds no list.
            if let layer, !layer.isEmpty { layers.append(layer) }
            ancestor = level._withUnsafeGuaranteedRef { $0.parentReference }
        }
        self.layers = layers
        self.coordinator = context.persistentStoreCoordinator
    }

    /// The source's snapshot of `id`; nil when it does not exist there.
    ///
    /// The nearest level that changed the object gives its values; whether
    /// it exists is decided by the nearest level that inserted or deleted
    /// it, or else by the store.
    func snapshot(for id: ObjectID) throws(StrataError) -> Snapshot? {
        var changed: Snapshot?
        for layer in layers {
            switch layer.state(of: id) {
            case .inserted(let snapshot): return changed ?? snapshot
            case .updated(let snapshot): if changed == nil { changed = snapshot }
            case .removed: return nil
            case nil: continue
            }
        }
        guard let stored = try coordinator.snapshot(for: id) else { return nil }
        return changed ?? stored
    }

    /// What the nearest level above the store that changed `id` holds for
    /// it — `.some(nil)` when that level deleted it — or nil when none
    /// changed it. Whether the store still has it is not asked.
    func nearestChange(of id: ObjectID) -> Snapshot?? {
        for layer in layers {
            switch layer.state(of: id) {
            case .inserted(let snapshot)?, .updated(let snapshot)?: return .some(snapshot)
            case .removed?: return .some(nil)
            case nil: continue
            }
        }
        return nil
    }

    /// ``snapshot(for:)`` for a reader holding `id` at store version
    /// `held`: ``VersionedRead/unchanged`` when no level above the store
    /// changed it and the store still holds that version.
    func snapshot(for id: ObjectID, unlessStoredAt held: UInt64) throws(StrataError) -> VersionedRead {
        guard layers.allSatisfy({ $0.state(of: id) == nil }) else { return .read(try snapshot(for: id)) }
        return try coordinator.snapshot(for: id, unlessAt: held)
    }

    /// What the levels above the store say of each object of the entities
    /// `including` accepts that one of them changed, inserted or deleted:
    /// O(those levels' pending changes).
    func overlay(_ including: (EntityDescription) -> Bool) -> [ObjectID: Overlay] {
        var overlay: [ObjectID: Overlay] = [:]
        for layer in layers {
            layer.forEachState(including) { id, state in overlay[id, default: Overlay()].add(state) }
        }
        return overlay
    }

    /// The objects of `entity` a level above the store changed, inserted or deleted.
    func changedObjects(of entity: EntityDescription) -> Dictionary<ObjectID, Overlay>.Keys {
        overlay { $0 === entity }.keys
    }

    /// The objects of `registered` (a context's registry) that a level
    /// above the store changed, inserted or deleted, of `entity`: the
    /// smaller side is walked — the levels' changes, or the registry with a
    /// look-up at each level — so a context holding few objects pays
    /// little for a parent holding a large import.
    func changedObjects(of entity: EntityDescription, registeredIn registered: [ObjectID: ManagedObject]) -> [ObjectID] {
        guard !layers.isEmpty else { return [] }
        if layers.reduce(0, { $0 + $1.changeCount }) <= registered.count {
            return changedObjects(of: entity).filter { registered[$0] != nil }
        }
        return registered.keys.filter { id in id.entity === entity && layers.contains { $0.state(of: id) != nil } }
    }

    /// What the levels above the store say of `id`, the nearest first
    /// (as ``overlay(_:)`` has it); nil when none changed it.
    func overlay(of id: ObjectID) -> Overlay? {
        var result: Overlay?
        for layer in layers {
            if let state = layer.state(of: id) { result = result ?? Overlay(); result!.add(state) }
        }
        return result
    }

    /// What the levels above the store say of one object (see ``snapshot(for:)``).
    struct Overlay {
        /// The nearest level's values, when a level changed or inserted it.
        var values: Snapshot?
        /// Whether a level inserted (true) or deleted (false) it; nil when
        /// only updates were seen, so the store decides.
        var exists: Bool?

        mutating func add(_ state: PendingState) {
            guard exists == nil else { return }
            switch state {
            case .inserted(let snapshot):
                if values == nil { values = snapshot }
                exists = true
            case .updated(let snapshot):
                if values == nil { values = snapshot }
            case .removed:
                exists = false
            }
        }
    }

    /// Calls `body` with every object of `entity` in the source and its
    /// row (a stored one lent for the call): the store's objects in primary-key order (with the values of
    /// the nearest level that changed them; less those a level deleted),
    /// then the ones a level inserted. The store is read at one read view,
    /// and its records are decoded only as far as `body` asks.
    func forEach(of entity: EntityDescription, _ body: (ObjectID, SourceRow) throws(StrataError) -> Void) throws(StrataError) {
        try forEach(of: entity, plan: .scan(entity), body)
    }

    /// ``forEach(of:_:)`` narrowed by `plan`: the stored objects its index
    /// selects (in index order), then every object a level above the store
    /// inserted or changed — whatever the index says of its stored values,
    /// the level's values may match.
    ///
    /// `leavingRecordsUnread`, with an exact plan: a stored object comes as
    /// ``SourceRow/indexed``, its record not read.
    func forEach(
        of entity: EntityDescription, plan: QueryPlan, leavingRecordsUnread: Bool = false,
        _ body: (ObjectID, SourceRow) throws(StrataError) -> Void
    ) throws(StrataError) {
        try forEachWhile(of: entity, plan: plan, leavingRecordsUnread: leavingRecordsUnread) { (id, row) throws(StrataError) -> Bool in
            try body(id, row)
            return true
        }
    }

    /// ``forEach(of:plan:leavingRecordsUnread:_:)`` until `body` returns
    /// false: the store is read no further (a fetch with a limit has its page).
    ///
    /// `recordsWanted`, with an exact plan: a stored object it says no to
    /// comes as ``SourceRow/indexed``, its record not read (an object the
    /// reading context holds, judged by its own values).
    func forEachWhile(
        of entity: EntityDescription, plan: QueryPlan, leavingRecordsUnread: Bool = false, recordsWanted: ((ObjectID) -> Bool)? = nil,
        _ body: (ObjectID, SourceRow) throws(StrataError) -> Bool
    ) throws(StrataError) {
        let reading = RecordReading(leavingUnread: leavingRecordsUnread, wanted: recordsWanted)
        func stored(_ each: (ObjectID, SourceRow) throws(StrataError) -> Bool) throws(StrataError) {
            try forEachStored(of: entity, plan: plan, reading: reading, each)
        }
        if let leading = plan.leading, !layers.isEmpty {
            try forEachWhile(of: entity, plan: plan, leading: leading, reading: reading, body)
            return
        }
        let overlay = overlay { $0 === entity }
        var going = true
        if overlay.isEmpty {
            try stored(body)
            return
        }
        var seen: Set<ObjectID> = []
        try stored { (id, row) throws(StrataError) -> Bool in
            guard let above = overlay[id] else {
                going = try body(id, row)
                return going
            }
            seen.insert(id)
            // Decided above the store: listed after the scan.
            if above.exists == nil { going = try body(id, above.values.map { .pending($0) } ?? row) }
            return going
        }
        for (id, above) in overlay where going {
            if above.exists == true {
                going = try body(id, .pending(above.values!))
            } else if above.exists == nil, plan.isNarrowed, !seen.contains(id), let values = above.values,
                      try coordinator.snapshot(for: id) != nil {
                // Changed above, stored outside the index's ranges: it
                // exists, and its changed values may match.
                going = try body(id, .pending(values))
            }
        }
    }

    /// ``forEachWhile(of:plan:leavingRecordsUnread:_:)`` for a plan that
    /// holds the index's first attribute equal to some values, without
    /// laying every change of the levels above over the store: each stored
    /// object the index selects is looked up at each level, and of the
    /// objects the levels changed only those whose values there have one of
    /// the plan's keys are visited (``PublishedKeys``) — O(the matches and
    /// the levels' recorded child saves), not O(the levels' changes).
    private func forEachWhile(
        of entity: EntityDescription, plan: QueryPlan, leading: QueryPlan.LeadingEquality, reading: RecordReading,
        _ body: (ObjectID, SourceRow) throws(StrataError) -> Bool
    ) throws(StrataError) {
        var seen: Set<ObjectID> = []
        var going = true
        func decide(_ id: ObjectID, _ row: SourceRow) throws(StrataError) -> Bool {
            guard let above = overlay(of: id) else {
                going = try body(id, row)
                return going
            }
            seen.insert(id)
            // Inserted or deleted above: decided there, and listed below.
            if above.exists == nil { going = try body(id, above.values.map { .pending($0) } ?? row) }
            return going
        }
        try forEachStored(of: entity, plan: plan, reading: reading, decide)
        guard going else { return }
        var candidates: Set<ObjectID> = []
        for layer in layers {
            layer.forEachID(of: entity, leading) { candidates.insert($0) }
        }
        for id in candidates where going && !seen.contains(id) {
            guard let above = overlay(of: id), let values = above.values else { continue }
            if above.exists == true {
                going = try body(id, .pending(values))
            } else if above.exists == nil, try coordinator.snapshot(for: id) != nil {
                // Changed above, stored outside the index's ranges: it
                // exists, and its changed values may match.
                going = try body(id, .pending(values))
            }
        }
    }

    /// Which stored objects' records a read of the store reads.
    private struct RecordReading {
        /// None, with an exact plan (a count, a fetch of IDs).
        let leavingUnread: Bool
        /// Those it names, with an exact plan.
        let wanted: ((ObjectID) -> Bool)?
    }

    /// The stored objects `plan` selects, each with its record or, where
    /// `reading` leaves it unread, as ``SourceRow/indexed``.
    private func forEachStored(
        of entity: EntityDescription, plan: QueryPlan, reading: RecordReading, _ each: (ObjectID, SourceRow) throws(StrataError) -> Bool
    ) throws(StrataError) {
        if plan.indexNumber == nil {
            try coordinator.forEachStoredRow(of: entity, matching: plan.narrowing, each)
        } else if reading.leavingUnread && plan.isExact {
            try coordinator.forEachIndexed(of: entity, in: plan) { (id) throws(StrataError) -> Bool in try each(id, .indexed) }
        } else if let wanted = reading.wanted, plan.isExact {
            try coordinator.forEachStored(of: entity, in: plan, reading: wanted) { (id, record) throws(StrataError) -> Bool in
                // Not `record.map`, which copies the record to find it is nil.
                guard let record else { return try each(id, .indexed) }
                return try each(id, .stored(record))
            }
        } else {
            try coordinator.forEachStored(of: entity, in: plan) { (record) throws(StrataError) -> Bool in try each(record.id, .stored(record)) }
        }
    }
}
