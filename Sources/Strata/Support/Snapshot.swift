internal import StrataStore

/// An object's values at one level of a context chain (a parent context or
/// the store), with the version a later save checks for conflicts.
package struct Snapshot: Sendable {
    package var values: [PropertyValue]
    package var version: UInt64

    /// Whether this snapshot is known to be older than `version`: both are
    /// versions one context issued (``ManagedObjectContext/nextVersion()``:
    /// the top bit, the context's serial, a counter that only grows) and
    /// this one's counter is lower. Versions from different sources (a
    /// store's, another context's) are not comparable: then false.
    func isOlder(than version: UInt64) -> Bool {
        isComparable(with: version) && self.version < version
    }

    /// Whether `version` is a store's (contexts issue theirs with the top bit set).
    static func isStoreVersion(_ version: UInt64) -> Bool { version >> 63 == 0 }

    /// Whether this snapshot's version and `version` were issued by one
    /// context, so that ``isOlder(than:)`` can order them.
    func isComparable(with version: UInt64) -> Bool {
        let issuer: UInt64 = 0xFFFF_FF00_0000_0000  // the top bit and the serial
        return self.version >> 63 == 1 && self.version & issuer == version & issuer
    }
}

/// What a read by a reader that holds an object's state at a known store
/// version found.
enum VersionedRead {
    /// The store still holds that version: the reader's values are its.
    case unchanged
    /// The store's snapshot now; nil when the object is not stored.
    case read(Snapshot?)
}

/// Everything one save hands to its destination (the parent context or the
/// coordinator): struct-of-arrays, so building and sending it costs a few
/// array appends per object and no hashing.
struct ChangeSet: Sendable {
    var inserted: [ObjectID] = []
    var insertedValues: [[PropertyValue]] = []
    var updated: [ObjectID] = []
    var updatedValues: [[PropertyValue]] = []
    /// The values the saving context started from (for property-level merges).
    var updatedBase: [[PropertyValue]] = []
    /// The destination's version the saving context started from.
    var updatedVersions: [UInt64] = []
    /// The version the saving context shows its children for each updated
    /// object's values (empty when built elsewhere: a batch request's).
    var updatedExposedVersions: [UInt64] = []
    /// The version the saving context shows its children for each inserted
    /// object's values, for a save to the store (empty otherwise).
    var insertedExposedVersions: [UInt64] = []
    var deleted: [ObjectID] = []
    var deletedVersions: [UInt64] = []
    /// The values the saving context started from for each deleted object.
    var deletedBase: [[PropertyValue]] = []
    var mergePolicy: MergePolicy = .error
    /// Who made these changes, for the store's history (see
    /// ``ManagedObjectContext/transactionAuthor``).
    var authors = TransactionAuthors()
    /// Whether the bases and versions are the store's present state of each
    /// updated and deleted object, read under the coordinator's save lock
    /// by whoever built this change set (a batch request): the coordinator
    /// then neither reads those objects again nor judges conflicts.
    var basesAreStored = false
    /// Attributes a batch request sets on stored objects, for the store to
    /// apply where they change a value (for the coordinator only): whoever
    /// built them checked the unique values they set (``uniquenessChecked``);
    /// what they changed is the store's to say.
    var partialUpdates = PartialUpdates()
    /// Whether these changes claim no key the store does not let them
    /// have, as whoever built them checked under this hold of the
    /// coordinator's save lock (a batch insert that looked every key up;
    /// a batch update of attributes no constraint holds): the coordinator
    /// then looks none up again.
    var uniquenessChecked = false

    /// Whether it asks for no change.
    var isEmpty: Bool { inserted.isEmpty && updated.isEmpty && deleted.isEmpty && partialUpdates.ids.isEmpty }

    /// Adds an update of `id` from its `stored` state to `values` (a
    /// change made at the destination's own level: a batch request's).
    mutating func update(_ id: ObjectID, from stored: Snapshot, to values: [PropertyValue]) {
        updated.append(id)
        updatedValues.append(values)
        updatedBase.append(stored.values)
        updatedVersions.append(stored.version)
    }

    /// Frees the change set's contents object by object, passing a yield
    /// point at each (``GracePeriod/release(_:)-([ChangeSet])``).
    mutating func empty(yieldingAt yields: inout YieldPoints) {
        func empty<Element>(_ array: inout [Element]) {
            while array.popLast() != nil { yields.pass() }
        }
        empty(&insertedValues)
        empty(&inserted)
        empty(&updatedValues)
        empty(&updatedBase)
        empty(&updated)
        empty(&deletedBase)
        empty(&deleted)
        empty(&partialUpdates.ids)
        partialUpdates.settings = .each([])
    }
}

/// What the destination did with a ``ChangeSet``.
struct SaveOutcome: Sendable {
    /// The destination's new version of each inserted object.
    var insertedVersions: [UInt64] = []
    /// The destination's version of each updated object after the save.
    var updatedVersions: [UInt64] = []
    /// Updated objects (by position) whose values a merge policy changed:
    /// the values the destination now holds.
    var resolvedValues: [Int: [PropertyValue]] = [:]
    /// Updated objects (by position) the destination had deleted and the
    /// policy let stay deleted.
    var droppedUpdates: Set<Int> = []
    /// Deleted objects (by position) the destination had changed and the
    /// policy kept: their values and version at the destination.
    var keptDeletes: [Int: Snapshot] = [:]
    /// True when the save reached the store (IDs become permanent).
    var reachedStore = false

    /// Whether applying this outcome changes values the destination's
    /// children see (a merge policy resolved a conflict).
    var changesObjectsHere: Bool { !resolvedValues.isEmpty || !droppedUpdates.isEmpty || !keptDeletes.isEmpty }

    /// The i-th inserted object has version `first + i` at the destination.
    mutating func numberInserts(from first: UInt64, count: Int) {
        insertedVersions = (0..<UInt64(count)).map { first + $0 }
    }

    /// Updated object `i` keeps the destination's state (a conflict the policy resolved its way).
    mutating func keep(_ current: Snapshot, forUpdate i: Int) {
        updatedVersions.append(current.version)
        resolvedValues[i] = current.values
    }

    /// Updated object `i` was deleted at the destination; its change is dropped.
    mutating func drop(update i: Int) {
        updatedVersions.append(0)
        droppedUpdates.insert(i)
    }
}
