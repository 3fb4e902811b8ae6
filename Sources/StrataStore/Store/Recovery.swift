import Dispatch

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// Opening a store: lock, manifest, segment footers, log replay.
///
/// 1. Check the directory (create it if allowed) and take `LOCK` with `flock`,
///    so a second writer — another process, or another open in this one —
///    gets `.locked`. A read-only open takes no lock: it opens beside a
///    writer (``openBesideWriters(directory:options:)``).
/// 2. Read `MANIFEST`; a directory with files but no manifest is not a store.
/// 3. Open every segment the manifest names and read its footer (or scan it),
///    then merge their key lists into the index: per key the highest sequence
///    wins, a tombstone removes the key; every version that lost counts as dead.
/// 4. Replay the logs numbered at or above the manifest's log number, in
///    order, with point-in-time semantics (``LogScanner``). A torn tail of the
///    last log is truncated away before anything is appended.
/// 5. Delete orphans (segments the manifest does not name, logs below its log
///    number, a leftover `MANIFEST.tmp`) and start a new log.
enum Recovery {
    struct Opened {
        /// The held `LOCK` file; nil for a read-only open, which takes no lock.
        var lockFile: FileDescriptor?
        var report: RecoveryReport
        var index: KeyIndex
        var files: [UInt32: StrataStore.StoredFile]
        var lastSequence: UInt64
        var nextFileNumber: UInt32
        var manifest: Manifest
        var log: LogWriter?
        var memtable: Memtable?
        /// Where a read-only open left off, for ``StrataStore/catchUp()``;
        /// nil for an open for writing.
        var followPoint: FollowPoint?
    }

    /// What a read-only store read of the directory, so that it can read
    /// on from there: the manifest's bytes, and the end of the last
    /// complete batch of the newest live log.
    struct FollowPoint {
        var manifestBytes: [UInt8]
        /// The manifest file's identity (``FileStatus/identity``), taken
        /// before its bytes were read: while it holds, the bytes do too.
        var manifestIdentity: [UInt64]?
        var manifest: Manifest
        /// The newest live log read, where its complete batches end, and
        /// its salt (nil when its header was not there yet: it is read
        /// again from the start).
        var log: (number: UInt32, end: Int, salt: UInt32?)?
        /// The memtable the logs' batches go to: address space only, sized
        /// as for a writer's log and more.
        var memtable: Memtable
    }

    /// Address space reserved per memtable beyond the log size limit, for the
    /// last group that crosses it.
    static func memtableCapacity(logSizeLimit: Int, atLeast needed: Int) -> Int {
        max(logSizeLimit * 2 + (64 << 20), needed + (64 << 20))
    }

