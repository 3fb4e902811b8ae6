extension ManagedObjectContext {
    /// The object for `id` in this context: the registered one, or a fault
    /// that loads its values from the parent chain or the store when first
    /// used (contract C15). Never fails; a fault whose object turns
    /// out not to exist reads as deleted, with default values.
    ///
    /// ```swift
    /// let recipe = context.object(with: id) as! Recipe
    /// ```
    public func object(with id: ObjectID) -> ManagedObject {
        checkQueue()
        precondition(model.contains(id.entity), "Strata: \(id) is not an ID of this context's model")
        return registeredOrFault(for: id)
    }

    /// The object for `id`, loaded now; throws ``StrataError/Code/objectNotFound``
    /// when neither this context, its ancestors nor the store has it.
    public func existingObject(with id: ObjectID) throws(StrataError) -> ManagedObject {
        checkQueue()
        guard model.contains(id.entity) else {
            throw StrataError(.invalidArgument, "\(id) is not an ID of this context's model")
        }
        if registry[id] == nil { takeHeldChildSaves() }
        if let object = registry[id] {
            object.fulfill()
            guard !object.flags.contains(.invalidated) else { throw StrataError(.objectNotFound, "\(id) no longer exists") }
            return object
        }
        let resolved = persistentStoreCoordinator.resolvingAlias(id)
        if resolved != id { return try existingObject(with: resolved) }
        guard let snapshot = try sourceSnapshot(for: id) else {
            throw StrataError(.objectNotFound, "no object \(id) in \(name), its parents or the store")
        }
        return materialize(id, snapshot)
    }

    // MARK: Internal

    /// The registered object for `id`, or a new fault registered for it;
    /// `fetched`: registered for a fetch's result, so let go of when no one
    /// references it any more (``releaseUnreferencedFetched()``).
    func registeredOrFault(for id: ObjectID, fetched: Bool = false) -> ManagedObject {
        if let object = registry[id] { return object }
        if heldSaveCount > 0 {
            takeHeldChildSaves()
            if let object = registry[id] { return object }
        }
        // A new object an upsert merged into an existing one: that one.
        let resolved = persistentStoreCoordinator.resolvingAlias(id)
        if resolved != id { return registeredOrFault(for: resolved, fetched: fetched) }
        let object = id.entity.managedObjectClass.init(entity: id.entity, insertInto: nil)
        object.primaryKey = id.primaryKey
        object.isTemporary = id.isTemporaryID
        object.context = self
        object.values = []
        object.flags = [.fault]
        registry[id] = object
        if fetched { noteFetched(id) }
        return object
    }

    /// Remembers an object registered for a fetch, for ``releaseUnreferencedFetched()``.
    @inline(__always)
    private func noteFetched(_ id: ObjectID) {
        guard !retainsRegistered else { return }
        recentlyFetched.append(id)
        if recentlyFetched.count == 1 { scheduleProcessingIfUsedDirectly() }
    }

    /// Registers an object read from the source (`fetched`: see
    /// ``registeredOrFault(for:fetched:)``).
    @discardableResult
    func materialize(_ id: ObjectID, _ snapshot: Snapshot, fetched: Bool = false) -> ManagedObject {
        let object = id.entity.managedObjectClass.init(entity: id.entity, insertInto: nil)
        object.primaryKey = id.primaryKey
        object.isTemporary = id.isTemporaryID
        object.context = self
        fill(object, snapshot)
        registry[id] = object
        if fetched { noteFetched(id) }
        return object
    }

    func fill(_ object: ManagedObject, _ snapshot: Snapshot) {
        // Loaded from the store: whatever ID it was asked for by, it is permanent.
        if parent == nil { object.isTemporary = false }
        object.values = snapshot.values
        object.committed = snapshot.values
        object.version = snapshot.version
        // Versions this context shows its children come from its own
        // counter only, never the source's (a store's sequence, a parent's
        // counter): so two of them can always be ordered, which is how a
        // child tells a late merge from a newer state (Snapshot.isOlder).
        object.exposedVersion = nextVersion()
        object.flags.remove(.fault)
    }

    /// Loads a fault. If the object no longer exists (or the store fails) it
    /// becomes an inaccessible object: default values, reported as deleted,
    /// never saved — Core Data's `shouldDeleteInaccessibleFaults`, without the crash.
    func fulfillFault(_ object: ManagedObject) {
        let id = object.objectID
        if heldSaveCount > 0 {
            // A fault for a new object a held save brings: taken in, it is filled.
            takeHeldChildSaves()
            guard object.flags.contains(.fault) else { return }
        }
        do {
            if let snapshot = try sourceSnapshot(for: id) {
                fill(object, snapshot)
                return
            }
        } catch {
            FileHandleStandardError.write("Strata: could not load \(id) in \(name): \(error)\n")
        }
        invalidate(object)
    }

    /// The object no longer exists at the source: it stays readable (with its
    /// last values, or defaults for a fault) but leaves the context.
    func invalidate(_ object: ManagedObject) {
        let id = object.objectID
        if !object.flags.isDisjoint(with: [.inserted, .dirty, .deleted]) { markUnpublished(id) }
        if object.flags.contains(.fault) { object.values = object.entity.initialValues }
        registry[id] = nil
        inserted[id] = nil
        updated[id] = nil
        deleted[id] = nil
        object.flags = [.invalidated]
    }

    /// The source's present snapshot of `id`: the ancestors' pending
    /// changes over the store (``SourceView``), read on this context's queue
    /// without entering any ancestor.
    func sourceSnapshot(for id: ObjectID) throws(StrataError) -> Snapshot? {
        guard parentReference != nil else { return try persistentStoreCoordinator.snapshot(for: id) }
        return try SourceView(of: self).snapshot(for: id)
    }

    /// Runs on this context's queue while a child saves an object this
    /// context has not registered: its view of `id`, registering the object
    /// here so that the save is checked and applied against it.
    func snapshotForChild(_ id: ObjectID) throws(StrataError) -> Snapshot? {
        let object: ManagedObject
        if let registered = registry[id] {
            object = registered
            if object.flags.contains(.fault) {
                guard let snapshot = try sourceSnapshot(for: id) else { invalidate(object); return nil }
                fill(object, snapshot)
            }
        } else {
            guard !discardedInserts.contains(id), let snapshot = try sourceSnapshot(for: id) else { return nil }
            object = materialize(id, snapshot)
        }
        guard !object.flags.contains(.deleted), !object.flags.contains(.invalidated) else { return nil }
        object.flags.remove(.exposedVersionFresh)  // a child now holds this version
        return Snapshot(values: object.values, version: object.exposedVersion)
    }
}

import Foundation

/// Writes diagnostics to standard error.
enum FileHandleStandardError {
    static func write(_ text: String) { FileHandle.standardError.write(Data(text.utf8)) }
}
