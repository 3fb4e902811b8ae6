@testable import Strata
import Testing

/// The rules ``IndexKeyWrites`` answers by, step by step: a key being
/// written is never answered as unwritten, whichever version the lookup
/// read; once written, only a version that includes the write is; a
/// catch-up, and dropping the marks past the capacity, forget everything
/// before them.
@Suite struct IndexKeyWritesTests {
    static func hash(_ key: [UInt8]) -> UInt64 {
        key.withUnsafeBytes { IndexKeyWrites.hash(prefix: UnsafeRawBufferPointer(start: nil, count: 0), key: $0) }
    }

    ///     save (writes key a)            lookup (read version 9, entry of a at 9)
    ///     willWrite [a]
    ///                                    unwritten(a, since 9)? no — under way
    ///     the write becomes visible at 10
    ///                                    unwritten(a, since 9)? no — written at 10
    ///     didWrite(visibleAt: 10)
    ///                                    unwritten(a, since 9)? no; since 10? yes
    ///                                    unwritten(b, since 0)? yes — never written
    @Test func aKeyUnderWayOrWrittenLaterIsNotUnwritten() {
        let writes = IndexKeyWrites()
        let a = Self.hash([1, 2, 3]), b = Self.hash([4, 5])
        #expect(a != b)
        #expect(writes.unwritten(a, since: 9))
        writes.willWrite([a])
        #expect(!writes.unwritten(a, since: 9))
        #expect(!writes.unwritten(a, since: 1_000), "a write under way has no version yet")
        #expect(writes.unwritten(b, since: 9))
        writes.didWrite(visibleAt: 10)
        #expect(!writes.unwritten(a, since: 9))
        #expect(writes.unwritten(a, since: 10))
        #expect(writes.unwritten(b, since: 0))
    }

    /// A catch-up names no keys: during it nothing is unwritten, after it
    /// nothing known before its version is.
    @Test func aCatchUpForgetsEverythingBeforeIt() {
        let writes = IndexKeyWrites()
        let a = Self.hash([7])
        writes.willCatchUp()
        #expect(!writes.unwritten(a, since: 5))
        writes.didCatchUp(at: 20)
        #expect(!writes.unwritten(a, since: 19))
        #expect(writes.unwritten(a, since: 20))
    }

    /// Past the capacity the marks go, and the floor rises to the version
    /// of the write that dropped them: a key it did not write is known
    /// unwritten only since then.
    @Test func pastTheCapacityTheFloorRises() {
        let writes = IndexKeyWrites()
        let first = (0..<IndexKeyWrites.capacity).map { Self.hash(withUnsafeBytes(of: UInt32($0)) { Array($0) }) }
        // Writes of as many keys as are marked one by one, at versions 1 … 8.
        var version: UInt64 = 0
        for start in stride(from: 0, to: first.count, by: IndexKeyWrites.markedAtMost) {
            version += 1
            writes.willWrite(Array(first[start..<start + IndexKeyWrites.markedAtMost]))
            writes.didWrite(visibleAt: version)
        }
        let untouched = Self.hash([0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
        #expect(writes.unwritten(untouched, since: 1))
        writes.willWrite([Self.hash([9, 9])])
        #expect(!writes.unwritten(untouched, since: 100), "the marks are gone while the write is under way")
        writes.didWrite(visibleAt: version + 1)
        #expect(!writes.unwritten(untouched, since: version))
        #expect(writes.unwritten(untouched, since: version + 1))
    }

    /// A write of more keys than are marked one by one (a batch of a batch
    /// request) is as a full table: it forgets everything before it,
    /// the keys it did not write included.
    @Test func aWriteOfManyKeysForgetsEverythingBeforeIt() {
        let writes = IndexKeyWrites()
        let untouched = Self.hash([0xFF])
        writes.willWrite([Self.hash([1])])
        writes.didWrite(visibleAt: 5)
        #expect(writes.unwritten(untouched, since: 2))
        var hashed = 0
        writes.willWrite(keyCount: IndexKeyWrites.markedAtMost + 1) {
            hashed += 1
            return []
        }
        #expect(hashed == 0, "the keys of a write too large to mark are not hashed")
        #expect(!writes.unwritten(untouched, since: 5))
        writes.didWrite(visibleAt: 6)
        #expect(!writes.unwritten(untouched, since: 5))
        #expect(writes.unwritten(untouched, since: 6))
    }

    /// A save may run beside a catch-up on a read-only store (they take
    /// different locks) and fail there: settling it must not end what the
    /// catch-up holds unknown.
    ///
    ///     catch-up                       save (fails: read-only)        lookup
    ///     willCatchUp
    ///                                    willWrite [] · didWrite(11)
    ///                                                                   unwritten(a, since 11)? no
    ///     didCatchUp(at: 12)
    ///                                                                   since 11? no · since 12? yes
    @Test func aSaveSettlingBesideACatchUpLeavesItUnknown() {
        let writes = IndexKeyWrites()
        let a = Self.hash([3, 1, 4])
        writes.willCatchUp()
        writes.willWrite([])
        writes.didWrite(visibleAt: 11)
        #expect(!writes.unwritten(a, since: 11))
        writes.didCatchUp(at: 12)
        #expect(!writes.unwritten(a, since: 11))
        #expect(writes.unwritten(a, since: 12))
    }

    /// The coordinator answers only for a version past the entry's, of
    /// the same store: a version that went back (a follower whose writer
    /// lost a log tail it had read) is never taken for a later one.
    @Test func theCoordinatorAnswersOnlyForALaterVersion() throws {
        let coordinator = try makeCoordinator(model: makeModel(recipeUniqueness: [["name"]]))
        let entity = try #require(coordinator.model.entity(named: "Recipe"))
        let key = QueryPlanner.encoding(of: .string("Soup"))
        let version = try coordinator.storeReadVersion()
        let later = StoreReadVersion(generation: version.generation, sequence: version.sequence + 1)
        #expect(coordinator.indexKey(key, of: entity, index: 0, unwrittenSince: version, now: later))
        #expect(!coordinator.indexKey(key, of: entity, index: 0, unwrittenSince: version, now: version))
        #expect(!coordinator.indexKey(key, of: entity, index: 0, unwrittenSince: later, now: version))
        let otherStore = StoreReadVersion(generation: version.generation + 1, sequence: version.sequence + 1)
        #expect(!coordinator.indexKey(key, of: entity, index: 0, unwrittenSince: version, now: otherStore))
    }
}
