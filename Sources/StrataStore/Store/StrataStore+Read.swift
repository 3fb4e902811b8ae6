extension StrataStore {
    private enum Lookup {
        case closed, absent
        case damaged(String)
        case found(IndexEntry)
        /// A read-only store's entry with its file, taken together: a
        /// catch-up that reads the store again may swap in a state where
        /// the number of the memtable the entry points into names a
        /// segment the writer made since.
        case foundIn(IndexEntry, StoredFile?)
    }

    /// The value of `key`, or nil when it is absent.
    ///
    /// ```swift
    /// if let value = try store.get(Array("user/1".utf8)) { … }
    /// ```
    public func get(_ key: [UInt8]) throws(StoreError) -> [UInt8]? {
        try key.withBytes { (k) throws(StoreError) -> [UInt8]? in
            while true {
                let lookup: Lookup = state.withReadLock {
                    if isClosed { return .closed }
                    guard let entry = index.lookup(k) else { return index.damage.map { .damaged($0) } ?? .absent }
                    return options.readOnly ? .foundIn(entry, files[entry.file]) : .found(entry)
                }
                if case .foundIn(let entry, let file) = lookup {
                    return try ValueReader.read(key: k, entry: entry, file: file, cache: cache)
                }
                guard case .found(let entry) = lookup else {
                    if case .closed = lookup { throw StoreError(.closed, "the store is closed", path: directory) }
                    if case .damaged(let why) = lookup { throw StoreError.damagedIndex(why, path: directory) }
                    return nil
                }
                // The warm path: the block is cached, and the file table (a
                // dictionary and a reference count that both cores would
                // share) is not touched. A memtable entry never hits: memtable
                // and segment numbers are distinct.
                if let value = try ValueReader.cachedValue(key: k, entry: entry, cache: cache) { return value }
                // Cold: find the file. If a flush or compaction retired it since
                // the lookup, the index points elsewhere now: look again.
                guard let file = state.withReadLock({ files[entry.file] }) else { continue }
                return try ValueReader.read(key: k, entry: entry, file: file, cache: cache)
            }
        }
    }

    /// The values of several keys, read from one consistent view.
    public func get(_ keys: [[UInt8]]) throws(StoreError) -> [[UInt8]?] {
        try readView().get(keys)
    }

    /// The keys and values whose keys start with `prefix`, in ascending key order.
    public func scan(prefix: [UInt8], limit: Int = .max) throws -> [KeyValue] {
        try readView().scan(prefix: prefix, limit: limit)
    }

    /// A consistent view pinned at the current sequence number (see ``ReadView``).
    public func readView() -> ReadView {
        state.withReadLock { ReadView(sequence: visibleSequence, index: index, files: files, cache: cache, state: state) }
    }

    /// The sequence number of the last batch written.
    public var sequence: UInt64 { publishedSequence.load(ordering: .acquiring) }

    /// Counters and sizes, for monitoring and benchmarks. Walks the index to
    /// measure its memory: O(keys), so not for a hot path.
    public var statistics: StoreStatistics {
        var (snapshot, files, counters, sequence, segments): (KeyIndex, [UInt32: StoredFile], Counters, UInt64, [SegmentInfo]) =
            state.withReadLock { (self.index, self.files, self.counters, self.visibleSequence, self.liveSegments) }
        // Let go of the snapshot under the state lock (see IndexPin).
        defer { state.withLock { snapshot = KeyIndex() } }
        var s = StoreStatistics()
        s.sequence = sequence
        s.keys = snapshot.count
        s.indexBytes = snapshot.memoryFootprint
        if let arena = snapshot.arena {
            s.indexCheckpointChunksUnread = arena.chunksUnread
            s.indexCheckpointChunksRebuilt = arena.damage.rebuilt
        }
        s.segments = segments.count
        s.segmentBytes = segments.reduce(0) { $0 + $1.fileSize }
        s.segmentRecords = segments.reduce(0) { $0 + $1.recordCount }
        s.deadRecords = state.withReadLock { () -> Int in
            var dead = 0
            for info in segments {
                if case .segment(let r)? = files[info.fileNumber] { dead += r.deadRecords }
            }
            return dead
        }
        s.memtableBytes = counters.memtableBytes
        s.batchesWritten = counters.batches
        s.operationsWritten = counters.operations
        s.logBytesWritten = counters.logBytes
        s.logSyncs = counters.logSyncs
        s.flushes = counters.flushes
        s.compactions = counters.compactions
        s.flushedBytes = counters.flushedBytes
        s.compactionBytesWritten = counters.compactedBytesWritten
        s.compactionBytesRemoved = counters.compactedBytesRemoved
        s.catchUps = counters.catchUps
        s.catchUpsReopened = counters.catchUpsReopened
        s.batchesCaughtUp = counters.batchesCaughtUp
        s.lastCompactionError = manifestLock.withLock { lastCompactionError }.map { "\($0)" }
        let cacheCounters = cache.counters
        s.cacheHits = cacheCounters.hits
        s.cacheMisses = cacheCounters.misses
        s.cacheBytes = cacheCounters.bytes
        return s
    }

    /// Waits for writers in flight and background work, makes the log durable,
    /// and releases the store's lock. Further calls throw `.closed`; read views
    /// taken before stay readable. Calling it twice is harmless.
    public func close() throws(StoreError) {
        try close(flushingLog: true)
    }

    /// Closes the store, and when nothing was written to it since it opened
    /// — no batch, no flush, no compaction — also takes back what the open
    /// added: the empty log it started is removed and no index checkpoint
    /// is written, so the directory is as the open found it (but for the
    /// leftovers of a crash the open cleared away: a torn last write, files
    /// no manifest names). For an open its caller turns out not to want:
    /// Strata refusing a model the store cannot be migrated to.
    ///
    /// ```swift
    /// let store = try StrataStore(directory: path)
    /// guard try storedModelFits(store) else {
    ///     try store.closeUntouched()   // the directory as it was
    ///     throw refusal
    /// }
    /// ```
    public func closeUntouched() throws(StoreError) {
        try close(flushingLog: false, removingAnUnwrittenLog: true)
    }

    /// `close()`; from `deinit` without the flush, whose work on the flush
    /// queue would hold the store past its end (the next open replays the
    /// log instead).
    func close(flushingLog: Bool, removingAnUnwrittenLog: Bool = false) throws(StoreError) {
        // After a catch-up under way, and before any other (it finds the store closed).
        try followLock.withLock { () throws(StoreError) in try closeFollowed(flushingLog: flushingLog, removingAnUnwrittenLog: removingAnUnwrittenLog) }
    }

    /// ``close(flushingLog:removingAnUnwrittenLog:)`` under `followLock`.
    private func closeFollowed(flushingLog: Bool, removingAnUnwrittenLog: Bool) throws(StoreError) {
        manifestLock.withLock { compactsInBackground = false }
        // Best effort: a flush that fails leaves the log as it is (it is
        // retired only once its segment is in the manifest), and the open
        // replays it as before.
        if flushingLog, !options.readOnly, state.withReadLock({ !isClosed && counters.memtableBytes >= options.flushOnCloseThreshold }) {
            try? flush()
        }
        writers.lock()
        if closing {
            writers.unlock()
            return
        }
        closing = true
        while !queue.isEmpty { writers.wait() }
        waitForLoggedGroupsApplied()
        writers.unlock()
        backgroundWork.wait()
        var firstError: StoreError?
        // Writes, flushes and compactions have all ended: `log` and the
        // manifest are as the last of them left them.
        var unwritten = false
        if removingAnUnwrittenLog, let log, let opened = openedLog, log.fileNumber == opened.number, log.offset == opened.end {
            unwritten = manifestLock.withLock { manifest == openedManifest }
        }
        if let log {
            do throws(SystemCallError) {
                if writers.withLock({ failure }) == nil { try log.sync() }
                try log.close()
            } catch {
                firstError = StoreError(.ioFailure, "cannot sync the log on close", path: log.path, errno: error.errno, cause: error)
            }
            // The batches the open replayed into its memtable are in the
            // logs before this one, which the next open replays as this one did.
            if unwritten && firstError == nil {
                do throws(SystemCallError) {
                    try fileSystem.remove(log.path)
                    try fileSystem.syncDirectory(directory)
                } catch {
                    firstError = StoreError(.ioFailure, "cannot remove the log an unwanted open started", path: log.path, errno: error.errno, cause: error)
                }
            }
        }
        if firstError == nil && !unwritten { saveIndexCheckpointIfDue() }
        state.withLock {
            isClosed = true
            index = KeyIndex()
            files = [:]
        }
        if let lockFile { try? fileSystem.close(lockFile) }
        if let firstError { throw firstError }
    }
}

