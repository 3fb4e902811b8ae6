internal import StrataStore
import Synchronization

/// An entity's property positions by the storage key path of the
/// `@Attribute` or `@Relationship` wrapper that stands for each: what a
/// typed property's read or write looks its property up by.
///
/// The wrapper's accessors are handed the key path of the wrapper, which
/// holds the property's name. Reading the wrapper through it is a generic
/// call into the runtime that costs more than the rest of a read; so each
/// key path is read once, its name found among the entity's properties,
/// and the position kept under the key path's identity.
///
/// Reads take no lock. Entries are only ever added, under `lock`: an entry
/// is written in full, then published by a releasing store of `count`; a
/// reader loads `count` acquiring and reads only the entries below it,
/// which never change once published. Each key path is kept alive, so its
/// identity never passes to another key path. Past `capacity` entries
/// (where a class's accessors were handed a new key path object per call),
/// a position is found by name every time.
///
/// `@unchecked Sendable`: `identities` and `positions` are written under
/// `lock` past `count` only, and read below it only; `keyPaths` is guarded
/// by `lock`.
final class WrapperIndexes: @unchecked Sendable {
    private let capacity: Int
    private let identities: UnsafeMutablePointer<ObjectIdentifier>
    private let positions: UnsafeMutablePointer<Int>
    /// The entries published.
    private let count = Atomic<Int>(0)
    private let lock = Lock()
    private var keyPaths: [AnyKeyPath] = []  // guarded by `lock`

    /// Room for `capacity` key paths: twice the entity's properties is
    /// room for a class's wrappers and a subclass's.
    init(capacity: Int) {
        self.capacity = capacity
        identities = .allocate(capacity: capacity)
        positions = .allocate(capacity: capacity)
    }

    deinit {
        identities.deallocate()
        positions.deallocate()
    }

    /// The position kept for `keyPath`; else `find()`'s, kept from then on.
    @inline(__always)
    func position(of keyPath: AnyKeyPath, orFind find: () -> Int) -> Int {
        let identity = ObjectIdentifier(keyPath)
        let published = count.load(ordering: .acquiring)
        for i in 0..<published where identities[i] == identity { return positions[i] }
        // Full: nothing more is kept, so no lock is taken to try.
        guard published < capacity else { return find() }
        return keep(keyPath, find())
    }

    @inline(never)
    private func keep(_ keyPath: AnyKeyPath, _ position: Int) -> Int {
        let identity = ObjectIdentifier(keyPath)
        lock.withLock {
            let published = count.load(ordering: .relaxed)
            guard published < capacity, !(0..<published).contains(where: { identities[$0] == identity }) else { return }
            identities.advanced(by: published).initialize(to: identity)
            positions.advanced(by: published).initialize(to: position)
            keyPaths.append(keyPath)
            count.store(published + 1, ordering: .releasing)
        }
        return position
    }

    /// The key paths kept (for tests).
    var keptCount: Int { count.load(ordering: .acquiring) }
}
