internal import StrataStore
import Synchronization

/// The coordinator's store: Strata's log store, or another behind the seam.
enum StoreBackend {
    case log(LogObjectStore)
    case external(ExternalStore)
}

/// A ``PersistentStore`` as the coordinator holds it: with the primary keys
/// it has reserved and not handed out yet, a read version, and the
/// following of the store's transactions with the identifiers of this
/// coordinator's own saves.
///
/// `@unchecked Sendable`: `store` and `keys` are `Sendable` and guard
/// themselves; `readVersion` is atomic; `following` and `ownSaves` are
/// guarded by `lock`, a leaf lock.
final class ExternalStore: @unchecked Sendable {
    let store: any PersistentStore
    let keys: ExternalKeys
    /// Moves on with each save made through this coordinator and each
    /// delivery of other coordinators' transactions: what lookups compare
    /// (another store has no sequence of its own that Strata sees). A
    /// transaction another process committed is seen by reads at once, and
    /// by this version once delivered (within a round trip of the commit).
    let readVersion = Atomic<UInt64>(0)
    private let lock = Lock()
    private var following: (any StoreTransactionFollowing)?
    /// The save identifiers of saves this coordinator made whose
    /// transactions the following has not delivered yet: passed over when
    /// delivered (the save merged them).
    private var ownSaves: Set<UInt64> = []

    init(_ store: any PersistentStore) {
        self.store = store
        keys = ExternalKeys(store)
    }

    deinit { following?.stop() }

    /// Keeps `following`, stopped when this ends or ``stopFollowing()`` is called.
    func follow(with following: any StoreTransactionFollowing) {
        lock.withLock { self.following = following }
    }

    /// Stops delivering transactions; returns once a delivery under way has
    /// ended (but on the delivering thread).
    func stopFollowing() {
        let following = lock.withLock {
            defer { self.following = nil }
            return self.following
        }
        following?.stop()
    }

    /// Notes that this coordinator made the save the store identified by
    /// `saveIdentifier` (if it follows the store); called under the save
    /// lock, which a delivery takes before it asks ``isOwn(_:)``.
    func savedOwn(_ saveIdentifier: UInt64) {
        lock.withLock {
            guard following != nil else { return }
            ownSaves.insert(saveIdentifier)
        }
    }

    /// Whether the saves identified by `saveIdentifiers` are all this
    /// coordinator's own — then they are forgotten, as if delivered.
    func passOverOwn(_ saveIdentifiers: [UInt64]) -> Bool {
        lock.withLock {
            // A run is a handful of saves: more than the set holds cannot all be in it.
            guard saveIdentifiers.count <= ownSaves.count, saveIdentifiers.allSatisfy(ownSaves.contains) else { return false }
            for identifier in saveIdentifiers { ownSaves.remove(identifier) }
            return true
        }
    }

    /// Whether `transaction`, being delivered, is one of this coordinator's own saves.
    func isOwn(_ transaction: StoreTransaction) -> Bool {
        guard let identifier = transaction.saveIdentifier else { return false }
        return lock.withLock { ownSaves.remove(identifier) != nil }
    }
}

/// Primary keys of another store, reserved a block at a time so that an
/// insert (which cannot throw) takes one without a round trip. A block
/// that cannot be had is remembered: the keys handed out meanwhile go on
/// from the last block's end, and the next save throws the error before it
/// writes anything (a key another process holds would fail it anyway).
///
/// A block is twice the size of the one before, from ``firstBlockSize``
/// to ``largestBlockSize``: a process that saves a few objects reserves
/// few keys, one that saves many makes few round trips for them (each
/// context takes keys in blocks of its own and leaves what it did not
/// use, so a save from a fresh context takes more keys than it inserts).
/// The keys a process does not use are gaps in the keys, nothing more.
///
/// `@unchecked Sendable`: `blocks`, `blockSizes` and `failure` are guarded
/// by `lock`.
final class ExternalKeys: @unchecked Sendable {
    static let firstBlockSize: UInt64 = 1_024
    static let largestBlockSize: UInt64 = 65_536

    private let store: any PersistentStore
    private let lock = Lock()
    private var blocks: [ObjectIdentifier: Range<UInt64>] = [:]
    /// The size of each entity's next block.
    private var blockSizes: [ObjectIdentifier: UInt64] = [:]
    private var failure: StrataError?

    init(_ store: any PersistentStore) { self.store = store }

    func take(_ count: UInt64, of entity: EntityDescription) -> Range<UInt64> {
        lock.withLock {
            let key = ObjectIdentifier(entity)
            var block = blocks[key] ?? 0..<0
            if block.count < count {
                let size = blockSizes[key] ?? Self.firstBlockSize
                blockSizes[key] = min(size * 2, Self.largestBlockSize)
                do throws(StrataError) {
                    let fresh = try store.reservePrimaryKeys(for: entity, count: max(count, size))
                    // Back to back with what is left, or a new run.
                    block = block.upperBound == fresh.lowerBound ? block.lowerBound..<fresh.upperBound : fresh
                } catch {
                    failure = failure ?? error
                    block = block.lowerBound..<max(block.upperBound, block.lowerBound + count)
                }
            }
            let taken = block.lowerBound..<block.lowerBound + count
            blocks[key] = taken.upperBound..<block.upperBound
            return taken
        }
    }

    /// The failure to reserve keys since the last call, if any.
    func takeFailure() -> StrataError? {
        lock.withLock {
            defer { failure = nil }
            return failure
        }
    }
}

extension Snapshot {
    init(_ stored: StoredSnapshot) {
        self.init(values: stored.values, version: stored.version)
    }
}
