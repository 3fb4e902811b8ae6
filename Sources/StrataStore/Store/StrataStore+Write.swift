/// A writer waiting in the queue. Its fields are guarded by `StrataStore.writers`.
final class PendingWrite: @unchecked Sendable {
    // Sendable because: `done` and `result` are written by the leader and read by
    // the waiting writer, both under `writers`; `batch` is immutable.
    let batch: WriteBatch
    var done = false
    var result: Result<UInt64, StoreError> = .failure(StoreError(.storeFailed, "not committed"))
    init(_ batch: WriteBatch) { self.batch = batch }
}

extension StrataStore {
    /// Writes `batch` atomically and returns its sequence number.
    ///
    /// Under ``StoreOptions/SyncMode/always`` and ``StoreOptions/SyncMode/grouped``
    /// the batch is durable when this returns. Concurrent callers are committed
    /// together: the first in line (the leader) writes every waiting batch with
    /// one `pwrite` and, under `.grouped`, one fsync (LevelDB's group commit).
    ///
    /// ```swift
    /// var batch = WriteBatch()
    /// batch.put(key, value)
    /// let sequence = try store.write(batch)
    /// ```
    /// - Throws: ``StoreError`` — `.invalidArgument` for an empty or oversized
    ///   key, `.readOnly`, `.closed`, `.storeFailed` after an earlier I/O failure,
    ///   `.ioFailure` when this write's own I/O failed (the store then fails).
    @discardableResult
    public func write(_ batch: WriteBatch) throws(StoreError) -> UInt64 {
        if batch.hasEmptyKey { throw StoreError(.invalidArgument, "keys must not be empty") }
        if batch.longestKey > Self.maximumKeySize {
            throw StoreError(.invalidArgument, "a key of \(batch.longestKey) bytes exceeds the limit of \(Self.maximumKeySize)")
        }
        if batch.byteCount > LogFormat.maximumPayload {
            throw StoreError(.invalidArgument, "a batch of \(batch.byteCount) bytes exceeds the limit of \(LogFormat.maximumPayload)")
        }
        if options.readOnly { throw StoreError(.readOnly, "the store was opened read-only", path: directory) }
        if batch.isEmpty {
            try checkOpen()
            return state.withLock { visibleSequence }
        }

        let me = PendingWrite(batch)
        writers.lock()
        if closing {
            writers.unlock()
            throw StoreError(.closed, "the store is closed", path: directory)
        }
        queue.append(me)
        while !me.done && queue.first !== me { writers.wait() }
        if me.done {
            writers.unlock()
            return try me.result.get()
        }

        // This thread leads: it owns the log and the memtable until it hands
        // the lead over by removing its group from the queue.
        if let failure {
            handOverLead()
            writers.unlock()
            throw StoreError(.storeFailed, "the store refuses writes after an earlier failure; reopen it", path: directory, cause: failure)
        }
        // The leader stays at the head of the queue while it leads: it
        // commits its own group, then, while writers are queued behind it
        // (and at most `maximumLeadRounds` times), theirs too. It is
        // running already, where handing the lead over wakes a waiting
        // writer, which must first get a core: on the 2-core VM, four
        // writers of synced batches went from a median of 1.06 to 1.20
        // million records/s (`strata-bench engine`, 4 runs each,
        // 2026-11-27).
        for round in 0..<Self.maximumLeadRounds {
            // The leader's own group starts with itself; later ones behind it.
            let groupStart = round == 0 ? 0 : 1
            var group: [PendingWrite] = []
            var groupBytes = 0
            for w in queue[groupStart...] {
                // An empty batch is a sentinel of flush() waiting for the lead: it is never grouped.
                if w.batch.isEmpty || (!group.isEmpty && (options.syncMode == .always || groupBytes + w.batch.byteCount > Self.maximumGroupBytes)) { break }
                group.append(w)
                groupBytes += w.batch.byteCount
            }
            // A failure since the last round (a flush's) refuses the rest,
            // as it would refuse a new leader.
            if group.isEmpty || failure != nil { break }
            writers.unlock()

            let outcome: Result<UInt64, StoreError>
            do throws(StoreError) { outcome = .success(try commit(group)) } catch { outcome = .failure(error) }

            writers.lock()
            let first = nextSequence - UInt64(group.count)
            for (i, w) in group.enumerated() {
                w.done = true
                switch outcome {
                case .success: w.result = .success(first + UInt64(i))
                case .failure(let error): w.result = .failure(error)
                }
            }
            // Those of the group behind this leader leave the queue now;
            // the leader leaves it last, handing the lead over.
            queue.removeSubrange(1..<(groupStart + group.count))
            writers.broadcast()
            if case .failure(let error) = outcome {
                if failure == nil { failure = error }
                break
            }
            if queue.count == 1 { break }
        }
        handOverLead()
        writers.unlock()
        return try me.result.get()
    }

    /// The leader (or a flush's sentinel) leaves the head of the queue and
    /// wakes the waiters: the next in line leads. Called with `writers` held.
    private func handOverLead() {
        queue.removeFirst()
        writers.broadcast()
    }

