extension StoreInspector {
    /// Every segment in the directory, in file-number order: blocks, records,
    /// compressed and raw sizes, sequence and key ranges (`strata-dump segments`).
    ///
    /// Reads footers only (or, where a footer fails its checks, scans the
    /// blocks as an open would). `describe` renders keys; Strata's
    /// `ObjectStoreInspector.describeKey` shows object keys as `Entity/pN`.
    ///
    /// ```swift
    /// for segment in try inspector.segments() {
    ///     print(segment.file, segment.records, segment.compressionRatio)
    /// }
    /// ```
    public func segments(describingKeys describe: ([UInt8]) -> String = StoreInspector.describeKey) throws(StoreError) -> [SegmentReport] {
        let live = Set(manifest.segments.map(\.fileNumber))
        var reports: [SegmentReport] = []
        for number in try segmentNumbersOnDisk() {
            let opened = try SegmentReader.open(fileSystem: fileSystem, directory: directory, fileNumber: number)
            reports.append(Self.report(opened, isLive: live.contains(number), describe: describe))
        }
        return reports
    }

    static func report(_ opened: SegmentReader.Opened, isLive: Bool, describe: ([UInt8]) -> String) -> SegmentReport {
        let reader = opened.reader
        let keys = opened.keys
        func key(_ entry: SegmentReader.KeyTable.Entry?) -> StoreKey? {
            guard let entry else { return nil }
            let bytes = Array(keys.bytes[Int(entry.keyStart)..<Int(entry.keyStart + entry.keyLength)])
            return StoreKey(bytes: bytes, text: describe(bytes))
        }
        var blocks: [BlockReport] = []
        var position = 0
        for (index, handle) in reader.blocks.enumerated() {
            let start = position
            position += Int(handle.recordCount)
            let inBlock = keys.entries[min(start, keys.entries.count)..<min(position, keys.entries.count)]
            blocks.append(BlockReport(index: index, offset: handle.offset, records: Int(handle.recordCount),
                                      storedBytes: UInt64(SegmentFormat.blockHeaderSize) + UInt64(handle.storedLength),
                                      rawBytes: UInt64(handle.rawLength), firstKey: key(inBlock.first), lastKey: key(inBlock.last)))
        }
        let stored = blocks.reduce(UInt64(0)) { $0 + $1.storedBytes }
        let raw = blocks.reduce(UInt64(0)) { $0 + $1.rawBytes }
        let deletes = keys.entries.reduce(0) { $0 + ($1.kind == .delete ? 1 : 0) }
        return SegmentReport(
            file: SegmentFormat.fileName(reader.fileNumber), fileNumber: reader.fileNumber, size: reader.info.fileSize, isLive: isLive,
            footerStatus: opened.rebuiltByScan ? "damaged: keys rebuilt by scanning the blocks" : "ok",
            records: keys.entries.count, puts: keys.entries.count - deletes, deletes: deletes,
            storedBytes: stored, rawBytes: raw, compressionRatio: stored == 0 ? 1 : Double(raw) / Double(stored),
            minimumSequence: reader.info.minimumSequence, maximumSequence: reader.info.maximumSequence,
            firstKey: key(keys.entries.first), lastKey: key(keys.entries.last), blocks: blocks)
    }
}
