import Dispatch
import Synchronization

/// An embeddable, append-only, log-structured key-value store.
///
/// Writes go to a write-ahead log as atomic batches and into an in-memory
/// index; when the log passes ``StoreOptions/logSizeLimit`` its live records
/// are written out as an immutable, LZ4-compressed segment and the log is
/// retired. Compaction merges segments in the background. Opening a store
/// reads segment footers and replays the log.
///
/// ```swift
/// let store = try StrataStore(directory: "/tmp/example")
/// var batch = WriteBatch()
/// batch.put(Array("user/1".utf8), Array("Ada".utf8))
/// batch.put(Array("user/2".utf8), Array("Grace".utf8))
/// try store.write(batch)                       // durable when it returns
/// let name = try store.get(Array("user/1".utf8))
/// for (key, value) in try store.scan(prefix: Array("user/".utf8)) { … }
/// try store.close()
/// ```
///
/// ## Concurrency rules
/// 1. Every method may be called from any thread at any time.
/// 2. Writes are serialized in one order, the order of their sequence numbers.
///    Concurrent writers are committed together (group commit).
/// 3. A reader sees a batch entirely or not at all. ``readView()`` pins a
///    sequence number: the view never changes, and holding it never blocks a writer.
/// 4. No read waits on disk I/O done by a writer, a flush or a compaction;
///    the locks it takes are held for in-memory work only.
/// 5. After a failed write, fsync or flush, the store refuses writes with
///    ``StoreError/Code/storeFailed`` until it is reopened; reads go on.
public final class StrataStore: @unchecked Sendable {
    // Sendable because every mutable property below is guarded as its comment
    // says, by `state`, `writers` or `manifestLock`, or is owned by the write
    // leader (exactly one thread at a time; see StrataStore+Write.swift).

    /// The store's directory.
    public let directory: String
    /// The options the store was opened with.
    public let options: StoreOptions
    /// What opening the store found and repaired.
    public let recoveryReport: RecoveryReport
    /// Keys may be at most this long (16 KiB).
    public static let maximumKeySize = 16 << 10

    let fileSystem: any FileSystem
    let cache: BlockCache
    /// The held `LOCK` file; nil when read-only (no lock is taken).
    let lockFile: FileDescriptor?

    // MARK: State shared with readers — guarded by `state`.
    //
    // What every read touches runs without Swift's runtime exclusivity
    // checks (`@exclusivity(unchecked)`): the lock already orders every
    // access, and each check would add to every warm get.
    // ThreadSanitizer's runs check the locking instead.
    let state = ReadWriteLock()
    /// The newest version of every key. Guarded by `state`.
    @exclusivity(unchecked) var index: KeyIndex
    /// The memtables and segments index entries point into. Guarded by `state`.
    @exclusivity(unchecked) var files: [UInt32: StoredFile]
    /// The sequence number of the last batch readers can see. Guarded by `state`.
    @exclusivity(unchecked) var visibleSequence: UInt64 {
        didSet { publishedSequence.store(visibleSequence, ordering: .releasing) }
    }
    /// `visibleSequence`, stored under `state` as it changes and read
    /// without it (``sequence``): a read view taken after it is loaded
    /// sees at least that batch, as the lock orders the two.
    let publishedSequence = Atomic<UInt64>(0)
    /// The next file number to hand out. Guarded by `state`.
    var nextFileNumber: UInt32
    /// Counters. Guarded by `state`.
    var counters = Counters()
    /// The manifest's segments, copied here after each switch so that
    /// `statistics` never waits behind a manifest write. Guarded by `state`.
    var liveSegments: [SegmentInfo]
    /// Set by `close()`. Guarded by `state`.
    @exclusivity(unchecked) var isClosed = false
    /// The segments the index checkpoint on disk was made over, when it is
    /// known to be current (loaded at open, or saved). Guarded by `state`.
    var checkpointedSegments: [SegmentInfo]?
    /// Whether the directory may hold an index checkpoint. Guarded by `state`.
    var checkpointFound: Bool
    /// What compaction does to each live record's value it copies (see
    /// ``setCompactionRewriter(_:)``). Guarded by `state`.
    var compactionRewriter: CompactionRewriter?

    // MARK: The writers' queue — guarded by `writers`.
    let writers = ConditionLock()
    /// Writers waiting to commit, in arrival order; the first is the leader. Guarded by `writers`.
    var queue: [PendingWrite] = []
    /// Why the store refuses writes, once it does. Guarded by `writers`.
    var failure: StoreError?
    /// True while a frozen memtable is being flushed. Guarded by `writers`.
    var flushInProgress = false
    /// True once `close()` started. Guarded by `writers`.
    var closing = false
    /// The last sequence number applied to the memtable and the index.
    /// Guarded by `writers`.
    var appliedThrough: UInt64
    /// Groups written to the log whose leaders have passed the lead on and
    /// not yet finished: syncing them, waiting for their turn, applying
    /// them. Guarded by `writers`.
    var groupsInFlight = 0
    /// The first sequence number of the first group whose sync failed: no
    /// group from it on is applied or acknowledged. Guarded by `writers`.
    var failedFrom: UInt64?
    /// The active log's offset past the last group written to it, and past
    /// the frames the last finished sync covered. Guarded by `writers`.
    var logWrittenEnd: UInt64
    var logSyncedEnd: UInt64 = 0
    /// Whether a sync of the active log runs now (one at a time), and the
    /// error of the one that failed. Guarded by `writers`.
    var syncing = false
    var syncFailure: StoreError?
    /// Groups waiting for the sync under way to end. Guarded by `writers`.
    var syncWaiters = 0

