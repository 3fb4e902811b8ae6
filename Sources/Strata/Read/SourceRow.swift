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

/// One object's record as a store scan hands it over, decoded only as far
/// as the reader asks.
struct StoredRecord {
    let id: ObjectID
    let bytes: [UInt8]
    let model: ManagedObjectModel

    /// The whole snapshot.
    func snapshot() throws(StrataError) -> Snapshot {
        guard let snapshot = RecordCoding.decode(bytes, entity: id.entity, model: model) else {
            throw StrataError(.corruptRecord, "the record of \(id) does not decode under the model")
        }
        return snapshot
    }

    /// Whether the record passes `test`, decoding only the properties up to
    /// the last one it reads.
    func passes(_ test: ValueTest, readingUpTo count: Int) throws(StrataError) -> Bool {
        guard let partial = RecordCoding.decode(bytes, entity: id.entity, model: model, prefix: count) else {
            throw StrataError(.corruptRecord, "the record of \(id) does not decode under the model")
        }
        return test.evaluate(partial.values)
    }
}

/// One object of a source scan (``SourceView/forEach(of:_:)``): as stored,
/// or as a level above the store has it.
enum SourceRow {
    case stored(StoredRecord)
    case pending(Snapshot)

    func snapshot() throws(StrataError) -> Snapshot {
        switch self {
        case .stored(let record): try record.snapshot()
        case .pending(let snapshot): snapshot
        }
    }

    /// Whether the object's values pass `test` (a stored record is decoded
    /// only as far as `test` reads).
    func passes(_ test: CompiledTest) throws(StrataError) -> Bool {
        switch self {
        case .stored(let record): try record.passes(test.test, readingUpTo: test.propertiesRead)
        case .pending(let snapshot): test.test.evaluate(snapshot.values)
        }
    }
}

/// A translated predicate and how many leading properties it needs decoded.
struct CompiledTest {
    let test: ValueTest
    let propertiesRead: Int

    init(_ test: ValueTest) {
        self.test = test
        propertiesRead = test.highestPropertyIndex.map { $0 + 1 } ?? 0
    }
}
