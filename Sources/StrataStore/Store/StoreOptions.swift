/// How a ``StrataStore`` is opened and how it behaves.
///
/// ```swift
/// var options = StoreOptions()
/// options.syncMode = .grouped          // concurrent writers share fsyncs
/// options.blockCacheCapacity = 256 << 20
/// let store = try StrataStore(directory: path, options: options)
/// ```
public struct StoreOptions: Sendable {
    /// When a write is durable.
    public enum SyncMode: Sendable, Hashable {
        /// Each write is fsynced on its own before `write` returns.
        case always
        /// Group commit: writers that arrive while a write is in flight are
        /// written together with one fsync; each returns once its own batch is
        /// durable. As durable as `.always`, with far fewer fsyncs under concurrency.
        case grouped
        /// Left to the OS: a process crash loses nothing, a power loss can lose
        /// the last writes (never part of one). For tests and benchmarks.
        case none
    }

    /// What open does with a damaged write-ahead log.
    public enum RecoveryMode: Sendable, Hashable {
        /// Stop at the first bad frame: a torn tail is cut off; a bad frame
        /// followed by valid ones fails the open with a corruption error.
        case pointInTime
        /// Like `pointInTime`, but a bad frame in the middle is treated as the
        /// end of the log: everything before it is kept, everything after it
        /// is discarded (and reported in ``StrataStore/recoveryReport``).
        case salvage
    }

    /// When writes are durable. Default `.grouped`.
    public var syncMode: SyncMode = .grouped
    /// Create the directory and an empty store when there is none. Default true.
    public var createIfMissing = true
    /// Open without writing anything: no log replay side effects, no new files,
    /// writes throw `.readOnly`. No lock is taken, so a read-only open works
    /// while another process (or another open in this one) has the store open
    /// for writing, and sees the store as it was at that moment: the batches
    /// acknowledged by then, each whole. It does not follow later writes;
    /// open again to see them.
    public var readOnly = false
    /// What to do with a damaged log. Default `.pointInTime`.
    public var recovery: RecoveryMode = .pointInTime
    /// The log size past which its records are written out as a segment.
    /// Default 64 MiB; at most 1 GiB.
    public var logSizeLimit = 64 << 20 {
        didSet { logSizeLimit = min(max(logSizeLimit, 4 << 10), 1 << 30) }
    }
    /// On close, write the log out to a segment when it holds at least this
    /// many bytes of records, so the next open reads segment footers instead
    /// of replaying the log, which is slower for the same records. Default
    /// 1 MiB; `Int.max` never flushes on close.
    public var flushOnCloseThreshold = 1 << 20
    /// On close, save the in-memory index as the index checkpoint when the
    /// store holds at least this many keys and its segments changed since
    /// the checkpoint on disk was made, so that the next open loads the
    /// index instead of building it from every segment's key table, most of
    /// what opening a large store costs. Saving one writes about 30 bytes a
    /// key. A close whose memtable still holds writes saves none (the
    /// checkpoint covers the segments alone). Default 100,000; `Int.max`
    /// never saves one.
    public var indexCheckpointMinimumKeys = 100_000
    /// Uncompressed size of a segment block, 4–64 KiB. Default 32 KiB.
    public var blockSize = 32 << 10 {
        didSet { blockSize = min(max(blockSize, 4 << 10), 64 << 10) }
    }
    /// The byte budget of the decompressed-block cache. Default 64 MiB. It is
    /// split over 16 shards, so a block is cached only if it fits in a
    /// sixteenth (keep it at least 16 × the block size).
    ///
    /// From 2 MiB up, the store reserves this much address space (not
    /// memory) for the cache's blocks and asks the kernel for huge pages
    /// there; blocks of `blockSize` are decoded into it. Resident memory
    /// still grows only as blocks are cached, 2 MiB at a time.
    public var blockCacheCapacity = 64 << 20
    /// The size at which compaction starts a new output segment. Default 256 MiB; at most 2 GiB.
    public var segmentSizeLimit = 256 << 20 {
        didSet { segmentSizeLimit = min(max(segmentSizeLimit, 64 << 10), 2 << 30) }
    }
    /// Compact a segment once this fraction of its records is dead. Default 0.5.
    public var compactionDeadRatio = 0.5
    /// Run compaction in the background when segments pass the dead ratio. Default true.
    public var automaticCompaction = true

    /// How long open waits for the store's lock before reporting `.locked`.
    /// Default 50 ms: long enough to ride out a process being spawned (until
    /// its `exec`, a child holds copies of the parent's descriptors, the lock
    /// file's included) or a previous instance finishing its close.
    public var lockTimeout: Double = 0.05

    /// The system-call layer (replaced by fault-injection tests).
    package var fileSystem: any FileSystem = POSIXFileSystem()

    /// The default options (each option's documentation says its default).
    public init() {}
}
