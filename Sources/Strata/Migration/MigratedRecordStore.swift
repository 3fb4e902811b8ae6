internal import StrataStore

/// A migrated store as its readers expect it: keys name entities by their
/// position in the current model, and every record is of the current
/// schema generation. Translates keys on the way in and out when entities
/// were renumbered, and upgrades records of older generations as they are
/// read (``StoredSchemas``); a record of the current generation, and the
/// key of a store whose entities kept their numbers, pass untouched.
///
/// Immutable: as safe from any thread as the store it wraps.
final class MigratedRecordStore: RecordStore {
    let base: any RecordStore
    let schemas: StoredSchemas

    init(_ base: any RecordStore, schemas: StoredSchemas) {
        self.base = base
        self.schemas = schemas
    }

    private func stored(_ key: [UInt8]) -> [UInt8] { schemas.key(key, toStored: true) }

    /// `value`, or its upgrade when it is an older generation's record.
    private func current(_ value: [UInt8], storedKey: [UInt8]) throws(StrataError) -> [UInt8] {
        try storedKey.withBytes { (key) throws(StrataError) -> [UInt8] in try schemas.upgraded(value, storedKey: key) ?? value }
    }

    func get(_ key: [UInt8]) throws(StrataError) -> [UInt8]? {
        let storedKey = stored(key)
        guard let value = try base.get(storedKey) else { return nil }
        return try current(value, storedKey: storedKey)
    }

    func forEachWhile(prefix: [UInt8], _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws(StrataError) -> Bool) throws(StrataError) {
        var keyCopy: [UInt8] = [], upgraded: [UInt8] = [], offsets: [Int] = []
        let renumbers = schemas.renumbers(keysStartingWith: prefix)
        try base.forEachWhile(prefix: stored(prefix)) { (key, value) throws(StrataError) -> Bool in
            let upgrade = schemas.upgrade(forRecord: value, storedKey: key)
            if let upgrade, !upgrade.upgrade(value, into: &upgraded, offsets: &offsets) { throw upgrade.malformed }
            func lend(_ key: UnsafeRawBufferPointer) throws(StrataError) -> Bool {
                if upgrade != nil {
                    return try upgraded.withBytes { (raw) throws(StrataError) in try body(key, raw) }
                } else {
                    return try body(key, value)
                }
            }
            if renumbers {
                keyCopy.removeAll(keepingCapacity: true)
                keyCopy.append(contentsOf: key)
                schemas.translate(&keyCopy, toStored: false)
                return try keyCopy.withBytes { (k) throws(StrataError) in try lend(k) }
            } else {
                return try lend(key)
            }
        }
    }

    func forEachKey(
        in keyRanges: KeyRanges, descending: Bool,
        _ body: (_ key: UnsafeRawBufferPointer, _ get: ([UInt8]) throws(StrataError) -> [UInt8]?) throws(StrataError) -> Bool
    ) throws(StrataError) {
        let ranges = keyRanges.ranges
        let storedRanges = KeyRanges(ranges.map { range -> KeyRange in
            let start = stored(range.start)
            guard let end = range.end else { return KeyRange(start: start, end: nil) }
            // A prefix's end may name the next entity: it ends where the
            // translated prefix ends, not where that entity is stored.
            if range.start.count >= 3, end == endOfPrefix(Array(range.start.prefix(3))) {
                return KeyRange(start: start, end: endOfPrefix(Array(start.prefix(3))))
            }
            return KeyRange(start: start, end: stored(end))
        })
        var keyCopy: [UInt8] = []
        // A range within one tag's keys needs only that tag's renumbering.
        let renumbers = ranges.contains { range in
            guard let tag = range.start.first, let end = range.end, end.first == tag || end == [tag &+ 1] else { return schemas.renumbers }
            return schemas.renumbers(keysStartingWith: range.start)
        }
        // A plan's ranges lie in one index, whose keys share the entity
        // number renumbering rewrites: the stored keys keep their order.
        try base.forEachKey(in: storedRanges, descending: descending) { key, get throws(StrataError) -> Bool in
            try withoutActuallyEscaping(get) { (get) throws(StrataError) -> Bool in
                let currentGet = { (key: [UInt8]) throws(StrataError) -> [UInt8]? in
                    let storedKey = self.stored(key)
                    guard let value = try get(storedKey) else { return nil }
                    return try self.current(value, storedKey: storedKey)
                }
                guard renumbers else { return try body(key, currentGet) }
                keyCopy.removeAll(keepingCapacity: true)
                keyCopy.append(contentsOf: key)
                schemas.translate(&keyCopy, toStored: false)
                return try keyCopy.withBytes { (k) throws(StrataError) -> Bool in try body(k, currentGet) }
            }
        }
    }

    func write(_ batch: WriteBatch) throws(StrataError) {
        guard schemas.renumbers else { return try base.write(batch) }
        // One copy of the bytes, each key's entity number patched in place.
        var translated = batch
        translated.rewriteKeysInPlace { schemas.translate($0, toStored: true) }
        try base.write(translated)
    }

    func close() throws(StrataError) { try base.close() }
    var statistics: StoreStatistics? { base.statistics }
    var readVersion: UInt64 { base.readVersion }
    func compact() throws(StrataError) { try base.compact() }
    func makeDurable() throws(StrataError) { try base.makeDurable() }

    /// The base's catch-up, its keys as the model numbers entities.
    func catchUp(keeping: ([UInt8]) -> Bool) throws(StrataError) -> [CaughtUpKey] {
        try base.catchUp { keeping(schemas.key($0, toStored: false)) }.map { changed in
            var current = changed
            current.key = schemas.key(changed.key, toStored: false)
            return current
        }
    }
}
