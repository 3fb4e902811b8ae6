internal import StrataStore

/// Which index keys the store's recent writes touched, by the store
/// version that made each visible: what lets a context's ``LookupMemo``
/// keep answering a key across versions the key's entries did not change
/// in. An import that saves a batch at a time looks its categories, tags
/// or authors up again in every batch; before this, every new store
/// version sent each of them back to a walk of the index.
///
/// A key here is an entry of an index of one attribute without its
/// primary key — the entity's index prefix and the value — which is
/// exactly what a point lookup seeks (``PointTerm``), hashed
/// (``hash(prefix:key:)``): a collision only sends a lookup to the walk.
///
/// The rule that makes an answer safe: a key's mark is set to "being
/// written" before the write can be seen, and to the version that made it
/// visible after; a catch-up of another process's writes, which names no
/// keys, holds everything unknown while it is under way and then raises
/// the floor below which nothing is known. So a lookup that reads the
/// store's version first, then asks here, sees every write that version
/// includes — finished or under way. (The caller also answers only for a
/// version past the entry's: a follower's may go back.)
///
/// Bounded: past ``capacity`` keys the marks are dropped and the floor
/// raised to the version of the write that dropped them; a write of more
/// than ``markedAtMost`` keys drops them too.
///
/// `@unchecked Sendable`: `marks`, `writing`, `floor` and `catchingUp`
/// are guarded by `lock`, a leaf lock.
final class IndexKeyWrites: @unchecked Sendable {
    static let capacity = 1 << 16
    /// A mark or floor while the write that sets it is under way.
    private static let underWay = UInt64.max

    private let lock = Lock()
    /// Each key written: the version that made its last write visible, or `underWay`.
    private var marks: [UInt64: UInt64] = [:]
    /// The keys of the write under way (marked `underWay`).
    private var writing: [UInt64] = []
    /// Nothing is known of writes before this version (`underWay` while a
    /// write that dropped the marks is under way).
    private var floor: UInt64 = 0
    /// Catch-ups under way: nothing is known while one is. Apart from the
    /// floor, which a write settles: a save may run beside a catch-up
    /// (they take different locks), and fail, on a read-only store.
    private var catchingUp = 0

    /// FNV-1a of `prefix` then `key`: one key's hash however its bytes lie.
    @inline(__always)
    static func hash(prefix: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in prefix { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        for byte in key { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash
    }

    /// Whether no write visible after `version` touched the key `hash`
    /// (as far as the store's present state goes: the caller read the
    /// version it answers for before asking, and it is past `version`).
    func unwritten(_ hash: UInt64, since version: UInt64) -> Bool {
        lock.withLock {
            guard catchingUp == 0, floor != Self.underWay, version >= floor else { return false }
            guard let mark = marks[hash] else { return true }
            return mark <= version
        }
    }

    /// The most keys a write marks one by one. A write touching more (a
    /// batch of a batch request) drops the marks and raises the floor to
    /// its version, as a full table does: a few such writes fill the table
    /// anyway, so marking each of their keys would cost their writes and
    /// keep nothing.
    static let markedAtMost = capacity / 8

    /// Marks `hashes` as being written, before the write that touches them
    /// can be seen. A write's ``willWrite(_:)`` and ``didWrite(visibleAt:)``
    /// never overlap another write's: saves write under the coordinator's
    /// `saveLock`. (A catch-up may overlap them; see `catchingUp`.)
    func willWrite(_ hashes: [UInt64]) {
        willWrite(keyCount: hashes.count) { hashes }
    }

    /// ``willWrite(_:)`` for a write touching `count` keys, whose hashes
    /// `hashes` makes only when they are marked.
    func willWrite(keyCount count: Int, _ hashes: () -> [UInt64]) {
        guard count > 0 else { return }
        guard count <= Self.markedAtMost else {
            lock.withLock {
                marks.removeAll(keepingCapacity: true)
                floor = Self.underWay
            }
            return
        }
        let hashes = hashes()
        lock.withLock {
            if marks.count + hashes.count > Self.capacity {
                marks.removeAll(keepingCapacity: true)
                floor = Self.underWay
            }
            for hash in hashes { marks[hash] = Self.underWay }
            writing += hashes
        }
    }

    /// The write marked by ``willWrite(_:)`` is visible at `version` (or
    /// failed, and the store is at `version`: either way nothing after it
    /// is newer than it).
    func didWrite(visibleAt version: UInt64) {
        lock.withLock {
            for hash in writing where marks[hash] == Self.underWay { marks[hash] = version }
            writing.removeAll(keepingCapacity: true)
            if floor == Self.underWay { floor = version }
        }
    }

    /// A catch-up is about to make writes visible whose keys are not known.
    func willCatchUp() {
        lock.withLock { catchingUp += 1 }
    }

    /// The catch-up is done; the store is at `version`. Nothing before it
    /// is known: a follower's version may even have gone back (a writer
    /// that lost a log tail the follower had read).
    func didCatchUp(at version: UInt64) {
        lock.withLock {
            catchingUp -= 1
            floor = version
            marks.removeAll(keepingCapacity: true)
            // A write under way beside it (one that will fail, on a
            // read-only store) keeps its keys marked until it settles.
            for hash in writing { marks[hash] = Self.underWay }
        }
    }
}
