/// What a destination does with one updated object of a save.
enum UpdateDecision {
    /// Store these values (the saving context's, or a property-level merge)
    /// over the destination's present state of the object (its values and
    /// version, which a store checks and keeps its indexes by).
    case write([PropertyValue], over: Snapshot)
    /// Keep the destination's state; the saving context takes this snapshot.
    case keep(Snapshot)
    /// The destination deleted the object; the saving context's change is dropped.
    case drop
}

/// What a destination does with one deleted object of a save.
enum DeleteDecision {
    /// Delete the object, whose present state at the destination this is.
    case delete(Snapshot)
    /// The destination had deleted it already.
    case alreadyGone
    /// The destination changed it and the policy keeps that change.
    case keep(Snapshot)
}

/// Optimistic conflict detection, shared by parent contexts and the
/// coordinator: a change conflicts when the destination's version of the
/// object is no longer the one the saving context started from.
enum ConflictResolution {
    /// The decisions for changes whose bases are the destination's present
    /// state (``ChangeSet/basesAreStored``): every update written over the
    /// version it started from, every delete made.
    static func unopposed(_ changes: ChangeSet) -> (updates: [UpdateDecision], deletes: [DeleteDecision]) {
        (changes.updated.indices.map { .write(changes.updatedValues[$0], over: Snapshot(values: changes.updatedBase[$0], version: changes.updatedVersions[$0])) },
         changes.deleted.indices.map { .delete(Snapshot(values: changes.deletedBase[$0], version: changes.deletedVersions[$0])) })
    }

    /// `current(id, seen, base)`: the destination's present snapshot of an
    /// object, nil when it no longer has it; `seen` and `base` are the
    /// version and values the saving context started from (a destination
    /// that still holds version `seen` may answer with `base` rather than
    /// read its values again). Throws ``StrataError/Code/mergeConflict``
    /// listing every conflict under ``MergePolicy/error``; otherwise decides
    /// each updated and deleted object by the policy.
    static func decide(
        _ changes: ChangeSet, current: (ObjectID, UInt64, [PropertyValue]) throws(StrataError) -> Snapshot?
    ) throws(StrataError) -> (updates: [UpdateDecision], deletes: [DeleteDecision]) {
        var currentUpdated: [Snapshot?] = []
        currentUpdated.reserveCapacity(changes.updated.count)
        for (i, id) in changes.updated.enumerated() {
            currentUpdated.append(try current(id, changes.updatedVersions[i], changes.updatedBase[i]))
        }
        var currentDeleted: [Snapshot?] = []
        currentDeleted.reserveCapacity(changes.deleted.count)
        for (i, id) in changes.deleted.enumerated() {
            currentDeleted.append(try current(id, changes.deletedVersions[i], changes.deletedBase[i]))
        }
        let policy = changes.mergePolicy
        var conflicts: [MergeConflict] = []
        var updates: [UpdateDecision] = []
        updates.reserveCapacity(changes.updated.count)
        for i in changes.updated.indices {
            guard let current = currentUpdated[i] else {
                if policy == .error {
                    conflicts.append(MergeConflict(objectID: changes.updated[i], properties: [], deletedAtDestination: true))
                }
                updates.append(.drop)
                continue
            }
            // Same version, or (a destination that let go of its object and
            // reloaded it has a new version) the very values the saver started from.
            if current.version == changes.updatedVersions[i] || current.values == changes.updatedBase[i] {
                updates.append(.write(changes.updatedValues[i], over: current))
                continue
            }
            if policy == .error {
                conflicts.append(conflict(changes.updated[i], base: changes.updatedBase[i], current: current.values))
                updates.append(.drop)
            } else if let merged = policy.resolve(base: changes.updatedBase[i], mine: changes.updatedValues[i], destination: current.values) {
                updates.append(.write(merged, over: current))
            } else {
                updates.append(.keep(current))
            }
        }
        var deletes: [DeleteDecision] = []
        deletes.reserveCapacity(changes.deleted.count)
        for i in changes.deleted.indices {
            guard let current = currentDeleted[i] else { deletes.append(.alreadyGone); continue }
            if current.version == changes.deletedVersions[i] || current.values == changes.deletedBase[i] || policy.deleteWinsOverChange {
                deletes.append(.delete(current))
            } else if policy == .error {
                conflicts.append(conflict(changes.deleted[i], base: nil, current: current.values))
                deletes.append(.delete(current))
            } else {
                deletes.append(.keep(current))
            }
        }
        if !conflicts.isEmpty {
            var error = StrataError(.mergeConflict, "\(conflicts.count) object(s) changed at the destination since this context read them")
            error.conflicts = conflicts
            throw error
        }
        return (updates, deletes)
    }

    private static func conflict(_ id: ObjectID, base: [PropertyValue]?, current: [PropertyValue]) -> MergeConflict {
        var names: [String] = []
        for (i, property) in id.entity.properties.enumerated() where base == nil || base![i] != current[i] {
            names.append(property.name)
        }
        return MergeConflict(objectID: id, properties: names, deletedAtDestination: false)
    }
}
