import Foundation
import Testing

@_spi(Coding) @testable import StrataStore

/// One test per wrong outcome the corruption matrix found, each on the
/// smallest store that shows it.
@Suite struct CorruptionRegressionTests {
    /// A store with two live logs: batches 1–4 (`k0`…`k3`) in the first, 5–6
    /// (`k4`, `k5`) in the second (a second open starts a log; the first stays
    /// live until a flush). Batch 3 deletes `k0`.
    static func twoLogStore(_ dir: ScratchDirectory) throws -> [LogReport] {
        var store = try StrataStore(directory: dir.store, options: smallOptions())
        try store.put("k0", "v0")
        try store.put("k1", "v1")
        try store.delete("k0")
        try store.put("k3", "v3")
        try store.close()
        store = try StrataStore(directory: dir.store, options: smallOptions())
        try store.put("k4", "v4")
        try store.put("k5", "v5")
        try store.close()
        let logs = try StoreInspector(directory: dir.store).logs().filter(\.isLive)
        try #require(logs.count == 2 && logs[0].frames.count == 4)
        return logs
    }

    static func truncate(_ path: String, at offset: UInt64) {
        writeFileBytes(path, Array(readFileBytes(path).prefix(Int(offset))))
    }

    static func expectCorruption(_ directory: String, options: StoreOptions = smallOptions(), path: String, offset: UInt64,
                                 sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            let store = try StrataStore(directory: directory, options: options)
            try? store.close()
            Issue.record("the damaged store opened", sourceLocation: sourceLocation)
        } catch let error as StoreError {
            #expect(error.code == .corruption, "\(error)", sourceLocation: sourceLocation)
            #expect(error.path == path, "\(error)", sourceLocation: sourceLocation)
            #expect(error.offset == offset, "\(error)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("not a StoreError: \(error)", sourceLocation: sourceLocation)
        }
    }

    /// An older log cut at a frame boundary, or emptied, scanned as clean: the
    /// open replayed the later log and lost the batches in between — `k0`
    /// came back though batch 3 deleted it. Now it is corruption where the
    /// batches went missing, which `verify` reports too, and salvage keeps
    /// what precedes the gap.
    @Test(arguments: [0, 32, 3])  // emptied, cut to its header, cut before its last frame (3: a marker)
    func anOlderLogCutShortIsCorruptionNotLostBatches(cut: Int) throws {
        let dir = ScratchDirectory("olderLogCut\(cut)")
        let logs = try Self.twoLogStore(dir)
        let path = dir.store + "/" + logs[0].file
        let offset = cut == 3 ? logs[0].frames[3].offset : UInt64(cut)
        Self.truncate(path, at: offset)
        let damaged = Set(try FileManager.default.contentsOfDirectory(atPath: dir.store))
        Self.expectCorruption(dir.store, path: path, offset: offset)
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: dir.store)) == damaged)  // the failed open removed nothing
        #expect(readFileBytes(path).count == Int(offset))
        let verdict = try StoreInspector(directory: dir.store).verify()
        #expect(verdict.problems.contains { $0.path == path && $0.offset == offset && $0.message.contains("are missing") }, "\(verdict.problems)")

        var salvage = smallOptions()
        salvage.recovery = .salvage
        let store = try StrataStore(directory: dir.store, options: salvage)
        #expect(store.recoveryReport.salvagedCorruption != nil)
        #expect(store.sequence == (cut == 3 ? 3 : 0))
        #expect(try store.string("k4") == nil)  // after the gap
        #expect(try store.string("k1") == (cut == 3 ? "v1" : nil))
        #expect(try store.string("k0") == nil)  // deleted by batch 3, or never replayed
        try store.close()
    }

    /// A torn older log failed even a salvaging open; salvage now keeps the
    /// batches before the tear and drops the later logs.
    @Test func aTornOlderLogIsSalvagedUpToTheTear() throws {
        let dir = ScratchDirectory()
        let logs = try Self.twoLogStore(dir)
        let path = dir.store + "/" + logs[0].file
        let last = logs[0].frames[3]
        var bytes = readFileBytes(path)
        bytes[Int(last.offset + last.bytes) - 1] ^= 0x01
        writeFileBytes(path, bytes)
        Self.expectCorruption(dir.store, path: path, offset: last.offset)
        var salvage = smallOptions()
        salvage.recovery = .salvage
        let store = try StrataStore(directory: dir.store, options: salvage)
        #expect(store.recoveryReport.salvagedCorruption?.contains(logs[0].file) == true)
        #expect(store.sequence == 3)
        #expect(try store.string("k1") == "v1")
        #expect(try store.string("k3") == nil && store.string("k4") == nil)
        try store.close()
    }

    /// A flushed store whose first segment has several blocks.
    static func flushedStore(_ dir: ScratchDirectory) throws -> (path: String, segment: SegmentReport) {
        let store = try StrataStore(directory: dir.store, options: smallOptions())
        for i in 0..<300 { try store.put(String(format: "key%04d", i), String(repeating: "value \(i) ", count: 8)) }
        try store.flush()
        try store.close()
        let segment = try #require(try StoreInspector(directory: dir.store).segments().first { $0.isLive && $0.blocks.count > 2 })
        return (dir.store + "/" + segment.file, segment)
    }

    /// A segment cut at a block boundary scanned as clean (the footer gone,
    /// the scan found fewer blocks and no fault): the open lost their records.
    /// Now any size but the manifest's is corruption at the shorter length.
    @Test func aSegmentCutAtABlockBoundaryIsCorruption() throws {
        let dir = ScratchDirectory()
        let (path, segment) = try Self.flushedStore(dir)
        let offset = segment.blocks[2].offset
        Self.truncate(path, at: offset)
        Self.expectCorruption(dir.store, path: path, offset: offset)
    }

    /// A flipped footer magic failed the fallback scan (it took the footer for
    /// a damaged block); the scan now stops where the trailer says the blocks end.
    @Test func aFlippedFooterMagicIsRebuiltByAScan() throws {
        let dir = ScratchDirectory()
        let (path, segment) = try Self.flushedStore(dir)
        let footer = Int(segment.blocks.last!.offset + segment.blocks.last!.storedBytes)
        var file = readFileBytes(path)
        file[footer] ^= 0x04
        writeFileBytes(path, file)
        let store = try StrataStore(directory: dir.store, options: smallOptions())
        #expect(store.recoveryReport.segmentsRebuiltByScan == [segment.file])
        #expect(try store.scan(prefix: bytes("key")).count == 300)
        try store.close()
    }

    /// A flipped bit in a segment's magic was `.notAStore`; the manifest names
    /// the file as a segment, so it is a damaged one.
    @Test func aDamagedSegmentMagicIsCorruption() throws {
        let dir = ScratchDirectory()
        let (path, _) = try Self.flushedStore(dir)
        var bytes = readFileBytes(path)
        bytes[2] ^= 0x10
        writeFileBytes(path, bytes)
        Self.expectCorruption(dir.store, path: path, offset: 0)
    }

    /// A flipped bit in the manifest's version read as a newer format, and one
    /// in its magic (or a manifest cut inside it) as a foreign file.
    @Test func aDamagedManifestIsCorruption() throws {
        let path = "/store/MANIFEST"
        var manifest = Manifest()
        manifest.segments = [SegmentInfo(fileNumber: 3, fileSize: 4096, recordCount: 10, minimumSequence: 1, maximumSequence: 10)]
        manifest.nextFileNumber = 4  // file numbers in use lie below it, or the manifest is corrupt
        let good = manifest.encoded()
        func code(_ bytes: [UInt8]) -> StoreError.Code? {
            do throws(StoreError) {
                _ = try Manifest(decoding: bytes, path: path)
                return nil
            } catch {
                return error.code
            }
        }
        #expect(code(good) == nil)
        for (offset, bit) in [(0, 0), (5, 7), (8, 1), (11, 7)] {
            var bytes = good
            bytes[offset] ^= 1 << bit
            #expect(code(bytes) == .corruption, "bit \(bit) of byte \(offset)")
        }
        for length in [0, 3, 8, 11, 40] { #expect(code(Array(good.prefix(length))) == .corruption, "cut at \(length)") }
        // A real newer version (its checksum holds) is still unsupported, and a foreign file foreign.
        var newer = Array(good.dropLast(4))
        newer[8] = 2
        newer.appendInteger(CRC32C.checksum(newer))
        #expect(code(newer) == .unsupportedVersion)
        #expect(code(Array("hello world, not a manifest".utf8)) == .notAStore)
    }
}
