@_spi(Coding) import StrataStore

/// The storage engine's decoders.
enum StoreTargets {
    /// One batch operation, copied out of the bytes it was decoded from.
    struct Operation: Equatable {
        var kind: OperationKind
        var key: [UInt8]
        var value: [UInt8]
    }

    /// Every operation of `payload`, or nil when `BatchDecoder` rejects it.
    static func operations(_ payload: UnsafeRawBufferPointer) -> [Operation]? {
        var reader = ByteReader(payload)
        var result: [Operation] = []
        while !reader.isAtEnd {
            guard let op = BatchDecoder.next(&reader) else { return nil }
            require(!op.key.isEmpty, "BatchDecoder returned an empty key")
            require(op.kind == .put || op.value.isEmpty, "a delete carries a value")
            result.append(Operation(kind: op.kind, key: Array(op.key), value: Array(op.value)))
        }
        return result
    }

    /// The payload a writer would produce for `operations`.
    static func encode(_ operations: [Operation]) -> [UInt8] {
        var batch = WriteBatch()
        for op in operations {
            if op.kind == .put { batch.put(op.key, op.value) } else { batch.delete(op.key) }
        }
        return batch.encoded
    }

    static func batch(_ input: UnsafeRawBufferPointer) {
        let decoded = operations(input)
        require(BatchDecoder.validate(input, expectedCount: decoded?.count ?? -1) == (decoded != nil), "validate disagrees with next()")
        var seen = 0
        if decoded != nil { BatchDecoder.forEach(input) { _ in seen += 1 } }
        require(seen == decoded?.count ?? 0, "forEach visits \(seen) operations of \(decoded?.count ?? 0)")
        guard let decoded else { return }
        let again = encode(decoded).withUnsafeBytes { operations($0) }
        require(again == decoded, "a batch does not survive decode(encode(decode(x)))")
    }

    static func wal(_ input: UnsafeRawBufferPointer) {
        guard let (repair, _, body) = splitMode(input) else { return }
        var bytes = body
        if repair { Repair.log(&bytes) }
        bytes.withUnsafeBytes { raw in
            let previous = UInt64(raw.count % 3)  // sometimes a log that must follow earlier sequences
            let scan = LogScanner(raw, previousSequence: previous)
            require(scan.validLength <= raw.count, "valid length \(scan.validLength) past the end \(raw.count)")
            guard let header = scan.header else {
                require(scan.frames.isEmpty && scan.validLength == 0, "frames without a header")
                return
            }
            switch LogFormat.encodeFileHeader(salt: header.salt, fileNumber: header.fileNumber).withUnsafeBytes({ LogFormat.decodeFileHeader($0) }) {
            case .success(let again): require(again == header, "the log header does not round-trip")
            case .failure(let problem): fatalError("a re-encoded log header fails: \(problem)")
            }
            var end = LogFormat.fileHeaderSize
            var last = previous
            for frame in scan.frames {
                require(frame.offset == end, "frame at \(frame.offset) does not follow the previous one at \(end)")
                require(frame.sequence > last, "sequence \(frame.sequence) after \(last)")
                require(frame.payload.lowerBound == frame.offset + LogFormat.frameHeaderSize && frame.payload.upperBound <= raw.count, "payload out of bounds")
                let payload = UnsafeRawBufferPointer(rebasing: raw[frame.payload])
                guard let ops = operations(payload) else { fatalError("an accepted frame's payload does not decode") }
                require(ops.count == frame.operationCount, "frame holds \(ops.count) operations, header says \(frame.operationCount)")
                // The writer's bytes for this frame are the frame's bytes (every header field is fixed-width).
                var rewritten: [UInt8] = []
                LogFormat.appendFrame(to: &rewritten, sequence: frame.sequence, operationCount: frame.operationCount, salt: header.salt, payload: Array(payload))
                require(rewritten.elementsEqual(raw[frame.offset..<frame.payload.upperBound]), "frame at \(frame.offset) does not re-encode to its bytes")
                end = frame.payload.upperBound
                last = frame.sequence
            }
            require(scan.validLength == end, "valid length \(scan.validLength), frames end at \(end)")
            if case .corruption(_, let next) = scan.end {
                require(next > scan.validLength && next < raw.count, "next valid frame at \(next) is not after the bad one")
            }
        }
    }

    /// A decoded block's records, copied out.
    struct Record: Equatable {
        var key: [UInt8]
        var sequence: UInt64
        var kind: OperationKind
        var value: [UInt8]
    }

    static func records(_ block: DecodedBlock) -> [Record] {
        (0..<block.count).map { i in
            block.withRecord(i) { Record(key: Array($0.key), sequence: $0.sequence, kind: $0.kind, value: Array($0.value)) }
        }
    }

    /// Frames of 4 KiB for the block target; each input's block gives its
    /// frame back when freed, which the target checks.
    static let blockMemory = BlockMemory(capacity: 2 << 20, frameSize: 4 << 10)