    static func open(directory: String, options: StoreOptions) throws(StoreError) -> Opened {
        let fs = options.fileSystem
        func io(_ what: String, _ path: String, _ error: SystemCallError) -> StoreError {
            StoreError(.ioFailure, what, path: path, errno: error.errno, cause: error)
        }

        // 1. Directory and lock.
        let status: FileStatus?
        do throws(SystemCallError) { status = try fs.status(directory) } catch { throw io("cannot examine the store directory", directory, error) }
        if status == nil {
            guard options.createIfMissing, !options.readOnly else {
                throw StoreError(.notFound, "no store at \(directory)", path: directory)
            }
            do throws(SystemCallError) { try fs.makeDirectory(directory) } catch {
                if error.errno == ENOENT {
                    throw StoreError(.notFound, "cannot create the store at \(directory): its parent directory does not exist", path: directory, errno: error.errno)
                }
                throw io("cannot create the store directory", directory, error)
            }
        } else if status?.isDirectory == false {
            throw StoreError(.notAStore, "\(directory) is a file, not a store directory", path: directory)
        }
        let names: [String]
        do throws(SystemCallError) { names = try fs.listDirectory(directory) } catch { throw io("cannot list the store directory", directory, error) }
        let hasManifest = names.contains(Manifest.fileName)
        if !hasManifest {
            let foreign = names.filter { $0 != "LOCK" && $0 != Manifest.temporaryName }
            if !foreign.isEmpty {
                throw StoreError(.notAStore, "\(directory) is not a Strata store: it has files (\(foreign.prefix(3).joined(separator: ", "))) but no MANIFEST", path: directory)
            }
            if options.readOnly {
                throw StoreError(.notFound, "no store at \(directory) (no MANIFEST)", path: directory)
            }
        }
        if options.readOnly { return try openBesideWriters(directory: directory, options: options) }
        let lockPath = directory + "/LOCK"
        let lockFile: FileDescriptor
        do throws(SystemCallError) { lockFile = try fs.open(lockPath, .createOrOpen) } catch {
            throw io("cannot open the store's lock file", lockPath, error)
        }
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(max(0, options.lockTimeout) * 1e9)
        while true {
            do throws(SystemCallError) {
                try fs.lockExclusive(lockFile)
                break
            } catch {
                let busy = error.errno == EWOULDBLOCK || error.errno == EAGAIN
                if busy && DispatchTime.now().uptimeNanoseconds < deadline {
                    usleep(5_000)
                    continue
                }
                if busy {
                    let holder = fs.lockHolder(lockFile)
                    try? fs.close(lockFile)
                    throw StoreError(.locked, lockedMessage(holder), path: lockPath, errno: error.errno)
                }
                try? fs.close(lockFile)
                throw io("cannot lock the store", lockPath, error)
            }
        }
        do throws(StoreError) {
            // List again now that the lock is held: while open waited for it, a
            // previous instance may have rotated logs, switched the manifest
            // and deleted files, and a stale listing would skip logs whose
            // batches were acknowledged.
            let locked: [String]
            do throws(SystemCallError) { locked = try fs.listDirectory(directory) } catch { throw io("cannot list the store directory", directory, error) }
            let hasManifestNow = locked.contains(Manifest.fileName)
            if !hasManifestNow, locked.contains(where: { $0 != "LOCK" && $0 != Manifest.temporaryName }) {
                throw StoreError(.notAStore, "\(directory) changed while open waited for its lock and is not a Strata store now", path: directory)
            }
            return try openListed(directory: directory, options: options, names: locked, hasManifest: hasManifestNow, lockFile: lockFile)
        } catch {
            try? fs.close(lockFile)
            throw error
        }
    }

    /// A read-only open, without the lock: it reads and never writes, so it
    /// can open beside a process that has the store open for writing (and
    /// any number of other readers). What it sees is the store at one
    /// moment: the manifest's segments and the complete batches of the live
    /// logs (a batch being appended is a torn tail, left out whole).
    ///
    /// A writer may flush, compact or rotate its log while this reads: a
    /// file the manifest it read named is gone by the time it is opened (an
    /// open file stays readable once unlinked; a not-yet-opened one does not).
    /// Such an open fails in a way that the directory's listing or the
    /// manifest explains by having changed: it starts again from the new
    /// manifest, a few times. A failure over an unchanged directory is the
    /// store's, and is thrown.
    private static func openBesideWriters(directory: String, options: StoreOptions) throws(StoreError) -> Opened {
        let fs = options.fileSystem
        let manifestPath = directory + "/" + Manifest.fileName
        func manifestBytes() -> [UInt8]? { try? fs.readFile(manifestPath) }
        var attempt = 0
        while true {
            let names: [String]
            do throws(SystemCallError) { names = try fs.listDirectory(directory) } catch {
                throw StoreError(.ioFailure, "cannot list the store directory", path: directory, errno: error.errno, cause: error)
            }
            guard names.contains(Manifest.fileName) else {
                throw StoreError(.notAStore, "\(directory) changed while it was being opened and is not a Strata store now", path: directory)
            }
            let manifest = manifestBytes()
            do throws(StoreError) {
                var opened = try openListed(directory: directory, options: options, names: names, hasManifest: true, lockFile: nil)
                opened.report.restartsBesideWriter = attempt
                return opened
            } catch {
                attempt += 1
                guard attempt < 8, let now = try? fs.listDirectory(directory),
                      now.sorted() != names.sorted() || manifestBytes() != manifest else { throw error }
                usleep(UInt32(1_000 * attempt))
            }
        }
    }

    /// Why an open was refused the lock, naming who holds it when that
    /// can be told.
    static func lockedMessage(_ holder: LockHolder?) -> String {
        guard let holder else { return "the store is locked: another process, or another open in this process, is using it" }
        if holder.isThisProcess { return "the store is locked by another open in this process: close that one first" }
        let name = holder.command.map { " (\($0))" } ?? ""
        return "the store is locked by process \(holder.pid)\(name), which has it open"
    }