    // MARK: Owned by the write leader (one thread at a time; handed over under `writers`).
    /// The log being appended to (nil when read-only).
    var log: LogWriter?
    /// The memtable receiving writes (nil when read-only).
    var memtable: Memtable?
    /// The sequence number the next batch gets.
    var nextSequence: UInt64
    /// The memtable bytes the groups logged into the active memtable take,
    /// applied or not (its `used` counts only the applied ones, and is the
    /// applying leader's to change).
    var memtableReserved: Int
    /// A scratch buffer for frames.
    var frameBuffer: [UInt8] = []
    /// A scratch list of one batch's operations as appended to the memtable.
    var placedScratch: [PlacedOperation] = []

    // MARK: Changing the index.
    /// Held by whoever changes ``index`` outside the `state` lock — the
    /// write leader applying a large batch to a copy (``apply(_:)``) — and
    /// by flushes and compactions around each change they make under it:
    /// so no change lands in the index between the copy and the swap that
    /// replaces it. Taken before `state`, after `installLock`.
    let indexMutation = Lock()
    /// Called by the write leader after it applied a large batch to its copy
    /// of the index and before it swaps the copy in (tests pause it there).
    /// Guarded by `indexMutation`.
    package var largeBatchAppliedHook: (@Sendable () -> Void)?

    // MARK: Installing new segments.
    /// Held by a flush from its manifest switch until its index entries are
    /// repointed, and by a compaction while it takes its snapshot and fixes its
    /// inputs: so compaction never sees a segment the manifest names but the
    /// index does not point into yet (whose records would look dead to it).
    let installLock = Lock()

    // MARK: The manifest — guarded by `manifestLock` (flush and compaction edit it).
    let manifestLock = Lock()
    /// The manifest as last written. Guarded by `manifestLock`.
    var manifest: Manifest
    /// The manifest, and the log and its length, as the open left them:
    /// what ``closeUntouched()`` compares with to know nothing was written.
    let openedManifest: Manifest
    let openedLog: (number: UInt32, end: UInt64)?
    /// Set while a compaction runs or is queued. Guarded by `manifestLock`.
    var compactionScheduled = false
    /// Cleared when `close()` begins: no compaction is queued after it (one
    /// would outlive the close, and hold a store that ends). Guarded by
    /// `manifestLock`.
    var compactsInBackground = true
    /// The last error a background compaction hit (compaction failures before
    /// its manifest switch leave the store intact). Guarded by `manifestLock`.
    var lastCompactionError: StoreError?

    // MARK: Following a writer — guarded by `followLock` (a read-only store's).
    /// Held by ``catchUp()`` throughout, one catch-up at a time, and by
    /// `close()`, which so waits for a catch-up under way (one that went on
    /// after it would lay a new index into a closed store). Taken before
    /// `manifestLock`, `state` and `writers`.
    let followLock = Lock()
    /// Where the read-only open or the last catch-up left off; nil for a
    /// store open for writing. Guarded by `followLock`.
    var followPoint: Recovery.FollowPoint?
    /// Called by ``catchUp()`` once it found the store open (tests close
    /// the store there). Guarded by `followLock`.
    package var catchUpCheckedOpenHook: (@Sendable () -> Void)?

    let flushQueue = DispatchQueue(label: "strata.store.flush")
    let compactionQueue = DispatchQueue(label: "strata.store.compaction")
    let backgroundWork = DispatchGroup()

    /// What an index entry's file number refers to.
    enum StoredFile: @unchecked Sendable {
        // Sendable because both payloads are (Memtable and SegmentReader document their guards).
        case memtable(Memtable)
        case segment(SegmentReader)
    }

    struct Counters {
        var batches = 0
        var operations = 0
        var logBytes: UInt64 = 0
        var logSyncs = 0
        var flushes = 0
        var compactions = 0
        var flushedBytes: UInt64 = 0
        var compactedBytesWritten: UInt64 = 0
        var compactedBytesRemoved: UInt64 = 0
        /// A read-only store's catch-ups (``StrataStore/catchUp()``).
        var catchUps = 0
        var catchUpsReopened = 0
        var batchesCaughtUp = 0
        /// Bytes in the active memtable, as of the last batch.
        var memtableBytes = 0
    }

