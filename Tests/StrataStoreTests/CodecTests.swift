import Foundation
import SharedTestSupport
import Testing

@_spi(Coding) @testable import StrataStore

@Suite struct ChecksumTests {
    @Test func standardCheckValueOnBothPaths() {
        let check = Array("123456789".utf8)
        check.withUnsafeBytes { b in
            #expect(CRC32C.portableChecksum(b) == 0xE306_9283)
            if let hardware = CRC32C.hardwareChecksum(b) { #expect(hardware == 0xE306_9283) }
            #expect(CRC32C.checksum(b) == 0xE306_9283)
        }
    }

    @Test func pathsAgreeOnRandomInputsAndSplits() {
        var g = SeededGenerator(seed: 7)
        for length in [0, 1, 7, 8, 9, 63, 64, 65, 1000, 4096, 100_003] {
            let data = (0..<length).map { _ in UInt8.random(in: 0...255, using: &g) }
            data.withUnsafeBytes { b in
                let portable = CRC32C.portableChecksum(b)
                if let hardware = CRC32C.hardwareChecksum(b) { #expect(hardware == portable, "length \(length)") }
                // Continuing across a split gives the same checksum.
                let cut = length / 3
                let first = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: b[0..<cut]))
                #expect(CRC32C.checksum(UnsafeRawBufferPointer(rebasing: b[cut...]), continuing: first) == portable)
            }
        }
    }

    @Test func detectsASingleBitFlip() {
        var data = Array(repeating: UInt8(0x5A), count: 512)
        let before = CRC32C.checksum(data)
        data[300] ^= 0x10
        #expect(CRC32C.checksum(data) != before)
    }
}

@Suite struct CompressionTests {
    @Test func roundTripsTextAndRandomBytes() {
        var g = SeededGenerator(seed: 11)
        let text = Array(String(repeating: "Strata keeps Core Data's semantics. ", count: 500).utf8)
        let noise = (0..<20_000).map { _ in UInt8.random(in: 0...255, using: &g) }
        for input in [text, noise, [1], []] {
            var out: [UInt8] = []
            let n = input.withUnsafeBytes { LZ4.compress($0, appendingTo: &out) }
            #expect(n == out.count)
            let back = out.withUnsafeBytes { LZ4.decompress($0, rawCount: input.count) }
            #expect(back == input)
        }
        var compressed: [UInt8] = []
        _ = text.withUnsafeBytes { LZ4.compress($0, appendingTo: &compressed) }
        #expect(compressed.count < text.count / 4)
    }

    @Test func malformedInputIsRefusedNotTrapped() {
        var g = SeededGenerator(seed: 12)
        let text = Array(String(repeating: "abcdefgh", count: 300).utf8)
        var compressed: [UInt8] = []
        _ = text.withUnsafeBytes { LZ4.compress($0, appendingTo: &compressed) }
        // Wrong declared size, truncated input, random garbage.
        #expect(compressed.withUnsafeBytes { LZ4.decompress($0, rawCount: text.count + 1) } == nil)
        #expect(compressed.dropLast(3).withUnsafeBytes { LZ4.decompress($0, rawCount: text.count) } == nil)
        for _ in 0..<200 {
            let garbage = (0..<Int.random(in: 1...300, using: &g)).map { _ in UInt8.random(in: 0...255, using: &g) }
            let result = garbage.withUnsafeBytes { LZ4.decompress($0, rawCount: 1000) }
            #expect(result == nil || result!.count == 1000)
        }
    }
}

