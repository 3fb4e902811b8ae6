@_spi(Coding) import StrataStore

/// The `store` target: a whole store directory, opened the way an application
/// opens one, so that recovery sees every file the others fuzz one at a time
/// and the ways they disagree (a manifest naming a missing segment, logs out
/// of order, sequences that go backwards across files).
///
/// Input: a mode byte, then files, each a tag byte · varint length · bytes.
/// A tag's low two bits are the kind (MANIFEST, LOCK, log, segment) and the
/// rest its file number; the LOCK kind with number 1 is the index checkpoint
/// (`INDEX`). Mode bit 0 repairs checksums; mode bit 1 opens the
/// store read-write, writes a batch, and checks a read-only reopen sees it.
enum StoreDirectory {
    static func name(tag: UInt8) -> String {
        switch tag & 3 {
        case 0: Manifest.fileName
        case 1: tag >> 2 == 1 ? IndexCheckpoint.fileName : "LOCK"
        case 2: LogFormat.fileName(UInt32(tag >> 2))
        default: SegmentFormat.fileName(UInt32(tag >> 2))
        }
    }

    /// The files an input describes (nil when it does not parse: the
    /// container is the harness's, not the engine's, so it is not fuzzed).
    static func files(_ body: [UInt8], repair: Bool) -> [String: [UInt8]]? {
        body.withUnsafeBytes { raw in
            var reader = ByteReader(raw)
            var files: [String: [UInt8]] = [:]
            while !reader.isAtEnd {
                guard let tag = reader.readInteger(UInt8.self), let length = reader.readLength(limit: reader.remaining),
                      let bytes = reader.readBytes(length) else { return nil }
                var file = Array(bytes)
                if repair {
                    switch tag & 3 {
                    case 0: Repair.manifest(&file)
                    case 2: Repair.log(&file)
                    case 3: Repair.segment(&file)
                    default: break
                    }
                }
                files[name(tag: tag), default: []] += file
            }
            // Every store has its lock file (a read-only open without one is
            // an I/O error, not a decoding question).
            files["LOCK", default: []] += []
            return files
        }
    }

    /// The inverse of ``files(_:repair:)``, for the seed corpus.
    static func encode(_ files: [String: [UInt8]], mode: UInt8) -> [UInt8] {
        var out: [UInt8] = [mode]
        for (name, bytes) in files.sorted(by: { $0.key < $1.key }) {
            let tag: UInt8
            if name == Manifest.fileName { tag = 0 } else if name == "LOCK" { tag = 1 } else if name == IndexCheckpoint.fileName { tag = 1 << 2 | 1 } else if name.hasSuffix(".wal"), let n = UInt8(name.dropLast(4)), n < 64 {
                tag = n << 2 | 2
            } else if name.hasSuffix(".seg"), let n = UInt8(name.dropLast(4)), n < 64 {
                tag = n << 2 | 3
            } else { continue }
            out.append(tag)
            out.appendVarint(UInt64(bytes.count))
            out.append(contentsOf: bytes)
        }
        return out
    }

    static func options(_ fs: MemoryFileSystem, readOnly: Bool) -> StoreOptions {
        var options = StoreOptions()
        options.fileSystem = fs
        options.readOnly = readOnly
        options.createIfMissing = false
        options.automaticCompaction = false
        options.blockCacheCapacity = 1 << 20
        options.lockTimeout = 0
        options.indexCheckpointMinimumKeys = 1  // a read-write close saves one: the save is fuzzed too
        return options
    }

    /// Everything a store holds, read by a scan and checked key by key with `get`.
    static func contents(_ store: StrataStore) throws -> [KeyValue] {
        var all: [KeyValue] = []
        let view = store.readView()
        var previous: [UInt8]? = nil
        try view.forEach(from: []) { key, value in
            if let previous { require(previous.lexicographicallyPrecedes(key), "a scan returned keys out of order") }
            previous = key
            all.append(KeyValue(key: key, value: value))
            return true
        }
        for pair in all {
            let got = try view.get(pair.key)
            require(got == pair.value, "get and scan disagree on a key")
        }
        return all
    }

    static func run(_ input: UnsafeRawBufferPointer) {
        guard let (repair, flags, body) = splitMode(input), let files = files(body, repair: repair) else { return }
        let fs = MemoryFileSystem(directory: StoreTargets.directory, files: files)
        let writable = flags & 1 == 1
        let store: StrataStore
        let before: [KeyValue]
        do {
            store = try StrataStore(directory: StoreTargets.directory, options: options(fs, readOnly: !writable))
            before = try contents(store)
        } catch let error as StoreError {
            require(error.code != .ioFailure && error.code != .invalidArgument, "unexpected error \(error)")
            return
        } catch {
            fatalError("an error that is not a StoreError: \(error)")
        }
        do {
            if writable {
                var batch = WriteBatch()
                batch.put(Array("fuzz-key".utf8), Array("fuzz-value".utf8))
                _ = try store.write(batch)
            }
            try store.close()
            guard writable else { return }
            // What recovery left behind (a cut torn tail, a new log) must open
            // again and hold what was there plus the new batch.
            let reopened = try StrataStore(directory: StoreTargets.directory, options: options(fs, readOnly: true))
            let after = try contents(reopened)
            try reopened.close()
            var expected = before.filter { $0.key != Array("fuzz-key".utf8) }
            expected.append(KeyValue(key: Array("fuzz-key".utf8), value: Array("fuzz-value".utf8)))
            expected.sort { $0.key.lexicographicallyPrecedes($1.key) }
            require(after == expected, "a store reopened after recovery and one write differs from what it held plus the write: "
                    + "lost \(expected.filter { !after.contains($0) }.map { "\(String(decoding: $0.key, as: UTF8.self))=\($0.value.count)B" }), gained \(after.filter { !expected.contains($0) }.map { "\(String(decoding: $0.key, as: UTF8.self))=\($0.value.count)B" })")
        } catch {
            fatalError("a store that opened fails afterwards: \(error)")
        }
    }
}