    /// Steps 2–5, over the directory's files as `names` lists them; the
    /// lock is held (`lockFile`), or the open is read-only and takes none.
    private static func openListed(directory: String, options: StoreOptions, names: [String], hasManifest: Bool, lockFile: FileDescriptor?) throws(StoreError) -> Opened {
        let fs = options.fileSystem
        var report = RecoveryReport()
        func io(_ what: String, _ path: String, _ error: SystemCallError) -> StoreError {
            StoreError(.ioFailure, what, path: path, errno: error.errno, cause: error)
        }

        // 2. Manifest.
        let manifestPath = directory + "/" + Manifest.fileName
        var manifest: Manifest
        var manifestBytes: [UInt8] = []
        let manifestIdentity = options.readOnly ? (try? fs.status(manifestPath))??.identity : nil
        if hasManifest {
            let bytes: [UInt8]
            do throws(SystemCallError) { bytes = try fs.readFile(manifestPath) } catch { throw io("cannot read MANIFEST", manifestPath, error) }
            manifest = try Manifest(decoding: bytes, path: manifestPath)
            manifestBytes = bytes
        } else {
            manifest = Manifest()
            do throws(SystemCallError) { try manifest.write(fileSystem: fs, directory: directory) } catch { throw io("cannot write a new MANIFEST", manifestPath, error) }
        }

        // Classify the directory's files.
        var logNumbers: [UInt32] = []
        var segmentNumbers: Set<UInt32> = []
        var highestNumber: UInt32 = 0
        for name in names {
            if let n = parseNumber(name, suffix: ".wal") {
                logNumbers.append(n)
                highestNumber = max(highestNumber, n)
            } else if let n = parseNumber(name, suffix: ".seg") {
                segmentNumbers.insert(n)
                highestNumber = max(highestNumber, n)
            }
        }
        logNumbers.sort()
        let live = Set(manifest.segments.map(\.fileNumber))

        // 3. Segments → index: loaded from the checkpoint the last close
        // saved, when it was made over exactly these segments; built from
        // their footers otherwise.
        var files: [UInt32: StrataStore.StoredFile] = [:]
        var index: KeyIndex
        let cores = max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        // A chunk of the checkpoint that fails its checks when it is first
        // read is rebuilt from the footers of the segments the checkpoint
        // was made over (those still there: a compaction that removed one
        // read every chunk holding its keys first, to repoint them).
        let checkpointSegments = manifest.segments
        let rebuild: @Sendable () -> KeyIndex? = {
            let present = checkpointSegments.filter { (try? fs.status(directory + "/" + SegmentFormat.fileName($0.fileNumber))) != nil }
            guard let opened = try? openSegments(present, fileSystem: fs, directory: directory) else { return nil }
            return mergeSegmentKeys(opened)
        }
        let checkpoint = names.contains(IndexCheckpoint.fileName)
            ? IndexCheckpoint.load(fileSystem: fs, directory: directory, segments: manifest.segments, ways: cores, rebuild: rebuild) : nil
        switch checkpoint {
        case .success(let loaded)?:
            report.indexCheckpoint = .loaded
            for reader in loaded.readers {
                report.segmentRecords += Int(reader.info.recordCount)
                files[reader.fileNumber] = .segment(reader)
            }
            index = loaded.index
        case let refused:
            if case .failure(let refusal)? = refused { report.indexCheckpoint = .notUsed(refusal.description) }
            let opened = try openSegments(manifest.segments, fileSystem: fs, directory: directory)
            for segment in opened {
                if segment.rebuiltByScan { report.segmentsRebuiltByScan.append(SegmentFormat.fileName(segment.reader.fileNumber)) }
                report.segmentRecords += segment.keys.entries.count
                files[segment.reader.fileNumber] = .segment(segment.reader)
            }
            index = mergeSegmentKeys(opened)
        }

        // 4. Logs: read and check them all, then size the memtable for exactly
        // what they hold (a memtable record can take up to four times its
        // logged size: a delete of a 1-byte key logs 3 bytes), then replay.
        // Nothing is cut or removed until every log has been checked, so an
        // open that fails leaves the logs as it found them.
        var lastSequence = manifest.lastSequence
        guard lastSequence <= Self.lastSequenceNumber else {
            throw StoreError(.corruption, "sequence number \(lastSequence) is past the last a store uses (MANIFEST is damaged)", path: manifestPath)
        }
        let liveLogs = logNumbers.filter { $0 >= manifest.logNumber }
        // File numbers are 32 bits and never reused. Real stores are billions
        // of files from the top; a damaged manifest or a stray file name can
        // be anywhere. The store numbers no file past `lastFileNumber` (the
        // allocator refuses), so any store it left behind opens read-only
        // again; opening for writing needs `fileNumbersReservedForWriting`
        // left, so such a store does not fail a few files later.
        guard manifest.nextFileNumber <= Self.lastFileNumber + 1, highestNumber <= Self.lastFileNumber else {
            throw StoreError(.corruption, "file number \(max(manifest.nextFileNumber, highestNumber)) is past the last a store uses (MANIFEST or a file name is damaged)",
                             path: manifestPath, offset: 12)
        }
        var nextFileNumber = max(manifest.nextFileNumber, highestNumber + 1)
        if !options.readOnly, nextFileNumber > Self.lastFileNumber + 1 - Self.fileNumbersReservedForWriting {
            throw StoreError(.corruption, "file number \(nextFileNumber) leaves no room to number new files (MANIFEST or a file name is damaged)",
                             path: manifestPath, offset: 12)
        }
        let memtableNumber = nextFileNumber  // read-only: in memory only, never a file
        nextFileNumber += 1
        var loaded: [(bytes: [UInt8], frames: [LogScanner.Frame])] = []
        var needed = 0
        var stopReplay = false
        enum Repair { case cut(to: Int), remove(what: String) }
        var repairs: [(path: String, repair: Repair)] = []
        // The log before the one being checked, and where its valid part ends.
        var previousLog: (path: String, validLength: Int)? = nil
        // The last log read, for a read-only open to read on from.
        var lastLogRead: (number: UInt32, end: Int, salt: UInt32?)? = nil
        for (position, n) in liveLogs.enumerated() {
            let logPath = directory + "/" + LogFormat.fileName(n)
            let isLast = position == liveLogs.count - 1
            if stopReplay {
                // Salvage: the log ended early at a corruption; later logs come after it in time.
                repairs.append((logPath, .remove(what: "a log after a salvaged corruption")))
                continue
            }
            let bytes: [UInt8]
            do throws(SystemCallError) { bytes = try fs.readFile(logPath) } catch { throw io("cannot read the log", logPath, error) }
            let scan = bytes.withUnsafeBytes { LogScanner($0, previousSequence: lastSequence) }
            if let header = scan.header, header.fileNumber != n {
                throw StoreError(.corruption, "log \(LogFormat.fileName(n)) says it is file \(header.fileNumber)", path: logPath, offset: 16)
            }
            // Sequence numbers run on without a gap from the manifest's last
            // one through every live log (each batch takes the next; a log is
            // started only after the one before it is complete and fsynced).
            // A gap means batches were lost before this log: the log before
            // it was cut short at a frame boundary, or emptied, which its own
            // scan cannot see.
            if let first = scan.frames.first, first.sequence != lastSequence + 1 {
                let (gapPath, gapOffset) = previousLog ?? (logPath, LogFormat.fileHeaderSize)
                let gapName = String(gapPath.split(separator: "/").last ?? "")
                let reason = "batches \(lastSequence + 1)–\(first.sequence - 1) are missing: \(gapName) ends at offset \(gapOffset) but \(LogFormat.fileName(n)) starts at sequence \(first.sequence)"
                guard options.recovery == .salvage else {
                    throw StoreError(.corruption, "\(reason) (a log was truncated or lost). Open with recovery: .salvage to keep what precedes the gap", path: gapPath, offset: UInt64(gapOffset))
                }
                report.salvagedCorruption = "\(gapName) @ \(gapOffset): \(reason)"
                repairs.append((logPath, .remove(what: "a log after a salvaged corruption")))
                stopReplay = true
                continue
            }
            var cut = false
            switch scan.end {
            case .clean:
                cut = scan.validLength < bytes.count && scan.header != nil
            case .tornTail:
                if isLast {
                    report.tornBytesDiscarded += UInt64(bytes.count - scan.validLength)
                } else {
                    // Logs are fsynced before the next one is started: only
                    // the last can hold an interrupted write.
                    guard options.recovery == .salvage else {
                        throw StoreError(.corruption, "log \(LogFormat.fileName(n)) ends in a torn write but later logs follow it. Open with recovery: .salvage to keep what precedes it", path: logPath, offset: UInt64(scan.validLength))
                    }
                    report.salvagedCorruption = "\(LogFormat.fileName(n)) @ \(scan.validLength): a torn write, but later logs follow it"
                    report.tornBytesDiscarded += UInt64(bytes.count - scan.validLength)
                    stopReplay = true
                }
                cut = true
            case .corruption(let reason, let next):
                guard options.recovery == .salvage else {
                    throw StoreError(.corruption, "log \(LogFormat.fileName(n)) is corrupt at offset \(scan.validLength) (\(reason)); valid batches follow at offset \(next). Open with recovery: .salvage to keep what precedes it", path: logPath, offset: UInt64(scan.validLength))
                }
                report.salvagedCorruption = "\(LogFormat.fileName(n)) @ \(scan.validLength): \(reason)"
                report.tornBytesDiscarded += UInt64(bytes.count - scan.validLength)
                cut = true
                stopReplay = true
            }
            previousLog = (logPath, scan.validLength)
            lastLogRead = (n, scan.header == nil ? 0 : scan.validLength, scan.header?.salt)
            if cut {
                repairs.append(scan.header == nil ? (logPath, .remove(what: "a log with a torn header")) : (logPath, .cut(to: scan.validLength)))
            }
            if scan.frames.isEmpty && !options.readOnly && !stopReplay {
                // A log with no batch (an open with no write before the
                // close) holds nothing to replay: delete it rather than let
                // such logs pile up across opens.
                if scan.header != nil || !cut {  // (one with a torn header is being removed already)
                    repairs.append((logPath, .remove(what: "an empty log")))
                    report.emptyLogsRemoved += 1
                }
                continue
            }
            for frame in scan.frames { needed += frame.payload.count + 9 * frame.operationCount }
            // Frames rise but need not be consecutive within a log: a last
            // one past the limit is damage (the store never numbers one there).
            if let last = scan.frames.last, last.sequence > Self.lastSequenceNumber {
                throw StoreError(.corruption, "sequence number \(last.sequence) is past the last a store uses", path: logPath, offset: UInt64(last.offset))
            }
            lastSequence = scan.frames.last?.sequence ?? lastSequence
            report.logsReplayed += 1
            loaded.append((bytes, scan.frames))
        }
        if !options.readOnly {
            for (path, repair) in repairs {
                switch repair {
                case .cut(let length):
                    do throws(SystemCallError) {
                        let fd = try fs.open(path, .readWrite)
                        defer { try? fs.close(fd) }
                        try fs.truncate(fd, to: UInt64(length))
                        try fs.sync(fd)
                    } catch { throw io("cannot cut the torn tail off the log", path, error) }
                case .remove(let what):
                    do throws(SystemCallError) { try fs.remove(path) } catch where error.errno == ENOENT {} catch {
                        throw io("cannot remove \(what)", path, error)
                    }
                }
            }
        }
        guard let memtable = Memtable(number: memtableNumber, capacity: memtableCapacity(logSizeLimit: options.logSizeLimit, atLeast: needed)) else {
            throw StoreError(.ioFailure, "cannot reserve memory for the memtable", path: directory)
        }
        files[memtableNumber] = .memtable(memtable)
        var placed: [PlacedOperation] = []
        for (bytes, frames) in loaded {
            bytes.withUnsafeBytes { raw in
                for frame in frames {
                    placed.removeAll(keepingCapacity: true)
                    memtable.append(batch: UnsafeRawBufferPointer(rebasing: raw[frame.payload]), sequence: frame.sequence, into: &placed)
                    placed.withUnsafeBufferPointer { apply($0, sequence: frame.sequence, file: memtableNumber, to: &index, files: files) }
                    report.batchesReplayed += 1
                }
            }
        }
        loaded.removeAll()

        // 5. Orphans and a fresh log.
        var log: LogWriter? = nil
        if !options.readOnly {
            var removed: [String] = []
            for n in segmentNumbers where !live.contains(n) { removed.append(SegmentFormat.fileName(n)) }
            for n in logNumbers where n < manifest.logNumber { removed.append(LogFormat.fileName(n)) }
            if names.contains(Manifest.temporaryName) { removed.append(Manifest.temporaryName) }
            if names.contains(IndexCheckpoint.temporaryName) { removed.append(IndexCheckpoint.temporaryName) }
            for name in removed {
                do throws(SystemCallError) { try fs.remove(directory + "/" + name) } catch where error.errno == ENOENT {} catch {
                    throw io("cannot remove an orphan file", directory + "/" + name, error)
                }
            }
            report.orphanFilesRemoved = removed
            do throws(SystemCallError) {
                // The memtable's number is also its log's: index entries name it.
                log = try LogWriter(fileSystem: fs, directory: directory, fileNumber: memtableNumber, durable: options.syncMode != .none, sizeLimit: options.logSizeLimit)
                if !removed.isEmpty { try fs.syncDirectory(directory) }
            } catch { throw io("cannot create a new log", directory + "/" + LogFormat.fileName(memtableNumber), error) }
        }

        let followPoint = options.readOnly && !stopReplay
            ? FollowPoint(manifestBytes: manifestBytes, manifestIdentity: manifestIdentity, manifest: manifest, log: lastLogRead, memtable: memtable) : nil
        return Opened(lockFile: lockFile, report: report, index: index, files: files, lastSequence: lastSequence,
                      nextFileNumber: nextFileNumber, manifest: manifest, log: log, memtable: options.readOnly && memtable.used == 0 ? nil : memtable,
                      followPoint: followPoint)
    }

