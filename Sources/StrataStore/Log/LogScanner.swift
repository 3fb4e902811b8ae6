/// Reads a write-ahead log back, with point-in-time semantics.
///
/// Frames are accepted in order until the first one that fails a check
/// (magic, bounds, salt, checksum, rising sequence, well-formed payload). What
/// happens then depends on what follows it:
/// - nothing valid: the rest is a **torn tail** — a batch whose write the crash
///   interrupted, never acknowledged as durable — and the log ends there
///   (recovery truncates the file to that offset before anything is appended);
/// - a valid frame further on: this is **corruption** in the middle of the log,
///   reported with the file and offset (RocksDB's point-in-time recovery), never
///   skipped silently, since batches after it were acknowledged.
package struct LogScanner {
    /// A batch found in the log.
    package struct Frame {
        package var sequence: UInt64
        package var operationCount: Int
        /// The payload's byte range in the scanned bytes.
        package var payload: Range<Int>
        /// The frame's starting offset in the file.
        package var offset: Int
    }

    package enum End: Equatable {
        /// The log ends cleanly at `validLength` (end of file or zero fill).
        case clean
        /// Bytes from `validLength` on are an interrupted write.
        case tornTail
        /// A bad frame at `validLength` is followed by a valid one at `nextValidOffset`.
        case corruption(reason: String, nextValidOffset: Int)
    }

    package var header: LogFormat.FileHeader?
    package var frames: [Frame] = []
    /// The length of the valid prefix of the file.
    package var validLength: Int = 0
    package var end: End = .clean

    /// Scans `bytes`, the whole content of a log file. A file too short to hold
    /// a header, or whose header is all zeros, is an empty log with a torn (or
    /// no) header: `header` is nil and `end` is `.tornTail` (or `.clean` when empty).
    /// A header that is present but wrong is reported as corruption at offset 0.
    package init(_ bytes: UnsafeRawBufferPointer, previousSequence: UInt64) {
        switch LogFormat.decodeFileHeader(bytes) {
        case .success(let h):
            header = h
        case .failure(.tooShort):
            end = bytes.isEmpty ? .clean : .tornTail
            return
        case .failure(let problem):
            if bytes.prefix(LogFormat.fileHeaderSize).allSatisfy({ $0 == 0 }) {
                // A header that never reached the disk; valid frames cannot
                // follow one, since they need its salt.
                end = .tornTail
            } else {
                end = .corruption(reason: "bad log file header (\(problem))", nextValidOffset: 0)
            }
            return
        }
        let salt = header!.salt
        var offset = LogFormat.fileHeaderSize
        var lastSequence = previousSequence
        while offset < bytes.count {
            if let frame = Self.frame(in: bytes, at: offset, salt: salt, after: lastSequence) {
                frames.append(frame)
                lastSequence = frame.sequence
                offset = frame.payload.upperBound
                continue
            }
            validLength = offset
            if let later = Self.firstValidFrame(in: bytes, after: offset, salt: salt, sequenceAbove: lastSequence) {
                end = .corruption(reason: Self.describeProblem(in: bytes, at: offset, salt: salt, after: lastSequence), nextValidOffset: later)
            } else {
                let rest = UnsafeRawBufferPointer(rebasing: bytes[offset...])
                end = rest.allSatisfy({ $0 == 0 }) ? .clean : .tornTail
            }
            return
        }
        validLength = offset
        end = .clean
    }

    /// The complete frames at the start of `bytes` — a log's bytes from a
    /// frame boundary on, its header left behind — under the log's `salt`,
    /// each after the one before (the first after `previousSequence`),
    /// up to the first that does not pass: one a writer is still
    /// appending, or damage, which a reader that follows the log cannot
    /// tell apart and leaves for the next look. `validLength` is where they end.
    package static func frames(continuing bytes: UnsafeRawBufferPointer, salt: UInt32, previousSequence: UInt64) -> (frames: [Frame], validLength: Int) {
        var frames: [Frame] = []
        var offset = 0
        var lastSequence = previousSequence
        while let frame = frame(in: bytes, at: offset, salt: salt, after: lastSequence) {
            frames.append(frame)
            lastSequence = frame.sequence
            offset = frame.payload.upperBound
        }
        return (frames, offset)
    }

    /// The frame at `offset` if it passes every check.
    private static func frame(in bytes: UnsafeRawBufferPointer, at offset: Int, salt: UInt32, after previous: UInt64) -> Frame? {
        guard bytes.count - offset >= LogFormat.frameHeaderSize else { return nil }
        var reader = ByteReader(bytes, offset: offset)
        guard reader.readInteger(UInt32.self) == LogFormat.frameMagic,
              let length = reader.readInteger(UInt32.self).map(Int.init), length <= LogFormat.maximumPayload,
              let sequence = reader.readInteger(UInt64.self),
              let count = reader.readInteger(UInt32.self).map(Int.init),
              reader.readInteger(UInt32.self) == salt,
              let crc = reader.readInteger(UInt32.self),
              bytes.count - offset - LogFormat.frameHeaderSize >= length,
              sequence > previous
        else { return nil }
        let payloadStart = offset + LogFormat.frameHeaderSize
        let payload = UnsafeRawBufferPointer(rebasing: bytes[payloadStart..<payloadStart + length])
        let head = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + 24]))
        guard CRC32C.checksum(payload, continuing: head) == crc,
              BatchDecoder.validate(payload, expectedCount: count)
        else { return nil }
        return Frame(sequence: sequence, operationCount: count, payload: payloadStart..<payloadStart + length, offset: offset)
    }

    /// The offset of the first frame after `offset` that passes every check.
    private static func firstValidFrame(in bytes: UnsafeRawBufferPointer, after offset: Int, salt: UInt32, sequenceAbove: UInt64) -> Int? {
        var candidate = offset + 1
        let magic0 = UInt8(truncatingIfNeeded: LogFormat.frameMagic)
        while candidate + LogFormat.frameHeaderSize <= bytes.count {
            if bytes[candidate] == magic0,
               frame(in: bytes, at: candidate, salt: salt, after: sequenceAbove) != nil {
                return candidate
            }
            candidate += 1
        }
        return nil
    }

    private static func describeProblem(in bytes: UnsafeRawBufferPointer, at offset: Int, salt: UInt32, after previous: UInt64) -> String {
        var reader = ByteReader(bytes, offset: offset)
        guard bytes.count - offset >= LogFormat.frameHeaderSize else { return "truncated frame header" }
        if reader.readInteger(UInt32.self) != LogFormat.frameMagic { return "bad frame magic" }
        let length = Int(reader.readInteger(UInt32.self)!)
        let sequence = reader.readInteger(UInt64.self)!
        _ = reader.readInteger(UInt32.self)
        if reader.readInteger(UInt32.self) != salt { return "frame salt does not match the file (stale frame)" }
        if length > bytes.count - offset - LogFormat.frameHeaderSize { return "frame length \(length) runs past the end of the file" }
        if sequence <= previous { return "sequence \(sequence) does not follow \(previous)" }
        return "frame checksum mismatch"
    }
}
