/// What ``StoreInspector`` reports. Every report is `Codable` with stable key
/// names (the property names), so tools can print them as JSON.

/// A key as stored, with a readable rendering.
///
/// `text` is whatever the caller's key describer made of it (``StoreInspector/describeKey(_:)``
/// by default: printable ASCII as is, other bytes as `\xNN`); `hex` is the exact bytes.
public struct StoreKey: Codable, Sendable, Hashable {
    /// The key rendered for reading, by ``StoreInspector/describeKey(_:)`` unless the caller gave
    /// another describer.
    public var text: String
    /// The key's exact bytes, two lowercase hex digits each.
    public var hex: String

    /// The key `bytes`, rendered as `text`.
    public init(bytes: [UInt8], text: String) {
        self.text = text
        self.hex = bytes.map { byte in
            let digits = String(byte, radix: 16)
            return byte < 16 ? "0" + digits : digits
        }.joined()
    }
}

/// One file of a store directory.
public struct StoreFileReport: Codable, Sendable, Hashable {
    /// What a file in a store directory is.
    public enum Kind: String, Codable, Sendable, Hashable {
        /// The store's own files: `lock` is `LOCK`, the file an open locks; `manifest` is
        /// `MANIFEST`; `manifestTemporary` is `MANIFEST.tmp` (`manifest-temporary` in JSON), which
        /// an interrupted manifest switch leaves behind; `log` is a write-ahead log (`000007.wal`);
        /// `segment` is a segment (`000004.seg`).
        case lock, manifest, manifestTemporary = "manifest-temporary", log, segment
        /// The index checkpoint (`INDEX`) and one a close was writing (`INDEX.tmp`).
        case indexCheckpoint = "index-checkpoint", indexCheckpointTemporary = "index-checkpoint-temporary"
        /// Anything else: a file the store does not know, or a directory.
        case other
    }
    /// The file's name in the store directory.
    public var name: String
    /// What the file is.
    public var kind: Kind
    /// The file's size in bytes.
    public var size: UInt64
    /// True for the files an open would use: `MANIFEST`, `LOCK`, the logs at or
    /// above the manifest's log number, the segments it names and an index
    /// checkpoint made over exactly those segments. False for
    /// leftovers that the next writable open deletes, and for foreign files.
    public var isLive: Bool
}

/// The manifest: the store's table of contents.
public struct ManifestReport: Codable, Sendable, Hashable {
    /// The number the next log or segment file the store creates will get.
    public var nextFileNumber: UInt32
    /// Logs numbered at or above this are replayed on open.
    public var logNumber: UInt32
    /// The highest sequence number held by any segment.
    public var lastSequence: UInt64
    /// The live segments' file names.
    public var segments: [String]
}

/// Counts of the records in the live files (segments named by the manifest,
/// logs at or above its log number).
public struct RecordStatistics: Codable, Sendable, Hashable {
    /// Keys whose newest version is a put: what a read sees.
    public var liveRecords = 0
    /// Key and value bytes of the live records.
    public var liveBytes: UInt64 = 0
    /// Older versions of keys that a newer record replaced or deleted.
    public var deadRecords = 0
    /// Key and value bytes of the dead records.
    public var deadBytes: UInt64 = 0
    /// Keys whose newest version is a delete (a tombstone kept so that an
    /// older version in a segment stays hidden).
    public var tombstones = 0
    /// Key bytes of those tombstones.
    public var tombstoneBytes: UInt64 = 0
    /// The lowest sequence number of any record in the live files (nil when
    /// they hold none).
    public var firstSequence: UInt64?
    /// The highest sequence number of any record in the live files (nil when they hold none).
    public var lastSequence: UInt64?

    /// Statistics with every count zero and no sequence numbers.
    public init() {}
}

/// Everything `strata-dump info` says about the engine's side of a store.
public struct StoreSummary: Codable, Sendable, Hashable {
    /// The store's directory, as given to the inspector.
    public var directory: String
    /// Every file in the directory, sorted by name.
    public var files: [StoreFileReport]
    /// What the manifest holds.
    public var manifest: ManifestReport
    /// Counts of the records in the live files.
    public var records: RecordStatistics
    /// Things an open would notice or repair (a torn tail it would cut off,
    /// leftover files it would delete).
    public var notes: [String]
}

/// One write-ahead log, frame by frame.
public struct LogReport: Codable, Sendable, Hashable {
    /// The log's file name (`000007.wal`).
    public var file: String
    /// The log's file number, the one in its name.
    public var fileNumber: UInt32
    /// The file's size in bytes.
    public var size: UInt64
    /// At or above the manifest's log number (replayed on open).
    public var isLive: Bool
    /// The file's random salt; nil when its header is torn or damaged.
    public var salt: UInt32?
    /// Each batch in file order, followed by at most one entry per damaged
    /// region (a bad frame followed by valid ones, or a torn tail).
    public var frames: [FrameReport]
}