/// Counters and sizes of a store (``StrataStore/statistics``).
public struct StoreStatistics: Sendable, Equatable {
    /// The sequence number of the last batch.
    public var sequence: UInt64 = 0
    /// Live keys.
    public var keys = 0
    /// Heap bytes of the in-memory index.
    public var indexBytes = 0
    /// Index bytes per live key.
    public var indexBytesPerKey: Double { keys == 0 ? 0 : Double(indexBytes) / Double(keys) }
    /// Chunks of the index checkpoint this store opened from that no read
    /// has reached yet (each is read when one first does).
    public var indexCheckpointChunksUnread = 0
    /// Chunks of that checkpoint that failed their checks when read and were
    /// rebuilt from the segments (damage the open could not see).
    public var indexCheckpointChunksRebuilt = 0
    /// Bytes in memtables (the current one and one being flushed).
    public var memtableBytes = 0
    /// The live segments: those the manifest names.
    public var segments = 0
    /// Bytes of the live segment files, together.
    public var segmentBytes: UInt64 = 0
    /// Records in the live segments, puts and deletes, dead ones included.
    public var segmentRecords: UInt64 = 0
    /// Records in segments that are no longer the newest version of their key.
    public var deadRecords = 0
    /// Batches written since the store was opened (the batches an open replays from the log are not
    /// counted).
    public var batchesWritten = 0
    /// Puts and deletes in those batches.
    public var operationsWritten = 0
    /// Bytes appended to the write-ahead log since the store was opened.
    public var logBytesWritten: UInt64 = 0
    /// fsyncs of the log: with group commit, fewer than batches written.
    public var logSyncs = 0
    /// Memtables written out as segments since the store was opened.
    public var flushes = 0
    /// Compactions finished since the store was opened.
    public var compactions = 0
    /// Bytes of the segments those flushes wrote.
    public var flushedBytes: UInt64 = 0
    /// Bytes of the segments those compactions wrote.
    public var compactionBytesWritten: UInt64 = 0
    /// Bytes of the segments those compactions replaced and deleted.
    public var compactionBytesRemoved: UInt64 = 0
    /// Catch-ups of a store opened read-only (``StrataStore/catchUp()``)
    /// since it was opened, those that found nothing new included.
    public var catchUps = 0
    /// Those of them that read the store again (the writer had flushed,
    /// compacted or changed logs since the last): each costs about an open.
    public var catchUpsReopened = 0
    /// The writer's batches those catch-ups brought in, counted by
    /// sequence number (a catch-up that read the store again counts every
    /// batch between the sequence it left and the one it found).
    public var batchesCaughtUp = 0
    /// Segment blocks the block cache held when a read needed them, since the store was opened.
    public var cacheHits = 0
    /// Segment blocks a read needed that the block cache did not hold, since the store was opened:
    /// each was read from its file and decompressed.
    public var cacheMisses = 0
    /// Bytes of the blocks the block cache holds now (at most ``StoreOptions/blockCacheCapacity``).
    public var cacheBytes = 0
    /// Why the last background compaction failed, if one did. (It failed before
    /// its manifest switch, so the store is unchanged and still writable.)
    public var lastCompactionError: String?
    /// Statistics with every count zero.
    public init() {}
}
