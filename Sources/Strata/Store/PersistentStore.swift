public import Foundation

/// A store other than Strata's own log store, behind the coordinator: the
/// seam the PostgreSQL store (`StrataPostgres`) plugs into, at the level
/// Core Data's incremental store works at — objects by ID with their
/// versions, every object of an entity (narrowed by a predicate where the
/// store can), the holders of unique values, and a save as one atomic
/// write guarded by the versions it read.
///
/// Unfrozen (`@_spi(StoreImplementation)`): it changes as the PostgreSQL
/// store grows. What the coordinator does not ask of such a store yet —
/// index key ranges, batch requests, compaction, migrations (the store
/// migrates its own tables as it opens) — throws a typed error on it.
///
/// Every method may be called from any thread, several at once, but for
/// ``save(_:)`` and ``reservePrimaryKeys(for:count:)``, which the
/// coordinator calls one at a time (under its save lock).
@_spi(StoreImplementation)
public protocol PersistentStore: AnyObject, Sendable {
    /// The store's identity, made when it was created.
    var identifier: UUID { get }

    /// `count` new primary keys of `entity`, no one else's.
    func reservePrimaryKeys(for entity: EntityDescription, count: UInt64) throws(StrataError) -> Range<UInt64>

    /// The stored values and versions of `ids`, in their order (nil: not
    /// stored), read at one state of the store.
    func snapshots(of ids: [ObjectID]) throws(StrataError) -> [StoredSnapshot?]

    /// Calls `body` with every stored object of `entity` that may pass
    /// `predicate` (all when nil), in primary-key order, at one state of
    /// the store, until it returns false. Returns whether every object it
    /// gave passes (then the coordinator judges none again).
    func forEachStored(
        of entity: EntityDescription, matching predicate: StorePredicate?,
        _ body: (ObjectID, StoredSnapshot) throws(StrataError) -> Bool
    ) throws(StrataError) -> Bool

    /// Calls `body` with the stored objects of `entity` that may pass
    /// `predicate` (all when nil) in `order` — each key's attribute values
    /// in Swift's order (``PropertyValue/compare(_:_:)``: `nil` first,
    /// `NaN` last), reversed for a descending key, ties by primary key,
    /// ascending — at one state of the store, until it returns false: a
    /// fetch with a sort and a limit reads its page, not every object.
    /// `expecting` says how many the caller will probably take (a first
    /// page's size). Returns whether every object it gave passes, or nil —
    /// calling `body` never — when it cannot read in that order (the
    /// default: the coordinator then reads every object and sorts them).
    func forEachStored(
        of entity: EntityDescription, matching predicate: StorePredicate?, orderedBy order: [StoreSortKey], expecting: Int,
        _ body: (ObjectID, StoredSnapshot) throws(StrataError) -> Bool
    ) throws(StrataError) -> Bool?

    /// The stored objects of `entity` that pass `predicate` (all when nil),
    /// other than `excluding`, grouped by their values of the attributes
    /// `properties` (none: one group of them all, even when empty), and
    /// per group `columns` computed over them (a count is one `.count`,
    /// ungrouped): one entry per combination held, values grouped as Swift groups them (strings equal by
    /// canonical equivalence are one group). Nil when the store cannot — a
    /// predicate it does not answer exactly, an attribute it does not
    /// group or order as Swift does (the default: the coordinator computes
    /// them over the objects it reads).
    func aggregates(
        of entity: EntityDescription, matching predicate: StorePredicate?, groupedBy properties: [Int],
        computing columns: [StoreAggregate], excluding: [ObjectID]
    ) throws(StrataError) -> [StoreGroup]?

    /// The statement the store sends for a read of `entity`'s objects that
    /// may pass `predicate`, in `order` when given (nil: primary-key
    /// order), as a fetch's `explain` shows it; nil when it has none to
    /// show, or cannot read in that order (the default). Never shows a
    /// constant: they are the statement's parameters.
    func statement(of entity: EntityDescription, matching predicate: StorePredicate?, orderedBy order: [StoreSortKey]?) throws(StrataError) -> String?

    /// The stored objects holding each of `keys` in the attributes of the
    /// uniqueness constraint `constraint` of `entity`, in the order of `keys`.
    func holders(of keys: [[PropertyValue]], constraint: [String], of entity: EntityDescription) throws(StrataError) -> [[ObjectID]]

