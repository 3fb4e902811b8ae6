public import Foundation
public import StrataStore

/// Reads the objects of a store on disk without the application: the model is
/// rebuilt from the schema the store keeps in its `m model` record, and its
/// hash checked against the one stored beside it.
///
/// Nothing is opened for writing and no lock is taken (see `StoreInspector`):
/// an application may have the store open meanwhile.
///
/// ```swift
/// let inspector = try ObjectStoreInspector(directory: "/var/lib/app/recipes")
/// print(inspector.model.versionHash)
/// for count in try inspector.summary().entities { print(count.entity, count.objects) }
/// if let soup = try inspector.object(inspector.objectID(parsing: "x-strata:/Recipe/p1")) {
///     print(soup)    // Recipe/p1 (version 1) / name = "Soup" / …
/// }
/// ```
///
/// Throws ``StrataError``: `.storage` (the engine's `StoreError` as the cause:
/// missing, not a store, corrupt), `.modelMismatch` (a plain StrataStore with
/// no Strata model), `.corruptRecord` (the model record is damaged, or its
/// schema does not hash to the stored hash).
public final class ObjectStoreInspector: Sendable {
    /// The store's live records.
    public let contents: StoreContents
    /// The model rebuilt from the stored schema (every entity's class is `ManagedObject`).
    public let model: ManagedObjectModel
    /// The store's identity, if it has one.
    public let storeIdentifier: UUID?
    /// Per entity (model order): the next primary key, from the store's key counters.
    let nextKeys: [UInt64]?
    /// The schema generations the records were written under; keys and
    /// records are read through them, as the coordinator reads them.
    let schemas: StoredSchemas

    /// Inspects the store in `directory`.
    public convenience init(directory: String) throws(StrataError) {
        let contents: StoreContents
        do throws(StoreError) { contents = try StoreInspector(directory: directory).contents() } catch { throw StrataError.storage(error) }
        try self.init(contents: contents)
    }

