/// Merging segments to reclaim the space of overwritten and deleted records.
///
/// Inputs are read block by block (bypassing the cache) and merged by key;
/// per key the highest sequence wins — never the order of files. A put is
/// copied only if the index still points at it. A tombstone is copied only if
/// its key is still absent and some segment outside the inputs holds records
/// older than it (which might include the key): dropping it then would bring
/// the deleted key back on the next open (Bitcask's resurrection bug).
///
/// Outputs are complete and fsynced before the manifest switch; index entries
/// are repointed after it, by compare-and-set in chunks; inputs are deleted
/// last. A failure before the switch deletes the outputs and leaves the store
/// as it was (it stays writable: compaction never touches a file the manifest
/// names); a failure of the switch itself fails the store.
/// See ``StrataStore/setCompactionRewriter(_:)``: key, value, and where to
/// write the replacement value; true when it wrote one.
public typealias CompactionRewriter = @Sendable (
    _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, _ replacement: inout [UInt8]
) -> Bool

extension StrataStore {
    /// Compacts every segment into new ones now, dropping all dead records and
    /// every tombstone no older data needs. Waits for a running background
    /// compaction first.
    ///
    /// ```swift
    /// try store.compact()
    /// print(store.statistics.segmentBytes)
    /// ```
    public func compact() throws(StoreError) {
        try checkOpen()
        if options.readOnly { throw StoreError(.readOnly, "the store was opened read-only", path: directory) }
        // Counted as background work, so close() waits for it to finish.
        backgroundWork.enter()
        defer { backgroundWork.leave() }
        let (isClosing, failed) = writers.withLock { (closing, failure) }
        if isClosing { throw StoreError(.closed, "the store is closed", path: directory) }
        if let failed {
            throw StoreError(.storeFailed, "the store refuses writes after an earlier failure; reopen it", path: directory, cause: failed)
        }
        var result: Result<Void, StoreError> = .success(())
        compactionQueue.sync {
            do throws(StoreError) { try runCompaction(inputs: nil) } catch { result = .failure(error) }
        }
        try result.get()
    }

    /// Has every later compaction pass each live value it copies through
    /// `rewriter`, which may write a replacement into its third argument
    /// (empty when it is called) and return true (false: the value is
    /// copied as it is). The engine
    /// knows nothing of what values mean; a layer above uses this to bring
    /// old records up to date as a side effect of compaction — Strata's
    /// coordinator upgrades the records an older schema wrote. The record
    /// keeps its key and sequence number: to readers it is the same write.
    /// Nil stops it. Called on the compaction's thread; must be pure, fast,
    /// and never touch the store.
    ///
    /// ```swift
    /// store.setCompactionRewriter { key, value, out in
    ///     guard value.first == 1 else { return false }
    ///     out = [2] + value.dropFirst()
    ///     return true
    /// }
    /// ```
    public func setCompactionRewriter(_ rewriter: CompactionRewriter?) {
        state.withLock { compactionRewriter = rewriter }
    }

    /// Queues a background compaction of the segments past the dead ratio.
    func scheduleCompactionIfNeeded() {
        guard options.automaticCompaction, !options.readOnly else { return }
        let candidates: [UInt32] = manifestLock.withLock {
            guard !compactionScheduled, compactsInBackground else { return [] }
            let inputs = state.withLock {
                manifest.segments.compactMap { info -> UInt32? in
                    guard case .segment(let s)? = files[info.fileNumber], info.recordCount > 0 else { return nil }
                    return Double(s.deadRecords) / Double(info.recordCount) >= options.compactionDeadRatio ? info.fileNumber : nil
                }
            }
            if !inputs.isEmpty { compactionScheduled = true }
            return inputs
        }
        guard !candidates.isEmpty else { return }
        backgroundWork.enter()
        compactionQueue.async { [self] in
            defer { backgroundWork.leave() }
            do throws(StoreError) {
                try BackgroundScheduling.run { () throws(StoreError) in try runCompaction(inputs: candidates) }
            } catch {
                manifestLock.withLock { lastCompactionError = error }
            }
            manifestLock.withLock { compactionScheduled = false }
        }
    }

    private struct Cursor {
        let reader: SegmentReader
        var block: DecodedBlock?
        var blockIndex: UInt32 = 0
        var record = 0
    }