/// One frame (one atomic batch) of a log, or a damaged region of one.
public struct FrameReport: Codable, Sendable, Hashable {
    /// Whether the frame passed its checks.
    public enum Status: String, Codable, Sendable, Hashable {
        /// Magic, salt, length, rising sequence, CRC32C and payload all check out.
        case ok
        /// The log's last bytes are an interrupted write, never acknowledged;
        /// a writable open cuts them off.
        case tornTail = "torn tail"
        /// A damaged frame with valid frames after it (or a damaged header):
        /// corruption, which a normal open refuses.
        case bad
    }
    /// The frame's offset in the file.
    public var offset: UInt64
    /// The batch's sequence number (nil for a damaged region).
    public var sequence: UInt64?
    /// Operations in the batch (nil for a damaged region).
    public var operations: Int?
    /// Bytes on disk: frame header and payload, or the damaged region's length.
    public var bytes: UInt64
    /// Whether the frame passed its checks, or what kind of damage the region is.
    public var status: Status
    /// What is wrong, for a damaged region.
    public var problem: String?
}

/// One segment file.
public struct SegmentReport: Codable, Sendable, Hashable {
    /// The segment's file name (`000004.seg`).
    public var file: String
    /// The segment's file number, the one in its name.
    public var fileNumber: UInt32
    /// The file's size in bytes.
    public var size: UInt64
    /// Named by the manifest.
    public var isLive: Bool
    /// Whether the key list came from the footer (`ok`) or, the footer or
    /// trailer failing its checks, from a scan of every block.
    public var footerStatus: String
    /// The records the segment holds: puts and deletes.
    public var records: Int
    /// The records that put a value.
    public var puts: Int
    /// The records that delete their key (tombstones).
    public var deletes: Int
    /// Stored (compressed) bytes of all blocks, block headers included.
    public var storedBytes: UInt64
    /// Uncompressed bytes of all blocks.
    public var rawBytes: UInt64
    /// `rawBytes / storedBytes` (1 for an empty segment).
    public var compressionRatio: Double
    /// The lowest sequence number of the segment's records.
    public var minimumSequence: UInt64
    /// The highest sequence number of the segment's records.
    public var maximumSequence: UInt64
    /// The segment's smallest key (nil when it holds no record).
    public var firstKey: StoreKey?
    /// The segment's largest key (nil when it holds no record).
    public var lastKey: StoreKey?
    /// Every block, in file order.
    public var blocks: [BlockReport]
}

/// One block of a segment.
public struct BlockReport: Codable, Sendable, Hashable {
    /// The block's position in the segment, from 0.
    public var index: Int
    /// The block's byte offset in the segment file.
    public var offset: UInt64
    /// The records the block holds.
    public var records: Int
    /// Bytes on disk, the 16-byte block header included.
    public var storedBytes: UInt64
    /// Uncompressed bytes of the block's contents.
    public var rawBytes: UInt64
    /// The block's smallest key (nil when the segment's key list has none for it).
    public var firstKey: StoreKey?
    /// The block's largest key (nil when the segment's key list has none for it).
    public var lastKey: StoreKey?
}

/// A checksum or structure check that failed.
public struct StoreProblem: Codable, Sendable, Hashable, CustomStringConvertible {
    /// The damaged file's full path.
    public var path: String
    /// Where in it, when known.
    public var offset: UInt64?
    /// What is wrong.
    public var message: String

    /// A problem in the file at `path`, at byte `offset` when known (nil otherwise).
    public init(path: String, offset: UInt64?, message: String) {
        self.path = path
        self.offset = offset
        self.message = message
    }

    /// `path at offset N: message`.
    public var description: String {
        path + (offset.map { " at offset \($0)" } ?? "") + ": " + message
    }
}

/// What ``StoreInspector/verify()`` checked and found.
public struct VerificationReport: Codable, Sendable, Hashable {
    /// One file that was checked, and what it held.
    public struct CheckedFile: Codable, Sendable, Hashable {
        /// The file's name in the store directory.
        public var file: String
        /// What the file is.
        public var kind: StoreFileReport.Kind
        /// Log frames, or segment blocks, that were checked.
        public var units: Int
        /// Records (operations) found in them.
        public var records: Int
        /// Whether every check of the file passed. A damaged log below the manifest's log number
        /// (one an open no longer reads) is only noted, and counts as passing.
        public var ok: Bool
    }
    /// The store's directory, as given to the inspector.
    public var directory: String
    /// Every file checked: the manifest, then each log, then each live segment.
    public var checked: [CheckedFile]
    /// Every failed check. Empty when the store is clean.
    public var problems: [StoreProblem]
    /// What an open repairs as a point-in-time recovery without refusing the
    /// store: a torn tail of the last live log, which it cuts off. A store
    /// with warnings and no problems is clean.
    public var warnings: [StoreProblem]
    /// What an open would tidy up without complaint (leftover files).
    public var notes: [String]

    /// True when no check failed.
    public var isClean: Bool { problems.isEmpty }
}
