/// What a context keeps to answer lookups by an attribute's value — a
/// find-or-create loop's — at a cost that does not grow with what it holds
/// or has pending: its changes by key (``PendingKeyIndex``), the store's
/// first entries for keys met before (``LookupMemo``), and which attribute
/// each key path reads (``AttributeReads``).
///
/// Guarded by the owning context's queue, as the context's other tables.
struct KeyLookups {
    /// The inserts and updates by the attributes that lead indexes, for
    /// fetches an index answers.
    var pending = PendingKeyIndex()
    /// The index entries point lookups met first, while the store stays as
    /// it was.
    var memo = LookupMemo()
    /// The attributes key paths named by lookups read.
    var attributes = AttributeReads()
    /// How many index walks point lookups made: with the context's judged
    /// objects, a lookup's cost counted (tests pin that a key met again
    /// before a write is not walked again).
    var walks = 0

    /// What a context's reset lets go of: the memo (its objects are gone).
    /// The pending table empties itself once nothing is pending; key paths
    /// read the same attributes whatever the context holds.
    mutating func reset() {
        memo.removeAll()
    }
}

/// Which attribute each key path a lookup names reads, for one context:
/// found by the key path's identity (a literal in a loop is one object)
/// with no lock, where ``PropertyProbe``'s process-wide table takes one at
/// every lookup.
///
/// Guarded by the owning context's queue.
struct AttributeReads {
    /// The last few asked for: each key path's identity and its entity's,
    /// compared without retaining anything, ...
    private var asked: [(keyPath: ObjectIdentifier, entity: ObjectIdentifier)] = []
    /// ... what each reads, at the same position, ...
    private var reads: [PropertyProbe.Read?] = []
    /// ... and the key paths, held so that none is freed and its address
    /// given to another.
    private var held: [AnyKeyPath] = []

    /// The attribute `keyPath` reads on objects of `entity`; nil when it
    /// reads none, several, a relationship, or values that are not
    /// attribute values (``PropertyProbe/property(read:entity:)``).
    mutating func read(_ keyPath: AnyKeyPath, of entity: EntityDescription) -> PropertyProbe.Read? {
        let wanted = (keyPath: ObjectIdentifier(keyPath), entity: ObjectIdentifier(entity))
        for i in asked.indices where asked[i] == wanted { return reads[i] }
        let read = PropertyProbe.property(read: keyPath, entity: entity)
        if asked.count == 8 {
            asked.removeFirst()
            reads.removeFirst()
            held.removeFirst()
        }
        asked.append(wanted)
        reads.append(read)
        held.append(keyPath)
        return read
    }
}