    /// Whether ``save(_:)`` itself refuses changes that would leave two
    /// stored objects holding one value of a uniqueness constraint —
    /// judged against every committed save as it commits, throwing
    /// ``StrataError/Code/constraintConflict`` with nothing written. Then a
    /// save that a conflict fails whatever it meets (its context's merge
    /// policy is ``MergePolicy/error``) is written without its values
    /// looked up first: ``holders(of:constraint:of:)`` is asked only after
    /// a refusal, to name the conflicts. False (the default): every save's
    /// new values are looked up before it is written.
    var refusesDuplicateUniqueValues: Bool { get }

    /// Writes `changes` whole, or — where an update or a delete finds a
    /// version other than the one it read — none of them, returning those
    /// objects for the coordinator to read again and decide again. A
    /// written save's identifier (``StoreSaveOutcome/written(saveIdentifier:)``)
    /// is how the coordinator tells its own saves from others' among those
    /// it is delivered.
    func save(_ changes: StoreChanges) throws(StrataError) -> StoreSaveOutcome

    /// Starts delivering every transaction saved to the store after
    /// `after` (nil: after the newest one now) — by any coordinator, this
    /// one's included — each once, in the order they committed, to
    /// `deliver`, on a thread of the store's, one call at a time; until the
    /// returned following is stopped. Transactions `passOver` claims may
    /// be skipped unread: it is asked, before the store reads them, with
    /// the save identifiers of every transaction after the last one
    /// delivered up to one the store has heard of, whether all are the
    /// coordinator's own saves, which it merged when it made them.
    /// `onError` hears what interrupted the following (it resumes by
    /// itself, missing nothing). Returns nil for a store no one else
    /// writes, which has nothing to follow (the default).
    func followTransactions(
        after: UInt64?, deliver: @escaping @Sendable ([StoreTransaction]) -> Void,
        passOver: @escaping @Sendable ([UInt64]) -> Bool, onError: @escaping @Sendable (StrataError) -> Void
    ) throws(StrataError) -> (any StoreTransactionFollowing)?

    /// The store's persistent history, when it keeps one that Strata's
    /// history API reads (``PersistentStoreCoordinator/fetchHistory(_:)``,
    /// cursors, pruning, the summary); nil when it keeps none (the default).
    var history: (any StoreHistory)? { get }

    /// Closes the store; later calls throw ``StrataError/Code/noPersistentStore``.
    func close() throws(StrataError)
}

@_spi(StoreImplementation)
extension PersistentStore {
    public var refusesDuplicateUniqueValues: Bool { false }

    public func forEachStored(
        of entity: EntityDescription, matching predicate: StorePredicate?, orderedBy order: [StoreSortKey], expecting: Int,
        _ body: (ObjectID, StoredSnapshot) throws(StrataError) -> Bool
    ) throws(StrataError) -> Bool? { nil }

    public func statement(
        of entity: EntityDescription, matching predicate: StorePredicate?, orderedBy order: [StoreSortKey]?
    ) throws(StrataError) -> String? { nil }

    public func aggregates(
        of entity: EntityDescription, matching predicate: StorePredicate?, groupedBy properties: [Int],
        computing columns: [StoreAggregate], excluding: [ObjectID]
    ) throws(StrataError) -> [StoreGroup]? { nil }

    public func followTransactions(
        after: UInt64?, deliver: @escaping @Sendable ([StoreTransaction]) -> Void,
        passOver: @escaping @Sendable ([UInt64]) -> Bool, onError: @escaping @Sendable (StrataError) -> Void
    ) throws(StrataError) -> (any StoreTransactionFollowing)? { nil }

    public var history: (any StoreHistory)? { nil }
}

/// One key of the order a store reads objects in
/// (``PersistentStore/forEachStored(of:matching:orderedBy:expecting:_:)``).
@_spi(StoreImplementation)
public struct StoreSortKey: Sendable, Hashable {
    /// The attribute, by its index among the entity's properties.
    public var property: Int
    public var descending: Bool

    public init(property: Int, descending: Bool) {
        self.property = property
        self.descending = descending
    }
}

/// What ``PersistentStore/aggregates(of:matching:groupedBy:computing:excluding:)``
/// computes per group.
@_spi(StoreImplementation)
public enum StoreAggregate: Sendable, Hashable {
    /// How many objects.
    case count
    /// The sum of an integer or double attribute's values, by its index.
    case sum(property: Int)
    /// The least and the greatest value of an attribute, in Swift's order
    /// (``PropertyValue``s of one kind: a NaN after every number).
    case minimum(property: Int)
    case maximum(property: Int)
}