    /// Inspects contents already read by a `StoreInspector`.
    public init(contents: StoreContents) throws(StrataError) {
        self.contents = contents
        func value(_ key: [UInt8]) throws(StrataError) -> [UInt8]? {
            do throws(StoreError) { return try contents.value(forKey: key) } catch { throw StrataError.storage(error) }
        }
        guard let record = try value(RecordCoding.modelKey) else {
            throw StrataError(.modelMismatch, "the store holds no Strata model (no m:model record): it is a plain StrataStore, not an object store")
        }
        guard let hash = RecordCoding.hash(inModelRecord: record) else {
            throw StrataError(.corruptRecord, "the store's model record is too short to hold a model hash")
        }
        let model = try ModelSchema.decode(Array(record.dropFirst(16)))
        guard model.versionHash == hash else {
            throw StrataError(.corruptRecord, "the stored schema hashes to \(model.versionHash) but the model record says \(hash)")
        }
        self.model = model
        if let history = try value(StoredSchemas.historyKey) {
            let generations = try StoredSchemas.generations(fromHistory: history, endingWith: Array(record.dropFirst(16)))
            schemas = try StoredSchemas(generations: generations, model: model)
        } else {
            schemas = StoredSchemas(freshFor: model)
        }
        let identity = try value(RecordCoding.storeKey)
        storeIdentifier = identity.flatMap { $0.count == 16 ? UUID(uuid: $0.withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) }) : nil }
        nextKeys = try value(RecordCoding.keysKey).flatMap(RecordCoding.decodeKeys)
    }

    /// Entity counts, the model's hash and the store's identity.
    public func summary() -> ObjectStoreSummary {
        var counts = Array(repeating: 0, count: model.entities.count)
        var awaitingUpgrade = 0
        var perGeneration = Array(repeating: 0, count: schemas.generations.count)
        var perFile: [String: [Int]] = [:]
        var unreadRecords = 0
        try? contents.forEachNamingFiles(prefix: [RecordCoding.objectTag]) { storedKey, value, file in
            guard isRead(storedKey) else {
                unreadRecords += 1
                return true
            }
            let key = modelKey(storedKey)
            if let id = RecordCoding.objectID(fromKey: key, model: model) { counts[Int(id.entity.index)] += 1 }
            if needsUpgrade(value, storedKey: storedKey) { awaitingUpgrade += 1 }
            if let generation = RecordCoding.generation(ofRecord: value), generation < UInt64(perGeneration.count) {
                perGeneration[Int(generation)] += 1
                perFile[file, default: Array(repeating: 0, count: perGeneration.count)][Int(generation)] += 1
            }
            return true
        }
        var entries = model.entities.map { Array(repeating: 0, count: $0.indexes.count) }
        var unread = 0
        contents.forEachKey(prefix: [IndexKeyCoding.indexTag]) { storedKey in
            guard isRead(storedKey) else {
                unread += 1
                return
            }
            let key = modelKey(storedKey)
            guard key.count > 4 else { return }
            let entity = Int(UInt16(key[1]) << 8 | UInt16(key[2])), index = Int(key[3])
            if entity < entries.count, index < entries[entity].count { entries[entity][index] += 1 }
        }
        let entities = model.entities.enumerated().map { i, entity in
            EntityCount(entity: entity.name, objects: counts[i],
                        nextPrimaryKey: nextKeys.flatMap { i < $0.count ? $0[i] : nil },
                        indexes: entity.indexes.enumerated().map { IndexCount(attributes: $1.attributeNames, entries: entries[i][$0]) })
        }
        let generations = schemas.generations.enumerated().map { g, generation in
            let decoded = try? ModelSchema.decodeCached(generation.schema)
            return SchemaGenerationSummary(
                generation: g, modelHash: decoded?.versionHash ?? "?", entities: decoded?.entities.map(\.name) ?? [],
                entityHashes: decoded?.entities.map(\.versionHash) ?? [], records: perGeneration[g])
        }
        return ObjectStoreSummary(
            modelHash: model.versionHash, storeIdentifier: storeIdentifier?.uuidString, entities: entities,
            schemaGenerations: generations, recordsAwaitingUpgrade: awaitingUpgrade,
            recordsPerFile: perFile.sorted { $0.key < $1.key }.map { FileGenerationCount(file: $0.key, records: $0.value) },
            recordsAwaitingRemoval: unreadRecords, indexEntriesAwaitingRemoval: unread,
            history: Optional(historySummary()).flatMap { $0 == HistorySummary() ? nil : $0 })
    }

    /// How much persistent history the store keeps, its cursors and what
    /// was pruned.
    public func historySummary() -> HistorySummary {
        (try? HistoryCoding.summarize { prefix, body in
            try? contents.forEach(prefix: prefix) { key, value in
                key.withUnsafeBytes { k in value.withUnsafeBytes { v in body(k, v) } }
                return true
            }
        }) ?? HistorySummary()
    }

    /// The transactions of the store's persistent history after number
    /// `after` (0: all kept), `limit` at most, oldest first. Throws
    /// ``StrataError/Code/corruptRecord`` for one that does not decode.
    public func history(after: UInt64 = 0, limit: Int = .max) throws(StrataError) -> [InspectedTransaction] {
        var result: [InspectedTransaction] = []
        var damaged: UInt64?
        let identifier = storeIdentifier ?? UUID()
        do throws(StoreError) {
            try contents.forEach(prefix: [HistoryCoding.transactionTag]) { key, value in
                guard let number = key.withUnsafeBytes({ HistoryCoding.number(fromKey: $0) }), number > after else { return true }
                guard let transaction = value.withUnsafeBytes({ HistoryCoding.decode($0, number: number, store: identifier, model: model) }) else {
                    damaged = number
                    return false
                }
                result.append(InspectedTransaction(transaction))
                return result.count < limit
            }
        } catch {
            throw StrataError.storage(error)
        }
        if let damaged { throw StrataError(.corruptRecord, "history transaction #\(damaged) does not decode") }
        return result
    }

    /// The ID `text` names: `Recipe/p42`, `Recipe/42` or the URI form
    /// `x-strata:/Recipe/p42`. Throws `.invalidArgument` for anything else,
    /// an entity the model lacks, or a temporary ID (never stored).
    public func objectID(parsing text: String) throws(StrataError) -> ObjectID {
        var rest = Substring(text)
        if rest.hasPrefix("x-strata:") { rest = rest.dropFirst("x-strata:".count) }
        while rest.hasPrefix("/") { rest = rest.dropFirst() }
        let parts = rest.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
            throw StrataError(.invalidArgument, "\(String(reflecting: text)) is not an object ID (expected Entity/pN or x-strata:/Entity/pN)")
        }
        guard let entity = model.entity(named: String(parts[0])) else {
            throw StrataError(.invalidArgument, "the store's model has no entity \(parts[0]) (it has \(model.entities.map(\.name).joined(separator: ", ")))")
        }
        var number = parts[1]
        if number.first == "t" {
            throw StrataError(.invalidArgument, "\(text) is a temporary ID; temporary IDs are never stored")
        }
        if number.first == "p" { number = number.dropFirst() }
        guard let pk = UInt64(number), pk > 0 else {
            throw StrataError(.invalidArgument, "\(String(reflecting: text)) has no valid primary key (expected Entity/pN with N ≥ 1)")
        }
        return ObjectID(entity: entity, primaryKey: pk, isTemporary: false)
    }

    /// The stored object `id` names, decoded; nil when the store has no such object.
    public func object(_ id: ObjectID) throws(StrataError) -> InspectedObject? {
        guard model.contains(id.entity) else {
            throw StrataError(.invalidArgument, "\(id) belongs to another model than the store's")
        }
        let bytes: [UInt8]?
        let key = storedKey(RecordCoding.key(id))
        do throws(StoreError) { bytes = try contents.value(forKey: key) } catch { throw StrataError.storage(error) }
        guard let bytes else { return nil }
        return try inspect(id, try current(bytes, storedKey: key))
    }

    /// The objects of the entity named `entity`, in primary-key order, at most `limit`.
    public func objects(ofEntity name: String, limit: Int = .max) throws(StrataError) -> [InspectedObject] {
        guard let entity = model.entity(named: name) else {
            throw StrataError(.invalidArgument, "the store's model has no entity \(name) (it has \(model.entities.map(\.name).joined(separator: ", ")))")
        }
        var result: [InspectedObject] = []
        var failure: StrataError?
        do throws(StoreError) {
            try contents.forEach(prefix: storedKey(RecordCoding.prefix(of: entity))) { stored, value in
                guard result.count < limit else { return false }
                let key = modelKey(stored)
                guard let id = RecordCoding.objectID(fromKey: key, model: model), id.entity === entity else {
                    failure = StrataError(.corruptRecord, "the key \(describeModelKey(key)) is not a well-formed object key")
                    return false
                }
                do throws(StrataError) { result.append(try inspect(id, try current(value, storedKey: stored))) } catch {
                    failure = error
                    return false
                }
                return result.count < limit
            }
        } catch {
            throw StrataError.storage(error)
        }
        if let failure { throw failure }
        return result
    }

    /// Checks every live record: object records decode under the stored model
    /// and their relationships point at stored objects, each with exactly its
    /// index entries and no two holding the same values in a unique index;
    /// the metadata records are well formed; no key is foreign to the object layer.
    public func verifyRecords() throws(StrataError) -> (records: Int, problems: [RecordProblem]) {
        var objectKeys = Set<[UInt8]>()
        contents.forEachKey(prefix: [RecordCoding.objectTag]) { if isRead($0) { objectKeys.insert(modelKey($0)) } }
        var indexKeys = Set<[UInt8]>()
        contents.forEachKey(prefix: [IndexKeyCoding.indexTag]) { if isRead($0) { indexKeys.insert(modelKey($0)) } }
        // The entries the stored objects make, as they are met.
        var madeEntries = Set<[UInt8]>()
        // Per unique index's values: the first object met holding them.
        var uniqueHolders: [[UInt8]: ObjectID] = [:]
        var problems: [RecordProblem] = []
        var records = 0
        do throws(StoreError) {
            try contents.forEach(prefix: []) { stored, storedValue in
                // Unread entries await their deletion (see `summary()`): not a problem.
                guard isRead(stored) else { return true }
                records += 1
                let key = modelKey(stored)
                let name = describeModelKey(key)
                func problem(_ message: String) { problems.append(RecordProblem(key: name, message: message)) }
                switch key.first {
                case RecordCoding.objectTag?:
                    guard let id = RecordCoding.objectID(fromKey: key, model: model) else {
                        problem("an object key that names no entity of the model")
                        return true
                    }
                    guard let value = try? current(storedValue, storedKey: stored),
                          let snapshot = RecordCoding.decode(value, entity: id.entity, model: model) else {
                        problem("does not decode under the stored model")
                        return true
                    }
                    for (i, value) in snapshot.values.enumerated() {
                        for target in value.objectIDs where !objectKeys.contains(RecordCoding.key(target)) {
                            problem("\(id.entity.properties[i].name) refers to \(target), which is not in the store")
                        }
                    }
                    for (number, index) in id.entity.indexes.enumerated() {
                        let entry = IndexKeyCoding.key(snapshot.values, of: id.entity, index: number, primaryKey: id.primaryKey)
                        if indexKeys.contains(entry) { madeEntries.insert(entry) } else { problem("has no entry in index \(index) for its values") }
                        if index.isUnique, let unique = IndexKeyCoding.uniqueKey(snapshot.values, of: id.entity, index: number),
                           let holder = uniqueHolders.updateValue(id, forKey: unique) {
                            problem("holds the values of \(holder) in unique index \(index)")
                        }
                    }
                case IndexKeyCoding.indexTag?:
                    // Matched against the objects' entries after the pass.
                    if indexEntryTarget(key) == nil { problem("an index entry that names no index of the model") }
                case RecordCoding.metaTag?:
                    let value = storedValue
                    if key == RecordCoding.keysKey, RecordCoding.decodeKeys(value)?.count != model.entities.count {
                        problem("the key counters do not decode, or do not match the model's \(model.entities.count) entities")
                    } else if key == RecordCoding.storeKey, value.count != 16 {
                        problem("the store identity is \(value.count) bytes, not 16")
                    }
                case HistoryCoding.transactionTag?:
                    let decodes = key.withUnsafeBytes { HistoryCoding.number(fromKey: $0) }.map { number in
                        storedValue.withUnsafeBytes { value in
                            HistoryCoding.decode(value, number: number, store: storeIdentifier ?? UUID(), model: model) != nil
                        }
                    }
                    if decodes != true { problem("a history transaction that does not decode") }
                case HistoryCoding.cursorTag?:
                    if storedValue.count != 8 { problem("a history cursor or mark of \(storedValue.count) bytes, not 8") }
                default:
                    problem("neither an object, a history nor a metadata key")
                }
                return true
            }
        } catch {
            throw StrataError.storage(error)
        }
        // Entries no stored object makes: stale, or for an object that is gone.
        for entry in indexKeys.subtracting(madeEntries).sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            guard let (id, index) = indexEntryTarget(entry) else { continue }  // reported above
            let message = objectKeys.contains(RecordCoding.key(id))
                ? "an entry of index \(index) for \(id) that its stored values do not make"
                : "an entry of index \(index) for \(id), which is not in the store"
            problems.append(RecordProblem(key: describeModelKey(entry), message: message))
        }
        return (records, problems)
    }

    /// A readable key, as the store holds it: `Entity/pN` for an object key
    /// (its entity number read through the store's schema generations),
    /// `m:name` for a metadata key, escaped bytes otherwise.
    @Sendable public func describeKey(_ key: [UInt8]) -> String {
        describeModelKey(modelKey(key))
    }

    /// ``describeKey(_:)`` of a key that already names entities by their
    /// position in the model.
    private func describeModelKey(_ key: [UInt8]) -> String {
        if let id = RecordCoding.objectID(fromKey: key, model: model) { return id.description }
        if let number = key.withUnsafeBytes({ HistoryCoding.number(fromKey: $0) }) { return "t#\(number)" }
        if key.first == RecordCoding.metaTag, key.count > 1, let name = String(validating: key[1...], as: UTF8.self),
           name.unicodeScalars.allSatisfy({ $0.isASCII && $0.value >= 0x20 && $0.value < 0x7F }) {
            return "m:" + name
        }
        return StoreInspector.describeKey(key)
    }

    // MARK: Helpers

    /// A key as the model names it, from the store's (see ``StoredSchemas``).
    private func modelKey(_ stored: [UInt8]) -> [UInt8] { schemas.key(stored, toStored: false) }

    private func storedKey(_ key: [UInt8]) -> [UInt8] { schemas.key(key, toStored: true) }

    /// False for a record or an index entry stored under a number the
    /// current schema generation does not read (``StoredSchemas/reads(storedKey:)``).
    private func isRead(_ stored: [UInt8]) -> Bool { schemas.reads(storedKey: stored) }

    /// Whether `value`, stored at `storedKey`, was written under an older schema generation.
    private func needsUpgrade(_ value: [UInt8], storedKey: [UInt8]) -> Bool {
        value.withUnsafeBytes { raw in storedKey.withUnsafeBytes { schemas.upgrade(forRecord: raw, storedKey: $0) != nil } }
    }

    /// `value` as the current model reads it: upgraded when an older
    /// schema generation wrote it.
    private func current(_ value: [UInt8], storedKey: [UInt8]) throws(StrataError) -> [UInt8] {
        try storedKey.withBytes { (key) throws(StrataError) -> [UInt8] in try schemas.upgraded(value, storedKey: key) ?? value }
    }

    /// The object and index an index entry belongs to; nil when it names
    /// no index of the model.
    private func indexEntryTarget(_ key: [UInt8]) -> (ObjectID, IndexDescription)? {
        guard key.count >= 4 + 1 + 8, let entity = model.entity(at: UInt16(key[1]) << 8 | UInt16(key[2])),
              Int(key[3]) < entity.indexes.count,
              let primaryKey = key.withUnsafeBytes({ IndexKeyCoding.primaryKey(ofEntry: $0) })
        else { return nil }
        return (ObjectID(entity: entity, primaryKey: primaryKey, isTemporary: false), entity.indexes[Int(key[3])])
    }

    private func inspect(_ id: ObjectID, _ bytes: [UInt8]) throws(StrataError) -> InspectedObject {
        guard let snapshot = RecordCoding.decode(bytes, entity: id.entity, model: model) else {
            throw RecordCoding.undecodable("the record of \(id)", format: bytes.first, under: "the stored model")
        }
        var properties: [InspectedProperty] = []
        for (property, value) in zip(id.entity.properties, snapshot.values) {
            let inspected = InspectedValue(value)
            switch property {
            case .attribute(let a):
                properties.append(InspectedProperty(name: a.name, kind: .attribute, type: "\(a.type)", value: inspected))
            case .relationship(let r):
                properties.append(InspectedProperty(name: r.name, kind: r.isToMany ? .toMany : .toOne, type: r.destinationEntityName, value: inspected))
            }
        }
        return InspectedObject(id: id.description, entity: id.entity.name, primaryKey: id.primaryKey, version: snapshot.version, properties: properties)
    }
}
