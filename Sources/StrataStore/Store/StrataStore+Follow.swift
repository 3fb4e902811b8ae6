#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// What one ``StrataStore/catchUp()`` brought into a read-only store.
public struct StoreCatchUp: Sendable, Equatable {
    /// The sequence number the store's reads saw before the call.
    public var previousSequence: UInt64
    /// The sequence number they see now: the last batch read in.
    public var sequence: UInt64
    /// Every key a batch read in wrote or deleted, ascending, each once
    /// (a key written and deleted again in between is among them).
    public var changedKeys: [[UInt8]]
    /// Whether the store was read again from its new manifest — the writer
    /// flushed, compacted or rotated its log since, or the reader fell so
    /// far behind that the logs it needed are gone — rather than by reading
    /// on in the logs. `changedKeys` is then what differs between the two
    /// states, found by walking both indexes: O(the keys), not O(the change).
    public var reopened: Bool

    /// Whether any batch came in.
    public var changed: Bool { sequence != previousSequence || !changedKeys.isEmpty }
}

extension StrataStore {
    /// Brings a read-only store up to date with the process that has the
    /// store open for writing: the batches it wrote since this store opened
    /// (or last caught up) become visible, whole and in order, and the
    /// keys they changed come back.
    ///
    /// ```swift
    /// let reader = try StrataStore(directory: path, options: StoreOptions(readOnly: true))
    /// // … another process writes …
    /// let caughtUp = try reader.catchUp()
    /// for key in caughtUp.changedKeys { … }   // read them again
    /// ```
    ///
    /// It reads on in the write-ahead log from where it left off: a batch
    /// counts once its frame is complete in the log (the writer's fsync may
    /// still be under way; a batch a power loss took back is one the
    /// writer never acknowledged). When the writer has flushed, compacted
    /// or rotated its log since (its manifest changed), the store is read
    /// again from the new manifest, as an open would, and swapped in whole.
    /// Read views taken before keep what they saw.
    ///
    /// One catch-up runs at a time; reads go on during it, and wait only
    /// while each batch is laid into the index. Throws
    /// ``StoreError/Code/invalidArgument`` on a store open for writing
    /// (which holds every batch already), `.closed` after `close()`, and
    /// what an open would throw when the store must be read again and can
    /// not be (the reads go on over the state before the call).
    public func catchUp() throws(StoreError) -> StoreCatchUp {
        guard options.readOnly else {
            throw StoreError(.invalidArgument, "catchUp() reads what another process wrote: this store is open for writing and holds every batch already",
                             path: directory)
        }
        return try followLock.withLock { () throws(StoreError) -> StoreCatchUp in
            try checkOpen()
            catchUpCheckedOpenHook?()
            guard let point = followPoint else {
                throw StoreError(.corruption, "this store was opened with recovery: .salvage past damage and cannot read on: open it again", path: directory)
            }
            let previous = sequence
            let caughtUp: StoreCatchUp
            if let readOn = readOn(from: point, after: previous) {
                caughtUp = applying(readOn, to: point, after: previous)
            } else {
                caughtUp = try reopening(after: previous)
            }
            state.withLock {
                counters.catchUps += 1
                if caughtUp.reopened { counters.catchUpsReopened += 1 }
                if caughtUp.sequence > caughtUp.previousSequence { counters.batchesCaughtUp += Int(caughtUp.sequence - caughtUp.previousSequence) }
            }
            return caughtUp
        }
    }