/// One group of ``PersistentStore/aggregates(of:matching:groupedBy:computing:excluding:)``.
@_spi(StoreImplementation)
public struct StoreGroup: Sendable, Hashable {
    /// One column's result: `.count`'s in `values`; a sum (`.integer`, or
    /// `.double` for a double attribute or an integer sum beyond 64 bits)
    /// or an extreme in `value`, over `values` values that are not nil
    /// (`value` is `.null` when none is).
    public struct Result: Sendable, Hashable {
        public var value: PropertyValue
        public var values: Int

        public init(value: PropertyValue, values: Int) {
            self.value = value
            self.values = values
        }
    }

    /// The grouped attributes' values, in the order asked.
    public var values: [PropertyValue]
    /// One per column asked, in their order.
    public var results: [Result]

    public init(values: [PropertyValue], results: [Result]) {
        self.values = values
        self.results = results
    }
}

/// A store's delivery of its transactions (``PersistentStore/followTransactions(after:deliver:onError:)``).
@_spi(StoreImplementation)
public protocol StoreTransactionFollowing: Sendable {
    /// Stops the deliveries: none starts after this returns, and one under
    /// way has ended by then — unless called from the delivering thread
    /// (from `deliver`), where it only stops the next one.
    func stop()
}

/// One save to a store as its history holds it: the objects it inserted,
/// updated and deleted.
@_spi(StoreImplementation)
public struct StoreTransaction: Sendable, Hashable {
    /// Its place in the store's order of commits: one more than the one
    /// before, in every process.
    public var number: UInt64
    /// The identifier the store gave its save when it was written
    /// (``StoreSaveOutcome/written(saveIdentifier:)``), nil when it gives none.
    public var saveIdentifier: UInt64?
    public var inserted: [ObjectID]
    public var updated: [ObjectID]
    public var deleted: [ObjectID]

    public init(
        number: UInt64, saveIdentifier: UInt64? = nil, inserted: [ObjectID] = [], updated: [ObjectID] = [], deleted: [ObjectID] = []
    ) {
        self.number = number
        self.saveIdentifier = saveIdentifier
        self.inserted = inserted
        self.updated = updated
        self.deleted = deleted
    }
}

/// An object's values (in its entity's property order, to-manys as
/// `.objects`) and the version its store holds.
@_spi(StoreImplementation)
public struct StoredSnapshot: Sendable, Hashable {
    public var values: [PropertyValue]
    public var version: UInt64

    public init(values: [PropertyValue], version: UInt64) {
        self.values = values
        self.version = version
    }
}

/// One save, as a store writes it: inserts at version 1, updates and
/// deletes with the version the saving context read.
@_spi(StoreImplementation)
public struct StoreChanges: Sendable {
    public struct Update: Sendable {
        public var id: ObjectID
        public var values: [PropertyValue]
        public var expectedVersion: UInt64
        /// The names of the properties it changes (for a store's history).
        public var changedProperties: [String]

        public init(id: ObjectID, values: [PropertyValue], expectedVersion: UInt64, changedProperties: [String] = []) {
            self.id = id
            self.values = values
            self.expectedVersion = expectedVersion
            self.changedProperties = changedProperties
        }
    }

    public struct Delete: Sendable {
        public var id: ObjectID
        public var expectedVersion: UInt64

        public init(id: ObjectID, expectedVersion: UInt64) {
            self.id = id
            self.expectedVersion = expectedVersion
        }
    }

    public var inserted: [(id: ObjectID, values: [PropertyValue])]
    public var updated: [Update]
    public var deleted: [Delete]
    public var author: String?
    public var contextName: String?

    public init(
        inserted: [(id: ObjectID, values: [PropertyValue])] = [], updated: [Update] = [], deleted: [Delete] = [],
        author: String? = nil, contextName: String? = nil
    ) {
        self.inserted = inserted
        self.updated = updated
        self.deleted = deleted
        self.author = author
        self.contextName = contextName
    }
}

/// What a store did with a save.
@_spi(StoreImplementation)
public enum StoreSaveOutcome: Sendable, Equatable {
    /// Written whole, as the save the store identifies by `saveIdentifier`
    /// (nil when it keeps no history): no other save to the store has it,
    /// and the transaction delivered for this save carries it
    /// (``StoreTransaction/saveIdentifier``). A store may number its
    /// transactions only as they commit, so a save need not learn its
    /// transaction's number.
    case written(saveIdentifier: UInt64?)
    /// Nothing written: these objects' stored versions were not the ones read.
    case conflicts([ObjectID])
}