    /// Compacts `inputs` (nil: every segment), skipping any no longer in the
    /// manifest. Runs on `compactionQueue`.
    func runCompaction(inputs requested: [UInt32]?) throws(StoreError) {
        // The snapshot, the inputs and the segments outside them, fixed together
        // while no flush is installing a segment.
        let rewriter = state.withReadLock { compactionRewriter }
        var rewritten: [UInt8] = []
        var (snapshot, readers, oldestOutside): (KeyIndex, [SegmentReader], UInt64) = installLock.withLock {
            let live = manifestLock.withLock { manifest.segments }
            let wanted = requested.map(Set.init) ?? Set(live.map(\.fileNumber))
            let oldestOutside = live.filter { !wanted.contains($0.fileNumber) && $0.recordCount > 0 }.map(\.minimumSequence).min() ?? .max
            return state.withLock {
                let readers = live.compactMap { info -> SegmentReader? in
                    guard wanted.contains(info.fileNumber), case .segment(let s)? = files[info.fileNumber] else { return nil }
                    return s
                }
                return (index, readers, oldestOutside)
            }
        }
        // Let go of the snapshot under the state lock on every way out (see
        // the flush): ThreadSanitizer orders this thread's reads of the
        // index's nodes before the writer's in-place writes — or before
        // their free, when this snapshot held the last reference — only
        // through that lock.
        defer { state.withLock { snapshot = KeyIndex() } }
        guard !readers.isEmpty else { return }
        let inputs = readers.map(\.fileNumber)
        var cursors: [Cursor] = []
        for reader in readers where !reader.blocks.isEmpty {
            var c = Cursor(reader: reader)
            c.block = try beforeSwitch { () throws(StoreError) in try reader.readBlock(0) }
            cursors.append(c)
        }

        // The merge. `less` orders cursors by key, then newest first.
        func withKey<T, E: Error>(_ c: Int, _ body: (DecodedBlock.Record) throws(E) -> T) throws(E) -> T {
            try cursors[c].block!.withRecord(cursors[c].record, body)
        }
        func less(_ a: Int, _ b: Int) -> Bool {
            withKey(a) { ra in
                withKey(b) { rb in
                    let c = compareBytes(ra.key, rb.key)
                    return c < 0 || (c == 0 && ra.sequence > rb.sequence)
                }
            }
        }
        var heap = MergeHeap(Array(cursors.indices), by: less)
        var outputs: [SegmentWriter] = []
        var repoint: [(key: Range<Int>, sequence: UInt64, old: IndexEntry, output: Int, block: UInt32)] = []
        var keyArena: [UInt8] = []
        var lastKey: [UInt8] = []
        var haveLast = false

        do throws(StoreError) {
            while let top = heap.top {
                let file = cursors[top].reader.fileNumber
                let here = RecordLocation(block: cursors[top].blockIndex, slot: UInt32(cursors[top].record))
                try withKey(top) { (r) throws(StoreError) in
                    let duplicate = haveLast && lastKey.withUnsafeBytes { compareBytes($0, r.key) } == 0
                    guard !duplicate else { return }
                    lastKey.removeAll(keepingCapacity: true)
                    lastKey.append(contentsOf: r.key)
                    haveLast = true
                    let current = snapshot.lookup(r.key)
                    let keep: Bool
                    switch r.kind {
                    case .put:
                        keep = current == IndexEntry(sequence: r.sequence, file: file, block: here.packed)
                    case .delete: keep = current == nil && oldestOutside < r.sequence
                    }
                    guard keep else { return }
                    if outputs.isEmpty || outputs[outputs.count - 1].estimatedSize >= UInt64(options.segmentSizeLimit) {
                        let number = try allocateFileNumber()
                        do throws(SystemCallError) {
                            outputs.append(try SegmentWriter(fileSystem: fileSystem, directory: directory, fileNumber: number, blockSize: options.blockSize))
                        } catch {
                            throw StoreError(.ioFailure, "cannot create a compaction output", path: path(SegmentFormat.fileName(number)), errno: error.errno, cause: error)
                        }
                    }
                    let out = outputs.count - 1
                    let block: UInt32
                    var replaced = false
                    if r.kind == .put, let rewriter {
                        rewritten.removeAll(keepingCapacity: true)
                        replaced = rewriter(r.key, r.value, &rewritten)
                    }
                    do throws(SystemCallError) {
                        if replaced {
                            block = try rewritten.withBytes { (value) throws(SystemCallError) in
                                try outputs[out].add(key: r.key, sequence: r.sequence, kind: r.kind, value: value).packed
                            }
                        } else {
                            block = try outputs[out].add(key: r.key, sequence: r.sequence, kind: r.kind, value: r.value).packed
                        }
                    } catch {
                        throw StoreError(.ioFailure, "cannot write a compaction output", path: outputs[out].path, errno: error.errno, cause: error)
                    }
                    if r.kind == .put {
                        let start = keyArena.count
                        keyArena.append(contentsOf: r.key)
                        repoint.append((start..<keyArena.count, r.sequence, current!, out, block))
                    }
                }
                // Advance the top cursor.
                cursors[top].record += 1
                if cursors[top].record == cursors[top].block!.count {
                    // Once per block: is the store closing?
                    if writers.withLock({ closing }) { throw StoreError(.closed, "compaction stopped: the store is closing", path: directory) }
                    cursors[top].blockIndex += 1
                    cursors[top].record = 0
                    if Int(cursors[top].blockIndex) < cursors[top].reader.blocks.count {
                        cursors[top].block = try cursors[top].reader.readBlock(cursors[top].blockIndex)
                        heap.topChanged()
                    } else {
                        cursors[top].block = nil
                        heap.removeTop()
                    }
                } else {
                    heap.topChanged()
                }
            }
        } catch {
            outputs.forEach { $0.abandon() }
            try beforeSwitch { () throws(StoreError) in throw error }
        }

        // Let go of the snapshot before repointing (see the flush), under the
        // state lock as the flush does.
        state.withLock { snapshot = KeyIndex() }

        // Finish the outputs.
        var infos: [SegmentInfo] = []
        do throws(SystemCallError) {
            for output in outputs { infos.append(try output.finish()) }
            if !outputs.isEmpty { try fileSystem.syncDirectory(directory) }
        } catch {
            outputs.forEach { $0.abandon() }
            throw StoreError(.ioFailure, "compaction stopped before its manifest switch, the store is unchanged: cannot finish an output", path: directory, errno: error.errno, cause: error)
        }

        // No `installLock` here: only a flush's install must exclude a
        // compaction's snapshot; the entries the two repoint are disjoint, and
        // holding it would make flushes (and so writers) wait out this repoint.
        do throws(StoreError) {
            try install(outputs: infos, written: outputs, replacing: inputs, readers: readers, repoint: repoint, keyArena: keyArena)
        } catch {
            // The switch failed or came before a failure: memory and disk may
            // disagree, so the store refuses writes (set outside the locks, as
            // `writers` is never taken inside another lock).
            writers.withLock { if failure == nil { failure = error } }
            throw error
        }
    }

