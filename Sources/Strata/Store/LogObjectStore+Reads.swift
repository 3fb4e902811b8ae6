internal import StrataStore

extension LogObjectStore {
    /// `id`'s values and version as stored; nil when it is not stored.
    func values(of id: ObjectID) throws(StrataError) -> Snapshot? {
        recordsRead.add(1)
        guard let bytes = try records.get(RecordCoding.key(id)) else { return nil }
        guard let snapshot = RecordCoding.decode(bytes, entity: id.entity, model: model) else {
            throw RecordCoding.undecodable(id, format: bytes.first)
        }
        return snapshot
    }

    /// ``values(of:)``, unless the record's header says the store holds
    /// version `held`: then the rest is not decoded.
    func values(of id: ObjectID, unlessAt held: UInt64) throws(StrataError) -> VersionedRead {
        recordsRead.add(1)
        guard let bytes = try records.get(RecordCoding.key(id)) else { return .read(nil) }
        if RecordCoding.version(ofRecord: bytes) == held { return .unchanged }
        guard let snapshot = RecordCoding.decode(bytes, entity: id.entity, model: model) else {
            throw RecordCoding.undecodable(id, format: bytes.first)
        }
        return .read(snapshot)
    }

    /// `id`'s version as stored, read from its record's header; nil when it
    /// is not stored.
    func version(of id: ObjectID) throws(StrataError) -> UInt64? {
        recordsRead.add(1)
        guard let bytes = try records.get(RecordCoding.key(id)) else { return nil }
        guard let version = RecordCoding.version(ofRecord: bytes) else { throw RecordCoding.undecodable(id, format: bytes.first) }
        return version
    }

    /// The values and version of each of `ids` as stored, in their order
    /// (nil: not stored), read in primary-key order: neighbouring records
    /// share the engine's index nodes and blocks.
    func values(of ids: [ObjectID]) throws(StrataError) -> [Snapshot?] {
        var snapshots = [Snapshot?](repeating: nil, count: ids.count)
        let order = ids.indices.sorted { a, b in (ids[a].entity.index, ids[a].primaryKey) < (ids[b].entity.index, ids[b].primaryKey) }
        for i in order { snapshots[i] = try values(of: ids[i]) }
        return snapshots
    }

    /// Calls `body` with every stored object of `entity`, in primary-key
    /// order, at one read view (one prefix scan), its record lent for the
    /// call, until it returns false.
    func forEachStored(of entity: EntityDescription, _ body: (BorrowedRecord) throws(StrataError) -> Bool) throws(StrataError) {
        let prefix = RecordCoding.prefix(of: entity)
        try records.forEachWhile(prefix: prefix) { (key, value) throws(StrataError) -> Bool in
            guard let primaryKey = RecordCoding.primaryKey(fromKey: key, prefix: prefix) else {
                throw StrataError(.corruptRecord, "a key of \(entity.name) does not decode under the model")
            }
            return try body(BorrowedRecord(id: ObjectID(entity: entity, primaryKey: primaryKey, isTemporary: false), bytes: value))
        }
    }

    /// Calls `body` with every stored object of `entity` whose entry in
    /// `index` lies in `ranges`, in index order (last first when
    /// `descending`), at one read view, with its record — read only for the
    /// objects `wanted` names, nil for the others — until it returns false.
    func forEachStored(
        of entity: EntityDescription, in ranges: KeyRanges, descending: Bool, index: IndexDescription?,
        reading wanted: (ObjectID) -> Bool, _ body: (ObjectID, BorrowedRecord?) throws(StrataError) -> Bool
    ) throws(StrataError) {
        try records.forEachKey(in: ranges, descending: descending) { entry, get throws(StrataError) -> Bool in
            let id = ObjectID(entity: entity, primaryKey: try Self.primaryKey(ofEntry: entry, entity: entity, index: index), isTemporary: false)
            guard wanted(id) else { return try body(id, nil) }
            recordsRead.add(1)
            guard let bytes = try get(RecordCoding.key(id)) else {
                throw StrataError(.corruptRecord, "\(entity.name)'s index \(index.map(String.init(describing:)) ?? "") names \(id), which is not stored")
            }
            return try bytes.withBytes { (raw) throws(StrataError) -> Bool in try body(id, BorrowedRecord(id: id, bytes: raw, owner: bytes)) }
        }
    }

    /// Calls `body` with each entry of `index` in `ranges`, lent for the
    /// call, and the primary key it ends with, in index order, at one read
    /// view, reading no record, until it returns false.
    func forEachEntry(
        of entity: EntityDescription, in ranges: KeyRanges, descending: Bool, index: IndexDescription?,
        _ body: (UnsafeRawBufferPointer, UInt64) throws(StrataError) -> Bool
    ) throws(StrataError) {
        try records.forEachKey(in: ranges, descending: descending) { entry, _ throws(StrataError) -> Bool in
            try body(entry, try Self.primaryKey(ofEntry: entry, entity: entity, index: index))
        }
    }

    /// The primary key an entry of `index` ends with.
    private static func primaryKey(ofEntry entry: UnsafeRawBufferPointer, entity: EntityDescription, index: IndexDescription?) throws(StrataError) -> UInt64 {
        guard let primaryKey = IndexKeyCoding.primaryKey(ofEntry: entry) else {
            throw StrataError(.corruptRecord, "an entry of \(entity.name)'s index \(index.map(String.init(describing:)) ?? "") is malformed")
        }
        return primaryKey
    }
}
