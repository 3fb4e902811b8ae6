import Foundation
import Strata

/// The object graph's decoders: records, the stored model, object-ID URIs.
enum StrataTargets {
    /// A model with every attribute type, optional and not, and to-one and
    /// to-many relationships, so that every tag of the record format has a
    /// property to land in.
    static let model: ManagedObjectModel = {
        do {
            return try ManagedObjectModel(entities: [
                EntityDescription(name: "Item", properties: [
                    .attribute("string", .string), .attribute("int16", .integer16), .attribute("int32", .integer32),
                    .attribute("int64", .integer64), .attribute("double", .double), .attribute("bool", .bool),
                    .attribute("date", .date), .attribute("data", .binaryData), .attribute("uuid", .uuid),
                    .attribute("maybeString", .string, optional: true), .attribute("maybeInt", .integer64, optional: true),
                    .toOne("owner", "Owner", inverse: "items"),
                    .toMany("tags", "Tag", inverse: "items"),
                ]),
                EntityDescription(name: "Owner", properties: [
                    .attribute("name", .string),
                    .toMany("items", "Item", inverse: "owner", deleteRule: .cascade),
                ]),
                EntityDescription(name: "Tag", properties: [
                    .attribute("name", .string, optional: true),
                    .toMany("items", "Item", inverse: "tags"),
                ]),
            ])
        } catch {
            fatalError("the fuzz model is invalid: \(error)")
        }
    }()

    static let coordinator = PersistentStoreCoordinator(model: model)

    /// A store's two schema generations: the first had Item without
    /// `maybeInt`, with a `legacy` string first and `int16` optional; the
    /// second is ``model``. Records of the first are upgraded as read.
    static let older: ManagedObjectModel = {
        do {
            return try ManagedObjectModel(entities: [
                EntityDescription(name: "Item", properties: [
                    .attribute("legacy", .string, optional: true),
                    .attribute("string", .string), .attribute("int16", .integer16, optional: true), .attribute("int32", .integer32),
                    .attribute("int64", .integer64), .attribute("double", .double), .attribute("bool", .bool),
                    .attribute("date", .date), .attribute("data", .binaryData), .attribute("uuid", .uuid),
                    .attribute("maybeString", .string, optional: true),
                    .toOne("owner", "Owner", inverse: "items"),
                    .toOne("tags", "Tag", inverse: "items"),
                ]),
                EntityDescription(name: "Owner", properties: [
                    .attribute("name", .string),
                    .toMany("items", "Item", inverse: "owner", deleteRule: .cascade),
                ]),
                EntityDescription(name: "Tag", properties: [
                    .attribute("name", .string, optional: true),
                    .toMany("items", "Item", inverse: "tags"),
                ]),
            ])
        } catch {
            fatalError("the older fuzz model is invalid: \(error)")
        }
    }()

    static let generations: StoredSchemas = {
        do {
            return try StoredSchemas(generations: [
                .init(schema: older.schema, numbers: [0, 1, 2]), .init(schema: model.schema, numbers: [0, 1, 2]),
            ], model: model)
        } catch {
            fatalError("the fuzz generations are invalid: \(error)")
        }
    }()

    /// Value equality that holds for NaN too (a double round-trips by bit pattern).
    static func same(_ a: [PropertyValue], _ b: [PropertyValue]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { x, y in
            switch (x, y) {
            case (.double(let p), .double(let q)): p.bitPattern == q.bitPattern
            case (.date(let p), .date(let q)): p.timeIntervalSinceReferenceDate.bitPattern == q.timeIntervalSinceReferenceDate.bitPattern
            default: x == y
            }
        }
    }

