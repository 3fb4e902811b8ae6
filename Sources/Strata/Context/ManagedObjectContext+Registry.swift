extension ManagedObjectContext {
    /// After a save: lets go of the saved objects that only the registry
    /// still references (see ``retainsRegisteredObjects``). Bounded by the
    /// save, not by everything the context ever registered.
    func releaseUnreferencedObjects(_ saved: ObjectChanges) {
        release(saved.inserted)
        release(saved.updated)
    }

    private func release(_ ids: [ObjectID]) {
        for id in ids {
            guard var object = registry.removeValue(forKey: id) else { continue }
            if isKnownUniquelyReferenced(&object) && object.flags.isDisjoint(with: [.dirty, .inserted, .deleted, .pendingNotification]) {
                object.context = nil
            } else {
                registry[id] = object
            }
        }
    }
}
