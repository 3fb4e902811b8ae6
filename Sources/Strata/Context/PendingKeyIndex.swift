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
/// the changes the context notes (``noteChanged(_:)``: every write, insert,
/// delete and take-in of a child's save passes through ``ManagedObjectContext/noteChange(_:)``
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
    private struct Table {
        var byKey: [[UInt8]: Set<ObjectID>] = [:]
        /// Each object's value when it was keyed, and its key.
        var keyOf: [ObjectID: Keyed] = [:]
    }

    private struct Keyed {
        let value: PropertyValue
        let key: [UInt8]

        init(_ value: PropertyValue) {
            self.value = value
            var key: [UInt8] = []
            IndexKeyCoding.appendValue(value, to: &key)
            self.key = key
        }
    }

    /// By entity (``EntityDescription/index``), then by property index.
    private var tables: [UInt16: [Int: Table]] = [:]
    /// Objects changed since the tables were last brought up to date.
    private var dirty: [ObjectID] = []

    /// Called for every change the context notes: O(1), and nothing at
    /// all until a lookup has built a table. An import writes an object's
    /// properties one after another: it is listed once for them.
    @inline(__always)
    mutating func noteChanged(_ id: ObjectID) {
        if !tables.isEmpty, dirty.last != id { dirty.append(id) }
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
            if tables.values.contains(where: { $0.values.contains { !$0.keyOf.isEmpty } }) {
                for entity in Array(tables.keys) {
                    for property in Array(tables[entity]!.keys) {
                        tables[entity]![property]!.byKey.removeAll(keepingCapacity: true)
                        tables[entity]![property]!.keyOf.removeAll(keepingCapacity: true)
                    }
                }
            }
            dirty.removeAll(keepingCapacity: true)
            return []
        }
        bringUpToDate(context)
        let tracked = context.inserted.count + context.updated.count
        if let table = tables[entity.index]?[property], table.keyOf.count <= 2 * tracked + 256 {
            // (Beyond twice what is tracked, most entries are claims of
            // objects gone since: built afresh below.)
        } else {
            tables[entity.index, default: [:]][property] = Self.build(entity, property, context)
        }
        let table = tables[entity.index]![property]!
        var found: [ManagedObject] = []
        func add(_ ids: Set<ObjectID>) {
            for id in ids {
                if let object = Self.tracked(id, in: context) { found.append(object) }
            }
        }
        if keys.count <= table.byKey.count {
            for key in keys { if let ids = table.byKey[key] { add(ids) } }
        } else {
            // Fewer keys pending than asked for: each pending key sought among the asked.
            for (key, ids) in table.byKey where leading.contains(key) { add(ids) }
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

    /// Whether `a` and `b` certainly have one key: the same string bytes
    /// (`==` holds for canonically equivalent strings, whose bytes differ),
    /// the same integer or flag. Anything else is encoded and compared.
    private static func encodesAlike(_ a: PropertyValue, _ b: PropertyValue) -> Bool {
        switch (a, b) {
        case (.string(let x), .string(let y)): return x.utf8.elementsEqual(y.utf8)
        case (.integer(let x), .integer(let y)): return x == y
        case (.bool(let x), .bool(let y)): return x == y
        case (.null, .null): return true
        default: return false
        }
    }

    private static func build(_ entity: EntityDescription, _ property: Int, _ context: ManagedObjectContext) -> Table {
        var table = Table()
        func add(_ object: ManagedObject) {
            guard object.entity === entity, !object.flags.contains(.deleted) else { return }
            let keyed = Keyed(object.values[property])
            table.keyOf[object.objectID] = keyed
            table.byKey[keyed.key, default: []].insert(object.objectID)
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
            // (An array: a view of the keys would share the table's storage,
            // and the first write below would copy it whole.)
            guard let properties = tables[entity].map({ Array($0.keys) }) else { continue }
            let object = Self.tracked(id, in: context)
            for property in properties {
                // In place: a copy of a table per change would copy it whole.
                let old = tables[entity]![property]!.keyOf[id]
                // Most changes leave the looked-up attribute as it was: its
                // value is compared, not encoded again.
                if let object, let old, Self.encodesAlike(object.values[property], old.value) { continue }
                if old == nil && object == nil { continue }
                let new = object.map { Keyed($0.values[property]) }
                if let old {
                    tables[entity]![property]!.byKey[old.key]?.remove(id)
                    if tables[entity]![property]!.byKey[old.key]?.isEmpty == true { tables[entity]![property]!.byKey[old.key] = nil }
                }
                tables[entity]![property]!.keyOf[id] = new
                if let new { tables[entity]![property]!.byKey[new.key, default: []].insert(id) }
            }
        }
        dirty.removeAll(keepingCapacity: true)
    }
}