    /// The most groups one leader commits before it hands the lead over:
    /// its own caller waits for them.
    static let maximumLeadRounds = 8

    /// The most bytes of batches one leader commits at once.
    static let maximumGroupBytes = 4 << 20

    /// Writes a group to the log, makes it durable, applies it to the memtable
    /// and the index. Called by the leader only. Returns the last sequence.
    private func commit(_ group: [PendingWrite]) throws(StoreError) -> UInt64 {
        var memtableBytes = 0
        for w in group {
            memtableBytes += w.batch.byteCount + 9 * w.batch.count
        }
        guard var log, var memtable else { throw StoreError(.readOnly, "the store was opened read-only", path: directory) }
        if log.offset >= UInt64(options.logSizeLimit) || memtable.used >= options.logSizeLimit || memtable.remaining < memtableBytes {
            try rotate(needing: memtableBytes)
            log = self.log!
            memtable = self.memtable!
        }

        frameBuffer.removeAll(keepingCapacity: true)
        var sequence = nextSequence
        for w in group {
            LogFormat.appendFrame(to: &frameBuffer, sequence: sequence, operationCount: w.batch.count, salt: log.salt, payload: w.batch.encoded)
            sequence += 1
        }
        do throws(SystemCallError) {
            try log.append(frameBuffer)
            if options.syncMode != .none { try log.sync() }
        } catch {
            throw StoreError(.ioFailure, "cannot write the log; the store now refuses writes until reopened", path: log.path, offset: log.offset, errno: error.errno, cause: error)
        }
        if frameBuffer.count > 256 << 10 { frameBuffer = [] }

        // Durable: now visible. Each batch is published whole under the state lock.
        let memtableNumber = memtable.number
        var s = nextSequence
        for w in group {
            placedScratch.removeAll(keepingCapacity: true)
            w.batch.encoded.withUnsafeBytes { memtable.append(batch: $0, sequence: s, into: &placedScratch) }
            placedScratch.withUnsafeBufferPointer { placed in
                if w.batch.count >= Self.offLockApplyOperations {
                    applyOffLock(placed, sequence: s, memtableNumber: memtableNumber)
                    return
                }
                readCheckpointChunks(reachedBy: placed)
                state.withLock {
                    Recovery.apply(placed, sequence: s, file: memtableNumber, to: &index, files: files)
                    visibleSequence = s
                    counters.batches += 1
                    counters.operations += placed.count
                }
            }
            s += 1
        }
        if placedScratch.count > 16_384 { placedScratch = [] }
        state.withLock {
            counters.memtableBytes = memtable.used
            counters.logBytes += UInt64(frameBuffer.count)
            if options.syncMode != .none { counters.logSyncs += 1 }
        }
        nextSequence = sequence
        return sequence - 1
    }

    /// Reads the chunks of the index checkpoint that `placed`'s keys reach,
    /// outside the `state` lock, so that applying the batch under it reads
    /// none (Rule 5: readers wait for no I/O a writer does). Once every
    /// chunk has been read, or when the index did not come from a
    /// checkpoint, it costs a look at the index's arena. Leader only.
    private func readCheckpointChunks(reachedBy placed: UnsafeBufferPointer<PlacedOperation>) {
        guard var snapshot = state.withReadLock({ (index.arena?.chunksUnread ?? 0) > 0 ? index : nil }) else { return }
        for operation in placed { _ = snapshot.lookup(operation.key) }
        // Let go of the snapshot under the state lock (see IndexPin).
        state.withLock { snapshot = KeyIndex() }
    }

    /// A batch of this many operations or more is applied to a copy of the
    /// index, outside the `state` lock: readers would otherwise wait for all
    /// of it (measured on the 2-core VM, 2026-11-25: a get waited 35 ms
    /// behind a batch of 100,000 scattered keys, 130 ms behind 300,000).
    /// Below it, the batch is applied in place under the lock, which costs
    /// no copy of the nodes it touches.
    static let offLockApplyOperations = 4_096

    /// Applies one batch's operations to a copy of the index and swaps the
    /// copy in under the `state` lock, with the batch's sequence number:
    /// readers see all of the batch or none of it, as in place, but wait
    /// only for the swap. The copy shares every node with the index until
    /// it changes one (each is copied on first touch, since the index still
    /// holds it), so nothing a reader can reach is written. Leader only.
    private func applyOffLock(_ placed: UnsafeBufferPointer<PlacedOperation>, sequence: UInt64, memtableNumber: UInt32) {
        indexMutation.withLock {
            var working = state.withReadLock { index }
            // The files the replaced versions live in, counted as dead at the
            // swap (the file table may change meanwhile: a flush retires its
            // memtable outside `indexMutation`).
            var replacedIn: [UInt32: Int] = [:]
            // Off the `state` lock (under `indexMutation`, which no reader
            // takes): the loop may yield its core (`YieldPoints`).
            Recovery.apply(placed, sequence: sequence, file: memtableNumber, to: &working, yielding: true) { replacedIn[$0.file, default: 0] += 1 }
            largeBatchAppliedHook?()
            state.withLock {
                swap(&index, &working)
                for (file, dead) in replacedIn {
                    if case .segment(let segment)? = files[file] { segment.deadRecords += dead }
                }
                visibleSequence = sequence
                counters.batches += 1
                counters.operations += placed.count
            }
            // `working` now holds the old index: what only it held (the old
            // versions of the nodes the batch changed) is freed here, outside
            // the lock, so readers do not wait for that either. Every reader
            // that read those nodes did so under the `state` lock before the
            // swap, or holds a snapshot that keeps them: the swap orders
            // their reads before this.
            working = KeyIndex()
        }
    }

