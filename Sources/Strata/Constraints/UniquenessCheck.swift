import Foundation

/// The keys a save's objects will hold in their entities' unique indexes,
/// and the judgement of those keys against what a destination holds.
///
/// A save passes when, once applied, no two objects share a key of a unique
/// index. So each object the save inserts or updates *claims* its keys:
/// - two claims on one key conflict (a duplicate within the save);
/// - a claim conflicts with every object holding the key at the destination
///   whose state the save does not itself decide (an object the save updates
///   or deletes will hold whatever the save gives it, so the destination's
///   values for it do not count).
///
/// An updated object whose key did not change held it at the destination
/// already: it is not looked up there (an upsert import's updates cost no
/// index read), only counted against the save's other claims.
///
/// The same judgement runs at every level a save crosses, each against what
/// that level holds (see ``ManagedObjectContext/save()``): the saving child
/// against its whole source, a parent against its own pending changes, the
/// coordinator against the store under its save lock.
struct UniquenessCheck {
    struct Claim {
        let id: ObjectID
        let index: Int
        /// The index entry's bytes before the primary key.
        let key: UniqueKey
        /// The object's values (all properties), for the report.
        let values: [PropertyValue]
        let needsLookup: Bool
    }

    private(set) var claims: [Claim] = []
    /// Objects whose state the save decides: inserted, updated, deleted.
    private var decided: Set<ObjectID> = []

    /// Whether any object `changes` inserts or updates has a uniqueness
    /// constraint (so that a save without any pays one pass over its IDs).
    static func applies(to changes: ChangeSet) -> Bool {
        changes.inserted.contains { !$0.entity.uniqueIndexNumbers.isEmpty }
            || changes.updated.contains { !$0.entity.uniqueIndexNumbers.isEmpty }
    }

    /// The claims of `changes`; nil when none of its objects has a
    /// uniqueness constraint. `updates`: the destination's decision for each
    /// updated object (what it will hold after a merge policy), when known;
    /// an update it keeps or drops claims nothing new.
    init?(_ changes: ChangeSet, updates: [UpdateDecision]? = nil) {
        guard Self.applies(to: changes) else { return nil }
        claims.reserveCapacity(changes.updated.count + changes.inserted.count)
        decided.reserveCapacity(changes.updated.count + changes.inserted.count + changes.deleted.count)
        // Updates first: a new object that meets an updated one on a key is
        // the one reported (and, under an upsert policy, merged into it).
        for (i, id) in changes.updated.enumerated() {
            var values = changes.updatedValues[i]
            if let updates {
                guard case .write(let written, _) = updates[i] else { continue }
                values = written
            }
            claim(id, values, base: changes.updatedBase[i])
        }
        for (i, id) in changes.inserted.enumerated() {
            claim(id, changes.insertedValues[i], base: nil)
        }
        decided.formUnion(changes.inserted)
        decided.formUnion(changes.updated)
        decided.formUnion(changes.deleted)
    }

    private mutating func claim(_ id: ObjectID, _ values: [PropertyValue], base: [PropertyValue]?) {
        let entity = id.entity
        for index in entity.uniqueIndexNumbers {
            guard let bytes = IndexKeyCoding.uniqueKey(values, of: entity, index: index) else { continue }
            let key = UniqueKey(bytes: bytes)
            let unchanged = base.map { IndexKeyCoding.uniqueKey($0, of: entity, index: index) == bytes } ?? false
            claims.append(Claim(id: id, index: index, key: key, values: values, needsLookup: !unchanged))
        }
    }

    /// The keys to look up at the destination: distinct, ascending.
    var keysToLookUp: [UniqueKey] {
        UniqueKey.sorted(Set(claims.lazy.filter(\.needsLookup).map(\.key)))
    }

