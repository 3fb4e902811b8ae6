internal import StrataStore
import Synchronization

/// The coordinator's store: Strata's log store, or another behind the seam.
enum StoreBackend {
    case log(LogObjectStore)
    case external(ExternalStore)
}

/// A ``PersistentStore`` as the coordinator holds it: with the primary keys
/// it has reserved and not handed out yet, and a count of the saves made
/// through it (the read version lookups compare: another store has no
/// sequence of its own that Strata sees).
///
/// `@unchecked Sendable`: `store` and `keys` are `Sendable` and guard
/// themselves; `saves` is atomic.
final class ExternalStore: @unchecked Sendable {
    let store: any PersistentStore
    let keys: ExternalKeys
    /// Saves made through this coordinator: moves on with each.
    let saves = Atomic<UInt64>(0)

    init(_ store: any PersistentStore) {
        self.store = store
        keys = ExternalKeys(store)
    }
}

/// Primary keys of another store, reserved a block at a time so that an
/// insert (which cannot throw) takes one without a round trip. A block
/// that cannot be had is remembered: the keys handed out meanwhile go on
/// from the last block's end, and the next save throws the error before it
/// writes anything (a key another process holds would fail it anyway).
///
/// `@unchecked Sendable`: `blocks` and `failure` are guarded by `lock`.
final class ExternalKeys: @unchecked Sendable {
    /// Keys per block: an import of thousands of objects makes a few round trips.
    static let blockSize: UInt64 = 1_024

    private let store: any PersistentStore
    private let lock = Lock()
    private var blocks: [ObjectIdentifier: Range<UInt64>] = [:]
    private var failure: StrataError?

    init(_ store: any PersistentStore) { self.store = store }

    func take(_ count: UInt64, of entity: EntityDescription) -> Range<UInt64> {
        lock.withLock {
            let key = ObjectIdentifier(entity)
            var block = blocks[key] ?? 0..<0
            if block.count < count {
                do throws(StrataError) {
                    let fresh = try store.reservePrimaryKeys(for: entity, count: max(count, Self.blockSize))
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
