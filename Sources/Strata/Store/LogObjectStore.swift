import Foundation
internal import StrataStore

/// The store behind a coordinator of a log (or in-memory) store: the
/// records, the schema generations they are written under, the key
/// counters and the persistent history's numbering as the store holds
/// them — everything about storage the coordinator does not decide.
/// The coordinator decides what a save does (conflicts, uniqueness,
/// versions, what its contexts hear) and hands the store a
/// ``StoreSaveRequest``; the store turns it into one atomic batch.
///
/// `@unchecked Sendable`: `history`, `nextKeys` and `recordedKeys` are
/// guarded by `lock`, a leaf lock (the history changed only under the
/// coordinator's `saveLock` as well: every change to it is a save, a cursor
/// write or a prune); the rest is set when the store opens and never changes.
final class LogObjectStore: @unchecked Sendable {
    let model: ManagedObjectModel
    /// The records: the engine's log store, or a dictionary in memory,
    /// behind ``MigratedRecordStore`` when older schema generations are read.
    let records: any RecordStore
    let schemas: StoredSchemas
    /// The store's identity, made when it was created.
    let identifier: UUID
    /// The coordinator's count of records read one by one.
    let recordsRead: RecordReadCount
    /// The index keys recent saves touched, for lookups that answer a key
    /// from an earlier version (``IndexKeyWrites``).
    let indexKeyWrites = IndexKeyWrites()
    private let lock = Lock()
    private var history: HistoryState?  // guarded by `lock`; changed under the coordinator's `saveLock` too
    /// Each entity's next primary key (by entity index): no key at or past
    /// it was ever handed out.
    private var nextKeys: [UInt64]      // guarded by `lock`
    /// `nextKeys` as the store last recorded them: a save whose keys are
    /// past them records them again, in its own batch.
    private var recordedKeys: [UInt64]  // guarded by `lock`

    private init(
        model: ManagedObjectModel, records: any RecordStore, schemas: StoredSchemas, identifier: UUID, keys: [UInt64],
        history: HistoryState, recordsRead: RecordReadCount
    ) {
        self.model = model
        self.records = records
        self.recordsRead = recordsRead
        self.schemas = schemas
        self.identifier = identifier
        self.nextKeys = keys
        self.recordedKeys = keys
        self.history = history
    }

    /// Opens (or creates) the store of `type` at `directory` for `model`,
    /// migrating it to the model when its own differs (see
    /// ``PersistentStoreCoordinator/addPersistentStore(_:directory:options:migrationPlan:migrationProgress:history:)``).
    /// A refused open leaves the directory as it was.
    static func open(
        _ type: PersistentStoreCoordinator.StoreType, directory: String?, options: StoreOptions, model: ManagedObjectModel,
        migrationPlan: MigrationPlan?, migrationProgress: MigrationProgressHandler?, history settings: PersistentHistory,
        erasesOnModelMismatch: Bool, indexBuildBatchSize: Int, recordsRead: RecordReadCount
    ) throws(StrataError) -> LogObjectStore {
        var newStore: any RecordStore
        switch type {
        case .inMemory:
            newStore = InMemoryRecordStore()
        case .log:
            guard let directory else { throw StrataError(.invalidArgument, "a log store needs a directory") }
            newStore = try LogRecordStore(directory: directory, options: options)
        }
        let readOnly = options.readOnly && type == .log
        let opening = LogStoreOpening(model: model, indexBuildBatchSize: indexBuildBatchSize)
        do throws(StrataError) {
            var prepared: LogStoreOpening.PreparedStore
            do throws(StrataError) {
                prepared = try opening.prepare(newStore, readOnly: readOnly, plan: migrationPlan, progress: migrationProgress)
            } catch where error.code == .modelMismatch && type == .log && !readOnly && erasesOnModelMismatch {
                // Development only (see `erasesStoreOnModelMismatch`).
                try? newStore.close()
                try? FileManager.default.removeItem(atPath: directory!)
                newStore = try LogRecordStore(directory: directory!, options: options)
                prepared = try opening.prepare(newStore, readOnly: false, plan: nil)
            }
            // The engine's compactions upgrade the old records they copy.
            (newStore as? LogRecordStore)?.engine.setCompactionRewriter(prepared.schemas.compactionRewriter)
            let records = prepared.schemas.needsTranslation ? MigratedRecordStore(newStore, schemas: prepared.schemas) : newStore
            let history = try HistoryState.load(from: records, settings: settings, readOnly: readOnly)
            return LogObjectStore(
                model: model, records: records, schemas: prepared.schemas, identifier: prepared.identifier, keys: prepared.keys,
                history: history, recordsRead: recordsRead)
        } catch {
            // A refused model, a store a newer model migrated: the
            // directory is left as it was (a migration that wrote before
            // failing leaves the store at the old model, closed as usual).
            if let logStore = newStore as? LogRecordStore { try? logStore.closeUntouched() } else { try? newStore.close() }
            throw error
        }
    }

    func close() throws(StrataError) {
        try records.close()
    }

    /// `count` primary keys of `entity` no one will ever get again,
    /// recorded with the next save.
    func reservePrimaryKeys(for entity: EntityDescription, count: UInt64) -> Range<UInt64> {
        lock.withLock {
            let start = nextKeys[Int(entity.index)]
            nextKeys[Int(entity.index)] = start + count
            return start..<start + count
        }
    }

    /// Each entity's next primary key: at least `keys`' (keys handed out
    /// before the store was added) and its own.
    func adoptKeys(_ keys: [UInt64]) {
        lock.withLock {
            for (i, next) in keys.enumerated() where i < nextKeys.count { nextKeys[i] = max(nextKeys[i], next) }
        }
    }

    /// Each entity's next primary key, by entity index.
    var keyCounters: [UInt64] { lock.withLock { nextKeys } }

    /// The key counters a save is to record (nil: recorded already), and
    /// after the save's write, that it did.
    func keysToRecord() -> [UInt64]? {
        lock.withLock { nextKeys != recordedKeys ? nextKeys : nil }
    }

    func recorded(_ keys: [UInt64]) {
        lock.withLock { recordedKeys = keys }
    }

    /// Reads or changes what the store's history holds (change it under
    /// the coordinator's `saveLock` too).
    func withHistoryState<T>(_ body: (inout HistoryState?) -> T) -> T {
        lock.withLock { body(&history) }
    }

    /// Whether saves record their transactions in the store's history.
    var recordsHistory: Bool { withHistoryState { $0?.settings.isEnabled ?? false } }

    /// The number the next transaction gets (nil: the store keeps no history state).
    var nextTransactionNumber: UInt64? { withHistoryState { $0?.next } }
}
