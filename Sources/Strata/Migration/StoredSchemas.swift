@_spi(Coding) internal import StrataStore

/// The schemas a store's records were written under, oldest first — its
/// schema *generations* — and how to read each as the current model.
///
/// A store starts at generation 0, whose records carry no generation and
/// whose keys number entities by their position in that first model. Each
/// migration that changes how records or keys are laid out adds a
/// generation, in the same atomic batch as the new model record; from then
/// on new records say which generation wrote them (``RecordCoding``), old
/// ones stay where they are and are upgraded as they are read
/// (``RecordUpgrade``). An entity keeps the number its keys were first
/// stored under, whatever its position in later models (renamed, or moved
/// by an entity added before it); a new entity gets a number never used.
///
/// An entity's index entries have a number of their own, the same as its
/// records' until a migration changes its indexes: the new entries are then
/// built before the switch, in batches, under a number never used — which
/// no reader of the old generation looks at — and the switch batch only
/// names it. The entries under the old number are left to
/// ``UnreadKeyRemoval`` to delete, batch by batch, after the switch (and at
/// every read-write open, should a crash have come first).
///
/// Immutable once made: shared by every reader of the store.
package final class StoredSchemas: Sendable {
    package struct Generation: Sendable {
        /// The model schema (``ModelSchema/encode(_:)``).
        let schema: [UInt8]
        /// Per entity position in that schema: the number its records' keys are stored under.
        let numbers: [UInt16]
        /// Per entity position: the number its index entries are stored under.
        let indexNumbers: [UInt16]

        package init(schema: [UInt8], numbers: [UInt16], indexNumbers: [UInt16]? = nil) {
            self.schema = schema
            self.numbers = numbers
            self.indexNumbers = indexNumbers ?? numbers
        }

        /// Every number the generation stores records or index entries under.
        var allNumbers: Set<UInt16> { Set(numbers).union(indexNumbers) }
    }

    let generations: [Generation]
    /// The model the store is read as (the last generation's).
    let model: ManagedObjectModel
    /// The current generation: what new records are written under.
    var current: UInt64 { UInt64(generations.count - 1) }
    /// Per position in ``model``: the number its keys are stored under.
    let storedNumbers: [UInt16]
    /// Per stored number: the position in ``model`` (``none``: none now).
    /// Arrays, not dictionaries: a read of a renumbered store looks one up
    /// per key.
    private let positions: [UInt16]
    /// Per position in ``model``: the number its index entries are stored under.
    let storedIndexNumbers: [UInt16]
    /// Per number index entries are stored under: the position in ``model``
    /// (``none``: entries no reader looks at, awaiting their deletion).
    private let indexPositions: [UInt16]
    private static let none = UInt16.max
    /// Whether some entity's records are stored under a number that is not its position.
    let renumbersRecords: Bool
    /// Whether some entity's index entries are stored under a number that is not its position.
    let renumbersIndexEntries: Bool
    /// Whether either is.
    var renumbers: Bool { renumbersRecords || renumbersIndexEntries }
    /// Per older generation, per stored entity number: how to upgrade its
    /// records (nil: its records read as they are).
    private let upgrades: [[UInt16: RecordUpgrade]]

    /// `generations` must end with one whose schema is `model.schema`.
    package init(generations: [Generation], model: ManagedObjectModel) throws(StrataError) {
        self.generations = generations
        self.model = model
        storedNumbers = generations.last!.numbers
        storedIndexNumbers = generations.last!.indexNumbers
        func positions(of numbers: [UInt16]) -> [UInt16] {
            var positions = Array(repeating: Self.none, count: Int(numbers.max() ?? 0) + 1)
            for (position, number) in numbers.enumerated() { positions[Int(number)] = UInt16(position) }
            return positions
        }
        self.positions = positions(of: storedNumbers)
        indexPositions = positions(of: storedIndexNumbers)
        renumbersRecords = storedNumbers.enumerated().contains { UInt16($0.offset) != $0.element }
        renumbersIndexEntries = storedIndexNumbers.enumerated().contains { UInt16($0.offset) != $0.element }
        // Each older generation maps to the current model through the
        // steps after it, composed: a property removed and added again in
        // between does not carry its old value over.
        var upgrades: [[UInt16: RecordUpgrade]] = Array(repeating: [:], count: generations.count - 1)
        var models = try generations.dropLast().map { (generation) throws(StrataError) in try ModelSchema.decodeCached(generation.schema) }
        models.append(model)
        var mapping: SchemaMapping?
        for g in stride(from: generations.count - 2, through: 0, by: -1) {
            let step = SchemaMapping.infer(from: models[g], to: models[g + 1])
            let through = mapping.map { $0.composed(after: step) } ?? step
            mapping = through
            let newPosition = through.newPosition.map { $0.map(UInt16.init) }
            for (position, entityMapping) in through.entities.enumerated() {
                guard let old = entityMapping.old, !entityMapping.keepsLayout || newPosition[Int(old.index)] != UInt16(position) else { continue }
                upgrades[g][generations[g].numbers[Int(old.index)]] = RecordUpgrade(
                    oldEntity: old, entity: model.entities[position], sources: entityMapping.sources,
                    newPosition: newPosition, generation: UInt64(generations.count - 1))
            }
        }
        self.upgrades = upgrades
    }

    /// A store with one generation: `model`'s, entities numbered by position.
    convenience init(freshFor model: ManagedObjectModel) {
        // Cannot throw: no older generation to decode.
        try! self.init(generations: [Generation(schema: model.schema, numbers: (0..<model.entities.count).map(UInt16.init))], model: model)
    }

    /// Whether readers need ``MigratedRecordStore`` between them and the store.
    var needsTranslation: Bool { renumbers || generations.count > 1 }

    // MARK: Keys

    /// `key` with the entity bytes of an object or index key turned from a
    /// model position into its stored number (or back, with `toStored` false).
    @inline(__always)
    func translate(_ key: inout [UInt8], toStored: Bool) {
        guard renumbers, key.count >= 3 else { return }
        key.withUnsafeMutableBytes { translate($0, toStored: toStored) }
    }

    /// ``translate(_:toStored:)`` on a key in place in a buffer (a write
    /// batch's, say).
    @inline(__always)
    func translate(_ key: UnsafeMutableRawBufferPointer, toStored: Bool) {
        guard renumbers, key.count >= 3 else { return }
        let isIndexEntry: Bool
        switch key[0] {
        case RecordCoding.objectTag where renumbersRecords: isIndexEntry = false
        case IndexKeyCoding.indexTag where renumbersIndexEntries: isIndexEntry = true
        default: return
        }
        let table = toStored ? (isIndexEntry ? storedIndexNumbers : storedNumbers) : (isIndexEntry ? indexPositions : positions)
        guard let translated = Self.entry(in: table, number: Int(UInt16(key[1]) << 8 | UInt16(key[2]))) else { return }
        key[1] = UInt8(translated >> 8)
        key[2] = UInt8(translated & 0xFF)
    }

    /// Whether the current generation reads the record or index entry
    /// stored at `key` — false for what awaits ``UnreadKeyRemoval``: keys
    /// under a number it does not read them under (replaced, removed, or
    /// written by a step a crash cut short). Other keys: true.
    func reads(storedKey key: [UInt8]) -> Bool {
        guard key.count >= 3 else { return true }
        let number = Int(UInt16(key[1]) << 8 | UInt16(key[2]))
        switch key[0] {
        case RecordCoding.objectTag: return Self.entry(in: positions, number: number) != nil
        case IndexKeyCoding.indexTag: return Self.entry(in: indexPositions, number: number) != nil
        default: return true
        }
    }

    /// `table`'s entry for entity number `number`; nil past its end or
    /// where it holds ``none``.
    @inline(__always)
    private static func entry(in table: [UInt16], number: Int) -> UInt16? {
        number < table.count && table[number] != none ? table[number] : nil
    }

    /// Whether keys starting with `prefix` may be stored under other numbers
    /// than their positions (when false, they read as they are stored).
    func renumbers(keysStartingWith prefix: [UInt8]) -> Bool {
        switch prefix.first {
        case RecordCoding.objectTag?: renumbersRecords
        case IndexKeyCoding.indexTag?: renumbersIndexEntries
        default: renumbers
        }
    }

    /// `key` translated (a copy; see ``translate(_:toStored:)``).
    func key(_ key: [UInt8], toStored: Bool) -> [UInt8] {
        var key = key
        translate(&key, toStored: toStored)
        return key
    }

    // MARK: Records

    /// `value`, stored at `storedKey`, rewritten as the current model
    /// writes it; nil when it is current already. Throws
    /// ``StrataError/Code/corruptRecord`` when it does not decode under the
    /// schema it was written with.
    func upgraded(_ value: [UInt8], storedKey: UnsafeRawBufferPointer) throws(StrataError) -> [UInt8]? {
        guard let upgrade = value.withUnsafeBytes({ upgrade(forRecord: $0, storedKey: storedKey) }) else { return nil }
        var out: [UInt8] = [], offsets: [Int] = []
        guard value.withUnsafeBytes({ upgrade.upgrade($0, into: &out, offsets: &offsets) }) else { throw upgrade.malformed }
        return out
    }

    /// The upgrade a record at stored key `key` needs; nil when it reads as it is.
    @inline(__always)
    func upgrade(forRecord value: UnsafeRawBufferPointer, storedKey key: UnsafeRawBufferPointer) -> RecordUpgrade? {
        guard key.count >= 3, key[0] == RecordCoding.objectTag, let format = value.first else { return nil }
        var generation: UInt64 = 0
        if format == 2 {
            var reader = ByteReader(value, offset: 1)
            guard let g = reader.readVarint() else { return nil }
            generation = g
        } else if format != 1 {
            return nil
        }
        guard generation < UInt64(upgrades.count) else { return nil }
        return upgrades[Int(generation)][UInt16(key[1]) << 8 | UInt16(key[2])]
    }

    /// What the engine's compaction does to each value it copies: an
    /// object record an older generation wrote is rewritten as the current
    /// one writes it, so compaction — background or not — leaves every
    /// record it touches current (nil while the store has one generation).
    /// A record that does not decode under its generation is copied as it
    /// is, for verification to report.
    var compactionRewriter: CompactionRewriter? {
        guard generations.count > 1 else { return nil }
        return { [self] key, value, replacement in
            guard let upgrade = upgrade(forRecord: value, storedKey: key) else { return false }
            var offsets: [Int] = []
            replacement.removeAll(keepingCapacity: true)
            return upgrade.upgrade(value, into: &replacement, offsets: &offsets)
        }
    }

    /// `value`, a record stored under entity number `number`, as the
    /// current model reads it (the same bytes when it is current); nil when
    /// it does not decode under the schema it was written with. For tools
    /// and the fuzzer.
    package func currentRecord(_ value: [UInt8], storedNumber number: UInt16) -> [UInt8]? {
        let key = RecordCoding.entityPrefix(RecordCoding.objectTag, number)
        return key.withUnsafeBytes { key in
            do { return try upgraded(value, storedKey: key) ?? value } catch { return nil }
        }
    }

    // MARK: The history record

    package static let historyKey: [UInt8] = [RecordCoding.metaTag] + Array("history".utf8)
    /// The newest history record format this build reads.
    static let newestHistoryFormat: UInt8 = 2

    /// The generations a history record holds, which must end with the
    /// store's model `schema`. Throws ``StrataError/Code/unsupportedFormat``
    /// for a history a newer Strata wrote, ``StrataError/Code/corruptRecord``
    /// for a damaged one.
    static func generations(fromHistory history: [UInt8], endingWith schema: [UInt8]) throws(StrataError) -> [Generation] {
        if let format = history.first, format > newestHistoryFormat {
            throw StrataError(
                .unsupportedFormat,
                "the store's schema history is in format \(format), written by a newer Strata; this build reads formats 1 to \(newestHistoryFormat)")
        }
        guard let generations = decodeHistory(history), generations.last?.schema == schema else {
            throw StrataError(.corruptRecord, "the store's schema history is damaged, or does not end with its model")
        }
        return generations
    }

    /// Format 1 while every entity's index entries share its records'
    /// number (what engines before index numbers read), 2 after: each
    /// generation's index numbers follow its record numbers.
    package func historyRecord() -> [UInt8] {
        let format: UInt8 = generations.allSatisfy({ $0.indexNumbers == $0.numbers }) ? 1 : 2
        var out: [UInt8] = [format]
        out.appendVarint(UInt64(generations.count))
        for generation in generations {
            out.appendVarint(UInt64(generation.numbers.count))
            for number in generation.numbers { out.appendVarint(UInt64(number)) }
            if format == 2 {
                for number in generation.indexNumbers { out.appendVarint(UInt64(number)) }
            }
            out.appendVarint(UInt64(generation.schema.count))
            out.append(contentsOf: generation.schema)
        }
        return out
    }

    package static func decodeHistory(_ bytes: [UInt8]) -> [Generation]? {
        bytes.withUnsafeBytes { raw in
            var reader = ByteReader(raw)
            guard let format = reader.readInteger(UInt8.self), format == 1 || format == 2,
                  let count = reader.readLength(limit: 1 << 16), count > 0 else { return nil }
            func readNumbers(_ n: Int) -> [UInt16]? {
                var numbers: [UInt16] = []
                for _ in 0..<n {
                    guard let number = reader.readVarint(), number <= UInt64(UInt16.max) else { return nil }
                    numbers.append(UInt16(number))
                }
                return Set(numbers).count == numbers.count ? numbers : nil
            }
            var generations: [Generation] = []
            for _ in 0..<count {
                guard let n = reader.readLength(limit: Int(UInt16.max)), let numbers = readNumbers(n),
                      let indexNumbers = format == 1 ? numbers : readNumbers(n),
                      let length = reader.readLength(limit: reader.remaining), let schema = reader.readBytes(length) else { return nil }
                generations.append(Generation(schema: Array(schema), numbers: numbers, indexNumbers: indexNumbers))
            }
            return reader.isAtEnd ? generations : nil
        }
    }
}