    /// Applies one batch's operations, placed in memtable `file` with
    /// `sequence`, to `index`; calls `replaced` with each entry a put or a
    /// delete replaced. Each run of puts whose keys ascend goes in as one
    /// run (``KeyIndex/insertAscending(count:key:entry:replaced:)``): the
    /// records of an import, or of a save of objects without indexes, are
    /// one such run.
    ///
    /// `yielding`: whether the loop passes ``YieldPoints`` — never where the
    /// caller holds the `state` lock, which readers (the main queue's among
    /// them) would wait on while the thread is off its core.
    @inline(__always)
    static func apply(
        _ placed: UnsafeBufferPointer<PlacedOperation>, sequence: UInt64, file: UInt32,
        to index: inout KeyIndex, yielding: Bool = false, replaced: (IndexEntry) -> Void
    ) {
        var yields = yielding ? YieldPoints() : YieldPoints.none
        var i = 0
        while i < placed.count {
            var j = i + 1
            if placed[i].kind == .put {
                while j < placed.count, placed[j].kind == .put, KeyIndex.compare(placed[j - 1].key, placed[j].key) < 0 { j += 1 }
            }
            // Shorter runs (a save's record and its index entries, each in
            // a leaf of its own) cost more as a run than key by key.
            if j - i >= 4 {
                let run = UnsafeBufferPointer(rebasing: placed[i..<j])
                index.insertAscending(count: run.count, key: { yields.pass(); return run[$0].key },
                                      entry: { IndexEntry(sequence: sequence, file: file, block: run[$0].offset) }, replaced: replaced)
            } else {
                for op in placed[i..<j] {
                    yields.pass()
                    let entry = IndexEntry(sequence: sequence, file: file, block: op.offset)
                    if let previous = op.kind == .put ? index.insert(op.key, entry) : index.remove(op.key) { replaced(previous) }
                }
            }
            i = j
        }
    }