@Suite struct ByteCodingTests {
    @Test func varintsRoundTripAndRejectOverflow() {
        var out: [UInt8] = []
        let values: [UInt64] = [0, 1, 127, 128, 300, 1 << 35, UInt64.max]
        for v in values { out.appendVarint(v) }
        out.withUnsafeBytes { b in
            var r = ByteReader(b)
            for v in values { #expect(r.readVarint() == v) }
            #expect(r.isAtEnd)
        }
        let overlong: [UInt8] = Array(repeating: 0xFF, count: 11) + [0x01]
        overlong.withUnsafeBytes { b in
            var r = ByteReader(b)
            #expect(r.readVarint() == nil)
        }
        let unterminated: [UInt8] = [0x80, 0x80]
        unterminated.withUnsafeBytes { b in
            var r = ByteReader(b)
            #expect(r.readVarint() == nil)
        }
    }

    /// What a `ByteWriter` writes in place is byte for byte what the
    /// appending helpers write, and `append(written:)` adds exactly it
    /// after what the array held.
    @Test func writingInPlaceMatchesAppending() {
        struct Fields: ByteWriting {
            var varints: [UInt64]
            var word: UInt32
            var tail: [UInt8]
            var byteCount: Int { varints.reduce(0) { $0 + varintSize($1) } + 4 + tail.count }
            func write(to writer: inout ByteWriter) {
                for v in varints { writer.writeVarint(v) }
                writer.writeInteger(word)
                tail.withUnsafeBytes { writer.writeBytes($0) }
            }
        }
        let varints: [UInt64] = [0, 1, 127, 128, 16_383, 16_384, 300, 1 << 35, 1 << 63, UInt64.max]
        for v in varints {
            var appended: [UInt8] = []
            appended.appendVarint(v)
            #expect(varintSize(v) == appended.count, "varint size of \(v)")
        }
        let fields = Fields(varints: varints, word: 0xDEAD_BEEF, tail: Array("tail".utf8))
        var expected: [UInt8] = [9, 9]
        for v in varints { expected.appendVarint(v) }
        expected.appendInteger(UInt32(0xDEAD_BEEF))
        expected.append(contentsOf: Array("tail".utf8))
        var written: [UInt8] = [9, 9]
        written.append(written: fields)
        #expect(written == expected)
        var empty: [UInt8] = []
        empty.append(written: Fields(varints: [], word: 1, tail: []))
        #expect(empty == [1, 0, 0, 0])
    }

    /// A put written in place encodes as the byte-array put does, and the
    /// batch decoder reads it back.
    @Test func aPutWrittenInPlaceEncodesAsAByteArrayPut() {
        let key = Array("recipe/1".utf8)
        let long = [UInt8](repeating: 0xAB, count: 300)  // a two-byte length
        for value in [[], Array("Soup".utf8), long] {
            var arrays = WriteBatch()
            arrays.put(key, value)
            var inPlace = WriteBatch()
            key.withUnsafeBytes { key in
                value.withUnsafeBytes { value in inPlace.put(BorrowedBytes(key), BorrowedBytes(value)) }
            }
            var generic = WriteBatch()
            generic.put(key[...], value[...])
            #expect(inPlace.encoded == generic.encoded)
            #expect(arrays.encoded == generic.encoded)
            #expect(inPlace.count == 1 && inPlace.longestKey == key.count)
            inPlace.encoded.withUnsafeBytes { payload in
                #expect(BatchDecoder.validate(payload, expectedCount: 1))
                BatchDecoder.forEach(payload) { operation in
                    #expect(operation.kind == .put)
                    #expect(Array(operation.key) == key)
                    #expect(Array(operation.value) == value)
                }
            }
        }
    }

    @Test func keyOrderIsUnsignedLexicographic() {
        func cmp(_ a: [UInt8], _ b: [UInt8]) -> Int { compareArrays(a, b) }
        #expect(cmp([1], [2]) < 0)
        #expect(cmp([0xFF], [0x01, 0x00]) > 0)
        #expect(cmp([1, 2], [1, 2, 0]) < 0)
        #expect(cmp([1, 2], [1, 2]) == 0)
    }
}

@Suite struct LogFormatTests {
    static let salt: UInt32 = 0xDEAD_BEEF

    /// A log file with `count` batches, and the offsets where each frame starts.
    static func makeLog(count: Int, salt: UInt32 = salt, firstSequence: UInt64 = 1) -> ([UInt8], [Int]) {
        var file = LogFormat.encodeFileHeader(salt: salt, fileNumber: 3)
        var starts: [Int] = []
        for i in 0..<count {
            var batch = WriteBatch()
            batch.put(bytes("key-\(i)"), bytes(String(repeating: "v", count: 10 + i)))
            if i % 2 == 1 { batch.delete(bytes("key-\(i - 1)")) }
            starts.append(file.count)
            LogFormat.appendFrame(to: &file, sequence: firstSequence + UInt64(i), operationCount: batch.count, salt: salt, payload: batch.encoded)
        }
        return (file, starts)
    }

    static func scan(_ file: [UInt8], after: UInt64 = 0) -> LogScanner {
        file.withUnsafeBytes { LogScanner($0, previousSequence: after) }
    }

    @Test func readsBackEveryFrame() {
        let (file, _) = Self.makeLog(count: 10)
        let scan = Self.scan(file)
        #expect(scan.header == LogFormat.FileHeader(salt: Self.salt, fileNumber: 3))
        #expect(scan.frames.map(\.sequence) == Array(1...10))
        #expect(scan.end == .clean)
        #expect(scan.validLength == file.count)
    }

    @Test func aTruncatedLastFrameIsATornTailAtEveryCut() {
        let (file, starts) = Self.makeLog(count: 5)
        for cut in (starts[4] + 1)..<file.count {
            let scan = Self.scan(Array(file[0..<cut]))
            #expect(scan.frames.count == 4, "cut at \(cut)")
            #expect(scan.end == .tornTail, "cut at \(cut)")
            #expect(scan.validLength == starts[4])
        }
    }

