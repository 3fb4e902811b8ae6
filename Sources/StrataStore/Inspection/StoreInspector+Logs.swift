extension StoreInspector {
    /// Every write-ahead log in the directory, in file-number order, frame by
    /// frame: `strata-dump wal`.
    ///
    /// Frames are checked exactly as recovery checks them.
    /// Unlike recovery, the inspector goes on past a damaged frame: the damaged
    /// region is one `bad` entry and the valid frames after it are listed too.
    public func logs() throws(StoreError) -> [LogReport] {
        try scannedLogs().map(\.report)
    }

    /// A log read and checked, with the valid prefix recovery would replay.
    struct ScannedLog {
        var report: LogReport
        var path: String
        var bytes: [UInt8]
        /// The frames before the first problem (what an open replays), with
        /// payload ranges in `bytes`.
        var replayable: [LogScanner.Frame]
        /// Failed checks, in file order.
        var problems: [StoreProblem]
        /// A torn tail of the last live log: not damage an open refuses, since
        /// a writable open cuts it off as a point-in-time recovery.
        var warnings: [StoreProblem]
        /// The torn tail's offset and length, when the log ends in one.
        var tornTail: (offset: Int, length: Int)?
        /// Where the valid prefix that an open replays ends.
        var validLength: Int
    }

    /// Reads and checks every log: the live ones chained by sequence from the
    /// manifest's last sequence, the stale ones (below the log number) each on its own.
    func scannedLogs() throws(StoreError) -> [ScannedLog] {
        let numbers = try logNumbers()
        var result: [ScannedLog] = []
        for n in numbers.stale {
            result.append(try scanLog(n, isLive: false, isLast: false, previousSequence: 0))
        }
        var previous = manifest.lastSequence
        var previousLog: (path: String, validLength: Int)? = nil
        for (position, n) in numbers.live.enumerated() {
            var scanned = try scanLog(n, isLive: true, isLast: position == numbers.live.count - 1, previousSequence: previous)
            // A gap in the sequence numbers: batches lost before this log,
            // which an open refuses (see Recovery), named where they went missing.
            if let first = scanned.replayable.first, first.sequence != previous + 1 {
                let (gapPath, gapOffset) = previousLog ?? (scanned.path, LogFormat.fileHeaderSize)
                let gapName = String(gapPath.split(separator: "/").last ?? "")
                scanned.problems.insert(StoreProblem(path: gapPath, offset: UInt64(gapOffset),
                                                     message: "batches \(previous + 1)–\(first.sequence - 1) are missing: \(gapName) ends at offset \(gapOffset) but \(scanned.report.file) starts at sequence \(first.sequence) (a log was truncated or lost)"), at: 0)
            }
            previous = scanned.replayable.last?.sequence ?? previous
            previousLog = (scanned.path, scanned.validLength)
            result.append(scanned)
        }
        return result
    }

    private func scanLog(_ number: UInt32, isLive: Bool, isLast: Bool, previousSequence: UInt64) throws(StoreError) -> ScannedLog {
        let name = LogFormat.fileName(number)
        let path = self.path(name)
        let bytes = try Self.read(fileSystem, path)
        var report = LogReport(file: name, fileNumber: number, size: UInt64(bytes.count), isLive: isLive, salt: nil, frames: [])
        var problems: [StoreProblem] = []
        var warnings: [StoreProblem] = []
        var torn: (Int, Int)? = nil
        func problem(_ offset: Int, _ message: String) {
            problems.append(StoreProblem(path: path, offset: UInt64(offset), message: message))
        }
        func tornTail(at offset: Int) {
            let length = bytes.count - offset
            if isLast || !isLive {
                report.frames.append(FrameReport(offset: UInt64(offset), sequence: nil, operations: nil, bytes: UInt64(length),
                                                 status: .tornTail, problem: "an interrupted write (never acknowledged); a writable open cuts it off"))
                torn = (offset, length)
                if isLive {
                    // What an open does with it: cut it off and go on, the
                    // point-in-time recovery a crash calls for. So it is a
                    // warning, not a failed check; what it cost (the batch
                    // it held) is the same either way.
                    warnings.append(StoreProblem(path: path, offset: UInt64(offset),
                                                 message: "torn tail at \(name):\(offset), an open will cut it (\(length) bytes: an interrupted, unacknowledged write, or damage to the last frame)"))
                } else {
                    problem(offset, "the log ends in a torn write of \(length) bytes")
                }
            } else {
                report.frames.append(FrameReport(offset: UInt64(offset), sequence: nil, operations: nil, bytes: UInt64(length),
                                                 status: .bad, problem: "a torn write, but later logs follow it"))
                problem(offset, "the log ends in a torn write but later logs follow it")
            }
        }

        let first = bytes.withUnsafeBytes { LogScanner($0, previousSequence: previousSequence) }
        guard let header = first.header else {
            switch first.end {
            case .clean: break  // an empty file: a log created, never written
            case .tornTail: tornTail(at: 0)
            case .corruption(let reason, _):
                report.frames.append(FrameReport(offset: 0, sequence: nil, operations: nil, bytes: UInt64(bytes.count), status: .bad, problem: reason))
                problem(0, reason)
            }
            return ScannedLog(report: report, path: path, bytes: bytes, replayable: [], problems: problems, warnings: warnings, tornTail: torn, validLength: first.validLength)
        }
        report.salt = header.salt
        if header.fileNumber != number {
            problem(16, "the log's header says it is file \(header.fileNumber)")
        }
        // Walk on past damage: rescan from each next valid frame, with the
        // file header in front so the scanner checks the same salt.
        var scan = first
        var shift = 0
        var lastSequence = previousSequence
        while true {
            for frame in scan.frames {
                report.frames.append(FrameReport(offset: UInt64(frame.offset + shift), sequence: frame.sequence, operations: frame.operationCount,
                                                 bytes: UInt64(frame.payload.upperBound - frame.offset), status: .ok, problem: nil))
                lastSequence = frame.sequence
            }
            let validLength = scan.validLength + shift
            switch scan.end {
            case .clean:
                return ScannedLog(report: report, path: path, bytes: bytes, replayable: first.frames, problems: problems, warnings: warnings, tornTail: torn, validLength: first.validLength)
            case .tornTail:
                tornTail(at: validLength)
                return ScannedLog(report: report, path: path, bytes: bytes, replayable: first.frames, problems: problems, warnings: warnings, tornTail: torn, validLength: first.validLength)
            case .corruption(let reason, let nextRelative):
                let next = nextRelative + shift
                report.frames.append(FrameReport(offset: UInt64(validLength), sequence: nil, operations: nil,
                                                 bytes: UInt64(next - validLength), status: .bad, problem: reason))
                problem(validLength, "\(reason); valid batches follow at offset \(next)")
                guard next > validLength, next < bytes.count else {
                    return ScannedLog(report: report, path: path, bytes: bytes, replayable: first.frames, problems: problems, warnings: warnings, tornTail: torn, validLength: first.validLength)
                }
                let rest = Array(bytes[0..<LogFormat.fileHeaderSize]) + bytes[next...]
                shift = next - LogFormat.fileHeaderSize
                scan = rest.withUnsafeBytes { LogScanner($0, previousSequence: lastSequence) }
            }
        }
    }
}
