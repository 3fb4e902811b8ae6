internal import StrataStore

/// A store this process opened read-only beside the process that writes
/// it: what the coordinator's catch-up reads in
/// (``PersistentStoreCoordinator/catchUpWithStore()``).
extension LogObjectStore {
    /// The directory whose changes tell of the writer's saves; nil when
    /// this process writes the store itself (or it is in memory).
    var followedDirectory: String? { Self.readOnlyDirectory(of: records) }

    /// Whether another process writes this store: it was opened read-only
    /// beside it, and may lag behind it.
    var followsAnotherWriter: Bool { followedDirectory != nil }

    /// What tells of the writer's saves: a watch on the store's directory,
    /// or none and why (the follower then polls); nil when this process
    /// writes the store itself (or it is in memory). `makeWatch` makes the
    /// inotify instance (a seam: tests make it fail).
    func changeSignal(makeWatch: () -> Int32) throws(StrataError) -> (signal: any StoreChangeSignal, unavailable: StrataError?)? {
        guard let directory = followedDirectory else { return nil }
        let (watch, unavailable) = try DirectoryWatch.watching(directory, makeWatch: makeWatch)
        return (watch, unavailable)
    }

    /// Reads in what the writing process wrote since the last catch-up:
    /// the objects it inserted, updated and deleted, and whether it changed
    /// the store's model (a migration: the caller opens the store again).
    func catchUp() throws(StrataError) -> (changes: ObjectChanges, modelChanged: Bool) {
        let model = self.model
        var modelChanged = false
        // The writer's index keys are not known here: every earlier answer goes.
        indexKeyWrites.willCatchUp()
        defer { indexKeyWrites.didCatchUp(at: records.readVersion) }
        let keys = try records.catchUp { key in
            if key.first == RecordCoding.metaTag {
                // The primary keys handed out are the writer's business.
                if key != RecordCoding.keysKey { modelChanged = true }
                return false
            }
            return RecordCoding.objectID(fromKey: key, model: model) != nil
        }
        var changes = ObjectChanges()
        for changed in keys {
            guard let id = RecordCoding.objectID(fromKey: changed.key, model: model) else { continue }
            switch (changed.existedBefore, changed.existsNow) {
            case (false, true): changes.inserted.append(id)
            case (true, true): changes.updated.append(id)
            case (true, false): changes.deleted.append(id)
            case (false, false): continue
            }
        }
        return (changes, modelChanged)
    }

    /// The directory of a log store opened read-only; nil for any other.
    private static func readOnlyDirectory(of store: any RecordStore) -> String? {
        switch store {
        case let log as LogRecordStore: log.engine.options.readOnly ? log.engine.directory : nil
        case let migrated as MigratedRecordStore: readOnlyDirectory(of: migrated.base)
        default: nil
        }
    }
}