    /// The batches the logs hold past `point`, read but not applied; nil
    /// when the store must be read again (the manifest changed, a batch is
    /// missing, the memtable has no room, a log cannot be read).
    private func readOn(from point: Recovery.FollowPoint, after sequence: UInt64) -> ReadOn? {
        let fs = fileSystem
        var readOn = ReadOn(log: point.log, manifestIdentity: point.manifestIdentity)
        // The manifest: the same file as before, or the same bytes.
        let manifestPath = path(Manifest.fileName)
        guard let manifestStatus = (try? fs.status(manifestPath)) ?? nil else { return nil }
        if manifestStatus.identity == nil || manifestStatus.identity != point.manifestIdentity {
            guard let bytes = try? fs.readFile(manifestPath), bytes == point.manifestBytes else { return nil }
            readOn.manifestIdentity = manifestStatus.identity
        }
        // The log read last, when it is longer than what was read of it:
        // the writer is still on it, or a newer log it moved to waits for
        // the next catch-up. Otherwise — or when no frame is there after
        // all (a log made ahead of its frames is zeros past them, until
        // its writer closes it) — the directory says which logs there are.
        var readAlready: ReadOn?
        if let log = point.log, log.salt != nil,
           let status = (try? fs.status(path(LogFormat.fileName(log.number)))) ?? nil, status.size > UInt64(log.end) {
            guard let found = readLogs([log.number], from: point, after: sequence, into: readOn) else { return nil }
            if !found.loaded.isEmpty { return found.needed <= point.memtable.remaining ? found : nil }
            readAlready = found
        }
        guard let names = try? fs.listDirectory(directory) else { return nil }
        let first = max(point.manifest.logNumber, point.log?.number ?? 0)
        let logs = names.compactMap { Recovery.parseNumber($0, suffix: ".wal") }.filter { $0 >= first }.sorted()
        // The log read last, read already with nothing new, and no newer one.
        if let readAlready, let log = point.log, logs.allSatisfy({ $0 <= log.number }) { return readAlready }
        guard let found = readLogs(logs, from: point, after: sequence, into: readOn) else { return nil }
        readOn = found
        guard readOn.needed <= point.memtable.remaining else { return nil }
        return readOn
    }

    /// Reads the batches of `logs` (ascending) past `point`, into `readOn`;
    /// nil when the store must be read again.
    private func readLogs(_ logs: [UInt32], from point: Recovery.FollowPoint, after sequence: UInt64, into readOn: ReadOn) -> ReadOn? {
        let fs = fileSystem
        var readOn = readOn
        var last = sequence
        for (position, n) in logs.enumerated() {
            let isNewest = position == logs.count - 1
            let start = point.log.flatMap { $0.number == n && $0.salt != nil ? $0.end : nil } ?? 0
            var frames: [LogScanner.Frame] = [], end = 0, salt: UInt32 = 0
            var bytes: [UInt8] = []
            // A window from `start`, larger while the frames fill it: a log
            // made ahead of its frames is zeros past them, to its end.
            var window = Self.readOnWindow
            while true {
                // Reading on in a log, its header too: a writer that opened and
                // closed without writing removed its log, and the next one may
                // have started one of the same number with another salt, whose
                // frames the old salt would never accept (the store is read again).
                guard let (header, read) = try? fs.readFile(path(LogFormat.fileName(n)), header: start == 0 ? 0 : LogFormat.fileHeaderSize,
                                                            from: start, atMost: window)
                else { return nil }
                bytes = read
                if start > 0, header.withUnsafeBytes({ try? LogFormat.decodeFileHeader($0).get().salt }) != point.log!.salt { return nil }
                let scanned: Int
                if start == 0 {
                    let scan = bytes.withUnsafeBytes { LogScanner($0, previousSequence: last) }
                    // A log whose header is not written yet: the writer is starting it.
                    guard let header = scan.header else {
                        if isNewest { return readOn }
                        return nil
                    }
                    (frames, end, salt, scanned) = (scan.frames, scan.validLength, header.salt, scan.validLength)
                } else {
                    let scan = bytes.withUnsafeBytes { LogScanner.frames(continuing: $0, salt: point.log!.salt!, previousSequence: last) }
                    (frames, end, salt, scanned) = (scan.frames, start + scan.validLength, point.log!.salt!, scan.validLength)
                }
                // The file ends within the window, or zeros follow the frames.
                if bytes.count < window || Self.zeroFrameHeader(in: bytes, at: scanned) { break }
                window *= 8
            }
            // Sequence numbers run on without a gap: one missing was
            // flushed to a segment this store does not read yet.
            if let firstFrame = frames.first, firstFrame.sequence != last + 1 { return nil }
            last = frames.last?.sequence ?? last
            readOn.needed += frames.reduce(0) { $0 + $1.payload.count + 9 * $1.operationCount }
            if !frames.isEmpty { readOn.loaded.append((bytes, frames)) }
            readOn.log = (n, end, salt)
            // A newer log starts only once this one is complete: what is
            // left of it is zero fill. The newest may be mid-append.
            if isNewest { break }
        }
        return readOn
    }

    /// How much of a log a catch-up reads at first: a few batches' worth.
    static let readOnWindow = 1 << 12

    /// Whether a frame header's worth of zeros lies at `offset` of `bytes`.
    private static func zeroFrameHeader(in bytes: [UInt8], at offset: Int) -> Bool {
        bytes.count - offset >= LogFormat.frameHeaderSize && bytes[offset..<(offset + LogFormat.frameHeaderSize)].allSatisfy { $0 == 0 }
    }

