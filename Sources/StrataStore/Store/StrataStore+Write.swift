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

        // This thread leads: it owns the log until it hands the lead over by
        // leaving the head of the queue.
        if let failure {
            handOverLead()
            writers.unlock()
            throw StoreError(.storeFailed, "the store refuses writes after an earlier failure; reopen it", path: directory, cause: failure)
        }
        // The leader stays at the head of the queue while it leads: it
        // commits its own group, then, while writers are queued behind it
        // (and at most `maximumLeadRounds` times), theirs too. It is
        // running already, where handing the lead over wakes a waiting
        // writer, which must first get a core — a cost concurrent writers
        // of synced batches feel on a machine of few cores. A large group
        // ends the lead early instead (see ``pipelinedGroupBytes``).
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
            let passesLeadEarly = options.syncMode != .none && groupBytes >= Self.pipelinedGroupBytes
            commit(group, at: groupStart, passingLeadEarly: passesLeadEarly)
            // Returns with `writers` held; the group is finished, and out of
            // the queue but for the leader. An early hand-over took the
            // leader out too: it leads no longer.
            if passesLeadEarly {
                writers.unlock()
                return try me.result.get()
            }
            if failure != nil || queue.count == 1 { break }
        }
        handOverLead()
        writers.unlock()
        return try me.result.get()
    }

    /// Commits `group`, the writers at `start...` in the queue: writes it to
    /// the log, waits until it is durable and every group before it was
    /// applied, applies it, and hands each writer its result. Called by the
    /// leader, at the head of the queue, with `writers` held; returns with it
    /// held, the group's writers out of the queue — and the leader too, when
    /// `passingLeadEarly`, which it does as soon as the group is in the log,
    /// so that the next leader's write overlaps this group's sync and apply.
    private func commit(_ group: [PendingWrite], at start: Int, passingLeadEarly: Bool) {
        writers.unlock()
        let logged: Result<LoggedGroup, StoreError>
        do throws(StoreError) { logged = .success(try writeToLog(group)) } catch { logged = .failure(error) }
        writers.lock()

        // Out of the queue: the writers behind the leader, and with an early
        // hand-over the leader as well, and the next in line, woken, leads.
        // (Otherwise no one's wait ends here: every wake-up of the waiting
        // writers costs a core's time, which many writers of small batches
        // feel most.)
        queue.removeSubrange((passingLeadEarly ? 0 : 1)..<(start + group.count))
        if passingLeadEarly { writers.broadcast() }
        let g: LoggedGroup
        switch logged {
        case .success(let written): g = written
        case .failure(let error):
            if failure == nil { failure = error }
            finish(group, with: .failure(error))
            return
        }
        // Counted until it is finished (before `finish`, whose broadcast
        // wakes whoever waits for no group in flight).
        groupsInFlight += 1
        logWrittenEnd = g.endOffset
        if options.syncMode != .none, let error = waitUntilDurable(g) {
            failedFrom = min(failedFrom ?? .max, g.firstSequence)
            groupsInFlight -= 1
            finish(group, with: .failure(error))
            return
        }
        // Groups are applied in the order they were logged, so readers see
        // sequence numbers rise one batch at a time.
        while appliedThrough != g.firstSequence - 1 && (failedFrom ?? .max) > g.firstSequence { writers.wait() }
        if (failedFrom ?? .max) < g.firstSequence {
            groupsInFlight -= 1
            finish(group, with: .failure(StoreError(.storeFailed, "an earlier write's sync failed; the store refuses writes until reopened", path: directory, cause: failure)))
            return
        }
        writers.unlock()
        apply(g)
        writers.lock()
        appliedThrough = g.lastSequence
        groupsInFlight -= 1
        finish(group, with: .success(g.firstSequence))
    }

    /// Returns once `group`'s frames are durable, or the error that stops
    /// them from being so. Called with `writers` held; releases it while it
    /// syncs.
    ///
    /// One sync at a time, covering every frame written before it starts:
    /// groups written while it runs share the next one (a group commit, as
    /// LevelDB's, but the next leader writes its frames meanwhile instead of
    /// waiting). Syncs are not run side by side: on Linux a failed
    /// writeback is reported once per open file, to whichever sync asks
    /// first, so a sync that succeeds beside one that fails would not show
    /// that frames it covers were lost (Rebello et al., 2020).
    private func waitUntilDurable(_ group: LoggedGroup) -> StoreError? {
        while true {
            if let syncFailure { return syncFailure }
            // A sync counts for the group if it started after the group
            // was written: it covered it (its target, the written end then).
            // Under `.always` only the group's own sync counts.
            if logSyncedEnd >= group.endOffset && options.syncMode != .always { return nil }
            if syncing {
                syncWaiters += 1
                writers.wait()
                syncWaiters -= 1
                continue
            }
            syncing = true
            let target = logWrittenEnd
            writers.unlock()
            let outcome: StoreError?
            do throws(SystemCallError) {
                try group.log.sync()
                outcome = nil
                state.withLock { counters.logSyncs += 1 }
            } catch {
                outcome = StoreError(.ioFailure, "cannot sync the log; the store now refuses writes until reopened", path: group.log.path, errno: error.errno, cause: error)
            }
            writers.lock()
            syncing = false
            if syncWaiters > 0 { writers.broadcast() }
            if let outcome {
                syncFailure = outcome
                if failure == nil { failure = outcome }
                return outcome
            }
            logSyncedEnd = max(logSyncedEnd, target)
            if target >= group.endOffset { return nil }
        }
    }

    /// Hands each writer of `group` its result — the i-th the sequence
    /// number `first + i`, or the error — and wakes them. Called with
    /// `writers` held.
    private func finish(_ group: [PendingWrite], with outcome: Result<UInt64, StoreError>) {
        for (i, w) in group.enumerated() {
            w.done = true
            w.result = outcome.map { $0 + UInt64(i) }
        }
        writers.broadcast()
    }

    /// Batch bytes from which a group's leader passes the lead on as soon as
    /// the group is written to the log, before its sync and apply: the next
    /// group's write then overlaps them. Below it, the leader keeps the lead
    /// until its group is applied, and writers that arrive meanwhile form
    /// the next group. Large groups gain from the overlap; a group of a few
    /// records gains nothing from it, and every hand-over wakes every
    /// waiter, which many writers of small batches would pay for.
    static let pipelinedGroupBytes = 32 << 10

    /// The leader (or a flush's sentinel) leaves the head of the queue and
    /// wakes the waiters: the next in line leads. Called with `writers` held.
    private func handOverLead() {
        queue.removeFirst()
        writers.broadcast()
    }

    /// Waits until no group written to the log is still being synced or
    /// applied. Called with `writers` held, by a leader about to rotate,
    /// by a flush's sentinel, and by `close()`.
    func waitForLoggedGroupsApplied() {
        while groupsInFlight > 0 { writers.wait() }
    }

    /// The most groups one leader commits before it hands the lead over:
    /// its own caller waits for them.
    static let maximumLeadRounds = 8

    /// The most bytes of batches one leader commits at once.
    static let maximumGroupBytes = 4 << 20

    /// A group of batches written to the log, to be synced and applied by
    /// the leader that wrote it — for a large group, after the next leader
    /// has taken over the log.
    struct LoggedGroup {
        let batches: [WriteBatch]
        let firstSequence: UInt64
        var lastSequence: UInt64 { firstSequence + UInt64(batches.count) - 1 }
        /// The log it was written to, which its sync makes durable (not
        /// closed before the group is applied, see ``rotate(needing:)``).
        let log: LogWriter
        /// The memtable the group's records go into: the leader's at the
        /// time it wrote the log (a later leader may have rotated since —
        /// not before this group is applied, see ``rotate(needing:)``).
        let memtable: Memtable
        /// Bytes written to the log, for the counters.
        let logBytes: Int
        /// The log offset just past the group's frames.
        let endOffset: UInt64
    }

    /// The first step of a commit, by the leader: frames the group, writes
    /// it to the log with one `pwrite`, and reserves its room in the
    /// memtable, rotating first when it does not fit. The sync
    /// (``waitUntilDurable(_:)``) and the apply (``apply(_:)``) follow, in
    /// ``commit(_:at:passingLeadEarly:)``; for a large group, after the
    /// lead has passed on, so that writers of synced batches do not spend
    /// their time waiting for syncs that no other work overlaps.
    private func writeToLog(_ group: [PendingWrite]) throws(StoreError) -> LoggedGroup {
        var memtableBytes = 0
        for w in group {
            memtableBytes += w.batch.byteCount + 9 * w.batch.count
        }
        guard var log, var memtable else { throw StoreError(.readOnly, "the store was opened read-only", path: directory) }
        // The memtable's own `used` is the applier's to change: what the
        // logged groups will take is counted here.
        if log.offset >= UInt64(options.logSizeLimit) || memtableReserved >= options.logSizeLimit || memtable.capacity - memtableReserved < memtableBytes {
            try rotate(needing: memtableBytes)
            log = self.log!
            memtable = self.memtable!
        }

        frameBuffer.removeAll(keepingCapacity: true)
        let first = nextSequence
        var sequence = first
        for w in group {
            LogFormat.appendFrame(to: &frameBuffer, sequence: sequence, operationCount: w.batch.count, salt: log.salt, payload: w.batch.encoded)
            sequence += 1
        }
        do throws(SystemCallError) {
            try log.append(frameBuffer)
        } catch {
            throw StoreError(.ioFailure, "cannot write the log; the store now refuses writes until reopened", path: log.path, offset: log.offset, errno: error.errno, cause: error)
        }
        let logBytes = frameBuffer.count
        if frameBuffer.count > 256 << 10 { frameBuffer = [] }
        memtableReserved += memtableBytes
        nextSequence = sequence
        return LoggedGroup(batches: group.map(\.batch), firstSequence: first, log: log, memtable: memtable, logBytes: logBytes, endOffset: log.offset)
    }

    /// The last step of a commit: copies each batch of a durable group into
    /// its memtable and publishes it in the index, one batch per hold of the
    /// state lock. Called by the leader that logged the group, once every
    /// group logged before it was applied (so by one thread at a time, in
    /// log order; `writers` orders the hand-over of `placedScratch`).
    private func apply(_ group: LoggedGroup) {
        let memtable = group.memtable
        let memtableNumber = memtable.number
        var s = group.firstSequence
        for batch in group.batches {
            placedScratch.removeAll(keepingCapacity: true)
            batch.encoded.withUnsafeBytes { memtable.append(batch: $0, sequence: s, into: &placedScratch) }
            placedScratch.withUnsafeBufferPointer { placed in
                if batch.count >= Self.offLockApplyOperations {
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
            counters.logBytes += UInt64(group.logBytes)
        }
    }

    /// Reads the chunks of the index checkpoint that `placed`'s keys reach,
    /// outside the `state` lock, so that applying the batch under it reads
    /// none (Rule 5: readers wait for no I/O a writer does). Once every
    /// chunk has been read, or when the index did not come from a
    /// checkpoint, it costs a look at the index's arena. The applying leader only.
    private func readCheckpointChunks(reachedBy placed: UnsafeBufferPointer<PlacedOperation>) {
        guard var snapshot = state.withReadLock({ (index.arena?.chunksUnread ?? 0) > 0 ? index : nil }) else { return }
        for operation in placed { _ = snapshot.lookup(operation.key) }
        // Let go of the snapshot under the state lock (see IndexPin).
        state.withLock { snapshot = KeyIndex() }
    }

    /// A batch of this many operations or more is applied to a copy of the
    /// index, outside the `state` lock: readers would otherwise wait for all
    /// of it, however large the batch.
    /// Below it, the batch is applied in place under the lock, which costs
    /// no copy of the nodes it touches.
    static let offLockApplyOperations = 4_096

    /// Applies one batch's operations to a copy of the index and swaps the
    /// copy in under the `state` lock, with the batch's sequence number:
    /// readers see all of the batch or none of it, as in place, but wait
    /// only for the swap. The copy shares every node with the index until
    /// it changes one (each is copied on first touch, since the index still
    /// holds it), so nothing a reader can reach is written. The applying leader only.
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
        // Groups logged before are copied into the memtable about to be
        // frozen (by the leaders that logged them): all of them first.
        waitForLoggedGroupsApplied()
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
            newLog = try LogWriter(fileSystem: fileSystem, directory: directory, fileNumber: number, durable: options.syncMode != .none, sizeLimit: options.logSizeLimit)
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
        memtableReserved = 0
        // The new log's header is durable (or need not be, under `.none`).
        writers.withLock {
            logWrittenEnd = newLog.offset
            logSyncedEnd = newLog.offset
        }
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
        waitForLoggedGroupsApplied()
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
