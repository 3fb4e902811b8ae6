/// What a context keeps for the ``FetchedResultsController``s that follow
/// it: the controllers, and what changed in its view since its last
/// objects-did-change that its own change lists do not say — objects a
/// merge changed without being registered here, and the values of a held
/// child save's new objects (which are not made into objects). Guarded by
/// the context's queue; empty, and never written, while no controller
/// follows the context, so contexts nobody observes pay nothing.
struct ResultsObservation {
    /// The controllers, held weakly: a controller holds its context, and
    /// ends whenever its owner lets go of it. Pruned at each delivery.
    private var observers: [WeakObserver] = []
    /// Objects merges and held saves changed since the last delivery, with
    /// what they knew of their values.
    private var known: [(ObjectID, KnownValues)] = []
    /// The next delivery, gathered with the objects-did-change payload and
    /// handed out where the notification is posted (outside any window:
    /// controllers run their owners' code).
    private var gathered: ObservedChanges?

    /// Whether a delivery is under way: a controller's owner whose code
    /// changes the context again (a save in `onChange`) gets the next
    /// delivery after this one, not inside it.
    var delivering = false

    var isObserved: Bool { !observers.isEmpty }

    mutating func add(_ observer: any ContextChangeObserver) {
        observers.removeAll { $0.observer == nil || $0.observer === observer }
        observers.append(WeakObserver(observer: observer))
    }

    /// A merge changed these objects (with the source's new values where it had them).
    mutating func noteMerged(_ changes: ObjectChanges) {
        guard isObserved else { return }
        for id in changes.inserted { known.append((id, .unknown)) }
        for (i, id) in changes.updated.enumerated() {
            if let snapshots = changes.updatedSnapshots, i < snapshots.count {
                known.append((id, .values(snapshots[i].values)))
            } else {
                known.append((id, .unknown))
            }
        }
        for id in changes.deleted { known.append((id, .gone)) }
    }

    /// A held child save brought these new objects, with these values.
    mutating func noteHeldInserts(_ ids: [ObjectID], values: [[PropertyValue]]) {
        guard isObserved else { return }
        for (id, values) in zip(ids, values) { known.append((id, .values(values))) }
    }

    /// Gathers the next delivery from the context's objects-did-change
    /// payload (nil when it has none) and what merges and held saves noted.
    mutating func gather(_ changes: ObjectChanges?) {
        guard isObserved, changes != nil || !known.isEmpty else {
            known.removeAll()
            return
        }
        var next = gathered ?? ObservedChanges()
        if let changes {
            for list in [changes.inserted, changes.updated, changes.deleted, changes.refreshed, changes.invalidated, changes.discarded] {
                next.ids.append(contentsOf: list)
            }
        }
        next.known.append(contentsOf: known)
        known.removeAll()
        gathered = next
    }

    /// The gathered delivery and the controllers to hand it to.
    mutating func takeDelivery() -> (ObservedChanges, [any ContextChangeObserver])? {
        guard let gathered else { return nil }
        self.gathered = nil
        observers.removeAll { $0.observer == nil }
        let alive = observers.compactMap(\.observer)
        return alive.isEmpty ? nil : (gathered, alive)
    }
}

/// What a merge or a held save knew of an object's values in the context's view.
enum KnownValues {
    /// Deleted, or gone from the source.
    case gone
    case values([PropertyValue])
    /// To be read from the context's source.
    case unknown
}

/// One delivery to a context's controllers: every object whose state in
/// the context's view may have changed since the last one.
struct ObservedChanges {
    /// The objects the objects-did-change payload lists (the context's own
    /// changes, child saves taken in, refreshes, invalidations): their
    /// state is what the context holds now.
    var ids: [ObjectID] = []
    /// Objects merges and held saves changed, in the order they did.
    var known: [(ObjectID, KnownValues)] = []
}

/// A controller that follows a context's changes. Called on the context's queue.
protocol ContextChangeObserver: AnyObject {
    func contextDidChange(_ changes: ObservedChanges)
}

private struct WeakObserver {
    weak var observer: (any ContextChangeObserver)?
}

extension ManagedObjectContext {
    /// Starts handing `observer` every change to this context's view. On its queue.
    func addChangeObserver(_ observer: any ContextChangeObserver) {
        observation.add(observer)
    }

    /// Hands the gathered changes to the controllers; called where
    /// objects-did-change is posted, just before it.
    func deliverObservedChanges() {
        guard !observation.delivering else { return }
        observation.delivering = true
        defer { observation.delivering = false }
        while let (changes, observers) = observation.takeDelivery() {
            for observer in observers { observer.contextDidChange(changes) }
        }
    }

    /// `id`'s values as this context sees them now, nil when it does not
    /// see the object (deleted here, gone from the source): a registered
    /// object's own values, else what a merge or held save said, else the
    /// source's. Registers nothing and takes no held save in.
    func valuesInView(of id: ObjectID, known: KnownValues?) throws(StrataError) -> [PropertyValue]? {
        if let object = registry[id] {
            if !object.flags.isDisjoint(with: [.deleted, .invalidated]) { return nil }
            if !object.flags.contains(.fault) { return object.values }
        } else if discardedInserts.contains(id) {
            return nil
        }
        switch known {
        case .gone: return nil
        case .values(let values): return values
        case .unknown, nil: return try sourceSnapshot(for: id)?.values
        }
    }
}
