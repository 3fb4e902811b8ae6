package import Foundation
@_spi(Coding) internal import StrataStore

/// How persistent history lies in the store, beside the objects.
///
/// A transaction is the key `t` and its number (8 bytes, big-endian), so
/// the history is one prefix in transaction order. A named cursor is `c`
/// and its name; `c` NUL `pruned` holds the number through which every
/// transaction was removed (0 when none was). Transactions name objects
/// by their entity's canonical name (its first name, which a rename keeps
/// as its renaming identifier) and primary key, and updated properties by
/// name as they were then, so a migration that renumbers or renames
/// entities leaves history readable.
///
/// A transaction record: format byte (1), timestamp (microseconds since
/// 1970, 8 bytes little-endian), author and context name (each a varint of
/// length + 1, 0 for none, then UTF-8), the entity names (a count, then
/// each as a length and UTF-8), the property names likewise, then the
/// inserts, updates and deletes: each a count, then per object its
/// entity's place in the name table and its primary key (varints), and for
/// an update the count and places of its changed properties. Format 2
/// (written only when a delete keeps values) adds the tombstones: a count,
/// then per tombstone its delete's position among the deletes, a count of
/// values, and per value its property's place and the value (a type byte
/// and its bytes: ``appendTombstoneValue(_:to:)``).
package enum HistoryCoding {
    static let transactionTag: UInt8 = 0x74  // "t"
    static let cursorTag: UInt8 = 0x63       // "c"
    static let prunedKey: [UInt8] = [cursorTag, 0] + Array("pruned".utf8)
    static let format: UInt8 = 1
    static let formatWithTombstones: UInt8 = 2

    static func key(_ number: UInt64) -> [UInt8] {
        var key: [UInt8] = [transactionTag]
        key.reserveCapacity(9)
        withUnsafeBytes(of: number.bigEndian) { key.append(contentsOf: $0) }
        return key
    }

    /// The number a transaction key holds; nil for any other key.
    static func number(fromKey key: UnsafeRawBufferPointer) -> UInt64? {
        guard key.count == 9, key[0] == transactionTag else { return nil }
        return UInt64(bigEndian: key.loadUnaligned(fromByteOffset: 1, as: UInt64.self))
    }

    /// Every transaction from `number` on.
    static func ranges(from number: UInt64) -> KeyRanges {
        [KeyRange(start: key(number), end: [transactionTag + 1])]
    }

    static func cursorKey(_ name: String) -> [UInt8] { [cursorTag] + Array(name.utf8) }

    /// The cursor a key names; nil for another key (or the pruned mark).
    static func cursorName(fromKey key: UnsafeRawBufferPointer) -> String? {
        guard key.count > 1, key[0] == cursorTag, key[1] != 0 else { return nil }
        return String(decoding: UnsafeRawBufferPointer(rebasing: key[1...]), as: UTF8.self)
    }

    static func numberValue(_ number: UInt64) -> [UInt8] {
        var value: [UInt8] = []
        value.appendInteger(number)
        return value
    }

    static func number(fromValue value: [UInt8]) -> UInt64? {
        value.withUnsafeBytes { number(fromValue: $0) }
    }

    /// A cursor's or the mark's number: 8 bytes, little-endian.
    static func number(fromValue value: UnsafeRawBufferPointer) -> UInt64? {
        guard value.count == 8 else { return nil }
        return UInt64(littleEndian: value.loadUnaligned(as: UInt64.self))
    }

    /// The number of `store`'s oldest transaction (`newest`: its newest); nil when it keeps none.
    static func transactionNumber(in store: any RecordStore, newest: Bool) throws(StrataError) -> UInt64? {
        var number: UInt64?
        try store.forEachKey(in: ranges(from: 0), descending: newest) { key, _ throws(StrataError) -> Bool in
            number = self.number(fromKey: key)
            return false
        }
        return number
    }

    /// The number through which `store` removed transactions (0: none).
    static func pruned(in store: any RecordStore) throws(StrataError) -> UInt64 {
        try store.get(prunedKey).flatMap(number(fromValue:)) ?? 0
    }

    /// How much history a store holds, read by `forEach`, a prefix scan
    /// of the store (`isEnabled` left false: the store does not say).
    static func summarize(
        _ forEach: (_ prefix: [UInt8], _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void) throws(StrataError) -> Void
    ) throws(StrataError) -> HistorySummary {
        var summary = HistorySummary()
        try forEach([transactionTag]) { key, value in
            guard let number = number(fromKey: key) else { return }
            if summary.transactions == 0 { summary.oldest = number }
            summary.newest = number
            summary.transactions += 1
            summary.bytes += key.count + value.count
        }
        try forEach([cursorTag]) { key, value in
            guard let number = number(fromValue: value) else { return }
            if let name = cursorName(fromKey: key) {
                summary.cursors[name] = number
            } else if key.elementsEqual(prunedKey) {
                summary.pruned = number
            }
        }
        return summary
    }

    // MARK: Records

    /// What a save hands history: each object by ID, and each update's
    /// changed property positions.
    package struct Written {
        var timestamp: Date
        var author: String?
        var contextName: String?
        var inserted: [ObjectID]
        var updated: [(ObjectID, PropertyIndexSet)]
        var deleted: [ObjectID]
        /// The values each delete keeps, by position among `deleted` (an
        /// entry only for a delete that keeps some).
        var tombstones: [(delete: Int, values: [(index: Int, value: PropertyValue)])]

        package init(
            timestamp: Date, author: String?, contextName: String?, inserted: [ObjectID], updated: [(ObjectID, PropertyIndexSet)], deleted: [ObjectID],
            tombstones: [(delete: Int, values: [(index: Int, value: PropertyValue)])] = []
        ) {
            self.timestamp = timestamp
            self.author = author
            self.contextName = contextName
            self.inserted = inserted
            self.updated = updated
            self.deleted = deleted
            self.tombstones = tombstones
        }
    }

    package static func encode(_ written: Written) -> [UInt8] {
        // The name tables, in order of first use. A save touches a few
        // entities and properties, so they are searched linearly (a save of
        // one object pays for no hash table), and each run of objects of
        // one entity finds its place at the first comparison.
        var entities: [EntityDescription] = []
        var properties: [(entity: EntityDescription, index: Int)] = []
        // Each entity's properties' places, by the entity's place and the
        // property's index (-1: not placed yet): an update's changed
        // properties, most often the same few over a whole import, are
        // found by name once.
        var placed: [[Int]] = []
        var lastEntity = 0
        func entityPlace(_ entity: EntityDescription) -> Int {
            if lastEntity < entities.count, entities[lastEntity] === entity { return lastEntity }
            lastEntity = entities.firstIndex { $0 === entity } ?? {
                entities.append(entity)
                placed.append([])
                return entities.count - 1
            }()
            return lastEntity
        }
        func propertyPlace(_ entity: EntityDescription, _ index: Int) -> Int {
            let place = entityPlace(entity)
            if index < placed[place].count, placed[place][index] >= 0 { return placed[place][index] }
            let name = entity.properties[index].name
            let found = properties.firstIndex { $0.entity.properties[$0.index].name == name } ?? {
                properties.append((entity, index))
                return properties.count - 1
            }()
            if placed[place].count <= index { placed[place] += repeatElement(-1, count: index + 1 - placed[place].count) }
            placed[place][index] = found
            return found
        }
        // First pass: the tables, so that the record is written in one buffer.
        for id in written.inserted { _ = entityPlace(id.entity) }
        for (id, changed) in written.updated {
            _ = entityPlace(id.entity)
            for index in changed { _ = propertyPlace(id.entity, index) }
        }
        for id in written.deleted { _ = entityPlace(id.entity) }
        for (delete, values) in written.tombstones {
            for (index, _) in values { _ = propertyPlace(written.deleted[delete].entity, index) }
        }

        var out: [UInt8] = []
        let objects = written.inserted.count + written.updated.count + written.deleted.count
        out.reserveCapacity(32 + (written.author?.utf8.count ?? 0) + (written.contextName?.utf8.count ?? 0)
                            + entities.reduce(0) { $0 + $1.canonicalName.utf8.count + 1 } + properties.count * 12 + objects * 6)
        out.append(written.tombstones.isEmpty ? format : formatWithTombstones)
        out.appendInteger(microseconds(written.timestamp))
        func appendText(_ text: String?) {
            guard let text else { return out.appendVarint(0) }
            out.appendVarint(UInt64(text.utf8.count) + 1)
            out.append(contentsOf: text.utf8)
        }
        func appendName(_ name: String) {
            out.appendVarint(UInt64(name.utf8.count))
            out.append(contentsOf: name.utf8)
        }
        appendText(written.author)
        appendText(written.contextName)
        out.appendVarint(UInt64(entities.count))
        for entity in entities { appendName(entity.canonicalName) }
        out.appendVarint(UInt64(properties.count))
        for (entity, index) in properties { appendName(entity.properties[index].name) }
        func appendObjects(_ ids: [ObjectID]) {
            out.appendVarint(UInt64(ids.count))
            for id in ids {
                out.appendVarint(UInt64(entityPlace(id.entity)))
                out.appendVarint(id.primaryKey)
            }
        }
        appendObjects(written.inserted)
        out.appendVarint(UInt64(written.updated.count))
        for (id, changed) in written.updated {
            out.appendVarint(UInt64(entityPlace(id.entity)))
            out.appendVarint(id.primaryKey)
            out.appendVarint(UInt64(changed.count))
            for index in changed { out.appendVarint(UInt64(propertyPlace(id.entity, index))) }
        }
        appendObjects(written.deleted)
        if !written.tombstones.isEmpty {
            out.appendVarint(UInt64(written.tombstones.count))
            for (delete, values) in written.tombstones {
                out.appendVarint(UInt64(delete))
                out.appendVarint(UInt64(values.count))
                for (index, value) in values {
                    out.appendVarint(UInt64(propertyPlace(written.deleted[delete].entity, index)))
                    appendTombstoneValue(value, to: &out)
                }
            }
        }
        return out
    }

    /// An attribute's value in a tombstone: a type byte, then 8 bytes
    /// (little-endian) for an integer, double, date or bool, 16 for a
    /// UUID, a varint length and the bytes for a string or data; nothing
    /// for nil.
    static func appendTombstoneValue(_ value: PropertyValue, to out: inout [UInt8]) {
        switch value {
        case .null, .object, .objects:  // (attributes only)
            out.append(0)
        case .string(let text):
            out.append(1)
            out.appendVarint(UInt64(text.utf8.count))
            out.append(contentsOf: text.utf8)
        case .integer(let i):
            out.append(2)
            out.appendInteger(i)
        case .double(let d):
            out.append(3)
            out.appendInteger(d.bitPattern)
        case .bool(let b):
            out.append(4)
            out.appendInteger(UInt64(b ? 1 : 0))
        case .date(let date):
            out.append(5)
            out.appendInteger(date.timeIntervalSinceReferenceDate.bitPattern)
        case .data(let data):
            out.append(6)
            out.appendVarint(UInt64(data.count))
            out.append(contentsOf: data)
        case .uuid(let uuid):
            out.append(7)
            withUnsafeBytes(of: uuid.uuid) { out.append(contentsOf: $0) }
        }
    }

    static func readTombstoneValue(_ reader: inout ByteReader, limit: Int) -> PropertyValue? {
        guard let type = reader.readInteger(UInt8.self) else { return nil }
        switch type {
        case 0: return .null
        case 1:
            guard let length = reader.readLength(limit: limit), let bytes = reader.readBytes(length) else { return nil }
            return .string(String(decoding: bytes, as: UTF8.self))
        case 2: return reader.readInteger(Int64.self).map(PropertyValue.integer)
        case 3: return reader.readInteger(UInt64.self).map { .double(Double(bitPattern: $0)) }
        case 4:
            guard let flag = reader.readInteger(UInt64.self), flag <= 1 else { return nil }
            return .bool(flag == 1)
        case 5: return reader.readInteger(UInt64.self).map { .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: $0))) }
        case 6:
            guard let length = reader.readLength(limit: limit), let bytes = reader.readBytes(length) else { return nil }
            return .data(Data(bytes))
        case 7:
            guard let bytes = reader.readBytes(16) else { return nil }
            let b = Array(bytes)
            return .uuid(UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])))
        default: return nil
        }
    }

    /// The transaction `number` of store `store` holds in `record`, its
    /// objects named under `model` (changes to entities it lacks left
    /// out); nil when the record does not decode.
    package static func decode(_ record: UnsafeRawBufferPointer, number: UInt64, store: UUID, model: ManagedObjectModel) -> HistoryTransaction? {
        var reader = ByteReader(record)
        guard let recordFormat = reader.readInteger(UInt8.self), recordFormat == format || recordFormat == formatWithTombstones,
              let micros = reader.readInteger(Int64.self) else { return nil }
        func readText() -> String?? {
            guard let length = reader.readLength(limit: record.count) else { return nil }
            if length == 0 { return .some(nil) }
            guard let bytes = reader.readBytes(length - 1) else { return nil }
            return .some(String(decoding: bytes, as: UTF8.self))
        }
        func readTable() -> [String]? {
            guard let count = reader.readLength(limit: record.count) else { return nil }
            var names: [String] = []
            for _ in 0..<count {
                guard let length = reader.readLength(limit: record.count), let bytes = reader.readBytes(length) else { return nil }
                names.append(String(decoding: bytes, as: UTF8.self))
            }
            return names
        }
        guard let author = readText(), let contextName = readText(), let entityNames = readTable(), let propertyNames = readTable() else { return nil }
        let entities = entityNames.map { name in model.entity(named: name).flatMap { $0.canonicalName == name ? $0 : nil }
            ?? model.entities.first { $0.canonicalName == name } }
        var changes: [HistoryChange] = []
        // Where each delete's change lies in `changes` (nil: its entity is gone).
        var deletePositions: [Int?] = []
        func readObject() -> ObjectID?? {
            guard !entities.isEmpty, let place = reader.readLength(limit: entities.count - 1), let primaryKey = reader.readVarint() else { return nil }
            guard let entity = entities[place] else { return .some(nil) }
            return .some(ObjectID(entity: entity, primaryKey: primaryKey, isTemporary: false))
        }
        func readObjects(_ kind: HistoryChange.Kind) -> Bool {
            guard let count = reader.readLength(limit: record.count) else { return false }
            for _ in 0..<count {
                guard let id = readObject() else { return false }
                var updatedProperties: [String] = []
                if kind == .update {
                    guard let changed = reader.readLength(limit: record.count) else { return false }
                    for _ in 0..<changed {
                        guard !propertyNames.isEmpty, let place = reader.readLength(limit: propertyNames.count - 1) else { return false }
                        updatedProperties.append(propertyNames[place])
                    }
                }
                if kind == .delete { deletePositions.append(id == nil ? nil : changes.count) }
                if let id { changes.append(HistoryChange(objectID: id, kind: kind, updatedProperties: updatedProperties)) }
            }
            return true
        }
        guard readObjects(.insert), readObjects(.update), readObjects(.delete) else { return nil }
        if recordFormat == formatWithTombstones {
            // Tombstones are of deletes: a record with none has none to keep.
            guard !deletePositions.isEmpty, let count = reader.readLength(limit: record.count), count > 0 else { return nil }
            var previous = -1
            for _ in 0..<count {
                // Ascending, one per delete.
                guard let delete = reader.readLength(limit: deletePositions.count - 1), delete > previous,
                      let values = reader.readLength(limit: record.count), values > 0 else { return nil }
                previous = delete
                var tombstone: [String: PropertyValue] = [:]
                for _ in 0..<values {
                    guard !propertyNames.isEmpty, let place = reader.readLength(limit: propertyNames.count - 1),
                          tombstone[propertyNames[place]] == nil,
                          let value = readTombstoneValue(&reader, limit: record.count) else { return nil }
                    tombstone[propertyNames[place]] = value
                }
                if let position = deletePositions[delete] { changes[position].tombstone = tombstone }
            }
        }
        guard reader.isAtEnd else { return nil }
        return HistoryTransaction(
            token: HistoryToken(storeIdentifier: store, transactionNumber: number),
            timestamp: Date(timeIntervalSince1970: Double(micros) / 1_000_000),
            author: author, contextName: contextName, changes: changes)
    }

    /// `date` in whole microseconds since 1970, within what 64 bits hold.
    static func microseconds(_ date: Date) -> Int64 {
        let micros = (date.timeIntervalSince1970 * 1_000_000).rounded()
        if micros.isNaN { return 0 }
        if micros >= 9.2e18 { return .max }
        if micros <= -9.2e18 { return .min }
        return Int64(micros)
    }

    /// A record's timestamp, without decoding the rest.
    static func timestamp(of record: [UInt8]) -> Date? {
        guard record.count >= 9, record[0] == format || record[0] == formatWithTombstones else { return nil }
        let micros = record.withUnsafeBytes { Int64(littleEndian: $0.loadUnaligned(fromByteOffset: 1, as: Int64.self)) }
        return Date(timeIntervalSince1970: Double(micros) / 1_000_000)
    }
}
