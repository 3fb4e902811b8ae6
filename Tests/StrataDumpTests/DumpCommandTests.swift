import Foundation
import Strata
import StrataStore
import Testing

/// Runs the built `strata-dump` on real stores and checks what it prints,
/// its exit status, and that the store's files stay byte-identical.
@Suite struct DumpCommandTests {
    // Mirrors of the JSON shapes StoreReports defines (the library types are Codable).
    struct Info: Decodable {
        var store: StoreSummary
        var objects: ObjectStoreSummary?
        var objectLayerNote: String?
    }
    struct Verification: Decodable {
        var store: VerificationReport
        var recordsChecked: Int
        var recordProblems: [RecordProblem]
    }

    @Test func historyListsEachSaveWithWhatItChanged() throws {
        let dir = ScratchStore()
        let ids = try buildSmallStore(at: dir.path)
        let json = try dump(["history", dir.path, "--json"], unchanged: dir.path)
        #expect(json.status == 0)
        let transactions = try decodeJSON([InspectedTransaction].self, json)
        #expect(transactions.map(\.number) == [1, 2, 3, 4])
        #expect(Set(transactions[0].inserted) == [ids.ada, ids.soup, ids.salt, ids.water])
        #expect(Set(transactions[1].inserted) == [ids.bread, ids.pepper])
        #expect(transactions[2].updated.first { $0.object == ids.soup }?.properties.sorted() == ["notes", "servings"])
        #expect(transactions[3].deleted == [ids.water])
        #expect(transactions.allSatisfy { (try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse($0.timestamp)) != nil })
        let later = try decodeJSON([InspectedTransaction].self, try dump(["history", dir.path, "--after", "2", "--json"], unchanged: dir.path))
        #expect(later.map(\.number) == [3, 4])
        let text = try dump(["history", dir.path, "--limit", "1"], unchanged: dir.path)
        #expect(text.stdout.hasPrefix("#1 ") && !text.stdout.contains("#2 "))
        let info = try dump(["info", dir.path], unchanged: dir.path)
        #expect(info.stdout.contains("history     4 transactions"))
    }

    @Test func infoOnASmallStore() throws {
        let dir = ScratchStore()
        try buildSmallStore(at: dir.path)
        let text = try dump(["info", dir.path], unchanged: dir.path)
        #expect(text.status == 0)
        #expect(text.stderr.isEmpty)
        #expect(text.stdout.contains("MANIFEST"))
        #expect(text.stdout.contains(".wal"))
        #expect(text.stdout.contains("model hash  \(makeKitchenModel().versionHash)"))
        #expect(text.stdout.contains("live        "))
        #expect(text.stdout.contains("identity    "))

        let json = try dump(["info", dir.path, "--json"], unchanged: dir.path)
        #expect(json.status == 0)
        let info = try decodeJSON(Info.self, json)
        #expect(info.objects?.modelHash == makeKitchenModel().versionHash)
        #expect(info.objects.flatMap { UUID(uuidString: $0.storeIdentifier ?? "") } != nil)
        let counts = Dictionary(uniqueKeysWithValues: (info.objects?.entities ?? []).map { ($0.entity, $0.objects) })
        #expect(counts == ["Component": 2, "Cook": 1, "Dish": 2])
        // Live: 5 objects, 3 metadata records and the history's 4
        // transactions (one per save). Dead: replaced versions (the soup,
        // its components, the cook, the key counters) and the water.
        #expect(info.store.records.liveRecords == 12)
        #expect(info.objects?.history?.transactions == 4)
        #expect(info.objects?.history?.newest == 4)
        #expect(info.store.records.deadRecords > 0)
        #expect(info.store.records.tombstones == 1)
        #expect(info.store.records.firstSequence == 1)
        #expect(info.store.records.lastSequence == 5)  // the model's batch, then four saves
        #expect(info.store.files.contains { $0.kind == .manifest && $0.isLive })
        #expect(info.store.files.contains { $0.kind == .log && $0.isLive && $0.size > 0 })
    }

