/// What ``StoreInspector`` reports. Every report is `Codable` with stable key
/// names (the property names), so tools can print them as JSON.

/// A key as stored, with a readable rendering.
///
/// `text` is whatever the caller's key describer made of it (``StoreInspector/describeKey(_:)``
/// by default: printable ASCII as is, other bytes as `\xNN`); `hex` is the exact bytes.
public struct StoreKey: Codable, Sendable, Hashable {
    public var text: String
    public var hex: String

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
        case lock, manifest, manifestTemporary = "manifest-temporary", log, segment
        /// The index checkpoint (`INDEX`) and one a close was writing (`INDEX.tmp`).
        case indexCheckpoint = "index-checkpoint", indexCheckpointTemporary = "index-checkpoint-temporary"
        case other
    }
    public var name: String
    public var kind: Kind
    public var size: UInt64
    /// True for the files an open would use: `MANIFEST`, `LOCK`, the logs at or
    /// above the manifest's log number, the segments it names and an index
    /// checkpoint made over exactly those segments. False for
    /// leftovers that the next writable open deletes, and for foreign files.
    public var isLive: Bool
}

/// The manifest: the store's table of contents.
public struct ManifestReport: Codable, Sendable, Hashable {
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
    /// The lowest and highest sequence numbers of any record in the live files
    /// (nil when they hold none).
    public var firstSequence: UInt64?
    public var lastSequence: UInt64?

    public init() {}
}

/// Everything `strata-dump info` says about the engine's side of a store.
public struct StoreSummary: Codable, Sendable, Hashable {
    public var directory: String
    public var files: [StoreFileReport]
    public var manifest: ManifestReport
    public var records: RecordStatistics
    /// Things an open would notice or repair (a torn tail it would cut off,
    /// leftover files it would delete).
    public var notes: [String]
}

/// One write-ahead log, frame by frame.
public struct LogReport: Codable, Sendable, Hashable {
    public var file: String
    public var fileNumber: UInt32
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
    public var status: Status
    /// What is wrong, for a damaged region.
    public var problem: String?
}

/// One segment file.
public struct SegmentReport: Codable, Sendable, Hashable {
    public var file: String
    public var fileNumber: UInt32
    public var size: UInt64
    /// Named by the manifest.
    public var isLive: Bool
    /// Whether the key list came from the footer (`ok`) or, the footer or
    /// trailer failing its checks, from a scan of every block.
    public var footerStatus: String
    public var records: Int
    public var puts: Int
    public var deletes: Int
    /// Stored (compressed) bytes of all blocks, block headers included.
    public var storedBytes: UInt64
    /// Uncompressed bytes of all blocks.
    public var rawBytes: UInt64
    /// `rawBytes / storedBytes` (1 for an empty segment).
    public var compressionRatio: Double
    public var minimumSequence: UInt64
    public var maximumSequence: UInt64
    public var firstKey: StoreKey?
    public var lastKey: StoreKey?
    public var blocks: [BlockReport]
}

/// One block of a segment.
public struct BlockReport: Codable, Sendable, Hashable {
    public var index: Int
    public var offset: UInt64
    public var records: Int
    /// Bytes on disk, the 16-byte block header included.
    public var storedBytes: UInt64
    public var rawBytes: UInt64
    public var firstKey: StoreKey?
    public var lastKey: StoreKey?
}

/// A checksum or structure check that failed.
public struct StoreProblem: Codable, Sendable, Hashable, CustomStringConvertible {
    /// The damaged file's full path.
    public var path: String
    /// Where in it, when known.
    public var offset: UInt64?
    public var message: String

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
        public var file: String
        public var kind: StoreFileReport.Kind
        /// Log frames, or segment blocks, that were checked.
        public var units: Int
        /// Records (operations) found in them.
        public var records: Int
        public var ok: Bool
    }
    public var directory: String
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
