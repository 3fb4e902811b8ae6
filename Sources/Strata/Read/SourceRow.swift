extension EntityDescription {
    /// An object of this entity that no context registers, to hold values
    /// read elsewhere while a predicate or a sort descriptor looks at them.
    /// Linked to `link` (a context's), a relationship it is asked for faults
    /// its target into that context; it is never inserted anywhere.
    func scratchObject(linkedTo link: ContextLink?) -> ManagedObject {
        let object = managedObjectClass.init(entity: self, insertInto: nil)
        object.link = link
        object.flags = []
        return object
    }
}

/// One object's record as a store scan lends it: its bytes are valid only
/// during the call that passes it (``PersistentStoreCoordinator/forEachStoredRow(of:matching:_:)``).
struct BorrowedRecord {
    let id: ObjectID
    let bytes: UnsafeRawBufferPointer
    /// The array `bytes` lies in, when the record was read into one of its
    /// own (a record an index entry names): kept as it is, not copied again.
    var owner: [UInt8]? = nil

    /// The whole snapshot.
    func snapshot() throws(StrataError) -> Snapshot {
        guard let snapshot = RecordCoding.decode(bytes, entity: id.entity) else { throw corrupt() }
        return snapshot
    }

    /// Whether the record passes `test`, judged where its values lie; the
    /// properties it reads are located in `fields` (a buffer reused from
    /// record to record).
    @inline(__always)
    func passes(_ test: CompiledTest, fields: inout RecordCoding.FieldOffsets) throws(StrataError) -> Bool {
        guard fields.locate(in: bytes, entity: id.entity), let passes = test.encoded.evaluate(bytes, fields, entity: id.entity) else {
            throw corrupt()
        }
        return passes
    }

    /// A copy that outlives the scan.
    func kept() -> StoredRecord { StoredRecord(id: id, bytes: owner ?? Array(bytes)) }

    private func corrupt() -> StrataError { RecordCoding.undecodable(id, format: bytes.first) }
}

/// A stored record kept after the scan that read it, still encoded.
struct StoredRecord {
    let id: ObjectID
    let bytes: [UInt8]

    func snapshot() throws(StrataError) -> Snapshot {
        try bytes.withBytes { (raw) throws(StrataError) in try BorrowedRecord(id: id, bytes: raw).snapshot() }
    }
}

/// One object of a source scan (``SourceView/forEach(of:_:)``): as stored
/// (lent for the call), or as a level above the store has it.
enum SourceRow {
    case stored(BorrowedRecord)
    case pending(Snapshot)
    /// As stored by a store other than the log store, which decoded its
    /// values (``PersistentStore``): the store's, as ``stored(_:)`` is.
    case fetched(Snapshot)
    /// As the row cache holds it (the store's), its record not read: a
    /// fetch that returns it as a fault has nothing to offer the cache.
    case cached(Snapshot)
    /// A stored object an exact plan's index selected (``QueryPlan/isExact``):
    /// it matches, and its record was not read. Only a count or a fetch of
    /// IDs asks for these, and neither needs the values.
    case indexed

    /// Whether the row is the store's (its record read, or not): an exact
    /// plan's entry selected it, and it matches by that.
    var isStored: Bool {
        if case .pending = self { return false }
        return true
    }

    func snapshot() throws(StrataError) -> Snapshot {
        switch self {
        case .stored(let record): return try record.snapshot()
        case .pending(let snapshot), .fetched(let snapshot), .cached(let snapshot): return snapshot
        case .indexed: throw StrataError(.invalidArgument, "an index entry's record was not read")
        }
    }

    /// Whether the object's values pass `test` (a stored record is judged
    /// where its values lie, see ``BorrowedRecord/passes(_:fields:)``).
    @inline(__always)
    func passes(_ test: CompiledTest, fields: inout RecordCoding.FieldOffsets) throws(StrataError) -> Bool {
        switch self {
        case .stored(let record): try record.passes(test, fields: &fields)
        case .pending(let snapshot), .fetched(let snapshot), .cached(let snapshot): test.test.evaluate(snapshot.values)
        case .indexed: true
        }
    }

    /// The row in a form that outlives the scan.
    func kept() -> KeptRow {
        switch self {
        case .stored(let record): .stored(record.kept())
        case .pending(let snapshot): .pending(snapshot)
        case .fetched(let snapshot): .fetched(snapshot)
        case .cached(let snapshot): .cached(snapshot)
        case .indexed: preconditionFailure("Strata: rows are not kept when records are left unread")
        }
    }
}

/// A ``SourceRow`` kept by a match until the fetch sorts and pages.
enum KeptRow {
    case stored(StoredRecord)
    case pending(Snapshot)
    case fetched(Snapshot)
    case cached(Snapshot)

    func snapshot() throws(StrataError) -> Snapshot {
        switch self {
        case .stored(let record): try record.snapshot()
        case .pending(let snapshot), .fetched(let snapshot), .cached(let snapshot): snapshot
        }
    }
}

/// A translated predicate, in both the forms a fetch applies: to decoded
/// values, and to records still encoded.
///
/// A class, so that the encoded form is made once, when the first record is
/// judged: a lookup through an exact plan (``QueryPlan/isExact``) judges
/// only objects the context holds, by their values, and never needs it.
/// Used on the fetching context's queue only.
final class CompiledTest {
    let test: ValueTest
    private(set) lazy var encoded = EncodedTest(test)
    /// How many leading properties must be located to judge a record.
    let propertiesRead: Int

    init(_ test: ValueTest) {
        self.test = test
        propertiesRead = test.highestPropertyIndex.map { $0 + 1 } ?? 0
    }
}
