extension StoreInspector {
    /// Checks every checksum in the store: the manifest (already, when the
    /// inspector was made), every log frame, and every segment's header,
    /// blocks (each decompressed and its record table checked), footer and
    /// trailer, and that each live segment has the size the manifest recorded.
    ///
    /// Never throws: a file that cannot be read is a problem like any other.
    ///
    /// `verify` agrees with what an open reports: it finds a problem exactly
    /// when a writable open (point-in-time recovery) followed by a read of
    /// every live record fails with a corruption error, or the open has to
    /// rebuild a segment's keys by a scan. One exception: a damaged block that
    /// holds no live record (only older versions and tombstones) is a problem
    /// here, though a read never touches it. A torn tail of the last live log
    /// is a *warning*, not a problem: it is what a crash leaves, and an open
    /// cuts it off as a clean point-in-time recovery (a damaged last frame
    /// looks the same, and costs the same batch). `CorruptionMatrixTests`
    /// checks this agreement on every truncation and bit flip of a small store.
    /// Leftovers an open would delete (logs below the manifest's log number,
    /// segments it does not name, `MANIFEST.tmp`) are noted, not checked; so
    /// is damage in a chunk of the index checkpoint, which reads rebuild
    /// from the segments (a checkpoint an open would not use at all is
    /// reported by `summary()`).
    ///
    /// ```swift
    /// let report = try StoreInspector(directory: path).verify()
    /// for problem in report.problems { print(problem) }   // "…/000003.wal at offset 160: frame checksum mismatch; …"
    /// ```
    public func verify() -> VerificationReport {
        var report = VerificationReport(directory: directory, checked: [], problems: [], warnings: [], notes: [])
        report.checked.append(.init(file: Manifest.fileName, kind: .manifest, units: 1, records: manifest.segments.count, ok: true))
        func fail(_ error: StoreError, _ fallbackPath: String) {
            report.problems.append(StoreProblem(path: error.path ?? fallbackPath, offset: error.offset, message: error.message))
        }

        // Logs.
        do throws(StoreError) {
            for scanned in try scannedLogs() {
                let frames = scanned.report.frames.filter { $0.status == .ok }
                if scanned.report.isLive {
                    report.problems += scanned.problems
                    report.warnings += scanned.warnings
                } else {
                    report.notes.append("\(scanned.report.file) is below the manifest's log number (already flushed); a writable open deletes it"
                                        + (scanned.problems.isEmpty ? "" : " (it is damaged: \(scanned.problems[0]))"))
                }
                report.checked.append(.init(file: scanned.report.file, kind: .log, units: frames.count,
                                            records: frames.reduce(0) { $0 + ($1.operations ?? 0) },
                                            ok: scanned.problems.isEmpty || !scanned.report.isLive))
            }
        } catch {
            fail(error, directory)
        }

        // Segments.
        let live = Set(manifest.segments.map(\.fileNumber))
        let onDisk: [UInt32]
        do throws(StoreError) { onDisk = try segmentNumbersOnDisk() } catch {
            fail(error, directory)
            onDisk = []
        }
        for info in manifest.segments where !onDisk.contains(info.fileNumber) {
            report.problems.append(StoreProblem(path: path(SegmentFormat.fileName(info.fileNumber)), offset: nil,
                                                message: "segment named in the MANIFEST is missing"))
        }
        for number in onDisk {
            let name = SegmentFormat.fileName(number)
            guard live.contains(number) else {
                report.notes.append("\(name) is not named by the MANIFEST (left by an interrupted flush or compaction); a writable open deletes it")
                continue
            }
            let before = report.problems.count
            var units = 0, records = 0
            verifySegment(number, expectedSize: manifest.segments.first { $0.fileNumber == number }?.fileSize,
                          problems: &report.problems, blocks: &units, records: &records)
            report.checked.append(.init(file: name, kind: .segment, units: units, records: records, ok: report.problems.count == before))
        }

        do throws(StoreError) {
            let names = try Self.list(fileSystem, directory)
            if names.contains(Manifest.temporaryName) {
                report.notes.append("\(Manifest.temporaryName) is left from an interrupted manifest switch; a writable open deletes it")
            }
            // The index checkpoint is a cache: an open checks its meta and
            // each chunk only when a read first reaches it, rebuilding a
            // damaged chunk from the segments. Every chunk is checked here.
            if names.contains(IndexCheckpoint.fileName),
               IndexCheckpoint.refusal(fileSystem: fileSystem, directory: directory, segments: manifest.segments) == nil,
               case .failure(let refusal)? = IndexCheckpoint.load(fileSystem: fileSystem, directory: directory, segments: manifest.segments,
                                                                  ways: 1, inPlace: false, rebuild: { nil }) {
                report.notes.append("\(IndexCheckpoint.fileName) is \(refusal.description): an open uses it and rebuilds the damaged part from the segments when a read first needs it")
            }
        } catch {
            fail(error, directory)
        }
        return report
    }

