import Foundation
import Strata
@_spi(Coding) import StrataStore

/// `strata-fuzz generate-corpus <dir>`: seeds for every target, made by the
/// real encoders (a real store in memory, the record and schema encoders),
/// so that the fuzzer starts from well-formed files and mutates inward.
/// Kept small: the committed corpus is a few kilobytes per target.
enum SeedCorpus {
    static func write(to directory: String) throws {
        for (target, seeds) in try make() {
            let folder = directory + "/" + target.rawValue
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            for (name, bytes) in seeds {
                try Data(bytes).write(to: URL(fileURLWithPath: folder + "/" + name))
            }
            print("\(target.rawValue): \(seeds.count) seeds, \(seeds.reduce(0) { $0 + $1.1.count }) bytes")
        }
    }

    static func make() throws -> [(FuzzTarget, [(String, [UInt8])])] {
        let files = try storeFiles()
        let checkpointed = try storeFiles(checkpoint: true)
        let logs = files.filter { $0.key.hasSuffix(".wal") }.sorted { $0.key < $1.key }
        let segment = files.first { $0.key.hasSuffix(".seg") }!.value
        var torn = logs.last!.value
        torn.removeLast(3)

        var batch = WriteBatch()
        batch.put(Array("alpha".utf8), Array("one".utf8))
        batch.delete(Array("beta".utf8))
        batch.put([0xFF, 0x00], [])

        var builder = BlockBuilder()
        for (i, key) in ["apple", "banana", "cherry"].enumerated() {
            Array(key.utf8).withUnsafeBytes { k in
                Array(repeating: UInt8(i), count: 5 * i).withUnsafeBytes { v in
                    builder.add(key: k, sequence: UInt64(i + 1), kind: i == 1 ? .delete : .put, value: v)
                }
            }
        }
        let rawBlock = builder.finish()
        var storedBlock: [UInt8] = []
        _ = rawBlock.withUnsafeBytes { SegmentFormat.appendBlock(raw: $0, to: &storedBlock) }

        let text = Array(String(repeating: "the quick brown fox jumps over the lazy dog; ", count: 8).utf8)
        var compressed: [UInt8] = []
        _ = text.withUnsafeBytes { LZ4.compress($0, appendingTo: &compressed) }
        var lz4Seed: [UInt8] = []
        lz4Seed.appendInteger(UInt16(text.count))
        lz4Seed += compressed

        var varints: [UInt8] = []
        for v: UInt64 in [0, 1, 127, 128, 300, 1 << 32, .max] { varints.appendVarint(v) }

        return [
            (.wal, logs.map { ("\($0.key)", [0] + $0.value) } + [("torn.wal", [0] + torn), ("repaired.wal", [1] + logs.last!.value)]),
            (.batch, [("batch", batch.encoded)]),
            (.block, [("raw-block", rawBlock), ("stored-block", storedBlock)]),
            (.segment, [("segment", [0] + segment), ("repaired-segment", [1] + segment)]),
            (.manifest, [("manifest", [0] + files[Manifest.fileName]!), ("repaired-manifest", [1] + files[Manifest.fileName]!)]),
            (.lz4, [("text", lz4Seed)]),
            (.varint, [("varints", varints)]),
            (.store, [("read-only", StoreDirectory.encode(files, mode: 0)), ("read-write", StoreDirectory.encode(files, mode: 2)),
                      ("repaired-read-write", StoreDirectory.encode(files, mode: 3)),
                      ("checkpoint-read-only", StoreDirectory.encode(checkpointed, mode: 0)),
                      ("checkpoint-read-write", StoreDirectory.encode(checkpointed, mode: 2))]),
            (.record, records()),
            (.schema, [("model", StrataTargets.model.schema), ("small-model", try smallModel().schema),
                       ("renamed-model", try renamedModel().schema)]),
            (.history, histories()),
            (.uri, [("permanent", Array("x-strata:/Item/p42".utf8)), ("temporary", Array("x-strata:/Owner/t7".utf8)),
                    ("query", Array("x-strata:/Tag/p1?x=1#y".utf8))]),
        ]
    }

    /// The files of a small store: a segment (a flush), the manifest naming
    /// it, and a log written after the flush; with `checkpoint`, two
    /// segments and the index checkpoint a close saves over them instead.
    static func storeFiles(checkpoint: Bool = false) throws -> [String: [UInt8]] {
        let fs = MemoryFileSystem(directory: StoreTargets.directory)
        var options = StoreDirectory.options(fs, readOnly: false)
        options.createIfMissing = true
        let store = try StrataStore(directory: StoreTargets.directory, options: options)
        var first = WriteBatch()
        for i in 0..<6 { first.put(Array("key-\(i)".utf8), Array("value \(i)".utf8)) }
        _ = try store.write(first)
        var second = WriteBatch()
        second.delete(Array("key-2".utf8))
        second.put(Array("key-9".utf8), Array(repeating: 7, count: 40))
        _ = try store.write(second)
        try store.flush()
        var third = WriteBatch()
        third.put(Array("key-1".utf8), Array("after the flush".utf8))
        third.delete(Array("key-4".utf8))
        _ = try store.write(third)
        var fourth = WriteBatch()
        fourth.put(Array("zzz".utf8), [])
        _ = try store.write(fourth)
        if checkpoint { try store.flush() }
        try store.close()
        if checkpoint { precondition(fs.contents(of: StoreTargets.directory)[IndexCheckpoint.fileName] != nil, "no index checkpoint saved") }
        return fs.contents(of: StoreTargets.directory)
    }

