import Dispatch
internal import StrataStore

extension ManagedObjectContext {
    /// After a save: lets go of the saved objects, and of those read since
    /// the last check, that only the registry still references (see
    /// ``retainsRegisteredObjects``). Bounded by the save and the reads, not
    /// by everything the context ever registered.
    ///
    /// A `.mainQueue` context hands them to a background queue to be freed:
    /// freeing an import's chunk of objects (each with its values) is about
    /// half of what saving the main context into the writer costs the main
    /// queue otherwise.
    func releaseUnreferencedObjects(_ saved: ObjectChanges) {
        readSinceHeldChecked += saved.inserted.count + saved.updated.count
        releaseUnreferenced(also: [saved.inserted, saved.updated])
    }

    /// Counts objects a fetch handed out towards checking ``heldReads`` again.
    func noteFetched(_ count: Int) {
        guard !retainsRegisteredObjects, !heldReads.isEmpty else { return }
        readSinceHeldChecked += count
    }

    /// Lets go of the objects read since the last call that only the
    /// registry still references and that hold no change (see
    /// ``retainsRegisteredObjects``). Called where no caller can hold an
    /// object through the registry alone: when a block ends, at the end of
    /// a main-queue turn for a context used directly, and when a
    /// confinement context's fetch starts.
    func releaseUnreferencedReads() {
        releaseUnreferenced(also: [])
    }

    /// Checks the objects read since the last check, and `extra`; and,
    /// once as many objects have been read, fetched or saved since they
    /// were last checked, the ones held then (``heldReads``): so an object
    /// let go of later leaves too, and the checks cost at most about twice
    /// what the context reads and saves.
    private func releaseUnreferenced(also extra: [[ObjectID]]) {
        let checksHeld = !heldReads.isEmpty && readSinceHeldChecked >= heldReads.count
        guard !recentlyRead.isEmpty || checksHeld || !extra.isEmpty else { return }
        var lists = extra + [recentlyRead]
        readSinceHeldChecked += recentlyRead.count
        recentlyRead = []
        if checksHeld {
            // A save lists what it saved again: the same ID may be here twice.
            lists.append(Array(Set(heldReads)))
            heldReads = []
            readSinceHeldChecked = 0
        }
        release(lists, keepingHeldIn: &heldReads)
    }

    /// Lets go of the unchanged objects of `lists` that only the registry
    /// references; appends the IDs of the others it holds to `held`.
    private func release(_ lists: [[ObjectID]], keepingHeldIn held: inout [ObjectID]) {
        // Other contexts free the objects here, as they go.
        let released = concurrencyType == .mainQueue ? ReleasedObjects() : nil
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
            }
        }
        // Emptied there, not here: whoever lets go of the box last, the
        // objects are freed on the queue.
        if let released, !released.objects.isEmpty {
            ReleasedObjects.queue.async { BackgroundScheduling.run { released.objects.removeAll() } }
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