    /// Lays the batches `readOn` holds into the memtable and the index, one
    /// at a time, each visible whole once it is in.
    private func applying(_ readOn: ReadOn, to point: Recovery.FollowPoint, after previous: UInt64) -> StoreCatchUp {
        let memtable = point.memtable
        var placed: [PlacedOperation] = []
        var keys: [[UInt8]] = []
        var sequence = previous
        for (bytes, frames) in readOn.loaded {
            bytes.withUnsafeBytes { raw in
                for frame in frames {
                    placed.removeAll(keepingCapacity: true)
                    // Only this catch-up appends to the memtable (under
                    // `followLock`); readers find its records through the index.
                    memtable.append(batch: UnsafeRawBufferPointer(rebasing: raw[frame.payload]), sequence: frame.sequence, into: &placed)
                    for op in placed { keys.append(Array(op.key)) }
                    state.withLock {
                        placed.withUnsafeBufferPointer { Recovery.apply($0, sequence: frame.sequence, file: memtable.number, to: &index, files: files) }
                        visibleSequence = frame.sequence
                    }
                    sequence = frame.sequence
                }
            }
        }
        var next = point
        next.log = readOn.log
        next.manifestIdentity = readOn.manifestIdentity
        followPoint = next
        return StoreCatchUp(previousSequence: previous, sequence: sequence, changedKeys: Self.sortedOnce(keys), reopened: false)
    }

    /// Reads the store again, as a read-only open does, and swaps the new
    /// state in; the changed keys are what differs between the indexes.
    private func reopening(after previous: UInt64) throws(StoreError) -> StoreCatchUp {
        let opened = try Recovery.open(directory: directory, options: options)
        guard let point = opened.followPoint else {
            throw StoreError(.corruption, "the store needs recovery: .salvage to open now, and a store opened so cannot read on", path: directory)
        }
        var before = state.withReadLock { index }
        let keys = Self.keysDiffering(before, opened.index)
        state.withLock {
            before = KeyIndex()  // let go of the snapshot under the lock (see IndexPin)
            index = opened.index
            files = opened.files
            visibleSequence = opened.lastSequence
            liveSegments = opened.manifest.segments
            nextFileNumber = opened.nextFileNumber
        }
        manifestLock.withLock { manifest = opened.manifest }
        followPoint = point
        return StoreCatchUp(previousSequence: previous, sequence: opened.lastSequence, changedKeys: keys, reopened: true)
    }

    /// What ``readOn(from:after:)`` found.
    private struct ReadOn {
        var loaded: [(bytes: [UInt8], frames: [LogScanner.Frame])] = []
        /// The memtable bytes they take.
        var needed = 0
        /// Where the last log read now ends.
        var log: (number: UInt32, end: Int, salt: UInt32?)?
        /// The manifest's identity now (its bytes unchanged).
        var manifestIdentity: [UInt64]?

        init(log: (number: UInt32, end: Int, salt: UInt32?)?, manifestIdentity: [UInt64]?) {
            self.log = log
            self.manifestIdentity = manifestIdentity
        }
    }

    private static func sortedOnce(_ keys: [[UInt8]]) -> [[UInt8]] {
        var sorted = keys.sorted { compareArrays($0, $1) < 0 }
        var kept = 0
        for key in sorted where kept == 0 || sorted[kept - 1] != key {
            sorted[kept] = key
            kept += 1
        }
        sorted.removeLast(sorted.count - kept)
        return sorted
    }

    /// The keys present in one index and not the other, or in both with
    /// entries of other versions (a sequence number of their own): a merge
    /// walk of the two, in key order.
    static func keysDiffering(_ a: KeyIndex, _ b: KeyIndex) -> [[UInt8]] {
        var x = a.makeCursor(from: nil), y = b.makeCursor(from: nil)
        var nextX = x.next(), nextY = y.next()
        var keys: [[UInt8]] = []
        while true {
            switch (nextX, nextY) {
            case (nil, nil):
                return keys
            case (let p?, nil):
                keys.append(p.key)
                nextX = x.next()
            case (nil, let q?):
                keys.append(q.key)
                nextY = y.next()
            case (let p?, let q?):
                let c = compareArrays(p.key, q.key)
                if c < 0 {
                    keys.append(p.key)
                    nextX = x.next()
                } else if c > 0 {
                    keys.append(q.key)
                    nextY = y.next()
                } else {
                    if p.entry.sequence != q.entry.sequence { keys.append(p.key) }
                    nextX = x.next()
                    nextY = y.next()
                }
            }
        }
    }
}