    /// Checks one live segment: size, header, trailer, footer, every block.
    private func verifySegment(_ number: UInt32, expectedSize: UInt64?, problems: inout [StoreProblem], blocks: inout Int, records: inout Int) {
        let name = SegmentFormat.fileName(number)
        let path = self.path(name)
        let bytes: [UInt8]
        do throws(StoreError) { bytes = try Self.read(fileSystem, path) } catch {
            problems.append(StoreProblem(path: path, offset: nil, message: error.message))
            return
        }
        if let expectedSize, expectedSize != UInt64(bytes.count) {
            problems.append(StoreProblem(path: path, offset: min(expectedSize, UInt64(bytes.count)),
                                         message: "the segment is \(bytes.count) bytes but the MANIFEST recorded \(expectedSize) (truncated or extended)"))
        }
        // Trailer and footer, checked here so that a damaged one is reported
        // even though an open would quietly rebuild the key list by a scan.
        bytes.withUnsafeBytes { all in
            guard all.count >= SegmentFormat.headerSize + SegmentFormat.trailerSize else {
                problems.append(StoreProblem(path: path, offset: 0, message: "the segment is too short (\(all.count) bytes) to hold a header and a trailer"))
                return
            }
            let trailerOffset = all.count - SegmentFormat.trailerSize
            guard let trailer = SegmentFormat.Trailer(decoding: UnsafeRawBufferPointer(rebasing: all[trailerOffset...])) else {
                problems.append(StoreProblem(path: path, offset: UInt64(trailerOffset), message: "segment trailer fails its magic or checksum"))
                return
            }
            let footerEnd = trailer.footerOffset + 4 + UInt64(trailer.footerStoredLength)
            guard trailer.footerOffset >= UInt64(SegmentFormat.headerSize), footerEnd == UInt64(trailerOffset) else {
                problems.append(StoreProblem(path: path, offset: UInt64(trailerOffset), message: "segment trailer points at a footer outside the file"))
                return
            }
            let footer = UnsafeRawBufferPointer(rebasing: all[Int(trailer.footerOffset)..<Int(footerEnd)])
            if footer.loadUnaligned(as: UInt32.self) != SegmentFormat.footerMagic.littleEndian {
                problems.append(StoreProblem(path: path, offset: trailer.footerOffset, message: "segment footer has a bad magic"))
            } else if CRC32C.checksum(UnsafeRawBufferPointer(rebasing: footer[4...])) != trailer.footerCRC {
                problems.append(StoreProblem(path: path, offset: trailer.footerOffset, message: "segment footer checksum mismatch"))
            }
        }
        // Header, footer structure and block table (SegmentReader's own checks), then every block.
        let opened: SegmentReader.Opened
        do throws(StoreError) {
            opened = try SegmentReader.open(fileSystem: fileSystem, directory: directory, fileNumber: number)
        } catch {
            if !problems.contains(where: { $0.path == path && $0.offset == error.offset }) {
                problems.append(StoreProblem(path: path, offset: error.offset, message: error.message))
            }
            return
        }
        if opened.rebuiltByScan, !problems.contains(where: { $0.path == path }) {
            problems.append(StoreProblem(path: path, offset: nil, message: "segment footer fails its structure checks (its key list was rebuilt by scanning the blocks)"))
        }
        for index in 0..<opened.reader.blocks.count {
            do throws(StoreError) {
                let block = try opened.reader.readBlock(UInt32(index))
                blocks += 1
                records += block.count
            } catch {
                problems.append(StoreProblem(path: path, offset: error.offset, message: error.message))
            }
        }
    }
}
