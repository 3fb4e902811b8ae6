/// The newest version of every key in a store's live files, read without
/// opening the store (see ``StoreInspector``): what an open would see.
///
/// Made by ``StoreInspector/contents()``. It holds the live logs in memory and
/// the segments' key lists (from their footers); values in segments are read
/// block by block when asked for. Memory grows with the number of keys.
///
/// ```swift
/// let contents = try StoreInspector(directory: path).contents()
/// if let value = try contents.value(forKey: Array("user/1".utf8)) { … }
/// for item in try contents.scan(prefix: Array("user/".utf8), limit: 10) { print(item.key, item.value) }
/// ```
public final class StoreContents: Sendable {
    /// Where a version of a key is.
    enum Place: Hashable, Sendable {
        /// Segment `segment` (an index into `segments`), record at `location`.
        case segment(Int, RecordLocation)
        /// Log `log` (an index into `logs`): where the key starts in it, and the value's byte range.
        case log(Int, keyStart: Int, value: Range<Int>)
    }

    struct Version: Sendable {
        var sequence: UInt64
        /// Position within the batch (a later operation on the same key wins).
        var ordinal: Int
        var kind: OperationKind
        var place: Place
    }

    /// A batch of a log: its sequence and its payload's range in the log's bytes.
    struct LogBatch: Sendable {
        var sequence: UInt64
        var payload: Range<Int>
    }

    let segments: [SegmentReader]
    let logs: [[UInt8]]
    /// Per log, its file name.
    let logFiles: [String]
    /// Per log, the batches an open would replay.
    let logBatches: [[LogBatch]]
    /// Per key, its newest version; sorted by key.
    let keys: [[UInt8]]
    let newest: [Version]
    /// Every version in the live files (for the dead-record count).
    let versionCount: Int
    /// What an open would notice (torn tails it would cut, damage it would stop at).
    public let notes: [String]

    init(inspector: StoreInspector) throws(StoreError) {
        var segments: [SegmentReader] = []
        var table: [[UInt8]: Version] = [:]
        var count = 0
        var notes: [String] = []
        func offer(_ key: [UInt8], _ version: Version) {
            count += 1
            if let existing = table[key] {
                if (existing.sequence, existing.ordinal) >= (version.sequence, version.ordinal) { return }
            }
            table[key] = version
        }
        for info in inspector.manifest.segments {
            let opened = try SegmentReader.open(fileSystem: inspector.fileSystem, directory: inspector.directory, fileNumber: info.fileNumber, expectedSize: info.fileSize)
            if opened.rebuiltByScan { notes.append("\(SegmentFormat.fileName(info.fileNumber)): footer damaged; keys rebuilt by scanning its blocks") }
            let index = segments.count
            segments.append(opened.reader)
            for entry in opened.keys.entries {
                let key = Array(opened.keys.bytes[Int(entry.keyStart)..<Int(entry.keyStart + entry.keyLength)])
                offer(key, Version(sequence: entry.sequence, ordinal: 0, kind: entry.kind, place: .segment(index, entry.location)))
            }
        }
        var logs: [[UInt8]] = []
        var logFiles: [String] = []
        var logBatches: [[LogBatch]] = []
        for scanned in try inspector.scannedLogs() where scanned.report.isLive {
            let index = logs.count
            logs.append(scanned.bytes)
            logFiles.append(scanned.report.file)
            if let torn = scanned.tornTail {
                notes.append("\(scanned.report.file): \(torn.length) bytes of torn tail at offset \(torn.offset); a writable open cuts them off")
            }
            if let problem = scanned.problems.first, scanned.tornTail == nil {
                notes.append("\(scanned.report.file): damaged at offset \(problem.offset ?? 0) (\(problem.message)); only the batches before it are shown")
            }
            let batches = scanned.replayable.map { LogBatch(sequence: $0.sequence, payload: $0.payload) }
            logBatches.append(batches)
            Self.forEachOperation(scanned.bytes, batches: batches) { batch, ordinal, keyStart, keyLength, value, kind in
                offer(Array(scanned.bytes[keyStart..<keyStart + keyLength]),
                      Version(sequence: batch.sequence, ordinal: ordinal, kind: kind, place: .log(index, keyStart: keyStart, value: value)))
            }
        }
        let sorted = table.sorted { $0.key.lexicographicallyPrecedes($1.key) }
        self.segments = segments
        self.logs = logs
        self.logFiles = logFiles
        self.logBatches = logBatches
        self.keys = sorted.map(\.key)
        self.newest = sorted.map(\.value)
        self.versionCount = count
        self.notes = notes
    }

    /// The number of keys that have a value.
    public var liveKeyCount: Int { newest.reduce(0) { $0 + ($1.kind == .put ? 1 : 0) } }

    /// The value of `key`, or nil when it is absent or deleted.
    public func value(forKey key: [UInt8]) throws(StoreError) -> [UInt8]? {
        guard let i = position(of: key), newest[i].kind == .put else { return nil }
        var cache: (Int, UInt32, DecodedBlock)? = nil
        return try read(newest[i].place, cache: &cache)
    }

    /// The keys (with values) starting with `prefix`, in ascending key order, at most `limit`.
    public func scan(prefix: [UInt8], limit: Int = .max) throws(StoreError) -> [KeyValue] {
        var result: [KeyValue] = []
        try forEach(prefix: prefix) { key, value in
            result.append(KeyValue(key: key, value: value))
            return result.count < limit
        }
        return result
    }