    /// Freezes the memtable, starts a new log and memtable, and hands the
    /// frozen one to the flush worker. Waits while a previous flush is still
    /// running (back-pressure: at most one frozen memtable at a time). Leader only.
    func rotate(needing bytes: Int) throws(StoreError) {
        writers.lock()
        while flushInProgress && failure == nil { writers.wait() }
        let failed = failure
        if failed == nil { flushInProgress = true }
        writers.unlock()
        if let failed { throw StoreError(.storeFailed, "the store refuses writes after an earlier failure; reopen it", path: directory, cause: failed) }

        let oldLog = log!
        // The old log is complete: make it durable before the new one takes
        // writes, even under `.none`, so that after a power loss no log with a
        // torn tail is ever followed by a newer one.
        do throws(SystemCallError) {
            try oldLog.sync()
        } catch {
            writers.withLock { flushInProgress = false; writers.broadcast() }
            throw StoreError(.ioFailure, "cannot sync the log before starting a new one", path: oldLog.path, errno: error.errno, cause: error)
        }
        let number: UInt32
        do throws(StoreError) {
            number = try allocateFileNumber()
        } catch {
            writers.withLock { flushInProgress = false; writers.broadcast() }
            throw error
        }
        let newLog: LogWriter
        do throws(SystemCallError) {
            newLog = try LogWriter(fileSystem: fileSystem, directory: directory, fileNumber: number, durable: options.syncMode != .none)
        } catch {
            writers.withLock { flushInProgress = false; writers.broadcast() }
            throw StoreError(.ioFailure, "cannot start a new log", path: path(LogFormat.fileName(number)), errno: error.errno, cause: error)
        }
        guard let newMemtable = Memtable(number: number, capacity: Recovery.memtableCapacity(logSizeLimit: options.logSizeLimit, atLeast: bytes)) else {
            writers.withLock { flushInProgress = false; writers.broadcast() }
            throw StoreError(.ioFailure, "cannot reserve memory for a memtable", path: directory)
        }
        let frozen = memtable!
        state.withLock {
            files[number] = .memtable(newMemtable)
            counters.memtableBytes = 0
        }
        log = newLog
        memtable = newMemtable
        try? oldLog.close()
        backgroundWork.enter()
        flushQueue.async { [self] in
            defer { backgroundWork.leave() }
            BackgroundScheduling.run { flush(frozen, nextLogNumber: number) }
        }
    }

    /// Used when the replayed log is already past the size limit. (A failure
    /// is kept as the store's failed state: the next write reports it.)
    func scheduleRotationAfterOpen() {
        try? rotateAsLeader()
    }

    /// Writes the memtable out as a segment now (and waits for it), so that its
    /// log can be retired. Useful before a backup or to measure a cold open.
    public func flush() throws(StoreError) {
        try checkOpen()
        if options.readOnly { throw StoreError(.readOnly, "the store was opened read-only", path: directory) }
        try rotateAsLeader()
        flushQueue.sync {}
        if let failed = writers.withLock({ failure }) {
            throw StoreError(.storeFailed, "the flush failed", path: directory, cause: failed)
        }
    }

    /// Takes the lead as a writer would, with an empty sentinel in the queue
    /// (never grouped), rotates the memtable if it holds anything, and hands
    /// the lead on. A rotation that fails puts the store in the failed state.
    private func rotateAsLeader() throws(StoreError) {
        writers.lock()
        // Checked under `writers`, where close() sets it: once close() began,
        // the index may already be gone, and a flush of it would retire logs
        // whose batches no segment holds.
        if closing {
            writers.unlock()
            throw StoreError(.closed, "the store is closed", path: directory)
        }
        let sentinel = PendingWrite(WriteBatch())
        queue.append(sentinel)
        while queue.first !== sentinel { writers.wait() }
        let failed = failure
        writers.unlock()
        var error: StoreError? = failed.map { StoreError(.storeFailed, "the store refuses writes after an earlier failure; reopen it", path: directory, cause: $0) }
        if error == nil, let memtable, memtable.used > 0 {
            do throws(StoreError) { try rotate(needing: 0) } catch let e { error = e }
        }
        writers.withLock {
            // A log that could not be started is a failed write: refuse more.
            if let error, failed == nil, failure == nil { failure = error }
            handOverLead()
        }
        if let error { throw error }
    }
}
