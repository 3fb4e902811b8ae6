internal import StrataStore

/// A context's changed objects — its inserts and its updates — by the
/// value of an attribute that leads one of their entity's indexes, so that
/// a fetch an index answers finds the pending objects that may match
/// without judging every one of them: find-or-create in a loop, with a
/// batch of new objects pending, costs O(log n + matches) per lookup, not
/// O(the batch).
///
/// Built for an (entity, attribute) the first time a fetch asks for it,
/// from the context's inserts and updates; kept in step afterwards from
/// the changes the context notes (``noteChanged(_:only:)``: every write, insert,
/// delete and take-in of a child's save passes through ``ManagedObjectContext/noteChange(_:only:)``
/// or ``ManagedObjectContext/markUnpublished(_:)``), brought up to date
/// when the next lookup comes — so a context that never looks anything up
/// by index pays one check per change, and one that does pays a hash
/// update per change.
///
/// An entry is a claim, checked at each lookup: an object that has left
/// the context's changes since (saved, rolled back, discarded) is dropped
/// from the answer there, and the tables are emptied once the context
/// holds no change. The encoding is the store index's
/// (``IndexKeyCoding/appendValue(_:to:)``), so the lookup selects
/// exactly the objects an index read would select were they stored.
///
/// Guarded by the owning context's queue, as the context's other tables.
struct PendingKeyIndex {
    /// The objects keyed by one (entity, attribute).
    private struct Table {
        let entity: UInt16
        let property: Int
        var byKey: [Key: Holders] = [:]
        /// Each object's value when it was keyed, and its key.
        var keyOf: [ObjectID: Keyed] = [:]

        init(entity: UInt16, property: Int) {
            self.entity = entity
            self.property = property
        }

        mutating func add(_ id: ObjectID, _ keyed: Keyed) {
            keyOf[id] = keyed
            byKey[keyed.key, default: .none].insert(id)
        }

        mutating func remove(_ id: ObjectID, from key: Key) {
            guard var holders = byKey.removeValue(forKey: key) else { return }
            holders.remove(id)
            if !holders.isEmpty { byKey[key] = holders }
        }

        mutating func removeAll() {
            byKey.removeAll(keepingCapacity: true)
            keyOf.removeAll(keepingCapacity: true)
        }
    }

    /// The objects holding one key: mostly one (a key an import looks up
    /// is mostly unique), kept without a set of its own.
    private enum Holders {
        case none
        case one(ObjectID)
        case many(Set<ObjectID>)

        var isEmpty: Bool {
            if case .none = self { return true }
            return false
        }

        mutating func insert(_ id: ObjectID) {
            switch self {
            case .none: self = .one(id)
            case .one(let other) where other != id: self = .many([other, id])
            case .one: break
            case .many(var ids):
                self = .none
                ids.insert(id)
                self = .many(ids)
            }
        }

        mutating func remove(_ id: ObjectID) {
            switch self {
            case .none: break
            case .one(let other): if other == id { self = .none }
            case .many(var ids):
                self = .none
                ids.remove(id)
                self = ids.count == 1 ? .one(ids.first!) : ids.isEmpty ? .none : .many(ids)
            }
        }

        func forEach(_ body: (ObjectID) -> Void) {
            switch self {
            case .none: break
            case .one(let id): body(id)
            case .many(let ids): for id in ids { body(id) }
            }
        }
    }

    /// A value's encoding, hashed as one run of bytes: an array of bytes
    /// hashes byte by byte, which every lookup and every change brought up
    /// to date paid.
    private struct Key: Hashable {
        let bytes: [UInt8]

        func hash(into hasher: inout Hasher) {
            bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
        }
    }

    private struct Keyed {
        let value: PropertyValue
        let key: Key

        init(_ value: PropertyValue) {
            self.value = value
            // In one allocation, as the lookup's own key.
            self.key = Key(bytes: QueryPlanner.encoding(of: value))
        }
    }

    /// One per (entity, attribute) looked up so far: a few, searched in
    /// turn (cheaper than hashing the pair at every change).
    private var tables: [Table] = []
    /// Objects changed since the tables were last brought up to date.
    private var dirty: [ObjectID] = []

    /// Called for every change the context notes: O(1), and nothing at
    /// all until a lookup has built a table. An import writes an object's
    /// properties one after another: it is listed once for them.
    ///
    /// `property`: the one property the change moves, of an object this
    /// context had changed already — listed then, or in the tables since,
    /// keyed by its values. Unless a table keys that property, its keys
    /// stand (a category gaining product after product is listed once).
    @inline(__always)
    mutating func noteChanged(_ id: ObjectID, only property: Int? = nil) {
        guard !tables.isEmpty, dirty.last != id else { return }
        if let property, !tables.contains(where: { $0.property == property && $0.entity == id.entity.index }) { return }
        dirty.append(id)
    }