    /// Runs the part of a compaction before its manifest switch; an error there
    /// leaves every file the manifest names untouched, and says so.
    private func beforeSwitch<T>(_ body: () throws(StoreError) -> T) throws(StoreError) -> T {
        do throws(StoreError) { return try body() } catch {
            var error = error
            if error.code != .closed {
                error.message = "compaction stopped before its manifest switch, the store is unchanged: " + error.message
            }
            throw error
        }
    }

    /// Switches the manifest, repoints the index and retires the inputs.
    /// `written`: the outputs' writers, which open them without reading
    /// their footers back.
    private func install(outputs infos: [SegmentInfo], written: [SegmentWriter], replacing inputs: [UInt32], readers: [SegmentReader],
                         repoint: [(key: Range<Int>, sequence: UInt64, old: IndexEntry, output: Int, block: UInt32)],
                         keyArena: [UInt8]) throws(StoreError) {
        let inputSet = Set(inputs)
        // The switch. Past this point the inputs are obsolete.
        try manifestLock.withLock { () throws(StoreError) in
            var next = manifest
            next.segments.removeAll { inputSet.contains($0.fileNumber) }
            next.segments.append(contentsOf: infos)
            next.nextFileNumber = state.withLock { nextFileNumber }
            do throws(SystemCallError) { try next.write(fileSystem: fileSystem, directory: directory) } catch {
                throw StoreError(.ioFailure, "cannot switch the manifest after a compaction; the store now refuses writes until reopened", path: path(Manifest.fileName), errno: error.errno, cause: error)
            }
            manifest = next
            state.withLock { liveSegments = next.segments }
        }

        // Repoint, then retire the inputs. The manifest names the outputs now:
        // failing to open one leaves memory and disk apart, so the store fails
        // (reopening reads the new manifest).
        var outputReaders: [SegmentReader] = []
        for (info, written) in zip(infos, written) {
            do throws(StoreError) {
                let reader = try written.openFinished()
                outputReaders.append(reader)
                state.withLock { files[info.fileNumber] = .segment(reader) }
            } catch {
                throw StoreError(.storeFailed, "cannot open a compaction output after the manifest switch; the store now refuses writes until reopened", path: path(SegmentFormat.fileName(info.fileNumber)), cause: error)
            }
        }
        var i = 0
        while i < repoint.count {
            let end = min(i + Self.repointChunk, repoint.count)
            keyArena.withUnsafeBytes { arena in
                indexMutation.withLock { state.withLock {
                    for item in repoint[i..<end] {
                        let key = UnsafeRawBufferPointer(rebasing: arena[item.key])
                        let new = IndexEntry(sequence: item.sequence, file: outputReaders[item.output].fileNumber, block: item.block)
                        if !index.replace(key, expected: item.old, with: new) {
                            outputReaders[item.output].deadRecords += 1
                        }
                    }
                } }
            }
            i = end
            letWaitersIn()
        }
        // Leaves loaded in place from the checkpoint that the repointing
        // replaced are memory the index no longer needs.
        state.withLock { index.releaseArenaIfUnused() }
        let removedBytes = readers.reduce(UInt64(0)) { $0 + $1.info.fileSize }
        state.withLock {
            for n in inputs { files[n] = nil }
            counters.compactions += 1
            counters.compactedBytesWritten += infos.reduce(0) { $0 + $1.fileSize }
            counters.compactedBytesRemoved += removedBytes
        }
        for n in inputs {
            cache.removeFile(n)
            // Best effort: an input left behind is an orphan the next open deletes.
            try? fileSystem.remove(path(SegmentFormat.fileName(n)))
        }
        try? fileSystem.syncDirectory(directory)
    }
}