    @Test func zeroFillAfterTheLastFrameIsACleanEnd() {
        let (file, _) = Self.makeLog(count: 3)
        let scan = Self.scan(file + Array(repeating: 0, count: 4096))
        #expect(scan.frames.count == 3)
        #expect(scan.end == .clean)
        #expect(scan.validLength == file.count)
    }

    @Test func aBadFrameFollowedByGoodOnesIsCorruptionAtItsOffset() {
        let (file, starts) = Self.makeLog(count: 6)
        // Flip a bit in the payload of frame 2, then in its length field.
        for position in [starts[2] + LogFormat.frameHeaderSize + 3, starts[2] + 5] {
            var damaged = file
            damaged[position] ^= 0x04
            let scan = Self.scan(damaged)
            #expect(scan.frames.count == 2)
            #expect(scan.validLength == starts[2])
            guard case .corruption(_, let next) = scan.end else {
                Issue.record("expected corruption, got \(scan.end)")
                continue
            }
            #expect(next == starts[3])
        }
    }

    @Test func framesFromAnotherFileOrOutOfOrderAreNotAccepted() {
        let (file, starts) = Self.makeLog(count: 3)
        let (foreign, foreignStarts) = Self.makeLog(count: 3, salt: 0x1234, firstSequence: 4)
        // A stale frame with another file's salt after the valid ones ends the log.
        let mixed = file + Array(foreign[foreignStarts[0]...])
        let scan = Self.scan(mixed)
        #expect(scan.frames.count == 3)
        #expect(scan.end == .tornTail)
        // Sequences must rise: a log whose frames are at or below the previous sequence is rejected.
        let replay = Self.scan(file, after: 5)
        #expect(replay.frames.isEmpty)
        _ = starts
    }

    @Test func aTornOrForeignHeader() {
        #expect(Self.scan([]).end == .clean)
        #expect(Self.scan([0x53, 0x54]).end == .tornTail)
        #expect(Self.scan(Array(repeating: 0, count: 64)).end == .tornTail)
        let scan = Self.scan(Array("not a log file at all, just some text here".utf8))
        guard case .corruption = scan.end else { Issue.record("foreign header accepted: \(scan.end)"); return }
    }
}

@Suite struct SegmentFormatTests {
    /// Writes a segment of `count` records (every 7th a tombstone) and returns what the manifest would record.
    static func writeSegment(_ dir: ScratchDirectory, count: Int, valueSize: Int = 100) throws -> SegmentInfo {
        try writtenSegment(dir, count: count, valueSize: valueSize).info
    }

    /// ``writeSegment(_:count:valueSize:)``, and the finished writer.
    static func writtenSegment(_ dir: ScratchDirectory, count: Int, valueSize: Int = 100) throws -> (info: SegmentInfo, writer: SegmentWriter) {
        try FileManager.default.createDirectory(atPath: dir.store, withIntermediateDirectories: true)
        let writer = try SegmentWriter(fileSystem: POSIXFileSystem(), directory: dir.store, fileNumber: 9, blockSize: 4096)
        for i in 0..<count {
            let key = bytes(String(format: "k%06d", i))
            let value = Array(repeating: UInt8(i % 251), count: valueSize)
            _ = try key.withUnsafeBytes { k in
                try value.withUnsafeBytes { v in
                    try writer.add(key: k, sequence: UInt64(i + 1), kind: i % 7 == 0 ? .delete : .put, value: i % 7 == 0 ? UnsafeRawBufferPointer(start: nil, count: 0) : v)
                }
            }
        }
        return (try writer.finish(), writer)
    }

