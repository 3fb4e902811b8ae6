import StrataStore

/// The fuzz targets: one per decoder that reads bytes from disk (or from a
/// URI). Each takes arbitrary bytes and must never trap: the decoder either
/// returns a value or reports malformed input (nil, a typed error, a
/// corruption report). Where a format round-trips, the target also checks
/// that what was decoded encodes to something that decodes to the same thing;
/// a failed check calls `fatalError`, which libFuzzer reports as a crash.
///
/// Several targets start with a *mode byte*: when its low bit is set, the
/// harness first recomputes the checksums the format carries (``Repair``), so
/// that mutations reach the structure checks behind them instead of dying at
/// the CRC — bytes with a wrong CRC are the easy case every decoder rejects first.
enum FuzzTarget: String, CaseIterable, Sendable {
    case wal, batch, block, segment, manifest, lz4, varint, store
    case record, schema, uri, history

    /// What the target feeds its input to (for `strata-fuzz list`).
    var summary: String {
        switch self {
        case .wal: "mode byte · a write-ahead log file → LogScanner (frames, batches, header)"
        case .batch: "a WAL frame payload → BatchDecoder"
        case .block: "a raw segment block → DecodedBlock; the same bytes as a stored block → SegmentFormat.decodeBlock"
        case .segment: "mode byte · a segment file → SegmentReader.open (trailer, footer or block scan) and every block"
        case .manifest: "mode byte · a MANIFEST → Manifest(decoding:)"
        case .lz4: "raw length u16 · LZ4 block → LZ4.decompress; the input → compress → decompress"
        case .varint: "LEB128 varints → ByteReader"
        case .store: "mode byte · (file tag · varint length · bytes)* → a directory opened by StrataStore (read-only, or read-write then reopened)"
        case .record: "selector byte · an object record, the keys record or an object key → RecordCoding"
        case .schema: "a model schema → ModelSchema.decode; each entity's object-ID URI round trip"
        case .uri: "a URI string → PersistentStoreCoordinator.managedObjectID(forURIRepresentation:)"
        case .history: "a persistent-history transaction record → HistoryCoding.decode, re-encoded"
        }
    }

    /// Runs one input through the target.
    func run(_ input: UnsafeRawBufferPointer) {
        switch self {
        case .wal: StoreTargets.wal(input)
        case .batch: StoreTargets.batch(input)
        case .block: StoreTargets.block(input)
        case .segment: StoreTargets.segment(input)
        case .manifest: StoreTargets.manifest(input)
        case .lz4: StoreTargets.lz4(input)
        case .varint: StoreTargets.varint(input)
        case .store: StoreDirectory.run(input)
        case .record: StrataTargets.record(input)
        case .schema: StrataTargets.schema(input)
        case .uri: StrataTargets.uri(input)
        case .history: StrataTargets.history(input)
        }
    }
}

/// A harness check: a decoder broke a promise it makes (a round trip that
/// does not return, a bound it let through). Traps, so libFuzzer keeps the input.
func require(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line) {
    if !condition() { fatalError("fuzz check failed: \(message())", file: file, line: line) }
}

/// Splits off the mode byte: whether to repair checksums, the other bits, the rest.
func splitMode(_ input: UnsafeRawBufferPointer) -> (repair: Bool, flags: UInt8, body: [UInt8])? {
    guard let mode = input.first else { return nil }
    return (mode & 1 == 1, mode >> 1, Array(input.dropFirst()))
}

extension UnsafeRawBufferPointer {
    /// A little-endian integer at `offset`, or nil when it does not fit.
    func integer<T: FixedWidthInteger>(at offset: Int, as _: T.Type = T.self) -> T? {
        guard offset >= 0, offset <= count - MemoryLayout<T>.size else { return nil }
        return T(littleEndian: loadUnaligned(fromByteOffset: offset, as: T.self))
    }
}

extension Array where Element == UInt8 {
    func integer<T: FixedWidthInteger>(at offset: Int, as type: T.Type = T.self) -> T? {
        withUnsafeBytes { $0.integer(at: offset, as: type) }
    }
}