    /// The objects of `entity` inserted or updated in `context` whose
    /// attribute `leading.property` encodes as one of `leading`'s keys,
    /// each once. Their values are the context's own, as a fetch with
    /// pending changes sees them.
    mutating func changedObjects(
        of entity: EntityDescription, _ leading: QueryPlan.LeadingEquality, in context: ManagedObjectContext
    ) -> [ManagedObject] {
        let property = leading.property, keys = leading.encodings
        if context.inserted.isEmpty && context.updated.isEmpty {
            // Emptied in place, once (the next batch of changes fills them
            // again); a re-import that changes nothing asks here every time.
            for t in tables.indices where !tables[t].keyOf.isEmpty { tables[t].removeAll() }
            dirty.removeAll(keepingCapacity: true)
            return []
        }
        bringUpToDate(context)
        let tracked = context.inserted.count + context.updated.count
        let t: Int
        if let found = tables.firstIndex(where: { $0.entity == entity.index && $0.property == property }) {
            t = found
            // Beyond twice what is tracked, most entries are claims of
            // objects gone since: built afresh.
            if tables[t].keyOf.count > 2 * tracked + 256 { tables[t] = Self.build(entity, property, context) }
        } else {
            t = tables.count
            tables.append(Self.build(entity, property, context))
        }
        var found: [ManagedObject] = []
        func add(_ holders: Holders) {
            holders.forEach { id in
                if let object = Self.tracked(id, in: context) { found.append(object) }
            }
        }
        if keys.count <= tables[t].byKey.count {
            for key in keys { if let holders = tables[t].byKey[Key(bytes: key)] { add(holders) } }
        } else {
            // Fewer keys pending than asked for: each pending key sought among the asked.
            for (key, holders) in tables[t].byKey where leading.contains(key.bytes) { add(holders) }
        }
        return found
    }

    /// The object under `id` when it is among the context's inserts or updates.
    @inline(__always)
    private static func tracked(_ id: ObjectID, in context: ManagedObjectContext) -> ManagedObject? {
        if let object = context.inserted[id], !object.flags.contains(.deleted) { return object }
        if let object = context.updated[id], !object.flags.contains(.deleted) { return object }
        return nil
    }

    /// Whether `a` and `b` certainly have one key: strings equal under
    /// `==` (canonical equivalence, which is what the key's canonical
    /// composition keeps), the same integer or flag. Anything else is
    /// encoded and compared.
    private static func encodesAlike(_ a: PropertyValue, _ b: PropertyValue) -> Bool {
        switch (a, b) {
        case (.string(let x), .string(let y)): return x == y
        case (.integer(let x), .integer(let y)): return x == y
        case (.bool(let x), .bool(let y)): return x == y
        case (.null, .null): return true
        default: return false
        }
    }

    private static func build(_ entity: EntityDescription, _ property: Int, _ context: ManagedObjectContext) -> Table {
        var table = Table(entity: entity.index, property: property)
        func add(_ object: ManagedObject) {
            guard object.entity === entity, !object.flags.contains(.deleted) else { return }
            table.add(object.objectID, Keyed(object.values[property]))
        }
        for object in context.inserted.values { add(object) }
        for object in context.updated.values { add(object) }
        return table
    }

    /// Re-keys every object changed since the last lookup, in every table of its entity.
    private mutating func bringUpToDate(_ context: ManagedObjectContext) {
        guard !dirty.isEmpty else { return }
        for id in dirty {
            let entity = id.entity.index
            var object: ManagedObject??
            for t in tables.indices where tables[t].entity == entity {
                if object == nil { object = .some(Self.tracked(id, in: context)) }
                let current = object!
                let property = tables[t].property
                let old = tables[t].keyOf[id]
                // Most changes leave the looked-up attribute as it was: its
                // value is compared, not encoded again.
                if let current, let old, Self.encodesAlike(current.values[property], old.value) { continue }
                if old == nil && current == nil { continue }
                if let old { tables[t].remove(id, from: old.key) }
                if let current {
                    tables[t].add(id, Keyed(current.values[property]))
                } else {
                    tables[t].keyOf[id] = nil
                }
            }
        }
        dirty.removeAll(keepingCapacity: true)
    }
}