    /// ``apply(_:sequence:file:to:replaced:)``, counting each replaced
    /// record of a segment as dead in it.
    static func apply(
        _ placed: UnsafeBufferPointer<PlacedOperation>, sequence: UInt64, file: UInt32,
        to index: inout KeyIndex, files: [UInt32: StrataStore.StoredFile]
    ) {
        apply(placed, sequence: sequence, file: file, to: &index) { previous in
            if case .segment(let segment)? = files[previous.file] { segment.deadRecords += 1 }
        }
    }

    /// Opens segments and reads their footers, one per core at a time; the
    /// first error (in manifest order) wins.
    static func openSegments(_ segments: [SegmentInfo], fileSystem: any FileSystem, directory: String) throws(StoreError) -> [SegmentReader.Opened] {
        final class Results: @unchecked Sendable {
            // Each slot is written by exactly one iteration of concurrentPerform,
            // and read only after it returns.
            var slots: [Result<SegmentReader.Opened, StoreError>?]
            init(_ count: Int) { slots = Array(repeating: nil, count: count) }
        }
        let results = Results(segments.count)
        results.slots.withUnsafeMutableBufferPointer { slots in
            nonisolated(unsafe) let slots = slots
            DispatchQueue.concurrentPerform(iterations: segments.count) { i in
                do throws(StoreError) {
                    slots[i] = .success(try SegmentReader.open(fileSystem: fileSystem, directory: directory, fileNumber: segments[i].fileNumber,
                                                               expectedSize: segments[i].fileSize))
                } catch {
                    slots[i] = .failure(error)
                }
            }
        }
        var opened: [SegmentReader.Opened] = []
        for slot in results.slots { opened.append(try slot!.get()) }
        return opened
    }

