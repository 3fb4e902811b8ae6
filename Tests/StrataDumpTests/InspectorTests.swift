import Foundation
import Strata
import StrataStore
import Testing

/// The library inspection APIs, called directly.
@Suite struct InspectorTests {
    @Test func storeInspectorSeesWhatAnOpenSees() throws {
        let dir = ScratchStore()
        try buildFlushedStore(at: dir.path, dishes: 120)
        let before = snapshot(dir.path)
        let inspector = try StoreInspector(directory: dir.path)
        let contents = try inspector.contents()
        // Every key and value the engine itself reads, and nothing else.
        var options = StoreOptions()
        options.readOnly = true
        let store = try StrataStore(directory: dir.path, options: options)
        let expected = try store.scan(prefix: [])
        try store.close()
        #expect(try contents.scan(prefix: []) == expected)
        #expect(contents.liveKeyCount == expected.count)
        for item in expected.prefix(20) { #expect(try contents.value(forKey: item.key) == item.value) }
        #expect(try contents.value(forKey: [0x6F, 0xFF, 0xFF]) == nil)

        let stats = try contents.statistics()
        #expect(stats.liveRecords == expected.count)
        #expect(stats.liveBytes == UInt64(expected.reduce(0) { $0 + $1.key.count + $1.value.count }))
        #expect(stats.deadRecords > 0 && stats.deadBytes > 0)
        #expect(stats.tombstones == 5)

        let segments = try inspector.segments()
        #expect(segments.filter(\.isLive).map(\.file) == inspector.manifestReport.segments)
        for segment in segments {
            #expect(segment.blocks.first?.offset == 32)
            #expect(segment.puts + segment.deletes == segment.records)
        }
        #expect(inspector.verify().isClean)
        #expect(snapshot(dir.path) == before)  // the read-only open above changed nothing either
    }

    @Test func logReportsMatchTheScanner() throws {
        let dir = ScratchStore()
        try buildSmallStore(at: dir.path)
        let logs = try StoreInspector(directory: dir.path).logs()
        let live = try #require(logs.first { $0.isLive })
        #expect(live.salt != nil)
        var offset: UInt64 = 32
        for frame in live.frames {
            #expect(frame.offset == offset)  // frames are contiguous from the header on
            offset += frame.bytes
        }
        #expect(offset == live.size)
    }

    @Test func describeKeyEscapesBinary() {
        #expect(StoreInspector.describeKey(Array("user/1".utf8)) == "user/1")
        #expect(StoreInspector.describeKey([0x6F, 0x00, 0x5C, 0x7F]) == "o\\x00\\x5c\\x7f")
    }

    @Test func modelIsRebuiltFromTheStoredSchema() throws {
        let dir = ScratchStore()
        let ids = try buildSmallStore(at: dir.path)
        let inspector = try ObjectStoreInspector(directory: dir.path)
        let original = makeKitchenModel()
        #expect(inspector.model.versionHash == original.versionHash)
        #expect(inspector.model.entities.map(\.name) == original.entities.map(\.name))
        for (rebuilt, entity) in zip(inspector.model.entities, original.entities) {
            #expect(rebuilt.managedObjectClass == ManagedObject.self)
            // Everything but defaults (not part of the schema) survives.
            #expect(rebuilt.relationships == entity.relationships)
            #expect(rebuilt.attributes.map { [$0.name, "\($0.type)", "\($0.isOptional)"] }
                    == entity.attributes.map { [$0.name, "\($0.type)", "\($0.isOptional)"] })
        }
        #expect(inspector.describeKey(Array("mmodel".utf8)) == "m:model")
        let id = try inspector.objectID(parsing: ids.bread)
        #expect(try inspector.objectID(parsing: "x-strata:/" + ids.bread) == id)
        #expect(try inspector.objectID(parsing: ids.bread.replacingOccurrences(of: "/p", with: "/")) == id)
        #expect(throws: StrataError.self) { try inspector.objectID(parsing: "Dish/t1") }
        #expect(throws: StrataError.self) { try inspector.objectID(parsing: "Dish") }
        #expect(throws: StrataError.self) { try inspector.objectID(parsing: "Dish/p0") }
        let bread = try #require(try inspector.object(id))
        #expect(bread.properties.map(\.name) == ["name", "servings", "rating", "spicy", "created", "photo", "tag", "notes", "components", "cook"])
        #expect(bread.properties.first { $0.name == "cook" }?.kind == .toOne)
        let summary = inspector.summary()
        #expect(summary.entities.map(\.objects) == [2, 1, 2])  // Component, Cook, Dish
        #expect(summary.entities.allSatisfy { ($0.nextPrimaryKey ?? 0) > UInt64($0.objects) })
        let verified = try inspector.verifyRecords()
        #expect(verified.problems.isEmpty)
        #expect(verified.records == 8 + 4)  // and the history's transaction per save
    }

    @Test func aSchemaThatDoesNotMatchItsHashIsRefused() throws {
        // A plain store holding a model record whose hash is not the schema's.
        let dir = ScratchStore()
        let store = try StrataStore(directory: dir.path)
        let good = try #require(try {
            let source = ScratchStore("source")
            try buildSmallStore(at: source.path)
            return try StoreInspector(directory: source.path).contents().value(forKey: Array("mmodel".utf8))
        }())
        var batch = WriteBatch()
        batch.put(Array("mmodel".utf8), Array("0000000000000000".utf8) + good.dropFirst(16))
        try store.write(batch)
        try store.close()
        do {
            _ = try ObjectStoreInspector(directory: dir.path)
            Issue.record("a model record with a wrong hash was accepted")
        } catch {
            #expect(error.code == .corruptRecord)
            #expect(error.message.contains("hashes to"))
        }
        let check = try StoreReports.verify(directory: dir.path)
        #expect(!check.isClean)
    }

    @Test func recordVerificationFindsUndecodableRecords() throws {
        let dir = ScratchStore()
        try buildSmallStore(at: dir.path)
        // Write a malformed Dish record, and a relationship to a missing object, straight into the engine.
        let store = try StrataStore(directory: dir.path)
        var batch = WriteBatch()
        batch.put([0x6F, 0x00, 0x02] + [0, 0, 0, 0, 0, 0, 0, 99], [1, 1, 2, 0xEE])
        try store.write(batch)
        try store.close()
        let check = try StoreReports.verify(directory: dir.path)
        #expect(check.store.isClean)
        #expect(check.recordProblems.map(\.key) == ["Dish/p99"])
        #expect(check.problems == ["record Dish/p99: does not decode under the stored model"])
    }
}
