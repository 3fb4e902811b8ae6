/// What one batch of a batch delete removes and changes, found from the
/// stored values as a context's deletes and save would: cascade rules
/// reach further objects; then, with what goes known, nullify takes each
/// deleted object out of the objects that stay, and deny and no action
/// refuse while such an object still holds, or points back at, one that
/// goes (``ManagedObjectContext/delete(_:)``).
enum BatchDeletion {
    /// The changes deleting `chosen` makes, read under the coordinator's
    /// save lock. Objects not stored (deleted since) are passed by.
    static func changes(
        deleting chosen: ArraySlice<ObjectID>, at coordinator: PersistentStoreCoordinator, authors: TransactionAuthors
    ) throws(StrataError) -> ChangeSet {
        // What goes: the chosen and what their cascade rules reach.
        var going: [ObjectID] = []
        var stored: [ObjectID: Snapshot] = [:]
        var queue = Array(chosen)
        // The chosen read together, in key order; what cascades, one by one.
        let chosenStored = try coordinator.storedSnapshots(queue)
        var next = 0
        while next < queue.count {
            let (id, position) = (queue[next], next)
            next += 1
            guard stored[id] == nil else { continue }
            let read = position < chosenStored.count ? chosenStored[position] : try coordinator.snapshot(for: id, offered: true)
            guard let snapshot = read else { continue }
            going.append(id)
            stored[id] = snapshot
            for i in id.entity.relationshipIndices {
                guard case .relationship(let relationship) = id.entity.properties[i], relationship.deleteRule == .cascade else { continue }
                snapshot.values[i].forEachObjectID { queue.append($0) }
            }
        }
        // What stays and is touched: its stored state and its values after.
        var staying: [ObjectID: Int] = [:]
        var changed: [(id: ObjectID, stored: Snapshot, values: [PropertyValue])] = []
        func stayingObject(_ id: ObjectID) throws(StrataError) -> Int? {
            if let known = staying[id] { return known }
            guard let snapshot = try coordinator.snapshot(for: id, offered: true) else { return nil }
            staying[id] = changed.count
            changed.append((id, snapshot, snapshot.values))
            return changed.count - 1
        }
        var failures: [ValidationFailure] = []
        for id in going {
            let entity = id.entity
            let values = stored[id]!.values
            for i in entity.relationshipIndices {
                guard case .relationship(let relationship) = entity.properties[i] else { continue }
                let inverse = entity.inverses[i]
                var denied = false  // (once per relationship, as a save reports it)
                for target in values[i].objectIDs where stored[target] == nil {
                    guard let t = try stayingObject(target) else { continue }  // not stored: nothing points back
                    let refersBack = inverse.map { changed[t].values[$0].objectIDs.contains(id) } ?? true
                    guard refersBack else { continue }
                    switch relationship.deleteRule {
                    case .cascade:
                        break  // (a target that stays is one not stored)
                    case .deny:
                        if !denied { failures.append(ValidationFailure(objectID: id, property: relationship.name, reason: .deleteDenied)) }
                        denied = true
                    case .noAction:
                        if let inverse {
                            failures.append(ValidationFailure(objectID: target, property: target.entity.properties[inverse].name, reason: .targetDeleted))
                        }
                    case .nullify:
                        guard let inverse else { break }
                        if !changed[t].values[inverse].editMembers({ $0.remove(id) }) {
                            changed[t].values[inverse] = .null
                            if target.entity.requiredIndices.contains(inverse) {
                                failures.append(ValidationFailure(objectID: target, property: target.entity.properties[inverse].name, reason: .missingValue))
                            }
                        }
                    }
                }
            }
        }
        if !failures.isEmpty {
            var error = StrataError(.validationFailed, "\(failures.count) validation failure(s); this batch of the delete was not written")
            error.validationFailures = failures
            throw error
        }
        var changes = ChangeSet()
        changes.authors = authors
        for id in going {
            changes.deleted.append(id)
            changes.deletedVersions.append(stored[id]!.version)
            changes.deletedBase.append(stored[id]!.values)
        }
        for (id, stored, values) in changed where values != stored.values { changes.update(id, from: stored, to: values) }
        changes.basesAreStored = true
        return changes
    }
}