    /// Merges the segments' sorted key lists: per key the highest sequence
    /// wins; a winning tombstone leaves the key out; losers count as dead.
    static func mergeSegmentKeys(_ segments: [SegmentReader.Opened]) -> KeyIndex {
        // Nest `withUnsafeBytes` over every table, so the merge reads the
        // footers' bytes in place: no copies, and no array retained per key.
        func withTables<T>(_ i: Int, _ keys: [UnsafeRawBufferPointer], _ entries: [UnsafeBufferPointer<SegmentReader.KeyTable.Entry>],
                           _ body: ([UnsafeRawBufferPointer], [UnsafeBufferPointer<SegmentReader.KeyTable.Entry>]) -> T) -> T {
            guard i < segments.count else { return body(keys, entries) }
            return segments[i].keys.bytes.withUnsafeBytes { k in
                segments[i].keys.entries.withUnsafeBufferPointer { e in withTables(i + 1, keys + [k], entries + [e], body) }
            }
        }
        // Beyond a few dozen segments, copy the tables into owned buffers
        // instead: one closure frame per segment would grow the stack.
        func withTablePointers<T>(_ body: ([UnsafeRawBufferPointer], [UnsafeBufferPointer<SegmentReader.KeyTable.Entry>]) -> T) -> T {
            if segments.count <= 32 { return withTables(0, [], [], body) }
            let keyCopies = segments.map { segment in
                let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(segment.keys.bytes.count, 1), alignment: 8)
                segment.keys.bytes.withUnsafeBytes { buffer.copyMemory(from: $0) }
                return buffer
            }
            let entryCopies = segments.map { segment in
                let buffer = UnsafeMutableBufferPointer<SegmentReader.KeyTable.Entry>.allocate(capacity: max(segment.keys.entries.count, 1))
                _ = buffer.initialize(from: segment.keys.entries)
                return UnsafeBufferPointer(rebasing: buffer[0..<segment.keys.entries.count])
            }
            defer {
                keyCopies.forEach { $0.deallocate() }
                entryCopies.forEach { $0.deallocate() }
            }
            return body(keyCopies.map { UnsafeRawBufferPointer($0) }, entryCopies)
        }
        let readers = segments.map(\.reader)
        let files = readers.map(\.fileNumber)
        var deadCounts = Array(repeating: 0, count: segments.count)
        let cores = max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        let index = withTablePointers { keyBytes, entries in
            @inline(__always) func key(_ c: Int, _ e: SegmentReader.KeyTable.Entry) -> UnsafeRawBufferPointer {
                UnsafeRawBufferPointer(rebasing: keyBytes[c][Int(e.keyStart)..<Int(e.keyStart + e.keyLength)])
            }
            if segments.count == 1, !entries[0].contains(where: { $0.kind != .put }) {
                // One sorted run of puts (a compacted store): the table is the index's source.
                return KeyIndex.build(SegmentKeys(keyBytes: keyBytes[0], entries: entries[0], file: files[0]), ways: cores)
            }
            // The winning puts, in key order, as (segment, position in its
            // table); the index is then built from them in one go.
            let winners = UnsafeMutableBufferPointer<(segment: UInt32, position: UInt32)>.allocate(capacity: max(1, entries.reduce(0) { $0 + $1.count }))
            defer { winners.deallocate() }
            var won = 0
            @inline(__always) func win(_ segment: Int, _ position: Int) {
                winners.baseAddress!.advanced(by: won).initialize(to: (UInt32(segment), UInt32(position)))
                won &+= 1
            }
            if segments.count == 1 {
                // One sorted run: every record is the only version of its key.
                for (p, e) in entries[0].enumerated() where e.kind == .put { win(0, p) }
            } else {
                // A k-way merge; among equal keys the highest sequence comes
                // first. Each segment's position is kept behind a pointer the
                // heap's order reads: captured as a variable, every access
                // would go through Swift's exclusivity checks, on every key
                // of every open that merges segments.
                let positions = UnsafeMutableBufferPointer<Int>.allocate(capacity: segments.count)
                positions.initialize(repeating: 0)
                defer { positions.deallocate() }
                @inline(__always) func head(_ s: Int) -> SegmentReader.KeyTable.Entry { entries[s][positions[s]] }
                var heap = MergeHeap(segments.indices.filter { !entries[$0].isEmpty }) { a, b in
                    let ea = head(a), eb = head(b)
                    let c = KeyIndex.compare(key(a, ea), key(b, eb))
                    return c < 0 || (c == 0 && ea.sequence > eb.sequence)
                }
                // The last key taken, from whichever segment.
                var previous = UnsafeRawBufferPointer(start: nil, count: 0)
                while let top = heap.top {
                    // The top segment's keys below the runner-up's head come
                    // next, in its own order: a run of them takes no sift (a
                    // store whose segments hold disjoint ranges, as flushes of
                    // ascending keys and compaction outputs do, merges in one
                    // comparison a key). Only a run's first key can equal
                    // the key taken before it: a segment's keys ascend.
                    let bound = heap.runnerUp.map { key($0, head($0)) }
                    let count = entries[top].count
                    var k = key(top, head(top))
                    if previous.baseAddress != nil, KeyIndex.compare(previous, k) == 0 {
                        deadCounts[top] += 1  // an older version of the key just taken
                    } else if head(top).kind == .put {
                        win(top, positions[top])
                    }
                    positions[top] += 1
                    while positions[top] < count {
                        let e = head(top)
                        let next = key(top, e)
                        if let bound, KeyIndex.compare(next, bound) >= 0 { break }
                        if e.kind == .put { win(top, positions[top]) }
                        positions[top] += 1
                        k = next
                    }
                    previous = k
                    if positions[top] == count { heap.removeTop() } else { heap.topChanged() }
                }
            }
            return KeyIndex.build(MergedKeys(winners: UnsafeBufferPointer(rebasing: winners[0..<won]), keyBytes: keyBytes, entries: entries, files: files), ways: cores)
        }
        for (reader, dead) in zip(readers, deadCounts) { reader.deadRecords += dead }
        return index
    }

    /// The winners of the segments' merge, in key order, as the index
    /// build reads them.
    struct MergedKeys: SortedIndexSource {
        let winners: UnsafeBufferPointer<(segment: UInt32, position: UInt32)>
        let keyBytes: [UnsafeRawBufferPointer]
        let entries: [UnsafeBufferPointer<SegmentReader.KeyTable.Entry>]
        let files: [UInt32]

        var count: Int { winners.count }

        @inline(__always)
        func key(_ i: Int) -> UnsafeRawBufferPointer {
            let w = winners[i]
            let e = entries[Int(w.segment)][Int(w.position)]
            return UnsafeRawBufferPointer(start: keyBytes[Int(w.segment)].baseAddress! + Int(e.keyStart), count: Int(e.keyLength))
        }

        @inline(__always)
        func entry(_ i: Int) -> IndexEntry {
            let w = winners[i]
            let e = entries[Int(w.segment)][Int(w.position)]
            return IndexEntry(sequence: e.sequence, file: files[Int(w.segment)], block: e.location.packed)
        }
    }

    /// One segment's key table, every record a put, as the index build reads it.
    struct SegmentKeys: SortedIndexSource {
        let keyBytes: UnsafeRawBufferPointer
        let entries: UnsafeBufferPointer<SegmentReader.KeyTable.Entry>
        let file: UInt32

        var count: Int { entries.count }

        @inline(__always)
        func key(_ i: Int) -> UnsafeRawBufferPointer {
            let e = entries[i]
            return UnsafeRawBufferPointer(start: keyBytes.baseAddress! + Int(e.keyStart), count: Int(e.keyLength))
        }

        @inline(__always)
        func entry(_ i: Int) -> IndexEntry { IndexEntry(sequence: entries[i].sequence, file: file, block: entries[i].location.packed) }
    }

    /// The highest number a store gives a file. Two below the 32-bit limit,
    /// so that the number after it, and the memtable's number of a read-only
    /// open after that, still fit.
    static let lastFileNumber = UInt32.max - 2

    /// The highest sequence number a store reaches: one per batch, so 2^62
    /// is out of reach of any real store, and leaves as many again above
    /// it for the numbers a session takes, so that arithmetic on them never
    /// overflows. A higher one read from disk is damage.
    static let lastSequenceNumber: UInt64 = 1 << 62

    /// How many file numbers must be left to open a store for writing: far
    /// more than the flushes and compactions of one session.
    static let fileNumbersReservedForWriting: UInt32 = 1 << 16

    static func parseNumber(_ name: String, suffix: String) -> UInt32? {
        guard name.hasSuffix(suffix) else { return nil }
        let digits = name.dropLast(suffix.count)
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return UInt32(digits)
    }
}