    /// A transaction record of persistent history: decodes or is nil, and
    /// what decodes survives decode(encode(decode(x))) (its timestamp to the
    /// microsecond, where a `Double` holds that exactly).
    static func history(_ input: UnsafeRawBufferPointer) {
        let store = UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16))
        guard let transaction = HistoryCoding.decode(input, number: 7, store: store, model: model) else { return }
        var updated: [(ObjectID, PropertyIndexSet)] = []
        for change in transaction.changes where change.kind == .update {
            let entity = change.objectID.entity
            let places = change.updatedProperties.compactMap { name in entity.properties.firstIndex { $0.name == name } }
            // A name the entity lacks is left out by decode only if the
            // entity is unknown; a known entity with an unknown property
            // name cannot re-encode it.
            guard places.count == change.updatedProperties.count else { return }
            updated.append((change.objectID, PropertyIndexSet(places)))
        }
        let deletes = transaction.changes.filter { $0.kind == .delete }
        var tombstones: [(delete: Int, values: [(index: Int, value: PropertyValue)])] = []
        for (position, change) in deletes.enumerated() where !change.tombstone.isEmpty {
            let entity = change.objectID.entity
            let values = change.tombstone.compactMap { name, value in entity.properties.firstIndex { $0.name == name }.map { (index: $0, value: value) } }
            guard values.count == change.tombstone.count else { return }  // (as for updated properties above)
            tombstones.append((position, values.sorted { $0.index < $1.index }))
        }
        let written = HistoryCoding.Written(
            timestamp: transaction.timestamp, author: transaction.author, contextName: transaction.contextName,
            inserted: transaction.changes.filter { $0.kind == .insert }.map(\.objectID), updated: updated,
            deleted: deletes.map(\.objectID), tombstones: tombstones)
        let encoded = HistoryCoding.encode(written)
        guard let again = encoded.withUnsafeBytes({ HistoryCoding.decode($0, number: 7, store: store, model: model) }) else {
            fatalError("a re-encoded history transaction does not decode")
        }
        let exactTime = abs(transaction.timestamp.timeIntervalSince1970) < 1e9
        // An update's properties as encode writes them: once each, in the
        // entity's order (a record may list them otherwise).
        func asEncoded(_ change: HistoryChange) -> [String] {
            let entity = change.objectID.entity
            return PropertyIndexSet(change.updatedProperties.compactMap { name in entity.properties.firstIndex { $0.name == name } })
                .map { entity.properties[$0].name }
        }
        // Changes equal but for their tombstones' values, compared as
        // `same` does (a NaN is kept bit for bit, and is not == itself).
        func sameChanges(_ a: [HistoryChange], _ b: [HistoryChange]) -> Bool {
            a.count == b.count && zip(a, b).allSatisfy { x, y in
                x.objectID == y.objectID && x.kind == y.kind && x.updatedProperties == asEncoded(y)
                    && x.tombstone.keys.sorted() == y.tombstone.keys.sorted()
                    && same(x.tombstone.keys.sorted().map { x.tombstone[$0]! }, y.tombstone.keys.sorted().map { y.tombstone[$0]! })
            }
        }
        require(sameChanges(again.changes, transaction.changes) && again.author == transaction.author && again.contextName == transaction.contextName
                && (!exactTime || again.timestamp == transaction.timestamp),
                "a history transaction does not survive decode(encode(decode(x)))")
    }

    /// The selector byte picks an entity's record, the keys record or an object key.
    static func record(_ input: UnsafeRawBufferPointer) {
        guard let selector = input.first else { return }
        let body = Array(input.dropFirst())
        if selector >= 0xF0 {
            // A record of the older generation (or the current one): its
            // upgrade never traps, and one that decodes as written reads
            // under the current model after its upgrade.
            let position = Int(selector & 0x0F) % model.entities.count
            let upgraded = generations.currentRecord(body, storedNumber: UInt16(position))
            if body.first == 1, RecordCoding.decode(body, entity: older.entities[position], model: older) != nil {
                require(upgraded.flatMap { RecordCoding.decode($0, entity: model.entities[position], model: model) } != nil,
                        "a record of the older generation that decodes does not read after its upgrade")
            }
            if let history = StoredSchemas.decodeHistory(body) {
                require(history.count > 0, "an empty history decoded")
            }
            return
        }
        let entities = model.entities
        switch Int(selector) % (entities.count + 2) {
        case let i where i < entities.count:
            let entity = entities[i]
            guard let snapshot = RecordCoding.decode(body, entity: entity, model: model) else { return }
            require(snapshot.values.count == entity.properties.count, "a record with \(snapshot.values.count) values for \(entity.properties.count) properties")
            var encoded: [UInt8] = []
            RecordCoding.encode(snapshot.values, version: snapshot.version, into: &encoded)
            guard let again = RecordCoding.decode(encoded, entity: entity, model: model) else { fatalError("a re-encoded record does not decode") }
            require(again.version == snapshot.version && same(again.values, snapshot.values), "a record does not survive decode(encode(decode(x)))")
        case entities.count:
            guard let keys = RecordCoding.decodeKeys(body) else { return }
            require(RecordCoding.decodeKeys(RecordCoding.keysRecord(keys)) == keys, "the keys record does not round-trip")
        default:
            _ = RecordCoding.hash(inModelRecord: body)
            guard let id = RecordCoding.objectID(fromKey: body, model: model) else { return }
            require(RecordCoding.key(id) == body, "an object key does not round-trip")
            require(coordinator.managedObjectID(forURIRepresentation: id.uriRepresentation()).map { $0 == id && !$0.isTemporaryID } ?? (id.primaryKey == 0),
                    "the URI of \(id) does not name it")
        }
    }

    static func schema(_ input: UnsafeRawBufferPointer) {
        let bytes = Array(input)
        let decoded: ManagedObjectModel
        do { decoded = try ModelSchema.decode(bytes) } catch {
            require(error.code == .corruptRecord || error.code == .invalidModel || error.code == .unsupportedFormat, "unexpected error \(error)")
            return
        }
        do {
            let again = try ModelSchema.decode(decoded.schema)
            require(again.schema == decoded.schema && again.versionHash == decoded.versionHash, "a schema does not survive decode(encode(decode(x)))")
        } catch {
            fatalError("a re-encoded schema fails: \(error)")
        }
        let coordinator = PersistentStoreCoordinator(model: decoded)
        for entity in decoded.entities {
            for temporary in [false, true] {
                let id = ObjectID(entity: entity, primaryKey: 42, isTemporary: temporary)
                let back = coordinator.managedObjectID(forURIRepresentation: id.uriRepresentation())
                require(back == id && back?.isTemporaryID == temporary, "the URI \(id.uriRepresentation()) of \(id) does not name it")
            }
        }
    }

    static func uri(_ input: UnsafeRawBufferPointer) {
        let text = String(decoding: input, as: UTF8.self)
        guard let url = URL(string: text), let id = coordinator.managedObjectID(forURIRepresentation: url) else { return }
        require(id.primaryKey > 0 && model.entities.contains { $0 === id.entity }, "a URI named \(id)")
        let back = coordinator.managedObjectID(forURIRepresentation: id.uriRepresentation())
        require(back == id && back?.isTemporaryID == id.isTemporaryID, "the URI of \(id) (from \(text)) does not name it")
    }
}