    static func block(_ input: UnsafeRawBufferPointer) {
        // The input as a stored block: header, checksum, LZ4, layout.
        // Decoded into a frame when its raw size fits one (2-4 KiB), else on the heap.
        if case .success(let block) = SegmentFormat.decodeBlock(input, expectedRecords: nil, memory: blockMemory) { _ = records(block) }
        precondition(blockMemory.framesInUse == 0, "a decoded block kept its frame after it was freed")
        // The input as a raw (decompressed) block.
        guard let block = DecodedBlock.copying(Array(input)) else { return }
        let decoded = records(block)
        var builder = BlockBuilder()
        for r in decoded {
            r.key.withUnsafeBytes { key in r.value.withUnsafeBytes { value in builder.add(key: key, sequence: r.sequence, kind: r.kind, value: value) } }
        }
        let raw = builder.finish()
        var stored: [UInt8] = []
        _ = raw.withUnsafeBytes { SegmentFormat.appendBlock(raw: $0, to: &stored) }
        switch stored.withUnsafeBytes({ SegmentFormat.decodeBlock($0, expectedRecords: UInt32(decoded.count)) }) {
        case .success(let again): require(records(again) == decoded, "a block does not survive decode(encode(decode(x)))")
        case .failure(let problem): fatalError("a re-encoded block fails: \(problem)")
        }
    }

    static let directory = "/fuzz"

    static func segment(_ input: UnsafeRawBufferPointer) {
        guard let (repair, _, body) = splitMode(input) else { return }
        var bytes = body
        if repair { Repair.segment(&bytes) }
        // The trailer alone: fixed-width fields, so a good one re-encodes to its bytes.
        if bytes.count >= SegmentFormat.trailerSize {
            let tail = Array(bytes.suffix(SegmentFormat.trailerSize))
            if let trailer = tail.withUnsafeBytes({ SegmentFormat.Trailer(decoding: $0) }) {
                require(trailer.encoded() == tail, "the trailer does not re-encode to its bytes")
            }
        }
        // The file number the header names (so a good header passes the check).
        let number = bytes.integer(at: 16, as: UInt64.self).flatMap { UInt32(exactly: $0) } ?? 1
        let fs = MemoryFileSystem(directory: directory, files: [SegmentFormat.fileName(number): bytes])
        let opened: SegmentReader.Opened
        do { opened = try SegmentReader.open(fileSystem: fs, directory: directory, fileNumber: number) } catch {
            require(error.code == .corruption || error.code == .notAStore || error.code == .unsupportedVersion, "unexpected error \(error)")
            return
        }
        let reader = opened.reader
        require(UInt64(opened.keys.entries.count) == reader.info.recordCount, "the key table and the record count disagree")
        var blocks: [UInt32: DecodedBlock] = [:]
        for entry in opened.keys.entries {
            require(entry.keyLength > 0 && Int(entry.keyStart) + Int(entry.keyLength) <= opened.keys.bytes.count, "a key outside the key table")
            require(Int(entry.location.block) < reader.blocks.count, "a key in block \(entry.location.block) of \(reader.blocks.count)")
            if blocks[entry.location.block] == nil {
                do { blocks[entry.location.block] = try reader.readBlock(entry.location.block) } catch {
                    require(error.code == .corruption, "unexpected error \(error)")
                    continue
                }
            }
            let block = blocks[entry.location.block]!
            require(Int(entry.location.slot) < block.count, "slot \(entry.location.slot) of a block of \(block.count)")
            block.withRecord(Int(entry.location.slot)) { _ in }
        }
    }

    static func manifest(_ input: UnsafeRawBufferPointer) {
        guard let (repair, _, body) = splitMode(input) else { return }
        var bytes = body
        if repair { Repair.manifest(&bytes) }
        let manifest: Manifest
        do { manifest = try Manifest(decoding: bytes, path: directory + "/MANIFEST") } catch {
            require(error.code == .corruption || error.code == .notAStore || error.code == .unsupportedVersion, "unexpected error \(error)")
            require(error.offset != nil, "a manifest error without an offset")
            return
        }
        let encoded = manifest.encoded()
        do {
            let again = try Manifest(decoding: encoded, path: directory + "/MANIFEST")
            require(again == manifest && again.encoded() == encoded, "a manifest does not survive decode(encode(decode(x)))")
        } catch {
            fatalError("a re-encoded manifest fails: \(error)")
        }
    }

    static func lz4(_ input: UnsafeRawBufferPointer) {
        if let rawCount = input.integer(at: 0, as: UInt16.self) {
            let body = UnsafeRawBufferPointer(rebasing: input[2...])
            if let raw = LZ4.decompress(body, rawCount: Int(rawCount)) { require(raw.count == Int(rawCount), "decompressed to the wrong length") }
        }
        var compressed: [UInt8] = []
        let n = LZ4.compress(input, appendingTo: &compressed)
        require(n == compressed.count && n <= LZ4.bound(input.count), "compress wrote \(n) of \(compressed.count) bytes")
        let again = compressed.withUnsafeBytes { LZ4.decompress($0, rawCount: input.count) }
        require(again.map { $0.elementsEqual(input) } ?? false, "LZ4 does not round-trip")
    }

    static func varint(_ input: UnsafeRawBufferPointer) {
        var reader = ByteReader(input)
        while !reader.isAtEnd {
            let start = reader.offset
            guard let value = reader.readVarint() else { return }
            let used = reader.offset - start
            require(used >= 1 && used <= 10, "a varint of \(used) bytes")
            var encoded: [UInt8] = []
            encoded.appendVarint(value)
            require(encoded.count <= used, "the canonical encoding of \(value) is longer than one that decoded")
            let back = encoded.withUnsafeBytes { bytes -> (UInt64?, Bool) in
                var r = ByteReader(bytes)
                return (r.readVarint(), r.isAtEnd)
            }
            require(back.0 == value && back.1, "varint \(value) does not round-trip")
            var limited = ByteReader(UnsafeRawBufferPointer(rebasing: input[start...]))
            if let length = limited.readLength(limit: 1000) { require(length == Int(value) && length <= 1000, "readLength let \(value) through") }
        }
    }
}