    @Test func roundTripsThroughTheFooter() throws {
        let dir = ScratchDirectory()
        let info = try Self.writeSegment(dir, count: 2000)
        #expect(info.recordCount == 2000 && info.minimumSequence == 1 && info.maximumSequence == 2000)
        let opened = try SegmentReader.open(fileSystem: POSIXFileSystem(), directory: dir.store, fileNumber: 9)
        #expect(!opened.rebuiltByScan)
        #expect(opened.keys.entries.count == 2000)
        #expect(opened.reader.blocks.count > 40)  // 4 KiB blocks of ~110-byte records
        // The footer's locations lead straight to each record.
        for i in [0, 1, 1234, 1999] {
            let e = opened.keys.entries[i]
            let block = try opened.reader.readBlock(e.location.block)
            let (key, value, kind) = block.withRecord(Int(e.location.slot)) { (Array($0.key), Array($0.value), $0.kind) }
            #expect(key == bytes(String(format: "k%06d", i)))
            #expect(kind == (i % 7 == 0 ? .delete : .put))
            if kind == .put { #expect(value == Array(repeating: UInt8(i % 251), count: 100)) }
        }
    }

    /// A flush opens the segment it wrote with its writer's block table,
    /// which leads to every record as the footer does; a file that no longer
    /// has the size written (cut short here) is refused as corrupt.
    @Test func aFinishedWriterOpensItsSegmentWithoutTheFooter() throws {
        let dir = ScratchDirectory()
        let (info, writer) = try Self.writtenSegment(dir, count: 2000)
        let fromFooter = try SegmentReader.open(fileSystem: POSIXFileSystem(), directory: dir.store, fileNumber: 9)
        let reader = try writer.openFinished()
        #expect(reader.blocks == fromFooter.reader.blocks && reader.info == info)
        for i in [0, 1, 1234, 1999] {
            let e = fromFooter.keys.entries[i]
            let block = try reader.readBlock(e.location.block)
            let key = block.withRecord(Int(e.location.slot)) { Array($0.key) }
            #expect(key == bytes(String(format: "k%06d", i)))
        }
        let path = dir.store + "/" + SegmentFormat.fileName(9)
        writeFileBytes(path, Array(readFileBytes(path).dropLast(1)))
        let error = #expect(throws: StoreError.self) { try writer.openFinished() }
        #expect(error?.code == .corruption)
    }

    @Test func aDamagedFooterFallsBackToScanningTheBlocks() throws {
        let dir = ScratchDirectory()
        let info = try Self.writeSegment(dir, count: 500)
        let path = dir.store + "/" + SegmentFormat.fileName(9)
        var file = readFileBytes(path)
        file[Int(info.fileSize) - SegmentFormat.trailerSize - 20] ^= 0xFF  // inside the footer
        writeFileBytes(path, file)
        let opened = try SegmentReader.open(fileSystem: POSIXFileSystem(), directory: dir.store, fileNumber: 9)
        #expect(opened.rebuiltByScan)
        #expect(opened.keys.entries.count == 500)
        #expect(opened.keys.entries.filter { $0.kind == .delete }.count == 72)
    }

    @Test func aDamagedBlockIsCorruptionNamingFileAndOffset() throws {
        let dir = ScratchDirectory()
        _ = try Self.writeSegment(dir, count: 500)
        let path = dir.store + "/" + SegmentFormat.fileName(9)
        let opened = try SegmentReader.open(fileSystem: POSIXFileSystem(), directory: dir.store, fileNumber: 9)
        let victim = opened.reader.blocks[3]
        var file = readFileBytes(path)
        file[Int(victim.offset) + SegmentFormat.blockHeaderSize + 10] ^= 0x01
        writeFileBytes(path, file)
        let reopened = try SegmentReader.open(fileSystem: POSIXFileSystem(), directory: dir.store, fileNumber: 9)
        do {
            _ = try reopened.reader.readBlock(3)
            Issue.record("a damaged block was read as good")
        } catch {
            #expect(error.code == .corruption)
            #expect(error.path == path)
            #expect(error.offset == victim.offset)
        }
        #expect(throws: Never.self) { _ = try reopened.reader.readBlock(4) }
    }
}

@Suite struct ManifestTests {
    @Test func roundTripsAndRejectsDamage() throws {
        let dir = ScratchDirectory()
        try FileManager.default.createDirectory(atPath: dir.store, withIntermediateDirectories: true)
        var m = Manifest()
        m.nextFileNumber = 42
        m.logNumber = 40
        m.lastSequence = 1_000_000
        m.segments = [SegmentInfo(fileNumber: 7, fileSize: 1234, recordCount: 99, minimumSequence: 1, maximumSequence: 99)]
        try m.write(fileSystem: POSIXFileSystem(), directory: dir.store)
        let path = dir.store + "/MANIFEST"
        let decoded = try Manifest(decoding: readFileBytes(path), path: path)
        #expect(decoded == m)
        #expect(!FileManager.default.fileExists(atPath: dir.store + "/MANIFEST.tmp"))

        var damaged = readFileBytes(path)
        damaged[20] ^= 0x01
        #expect { try Manifest(decoding: damaged, path: path) } throws: { ($0 as? StoreError)?.code == .corruption }
        #expect { try Manifest(decoding: Array("hello world, not a manifest".utf8), path: path) } throws: { ($0 as? StoreError)?.code == .notAStore }
        #expect { try Manifest(decoding: Array(readFileBytes(path).prefix(30)), path: path) } throws: { ($0 as? StoreError)?.code == .corruption }
    }
}