    @Test func walListsEveryBatch() throws {
        let dir = ScratchStore()
        try buildSmallStore(at: dir.path)
        let json = try dump(["wal", dir.path, "--json"], unchanged: dir.path)
        #expect(json.status == 0)
        let logs = try decodeJSON([LogReport].self, json)
        let frames = logs.filter(\.isLive).flatMap(\.frames)
        #expect(frames.map(\.sequence) == [1, 2, 3, 4, 5])
        #expect(frames.allSatisfy { $0.status == .ok && $0.bytes > 28 })
        #expect(frames[0].operations == 3)  // model, key counters, identity

        let text = try dump(["wal", dir.path], unchanged: dir.path)
        #expect(text.status == 0)
        #expect(text.stdout.contains("5 batches"))
        #expect(text.stdout.contains("offset"))
        let okLines = text.stdout.split(separator: "\n").filter { $0.hasSuffix("  ok") }
        #expect(okLines.count == 5)
    }

    @Test func segmentsShowBlocksRatiosAndReadableKeys() throws {
        let dir = ScratchStore()
        try buildFlushedStore(at: dir.path)
        let json = try dump(["segments", dir.path, "--json"], unchanged: dir.path)
        #expect(json.status == 0)
        let segments = try decodeJSON([SegmentReport].self, json)
        #expect(!segments.isEmpty)
        for segment in segments where segment.isLive {
            #expect(segment.blocks.count >= 1)
            #expect(segment.records == segment.blocks.reduce(0) { $0 + $1.records })
            #expect(segment.rawBytes > 0 && segment.storedBytes > 0)
            #expect(segment.footerStatus == "ok")
        }
        let keys = segments.flatMap { [$0.firstKey?.text, $0.lastKey?.text] }.compactMap { $0 }
        #expect(keys.contains { $0.hasPrefix("Dish/p") || $0.hasPrefix("Cook/p") })
        #expect(keys.allSatisfy { $0.hasPrefix("m:") || $0.contains("/p") || $0.hasPrefix("t#") })
        // Repetitive text compresses.
        #expect(segments.contains { $0.compressionRatio > 1.5 })

        let text = try dump(["segments", dir.path], unchanged: dir.path)
        #expect(text.status == 0)
        #expect(text.stdout.contains("ratio "))
        #expect(text.stdout.contains("block 0 @ 32:"))
        #expect(text.stdout.contains("Dish/p"))

        let info = try decodeJSON(Info.self, try dump(["info", dir.path, "--json"], unchanged: dir.path))
        #expect(info.objects?.entities.first { $0.entity == "Dish" }?.objects == 295)
        #expect(info.store.manifest.segments.count == segments.filter(\.isLive).count)
    }

    @Test func getDecodesAnObjectWithoutTheApplicationsClasses() throws {
        let dir = ScratchStore()
        let ids = try buildSmallStore(at: dir.path)
        for form in [ids.soup, "x-strata:/" + ids.soup] {
            let text = try dump(["get", dir.path, form], unchanged: dir.path)
            #expect(text.status == 0, "\(form): \(text.stderr)")
            // Inserted, updated, then updated again when deleting the water removed it from `components`.
            #expect(text.stdout.hasPrefix("\(ids.soup) (version 3)\n"))
            #expect(text.stdout.contains("  name = \"Soup\"\n"))
            #expect(text.stdout.contains("  servings = 6\n"))
            #expect(text.stdout.contains("  rating = 4.5\n"))
            #expect(text.stdout.contains("  spicy = true\n"))
            #expect(text.stdout.contains("  created = 2001-01-02T00:00:00.000Z\n"))
            #expect(text.stdout.contains("  photo = <3 bytes: 010203>\n"))
            #expect(text.stdout.contains("  tag = E621E1F8-C36C-495A-93FC-0C247A3E6E5F\n"))
            #expect(text.stdout.contains("  notes = \"add salt \\\"late\\\"\"\n"))
            #expect(text.stdout.contains("  components = [\(ids.salt)]\n"))
            #expect(text.stdout.contains("  cook = \(ids.ada)"))
        }
        let json = try dump(["get", dir.path, ids.bread, "--json"], unchanged: dir.path)
        #expect(json.status == 0)
        let bread = try decodeJSON(InspectedObject.self, json)
        #expect(bread.id == ids.bread)
        #expect(bread.entity == "Dish")
        let values = Dictionary(uniqueKeysWithValues: bread.properties.map { ($0.name, $0.value) })
        #expect(values["name"] == .string("Bread"))
        #expect(values["servings"] == .integer(1))
        #expect(values["photo"] == .null)
        #expect(values["components"] == .objects([ids.pepper]))
        #expect(values["cook"] == .object(ids.ada))

        let missing = try dump(["get", dir.path, ids.water], unchanged: dir.path)  // deleted
        #expect(missing.status == 2)
        #expect(missing.stderr == "strata-dump: no object \(ids.water) in the store\n")
        let unknown = try dump(["get", dir.path, "Nope/p1"], unchanged: dir.path)
        #expect(unknown.status == 2)
        #expect(unknown.stderr.contains("no entity Nope"))
        #expect(unknown.stderr.filter { $0 == "\n" }.count == 1)
    }

