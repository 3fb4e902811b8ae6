import Dispatch
internal import StrataStore

extension ManagedObjectContext {
    /// After a save: lets go of the saved objects that only the registry
    /// still references (see ``retainsRegisteredObjects``). Bounded by the
    /// save, not by everything the context ever registered.
    ///
    /// A `.mainQueue` context hands them to a background queue to be freed:
    /// freeing an import's chunk of objects (each with its values) is about
    /// half of what saving the main context into the writer costs the main
    /// queue otherwise.
    func releaseUnreferencedObjects(_ saved: ObjectChanges) {
        // Other contexts free the objects here, as they go.
        let released = concurrencyType == .mainQueue ? ReleasedObjects() : nil
        release(saved.inserted, into: released)
        release(saved.updated, into: released)
        // Emptied there, not here: whoever lets go of the box last, the
        // objects are freed on the queue.
        if let released, !released.objects.isEmpty {
            ReleasedObjects.queue.async { BackgroundScheduling.run { released.objects.removeAll() } }
        }
    }

    private func release(_ ids: [ObjectID], into released: ReleasedObjects?) {
        for id in ids {
            guard var object = registry.removeValue(forKey: id) else { continue }
            if isKnownUniquelyReferenced(&object) && object.flags.isDisjoint(with: [.dirty, .inserted, .deleted, .pendingNotification]) {
                object.context = nil
                released?.objects.append(object)
            } else {
                registry[id] = object
            }
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
