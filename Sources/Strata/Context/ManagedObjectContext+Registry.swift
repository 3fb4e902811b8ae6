import Dispatch
internal import StrataStore

extension ManagedObjectContext {
    /// After a save: lets go of the saved objects that only the registry
    /// still references (see ``retainsRegisteredObjects``). Bounded by the
    /// save, not by everything the context ever registered. Saved objects
    /// still referenced stay registered. Only the first `registeredInserts`
    /// inserted IDs can be registered (the rest were held saves handed on).
    func releaseUnreferencedObjects(_ saved: ObjectChanges, registeredInserts: Int) {
        var held: [ObjectID] = []
        release([Array(saved.inserted.prefix(registeredInserts)), saved.updated], keepingHeldIn: &held)
    }

    /// Counts objects a fetch handed out towards checking ``heldFetched`` again.
    func countFetched(_ count: Int) {
        guard !retainsRegistered, !heldFetched.isEmpty else { return }
        fetchedSinceHeldChecked += count
    }

    /// Lets go of the objects registered for fetches since the last call
    /// that only the registry still references and that hold no change (see
    /// ``retainsRegisteredObjects``); and, once as many objects have been
    /// fetched since they were last checked, of the ones held then
    /// (``heldFetched``), so an object let go of later leaves too and the
    /// checks cost at most about twice what the context fetches. Called
    /// where no caller can hold an object through the registry alone: when
    /// a block ends, at the end of a main-queue turn for a context used
    /// directly, and when a confinement context's fetch starts.
    func releaseUnreferencedFetched() {
        let checksHeld = !heldFetched.isEmpty && fetchedSinceHeldChecked >= heldFetched.count
        guard !recentlyFetched.isEmpty || checksHeld else { return }
        var lists = [recentlyFetched]
        fetchedSinceHeldChecked += recentlyFetched.count
        recentlyFetched = []
        if checksHeld {
            lists.append(heldFetched)
            heldFetched = []
            fetchedSinceHeldChecked = 0
        }
        release(lists, keepingHeldIn: &heldFetched)
    }

    /// Lets go of the unchanged objects of `lists` that only the registry
    /// references; appends the IDs of the others it holds to `held`.
    private func release(_ lists: [[ObjectID]], keepingHeldIn held: inout [ObjectID]) {
        // Other contexts free the objects here, as they go.
        let released = concurrencyType == .mainQueue ? ReleasedObjects() : nil
        var releasedCount = 0
        for ids in lists {
            for id in ids {
                guard let position = registry.index(forKey: id) else { continue }
                let changed = !registry.values[position].flags.isDisjoint(with: [.dirty, .inserted, .deleted, .pendingNotification])
                // In place: a copy of the reference would make it look shared.
                guard !changed, isKnownUniquelyReferenced(&registry.values[position]) else {
                    held.append(id)
                    continue
                }
                let object = registry.remove(at: position).value
                object.context = nil
                released?.objects.append(object)
                releasedCount += 1
            }
        }
        // A table sized for everything once fetched would keep its memory
        // (a million objects: 64 MiB): rebuilt for what is left, at a cost
        // paid for by the removals that emptied it.
        if registry.capacity > 4096 && registry.count < registry.capacity / 8 {
            var smaller = [ObjectID: ManagedObject](minimumCapacity: registry.count)
            for (id, object) in registry { smaller[id] = object }
            registry = smaller
        }
        // Emptied there, not here: whoever lets go of the box last, the
        // objects are freed on the queue.
        if let released, !released.objects.isEmpty {
            let releasedCount = releasedCount
            ReleasedObjects.queue.async {
                BackgroundScheduling.run { released.objects.removeAll() }
                FreedObjects.note(releasedCount)
            }
        } else {
            FreedObjects.note(releasedCount)
        }
    }
}

/// Objects a context let go of, on their way to being freed.
///
/// `@unchecked Sendable`: filled on the context's queue, then handed to
/// ``queue`` and touched only there. Nothing else references these objects
/// (a context releases only objects it holds the one reference to), so
/// freeing them elsewhere touches nothing another thread can see — the one
/// observable difference is that a subclass's `deinit` runs on ``queue``.
final class ReleasedObjects: @unchecked Sendable {
    var objects: [ManagedObject] = []
    static let queue = DispatchQueue(label: "strata.released-objects", qos: .utility)
}