    @Test func entityListsObjectsInKeyOrder() throws {
        let dir = ScratchStore()
        let ids = try buildSmallStore(at: dir.path)
        let all = try decodeJSON([InspectedObject].self, try dump(["entity", dir.path, "Dish", "--json"], unchanged: dir.path))
        #expect(all.map(\.id) == [ids.soup, ids.bread])
        let one = try dump(["entity", dir.path, "Component", "--limit", "1"], unchanged: dir.path)
        #expect(one.status == 0)
        #expect(one.stdout.hasPrefix("\(ids.salt) (version 1)\n  name = \"Salt\"\n  grams = 5\n  dish = \(ids.soup)\n"))
        #expect(!one.stdout.contains(ids.pepper))
        let flushed = ScratchStore()
        try buildFlushedStore(at: flushed.path, dishes: 60)
        let dishes = try decodeJSON([InspectedObject].self, try dump(["entity", flushed.path, "Dish", "--json"], unchanged: flushed.path))
        #expect(dishes.count == 55)
        #expect(dishes.map(\.primaryKey) == dishes.map(\.primaryKey).sorted())
        #expect(dishes.prefix(10).allSatisfy { $0.properties.first { $0.name == "rating" }?.value == .double(5) })
    }

    /// `explain` reads the model stored in the store and says which index a
    /// condition written as text would use, and how a count per group reads.
    @Test func explainNamesTheIndexForAConditionAsText() throws {
        let dir = ScratchStore()
        var options = StoreOptions()
        options.syncMode = .none
        let coordinator = PersistentStoreCoordinator(model: makeKitchenModel(dishIndexes: [IndexDescription("servings", "rating")], dishUniqueness: [["name"]]))
        try coordinator.addPersistentStore(.log, directory: dir.path, options: options)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            Dish(context: context).name = "Soup"
            try context.save()
        }
        try coordinator.close()
        let cases: [([String], String)] = [
            (["--where", "servings IN (2, 4) AND rating >= 3.5"], "SEARCH Dish USING INDEX (servings, rating) (servings IN (2 values) AND rating >= ?)"),
            (["--where", "name = 'Soup'"], "SEARCH Dish USING INDEX UNIQUE (name) (name = ?)"),
            (["--where", "name starts with \"So\" and spicy = true"], "SEARCH Dish USING INDEX UNIQUE (name) (name STARTS WITH ?)"),
            (["--where", "rating > 2"], "SCAN Dish"),
            ([], "SCAN Dish"),
            (["--group-by", "servings"], "SCAN Dish USING INDEX (servings, rating) FOR GROUP BY"),
            (["--where", "servings > 2", "--group-by", "rating", "servings"], "SEARCH Dish USING INDEX (servings, rating) (servings > ?) FOR GROUP BY"),
            (["--group-by", "cook"], "SCAN Dish THEN GROUP BY (reading each record)"),
        ]
        for (arguments, plan) in cases {
            let result = try dump(["explain", dir.path, "Dish"] + arguments, unchanged: dir.path)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
            #expect(result.stdout == plan + "\nindexes: (servings, rating), UNIQUE (name)\n", "\(arguments)")
        }
        for (arguments, message) in [(["--where", "colour = 'red'"], "Dish has no attribute colour"),
                                     (["--where", "servings = 'four'"], "is not a value of type integer64"),
                                     (["--where", "servings >"], "expected a value"),
                                     (["--where", "name = 'Soup' OR servings = 2"], "expected AND or the end")] {
            let result = try dump(["explain", dir.path, "Dish"] + arguments, unchanged: dir.path)
            #expect(result.status != 0)
            #expect(result.stderr.contains(message), "\(result.stderr)")
        }
    }

    @Test func verifyIsCleanOnGoodStores() throws {
        for flushed in [false, true] {
            let dir = ScratchStore("verify\(flushed)")
            if flushed { try buildFlushedStore(at: dir.path) } else { try buildSmallStore(at: dir.path) }
            let text = try dump(["verify", dir.path], unchanged: dir.path)
            #expect(text.status == 0, "\(text.stdout)")
            #expect(text.stdout.hasSuffix("clean\n"))
            #expect(text.stderr.isEmpty)
            let json = try dump(["verify", dir.path, "--json"], unchanged: dir.path)
            #expect(json.status == 0)
            let report = try decodeJSON(Verification.self, json)
            #expect(report.store.problems.isEmpty && report.recordProblems.isEmpty)
            #expect(report.recordsChecked > 0)
            #expect(report.store.checked.contains { $0.kind == (flushed ? .segment : .log) && $0.units > 0 })
        }
    }

    @Test func verifyFindsAFlippedByteInALogFrame() throws {
        let dir = ScratchStore()
        try buildSmallStore(at: dir.path)
        let log = try #require(try StoreInspector(directory: dir.path).logs().first { $0.isLive })
        let second = log.frames[1]
        let path = dir.path + "/" + log.file
        try flipByte(path, at: second.offset + 28 + 3)  // inside the payload
        let text = try dump(["verify", dir.path], unchanged: dir.path)
        #expect(text.status == 1)
        #expect(text.stdout.contains("corrupt: \(path) at offset \(second.offset): frame checksum mismatch"))
        let report = try decodeJSON(Verification.self, try dump(["verify", dir.path, "--json"], unchanged: dir.path))
        #expect(report.store.problems.map(\.offset) == [second.offset])
        // wal shows the damaged frame as bad and the frames after it as ok.
        let logs = try decodeJSON([LogReport].self, try dump(["wal", dir.path, "--json"], unchanged: dir.path))
        let statuses = try #require(logs.first { $0.file == log.file }).frames.map(\.status)
        #expect(statuses == [.ok, .bad, .ok, .ok, .ok])

        // The last frame: indistinguishable from a torn write, which an open
        // cuts off as a point-in-time recovery: a warning, exit status 0.
        let other = ScratchStore("lastFrame")
        try buildSmallStore(at: other.path)
        let lastLog = try #require(try StoreInspector(directory: other.path).logs().first { $0.isLive })
        let last = try #require(lastLog.frames.last)
        try flipByte(other.path + "/" + lastLog.file, at: last.offset + last.bytes - 1)
        let torn = try dump(["verify", other.path], unchanged: other.path)
        #expect(torn.status == 0, "\(torn.stdout)")
        #expect(torn.stdout.contains("warning: torn tail at \(lastLog.file):\(last.offset), an open will cut it (\(last.bytes) bytes"))
        #expect(torn.stdout.contains("ok   \(lastLog.file)"))
        #expect(torn.stdout.hasSuffix("clean (1 warning)\n"))
        let tornReport = try decodeJSON(Verification.self, try dump(["verify", other.path, "--json"], unchanged: other.path))
        #expect(tornReport.store.isClean && tornReport.recordProblems.isEmpty)
        #expect(tornReport.store.warnings.map(\.path) == [other.path + "/" + lastLog.file])
        #expect(tornReport.store.warnings.map(\.offset) == [last.offset])
        // And an open does cut it, keeping every batch before it.
        let store = try StrataStore(directory: other.path)
        #expect(store.recoveryReport.tornBytesDiscarded == last.bytes)
        try store.close()
        #expect(try StoreReports.verify(directory: other.path).store.warnings.isEmpty)
    }

    @Test func verifyReportsATornTailInAnOlderLogAsCorruption() throws {
        // Only the newest log can be torn: a torn older one fails the open, and verify.
        let dir = ScratchStore()
        try buildSmallStore(at: dir.path)
        do {
            // A second open starts a second log; the first stays live until a flush.
            var options = StoreOptions()
            options.syncMode = .none
            let store = try StrataStore(directory: dir.path, options: options)
            var batch = WriteBatch()
            batch.put(Array("user/2".utf8), Array("Grace".utf8))
            try store.write(batch)
            try store.close()
        }
        let logs = try StoreInspector(directory: dir.path).logs().filter(\.isLive)
        try #require(logs.count == 2)
        let last = try #require(logs[0].frames.last)
        let path = dir.path + "/" + logs[0].file
        try flipByte(path, at: last.offset + last.bytes - 1)
        let text = try dump(["verify", dir.path], unchanged: dir.path)
        #expect(text.status == 1)
        #expect(text.stdout.contains("corrupt: \(path) at offset \(last.offset): the log ends in a torn write but later logs follow it"))
        #expect(throws: StoreError.self) { try StrataStore(directory: dir.path) }
    }

    @Test func verifyFindsAFlippedByteInASegmentBlock() throws {
        let dir = ScratchStore()
        try buildFlushedStore(at: dir.path)
        let segment = try #require(try StoreInspector(directory: dir.path).segments().first { $0.isLive && $0.blocks.count > 1 })
        let block = segment.blocks[1]
        let path = dir.path + "/" + segment.file
        try flipByte(path, at: block.offset + 16 + 7)
        let text = try dump(["verify", dir.path], unchanged: dir.path)
        #expect(text.status == 1)
        #expect(text.stdout.contains("corrupt: \(path) at offset \(block.offset): segment block: block checksum mismatch"))
        #expect(text.stdout.contains("BAD  \(segment.file)"))

        // A flipped footer byte is caught too, though an open would rebuild the keys.
        let other = ScratchStore("footer")
        try buildFlushedStore(at: other.path)
        let inspected = try #require(try StoreInspector(directory: other.path).segments().first { $0.isLive })
        let footerOffset = try #require(inspected.blocks.last).offset + inspected.blocks.last!.storedBytes
        try flipByte(other.path + "/" + inspected.file, at: footerOffset + 6)
        let footer = try dump(["verify", other.path], unchanged: other.path)
        #expect(footer.status == 1)
        #expect(footer.stdout.contains("\(inspected.file) at offset \(footerOffset): segment footer checksum mismatch"))
    }

    @Test func errorsAreOneLineAndNonZero() throws {
        let dir = ScratchStore()
        func expectOneLine(_ result: DumpResult, status: Int32, containing text: String, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(result.status == status, "\(result.stderr)", sourceLocation: sourceLocation)
            #expect(result.stderr.hasPrefix("strata-dump: "), sourceLocation: sourceLocation)
            #expect(result.stderr.filter { $0 == "\n" }.count == 1, "\(result.stderr)", sourceLocation: sourceLocation)
            #expect(result.stderr.contains(text), "\(result.stderr)", sourceLocation: sourceLocation)
            #expect(!result.stderr.contains("Fatal error") && !result.stderr.contains("Stack dump"), sourceLocation: sourceLocation)
        }
        // Missing directory: nothing gets created.
        for command in ["info", "wal", "segments", "verify"] {
            expectOneLine(try dump([command, dir.path]), status: 2, containing: "no store at")
            #expect(!FileManager.default.fileExists(atPath: dir.path))
        }
        expectOneLine(try dump(["get", dir.path, "Dish/p1"]), status: 2, containing: "no store at")

        // A directory of other files.
        let foreign = dir.root + "/foreign"
        try FileManager.default.createDirectory(atPath: foreign, withIntermediateDirectories: true)
        try Data("hello".utf8).write(to: URL(fileURLWithPath: foreign + "/notes.txt"))
        for command in ["info", "verify", "wal"] {
            expectOneLine(try dump([command, foreign], unchanged: foreign), status: 2, containing: "is not a Strata store")
        }
        // A plain file.
        expectOneLine(try dump(["info", foreign + "/notes.txt"]), status: 2, containing: "is a file, not a store directory")

        // A truncated MANIFEST.
        try buildSmallStore(at: dir.path)
        let manifest = dir.path + "/MANIFEST"
        let bytes = try Data(contentsOf: URL(fileURLWithPath: manifest))
        try bytes.prefix(bytes.count - 3).write(to: URL(fileURLWithPath: manifest))
        for command in ["info", "wal", "segments", "verify"] {
            expectOneLine(try dump([command, dir.path], unchanged: dir.path), status: 1, containing: "\(manifest) at offset 0: MANIFEST fails its checksum")
        }
        expectOneLine(try dump(["entity", dir.path, "Dish"], unchanged: dir.path), status: 1, containing: "MANIFEST fails its checksum")

        // A truncated segment.
        let flushed = ScratchStore("truncatedSegment")
        try buildFlushedStore(at: flushed.path)
        let segment = try #require(try StoreInspector(directory: flushed.path).segments().first { $0.isLive && $0.blocks.count > 1 })
        let segmentPath = flushed.path + "/" + segment.file
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: segmentPath))
        try handle.truncate(atOffset: segment.blocks[1].offset + 20)
        try handle.close()
        expectOneLine(try dump(["info", flushed.path], unchanged: flushed.path), status: 1, containing: segmentPath)
        let verify = try dump(["verify", flushed.path], unchanged: flushed.path)
        #expect(verify.status == 1)
        #expect(verify.stdout.contains("\(segmentPath) at offset \(segment.blocks[1].offset + 20): the segment is \(segment.blocks[1].offset + 20) bytes but the MANIFEST recorded \(segment.size)"))

        // A plain StrataStore (no model): engine views work, object views say why not.
        let plain = ScratchStore("plain")
        do {
            var options = StoreOptions()
            options.syncMode = .none
            let store = try StrataStore(directory: plain.path, options: options)
            var batch = WriteBatch()
            batch.put(Array("user/1".utf8), Array("Ada".utf8))
            try store.write(batch)
            try store.close()
        }
        let info = try dump(["info", plain.path], unchanged: plain.path)
        #expect(info.status == 0)
        #expect(info.stdout.contains("objects     the store holds no Strata model"))
        #expect(try dump(["verify", plain.path], unchanged: plain.path).status == 0)
        expectOneLine(try dump(["get", plain.path, "Dish/p1"], unchanged: plain.path), status: 2, containing: "holds no Strata model")

        // Bad arguments are ArgumentParser's usage errors.
        let usage = try dump(["get", plain.path])
        #expect(usage.status == 64)
    }

    @Test func inspectsAStoreAnotherProcessHasOpen() throws {
        let dir = ScratchStore()
        try buildSmallStore(at: dir.path)
        var options = StoreOptions()
        options.syncMode = .none
        let coordinator = PersistentStoreCoordinator(model: makeKitchenModel())
        try coordinator.addPersistentStore(.log, directory: dir.path, options: options)  // holds LOCK
        defer { try? coordinator.close() }
        for command in [["info"], ["wal"], ["verify"], ["entity", "_", "Dish"]] {
            var arguments = command
            if arguments.count > 1 { arguments[1] = dir.path } else { arguments.append(dir.path) }
            let result = try dump(arguments, unchanged: dir.path)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
        }
    }
}