    /// Opens the store in `directory`, creating it if `options.createIfMissing`.
    ///
    /// Throws ``StoreError`` with `.notFound`, `.notAStore`, `.locked`,
    /// `.corruption` (with the file and offset), `.unsupportedVersion` or
    /// `.ioFailure`. A torn last write is cut off and reported in
    /// ``recoveryReport``; it was never acknowledged.
    public convenience init(directory: String, options: StoreOptions = StoreOptions()) throws {
        DispatchEventLoop.prepare()
        let opened = try Recovery.open(directory: directory, options: options)
        self.init(opened: opened, directory: directory, options: options)
        if !options.readOnly, let memtable, memtable.used >= options.logSizeLimit {
            // The replayed log is already past the limit: flush it now, in the background.
            scheduleRotationAfterOpen()
        }
    }

    init(opened: Recovery.Opened, directory: String, options: StoreOptions) {
        self.directory = directory
        self.options = options
        self.fileSystem = options.fileSystem
        self.cache = BlockCache(capacity: options.blockCacheCapacity, frameSize: options.blockSize)
        self.lockFile = opened.lockFile
        self.recoveryReport = opened.report
        self.index = opened.index
        self.files = opened.files
        self.visibleSequence = opened.lastSequence
        publishedSequence.store(opened.lastSequence, ordering: .releasing)
        self.nextSequence = opened.lastSequence + 1
        self.appliedThrough = opened.lastSequence
        self.memtableReserved = opened.memtable?.used ?? 0
        self.logWrittenEnd = opened.log?.offset ?? 0
        self.nextFileNumber = opened.nextFileNumber
        self.manifest = opened.manifest
        self.openedManifest = opened.manifest
        self.openedLog = opened.log.map { ($0.fileNumber, $0.offset) }
        self.liveSegments = opened.manifest.segments
        self.log = opened.log
        self.memtable = opened.memtable
        self.counters.memtableBytes = opened.memtable?.used ?? 0
        self.checkpointedSegments = opened.report.indexCheckpoint == .loaded ? opened.manifest.segments : nil
        self.checkpointFound = opened.report.indexCheckpoint != .absent
        self.followPoint = opened.followPoint
    }

    deinit {
        if !isClosed { try? close(flushingLog: false) }
    }

    /// Hands out a new file number; none past ``Recovery/lastFileNumber``
    /// (only a store opened near it, which takes a damaged MANIFEST, gets
    /// there: a real one would need billions of flushes).
    func allocateFileNumber() throws(StoreError) -> UInt32 {
        let number: UInt32? = state.withLock {
            guard nextFileNumber <= Recovery.lastFileNumber else { return nil }
            defer { nextFileNumber += 1 }
            return nextFileNumber
        }
        guard let number else {
            throw StoreError(.corruption, "the store has used every file number (it was opened near the 32-bit limit: MANIFEST or a file name was damaged)",
                             path: directory)
        }
        return number
    }

    func path(_ name: String) -> String { directory + "/" + name }

    /// Throws `.closed` after `close()`.
    func checkOpen() throws(StoreError) {
        if state.withReadLock({ isClosed }) { throw StoreError(.closed, "the store is closed", path: directory) }
    }
}

/// What opening a store found, and what it did about it.
public struct RecoveryReport: Sendable, Equatable {
    /// Batches replayed from write-ahead logs.
    public var batchesReplayed = 0
    /// Logs replayed.
    public var logsReplayed = 0
    /// Bytes of an interrupted last write cut from the end of the log (never acknowledged).
    public var tornBytesDiscarded: UInt64 = 0
    /// Segments whose footer failed its checks and that were scanned instead.
    public var segmentsRebuiltByScan: [String] = []
    /// Files left by an interrupted flush or compaction, deleted.
    public var orphanFilesRemoved: [String] = []
    /// With ``StoreOptions/RecoveryMode/salvage``: the corruption that ended the log early.
    public var salvagedCorruption: String?
    /// Records found in segments.
    public var segmentRecords = 0
    /// Logs that held no batch (opened and closed without a write), deleted.
    public var emptyLogsRemoved = 0
    /// Whether the index was loaded from the index checkpoint the last
    /// close saved, or built from the segments' footers, and why.
    public var indexCheckpoint = IndexCheckpointUse.absent
    /// A read-only open: how many times it started again because a writer
    /// flushed, compacted or rotated its log while it read (see
    /// ``StoreOptions/readOnly``).
    public var restartsBesideWriter = 0
    /// A report with every count zero: nothing replayed or repaired.
    public init() {}
}

/// What opening a store did with the index checkpoint: the in-memory index
/// over the store's segments, saved by a close (see
/// ``StoreOptions/indexCheckpointMinimumKeys``). It is a cache: whatever
/// is wrong with it, the index is built from the segments instead, and
/// nothing is lost.
public enum IndexCheckpointUse: Sendable, Equatable {
    /// There was none: the index was built from the segments' footers.
    case absent
    /// The index was loaded from it.
    case loaded
    /// There was one, and the index was built from the footers instead, for
    /// this reason (usually that a flush or compaction changed the segments
    /// since it was saved).
    case notUsed(String)
}