    /// The conflicts, given what holds each looked-up key at the destination
    /// (`holders`; objects the save decides are left out here).
    func conflicts(holders: [UniqueKey: [ObjectID]]) -> [ConstraintConflict] {
        var first: [UniqueKey: ObjectID] = [:]
        first.reserveCapacity(claims.count)
        var conflicts: [ConstraintConflict] = []
        for claim in claims {
            var others: [ObjectID] = []
            if let earlier = first[claim.key] {
                others.append(earlier)
            } else {
                first[claim.key] = claim.id
            }
            if claim.needsLookup, let held = holders[claim.key] {
                for id in held where !decided.contains(id) && !others.contains(id) { others.append(id) }
            }
            guard !others.isEmpty else { continue }
            let entity = claim.id.entity
            let properties = entity.indexedProperties[claim.index]
            conflicts.append(ConstraintConflict(
                objectID: claim.id,
                constraint: properties.map { entity.properties[$0].name },
                values: properties.map { claim.values[$0] },
                conflictingObjectIDs: others))
        }
        return conflicts
    }

    /// Throws ``StrataError/Code/constraintConflict`` when the save conflicts
    /// at the destination `holders` describes.
    func enforce(holders: [UniqueKey: [ObjectID]]) throws(StrataError) {
        let found = conflicts(holders: holders)
        guard !found.isEmpty else { return }
        var error = StrataError(.constraintConflict, "\(found.count) uniqueness constraint conflict(s); nothing was saved")
        error.constraintConflicts = found
        throw error
    }
}

/// A unique index's entry without its primary key: what every object holding
/// the same values shares. Hashed as one run of bytes (an array of bytes
/// hashes byte by byte, which a save's check paid for every claim).
struct UniqueKey: Hashable, Comparable {
    let bytes: [UInt8]

    func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    /// `keys` in ascending order: laid in one buffer and sorted there
    /// (``ByteStringOrder``), which a batch of keys sharing their index's
    /// tag and a prefix sorts by integers, not by `memcmp` on every comparison.
    static func sorted<Keys: Collection<UniqueKey>>(_ keys: Keys) -> [UniqueKey] {
        let keys = Array(keys)
        return order(of: keys).map { keys[$0] }
    }

    /// The positions of `keys` in ascending order of the keys (equal ones
    /// keep their order), sorted as ``sorted(_:)`` sorts them.
    static func order(of keys: [UniqueKey]) -> [Int] {
        var buffer: [UInt8] = []
        var spans: [Range<Int>] = []
        buffer.reserveCapacity(keys.reduce(0) { $0 + $1.bytes.count })
        spans.reserveCapacity(keys.count)
        for key in keys {
            let start = buffer.count
            buffer += key.bytes
            spans.append(start..<buffer.count)
        }
        return buffer.withUnsafeBytes { raw in ByteStringOrder.order(of: spans, in: raw) }
    }

    /// The positions in `a` of the keys `b` holds too (both ascending and
    /// distinct), ascending: one merge of the two.
    static func positions(ofCommon a: [UniqueKey], _ b: [UniqueKey]) -> [Int] {
        var common: [Int] = []
        var i = 0, j = 0
        while i < a.count && j < b.count {
            let order = compare(a[i], b[j])
            if order < 0 {
                i += 1
            } else if order > 0 {
                j += 1
            } else {
                common.append(i)
                i += 1
                j += 1
            }
        }
        return common
    }

    /// Byte order, by `memcmp`.
    static func < (a: UniqueKey, b: UniqueKey) -> Bool {
        compare(a, b) < 0
    }

    /// Byte order as a sign: negative when `a` comes first, zero when
    /// they are equal, positive when `b` does.
    static func compare(_ a: UniqueKey, _ b: UniqueKey) -> Int {
        a.bytes.withUnsafeBytes { x in
            b.bytes.withUnsafeBytes { y in
                let common = min(x.count, y.count)
                let order = common == 0 ? 0 : memcmp(x.baseAddress!, y.baseAddress!, common)
                return order != 0 ? Int(order) : x.count - y.count
            }
        }
    }
}