    /// Transactions of persistent history as a save writes them.
    static func histories() -> [(String, [UInt8])] {
        let model = StrataTargets.model
        let ids = model.entities.enumerated().map { ObjectID(entity: $1, primaryKey: UInt64(1 + $0 * 300), isTemporary: false) }
        let save = HistoryCoding.encode(HistoryCoding.Written(
            timestamp: Date(timeIntervalSince1970: 1_790_000_000.123456), author: "import", contextName: "App.writer",
            inserted: ids, updated: [(ids[0], [0, 1])], deleted: [ids[ids.count - 1]]))
        let bare = HistoryCoding.encode(HistoryCoding.Written(
            timestamp: Date(timeIntervalSince1970: 0), author: nil, contextName: nil, inserted: [], updated: [], deleted: [ids[0]]))
        let item = ids[model.entities.firstIndex { $0.name == "Item" }!]
        let tombstones = HistoryCoding.encode(HistoryCoding.Written(
            timestamp: Date(timeIntervalSince1970: 1_790_000_001), author: "sync", contextName: nil, inserted: [], updated: [],
            deleted: [ids[0], item], tombstones: [(1, [(0, .string("hello")), (1, .integer(-7)), (4, .double(1.5)), (5, .bool(true)),
                                                       (6, .date(Date(timeIntervalSinceReferenceDate: 1000))), (7, .data(Data([1, 2]))),
                                                       (8, .uuid(UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!)), (9, .null)])]))
        return [("save", save), ("delete-only", bare), ("tombstones", tombstones)]
    }

    static func records() -> [(String, [UInt8])] {
        let model = StrataTargets.model
        let item = model.entity(named: "Item")!, owner = model.entity(named: "Owner")!, tag = model.entity(named: "Tag")!
        func id(_ entity: EntityDescription, _ pk: UInt64) -> ObjectID { ObjectID(entity: entity, primaryKey: pk, isTemporary: false) }
        let values: [(EntityDescription, [PropertyValue])] = [
            (item, [.string("hello, wörld"), .integer(-7), .integer(70_000), .integer(.min), .double(1.5), .bool(true),
                    .date(Date(timeIntervalSinceReferenceDate: 1000)), .data(Data([1, 2, 3])),
                    .uuid(UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!), .null, .integer(3),
                    .object(id(owner, 1)), .objects([id(tag, 1), id(tag, 2)])]),
            (owner, [.string("owner"), .objects([id(item, 5)])]),
            (tag, [.null, .objects([])]),
        ]
        var seeds: [(String, [UInt8])] = []
        for (entity, values) in values {
            var bytes: [UInt8] = [UInt8(entity.index)]
            RecordCoding.encode(values, version: 3, into: &bytes)
            seeds.append(("record-\(entity.name)", bytes))
        }
        seeds.append(("keys", [UInt8(model.entities.count)] + RecordCoding.keysRecord([5, 300, 1])))
        // A record of the older schema generation (StrataTargets.generations).
        var old: [UInt8] = [0xF0]
        RecordCoding.encode([.string("legacy"), .string("hi"), .null, .integer(1), .integer(2), .double(3), .bool(false),
                             .date(Date(timeIntervalSinceReferenceDate: 5)), .data(Data([9])), .uuid(UUID(uuid: (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))),
                             .null, .object(id(owner, 2)), .object(id(tag, 3))], version: 2, into: &old)
        seeds.append(("record-old-generation", old))
        seeds.append(("object-key", [UInt8(model.entities.count + 1)] + RecordCoding.key(id(item, 42))))
        return seeds
    }

    /// A model in schema format 4: renaming identifiers, a hash modifier, defaults.
    static func renamedModel() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Note", properties: [
                .attribute("heading", .string, defaultValue: .string("untitled"), renamedFrom: "title"),
                .attribute("views", .integer32, defaultValue: .integer(0)),
                .toOne("folder", "Notebook", inverse: "notes", renamedFrom: "parent"),
            ], renamedFrom: "Memo", versionHashModifier: "2"),
            EntityDescription(name: "Notebook", properties: [
                .toMany("notes", "Note", inverse: "folder"),
            ], renamedFrom: "Folder"),
        ])
    }

    static func smallModel() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Note", properties: [.attribute("text", .string, optional: true), .toOne("folder", "Folder", inverse: "notes")]),
            EntityDescription(name: "Folder", properties: [.toMany("notes", "Note", inverse: "folder", deleteRule: .deny)]),
        ])
    }
}
