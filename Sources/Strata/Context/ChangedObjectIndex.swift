/// Where an object stands in a recorded child save (a
/// ``DeferredChildSaves/Entry``), found without scanning the save.
///
/// Every read through a parent that has saves waiting to be taken in asks
/// each of them what it does to the object read: the view context's check
/// of a one-object edit, a child's fault, a fetch laid over the parent. A
/// scan of the save's IDs would make each such question cost the size of
/// the save, paid on the main thread for every edit while a large import
/// waits for the writer.
///
/// Two levels answer it:
/// - per entity, the lowest and highest primary key the save changes. A
///   save of new objects holds keys above every object that existed
///   before it, so a question about any older object stops here — O(the
///   model's entities);
/// - for a save of more than ``hashedAbove`` objects made off the main
///   queue, each object's position, by hash. Its thread builds it before
///   the save is recorded, outside every lock: O(the save), paid by the
///   thread that made the save. A main-queue child's save (its held
///   saves handed on) keeps the ranges only, so the main queue pays no
///   hashing per object it hands on; a question inside its ranges scans.
struct ChangedObjectIndex: Sendable {
    enum Position: Equatable {
        case inserted(Int)
        case updated(Int)
        case deleted(Int)
    }

    /// Saves of up to this many objects are scanned: no hash table pays for itself.
    static let hashedAbove = 64

    /// Per entity, by ``EntityDescription/index``: the keys the save changes.
    private let keys: [ClosedRange<UInt64>?]
    /// Each object's position in ``ChangeSet/inserted``, then `updated`,
    /// then `deleted`, counted across the three.
    private let positions: [ObjectID: Int]?

    init(_ changes: ChangeSet, hashed: Bool) {
        var keys: [ClosedRange<UInt64>?] = []
        for ids in [changes.inserted, changes.updated, changes.deleted] {
            for id in ids {
                let entity = Int(id.entity.index)
                if entity >= keys.count { keys += Array(repeating: nil, count: entity + 1 - keys.count) }
                let key = id.primaryKey
                if let range = keys[entity] {
                    if key < range.lowerBound { keys[entity] = key...range.upperBound }
                    else if key > range.upperBound { keys[entity] = range.lowerBound...key }
                } else {
                    keys[entity] = key...key
                }
            }
        }
        self.keys = keys
        let count = changes.inserted.count + changes.updated.count + changes.deleted.count
        guard hashed, count > Self.hashedAbove else {
            positions = nil
            return
        }
        var positions: [ObjectID: Int] = [:]
        positions.reserveCapacity(count)
        // In the scan's order of preference below: the first one listed wins.
        let inserted = changes.inserted.count, updated = changes.updated.count
        for (i, id) in changes.updated.enumerated() where positions[id] == nil { positions[id] = inserted + i }
        for (i, id) in changes.deleted.enumerated() where positions[id] == nil { positions[id] = inserted + updated + i }
        for (i, id) in changes.inserted.enumerated() where positions[id] == nil { positions[id] = i }
        self.positions = positions
    }

    /// Where `id` stands in `changes` (the change set this was built from),
    /// preferring an update, then a deletion, then an insertion, as a save
    /// that lists an object twice means it; nil when the save leaves it alone.
    func position(of id: ObjectID, in changes: ChangeSet) -> Position? {
        let entity = Int(id.entity.index)
        guard entity < keys.count, let range = keys[entity], range.contains(id.primaryKey) else { return nil }
        if let positions {
            guard let i = positions[id] else { return nil }
            let inserted = changes.inserted.count, updated = changes.updated.count
            if i < inserted { return .inserted(i) }
            if i < inserted + updated { return .updated(i - inserted) }
            return .deleted(i - inserted - updated)
        }
        if let i = changes.updated.firstIndex(of: id) { return .updated(i) }
        if let i = changes.deleted.firstIndex(of: id) { return .deleted(i) }
        if let i = changes.inserted.firstIndex(of: id) { return .inserted(i) }
        return nil
    }
}
