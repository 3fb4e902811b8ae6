/// Writing a frozen memtable out as a segment.
///
/// Order of effects, each step durable before the next (so a crash anywhere
/// leaves a store that opens to the same contents):
/// 1. write the segment and fsync it and the directory — until the manifest
///    names it, it is an orphan the next open deletes;
/// 2. switch the manifest to name the segment and advance its log number past
///    the frozen memtable's logs — from here on those logs are obsolete;
/// 3. repoint index entries from the memtable to the segment, by
///    compare-and-set in chunks of 256 (a key overwritten meanwhile keeps its
///    newer entry, and the segment's copy counts as dead); readers and the
///    writer wait for one chunk at most;
/// 4. drop the memtable (read views that still hold it keep it alive) and
///    delete the obsolete logs.
extension StrataStore {
    /// Keys repointed per hold of the state lock.
    static let repointChunk = 256

    /// Index keys per memtable record above which a flush finds the
    /// records to write by looking each one up rather than by walking the
    /// whole index: a look-up (which prefetches each node it enters) against
    /// a walk's visit to each entry.
    /// An estimate, not tuned by measurement.
    static let lookUpRecordsAbove = 64

    /// Called between two chunks of a repoint. A pthread mutex is not fair:
    /// released and retaken at once, it is retaken before a reader or writer
    /// woken on it gets to run, and that waiter starves for the whole repoint,
    /// however briefly each chunk holds the lock. A pause of 50 µs lets it in.
    ///
    /// Only when a thread is waiting for one of the two locks: timers can
    /// wake late, so a pause may last far longer than asked, and a pause per
    /// chunk would lengthen every flush while writers, their memtable full,
    /// wait for it.
    func letWaitersIn() {
        guard state.hasWaiters || indexMutation.hasWaiters else { return }
        usleep(50)
    }

    func flush(_ frozen: Memtable, nextLogNumber: UInt32) {
        do throws(StoreError) {
            try writeSegment(from: frozen, nextLogNumber: nextLogNumber)
            writers.withLock {
                flushInProgress = false
                writers.broadcast()
            }
            scheduleCompactionIfNeeded()
        } catch {
            writers.withLock {
                if failure == nil { failure = error }
                flushInProgress = false
                writers.broadcast()
            }
        }
    }

    private func writeSegment(from frozen: Memtable, nextLogNumber: UInt32) throws(StoreError) {
        var snapshot = state.withLock { index }
        let olderSegmentsExist = manifestLock.withLock { !manifest.segments.isEmpty }

        // The records to write, as memtable offsets in key order: every put the
        // index still points at, and every newest tombstone whose key the
        // index lacks (needed only while an older segment may hold the key).
        var puts: [UInt32] = []
        if snapshot.count > Self.lookUpRecordsAbove * frozen.recordCount {
            // A small memtable against a large index: a look-up per record,
            // then a sort, costs in proportion to the memtable, where a walk
            // of the whole index costs in proportion to the store.
            var offset = 0
            while offset < frozen.used {
                let r = frozen.record(at: UInt32(offset))
                if let entry = snapshot.lookup(r.key), entry.file == frozen.number, entry.block == UInt32(offset) {
                    puts.append(UInt32(offset))
                }
                offset += Memtable.recordSize(keyCount: r.key.count, valueCount: r.value.count)
            }
            puts.sort { compareBytes(frozen.record(at: $0).key, frozen.record(at: $1).key) < 0 }
        } else {
            snapshot.forEach(from: nil) { _, entry in
                if entry.file == frozen.number { puts.append(entry.block) }
                return true
            }
        }
        var tombstones: [UInt32] = []
        if olderSegmentsExist {
            tombstones = frozen.tombstones.filter { snapshot.lookup(frozen.record(at: $0).key) == nil }
            tombstones.sort { a, b in
                let ra = frozen.record(at: a), rb = frozen.record(at: b)
                let c = compareBytes(ra.key, rb.key)
                return c < 0 || (c == 0 && ra.sequence > rb.sequence)
            }
            var last: UnsafeRawBufferPointer? = nil
            tombstones = tombstones.filter { offset in
                let key = frozen.record(at: offset).key
                defer { last = key }
                return last.map { compareBytes($0, key) != 0 } ?? true
            }
        }

        // Let go of the snapshot before repointing: while it shares the index's
        // nodes, every compare-and-set below would have to copy them. Let go
        // of it under the state lock: once it is gone the writer (which
        // mutates under that lock) may find the nodes read above unshared and
        // write them in place, and the lock is what orders those writes after
        // this thread's reads. (The reference count orders them too, but
        // ThreadSanitizer cannot see inside the Swift runtime and reported
        // the in-place write as a race.)
        state.withLock { snapshot = KeyIndex() }

        var number: UInt32 = 0  // a segment's number, taken only when there is one to write
        var info: SegmentInfo? = nil
        var written: SegmentWriter? = nil  // the new segment's, once finished
        var placed: [(offset: UInt32, block: UInt32)] = []
        placed.reserveCapacity(puts.count)
        if !puts.isEmpty || !tombstones.isEmpty {
            number = try allocateFileNumber()
            let writer: SegmentWriter
            do throws(SystemCallError) {
                writer = try SegmentWriter(fileSystem: fileSystem, directory: directory, fileNumber: number, blockSize: options.blockSize)
            } catch {
                throw StoreError(.ioFailure, "cannot create a segment", path: path(SegmentFormat.fileName(number)), errno: error.errno, cause: error)
            }
            do throws(SystemCallError) {
                var p = 0, t = 0
                var yields = YieldPoints()
                while p < puts.count || t < tombstones.count {
                    yields.pass()
                    let takePut: Bool
                    if p == puts.count { takePut = false } else if t == tombstones.count { takePut = true } else {
                        takePut = compareBytes(frozen.record(at: puts[p]).key, frozen.record(at: tombstones[t]).key) < 0
                    }
                    let offset = takePut ? puts[p] : tombstones[t]
                    let r = frozen.record(at: offset)
                    let location = try writer.add(key: r.key, sequence: r.sequence, kind: r.kind, value: r.value)
                    if takePut { placed.append((offset, location.packed)); p += 1 } else { t += 1 }
                }
                info = try writer.finish()
                written = writer
                try fileSystem.syncDirectory(directory)
            } catch {
                writer.abandon()
                throw StoreError(.ioFailure, "cannot write a segment; the store now refuses writes until reopened", path: writer.path, errno: error.errno, cause: error)
            }
        }

        try installLock.withLock { () throws(StoreError) in
            try install(segment: info, written: written, number: number, placed: placed, from: frozen, nextLogNumber: nextLogNumber)
        }
        removeObsoleteLogs(below: nextLogNumber)
    }