    /// Calls `body` with each live key starting with `prefix` and its value, in
    /// ascending key order, reading each segment block once; stops when `body` returns false.
    public func forEach(prefix: [UInt8], _ body: ([UInt8], [UInt8]) -> Bool) throws(StoreError) {
        try visit(prefix: prefix, namingFiles: false) { key, value, _ in body(key, value) }
    }

    /// ``forEach(prefix:_:)``, naming the file each value is in
    /// (`000004.seg`, `000007.wal`): what a layer above counts per file.
    public func forEachNamingFiles(prefix: [UInt8], _ body: (_ key: [UInt8], _ value: [UInt8], _ file: String) -> Bool) throws(StoreError) {
        try visit(prefix: prefix, namingFiles: true) { key, value, file in body(key, value, file!) }
    }

    private func visit(prefix: [UInt8], namingFiles: Bool, _ body: ([UInt8], [UInt8], String?) -> Bool) throws(StoreError) {
        var cache: (Int, UInt32, DecodedBlock)? = nil
        var i = lowerBound(prefix)
        while i < keys.count, keys[i].starts(with: prefix) {
            let place = newest[i].place
            if newest[i].kind == .put, !body(keys[i], try read(place, cache: &cache), namingFiles ? fileName(of: place) : nil) { return }
            i += 1
        }
    }

    private func fileName(of place: Place) -> String {
        switch place {
        case .segment(let segment, _): SegmentFormat.fileName(segments[segment].fileNumber)
        case .log(let log, _, _): logFiles[log]
        }
    }

    /// Calls `body` with each live key starting with `prefix`, in order, without reading values.
    public func forEachKey(prefix: [UInt8], _ body: ([UInt8]) -> Void) {
        var i = lowerBound(prefix)
        while i < keys.count, keys[i].starts(with: prefix) {
            if newest[i].kind == .put { body(keys[i]) }
            i += 1
        }
    }

    /// Live, dead and tombstone records and bytes, and the sequence range.
    /// Reads (and checks) every block of every live segment.
    public func statistics() throws(StoreError) -> RecordStatistics {
        var stats = RecordStatistics()
        var newestPlaces: [Place: OperationKind] = [:]
        for (i, version) in newest.enumerated() {
            newestPlaces[version.place] = version.kind
            if version.kind == .put {
                stats.liveRecords += 1
            } else {
                stats.tombstones += 1
                stats.tombstoneBytes += UInt64(keys[i].count)
            }
        }
        stats.deadRecords = versionCount - newest.count
        var first = UInt64.max, last: UInt64 = 0
        // Every record of every live file: its key's newest put is live, its
        // key's newest delete is a tombstone (counted above), anything else is dead.
        func account(_ place: Place, sequence: UInt64, size: Int) {
            first = min(first, sequence)
            last = max(last, sequence)
            switch newestPlaces[place] {
            case .put?: stats.liveBytes += UInt64(size)
            case .delete?: break
            case nil: stats.deadBytes += UInt64(size)
            }
        }
        for (index, reader) in segments.enumerated() {
            for block in 0..<UInt32(reader.blocks.count) {
                let decoded = try reader.readBlock(block)
                for slot in 0..<decoded.count {
                    decoded.withRecord(slot) { record in
                        account(.segment(index, RecordLocation(block: block, slot: UInt32(slot))),
                                sequence: record.sequence, size: record.key.count + record.value.count)
                    }
                }
            }
        }
        for (index, log) in logs.enumerated() {
            Self.forEachOperation(log, batches: logBatches[index]) { batch, _, keyStart, key, value, _ in
                account(.log(index, keyStart: keyStart, value: value), sequence: batch.sequence, size: key + value.count)
            }
        }
        if first <= last {
            stats.firstSequence = first
            stats.lastSequence = last
        }
        return stats
    }

    /// Calls `body(batch, ordinal, keyStart, keyLength, valueRange, kind)` for each operation of `batches` in `log`.
    static func forEachOperation(_ log: [UInt8], batches: [LogBatch], _ body: (LogBatch, Int, Int, Int, Range<Int>, OperationKind) -> Void) {
        log.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return }
            for batch in batches {
                var ordinal = 0
                BatchDecoder.forEach(UnsafeRawBufferPointer(rebasing: raw[batch.payload])) { op in
                    let keyStart = op.key.baseAddress.map { $0 - base } ?? 0
                    let valueStart = op.value.baseAddress.map { $0 - base } ?? keyStart + op.key.count
                    body(batch, ordinal, keyStart, op.key.count, valueStart..<valueStart + op.value.count, op.kind)
                    ordinal += 1
                }
            }
        }
    }

    // MARK: Helpers

    private func lowerBound(_ key: [UInt8]) -> Int {
        var low = 0, high = keys.count
        while low < high {
            let mid = (low + high) / 2
            if keys[mid].lexicographicallyPrecedes(key) { low = mid + 1 } else { high = mid }
        }
        return low
    }

    private func position(of key: [UInt8]) -> Int? {
        let i = lowerBound(key)
        return i < keys.count && keys[i] == key ? i : nil
    }

    private func read(_ place: Place, cache: inout (Int, UInt32, DecodedBlock)?) throws(StoreError) -> [UInt8] {
        switch place {
        case .log(let log, _, let range):
            return Array(logs[log][range])
        case .segment(let segment, let location):
            let block: DecodedBlock
            if let cache, cache.0 == segment, cache.1 == location.block {
                block = cache.2
            } else {
                block = try segments[segment].readBlock(location.block)
                cache = (segment, location.block, block)
            }
            guard Int(location.slot) < block.count else {
                throw StoreError(.corruption, "segment block \(location.block) has no record \(location.slot)", path: segments[segment].path)
            }
            return block.withRecord(Int(location.slot)) { Array($0.value) }
        }
    }
}