    /// Steps 2 to 4 of a flush, under `installLock`. `written`: the new
    /// segment's writer, which opens it without reading its footer back.
    private func install(segment info: SegmentInfo?, written: SegmentWriter?, number: UInt32, placed: [(offset: UInt32, block: UInt32)], from frozen: Memtable, nextLogNumber: UInt32) throws(StoreError) {
        // 2. The manifest switch.
        var reader: SegmentReader? = nil
        try manifestLock.withLock { () throws(StoreError) in
            var next = manifest
            if let info { next.segments.append(info) }
            next.logNumber = nextLogNumber
            next.lastSequence = max(next.lastSequence, frozen.maximumSequence)
            next.nextFileNumber = state.withLock { nextFileNumber }
            do throws(SystemCallError) { try next.write(fileSystem: fileSystem, directory: directory) } catch {
                throw StoreError(.ioFailure, "cannot switch the manifest after a flush; the store now refuses writes until reopened", path: path(Manifest.fileName), errno: error.errno, cause: error)
            }
            manifest = next
            state.withLock { liveSegments = next.segments }
        }
        if let written {
            reader = try written.openFinished()
        }

        // 3. Repoint the index.
        if let reader {
            state.withLock { files[number] = .segment(reader) }
            var i = 0
            while i < placed.count {
                let end = min(i + Self.repointChunk, placed.count)
                // `placed` is in key order (the segment's): one walk per chunk.
                let records = placed[i..<end].map { frozen.record(at: $0.offset) }
                indexMutation.withLock { state.withLock {
                    reader.deadRecords += index.replaceAll(
                        count: records.count,
                        key: { records[$0].key },
                        expected: { IndexEntry(sequence: records[$0].sequence, file: frozen.number, block: placed[i + $0].offset) },
                        replacement: { IndexEntry(sequence: records[$0].sequence, file: number, block: placed[i + $0].block) })
                } }
                i = end
                letWaitersIn()
            }
        }

        // 4. Retire the memtable and its logs.
        state.withLock {
            files[frozen.number] = nil
            counters.flushes += 1
            counters.flushedBytes += info?.fileSize ?? 0
        }
    }

    /// Deletes logs below `number` (best effort: a leftover is deleted at the next open).
    func removeObsoleteLogs(below number: UInt32) {
        guard let names = try? fileSystem.listDirectory(directory) else { return }
        var removed = false
        for name in names {
            if let n = Recovery.parseNumber(name, suffix: ".wal"), n < number {
                if (try? fileSystem.remove(path(name))) != nil { removed = true }
            }
        }
        if removed { try? fileSystem.syncDirectory(directory) }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif
