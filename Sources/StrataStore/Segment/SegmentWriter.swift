/// Writes one segment file from records given in ascending key order.
///
/// The file is complete and fsynced when ``finish()`` returns; until then it
/// is referenced by nothing (the manifest names it only afterwards), so a crash
/// or an error leaves at worst an orphan that the next open deletes.
package final class SegmentWriter {
    package let fileNumber: UInt32
    package let path: String
    private let directory: String
    private let fileSystem: any FileSystem
    private let fd: FileDescriptor
    private let blockSize: Int
    // A writer is used by one thread (it is not Sendable) and none of its
    // methods reaches one of these while another access to it is open, so
    // Swift's runtime exclusivity checks are off for them: `add` would pay
    // four a record, in every flush and compaction.
    @exclusivity(unchecked) private var builder = BlockBuilder()
    @exclusivity(unchecked) private var pending: [UInt8] = []
    private var fileOffset: UInt64 = 0
    @exclusivity(unchecked) private var blocks: [SegmentFormat.BlockHandle] = []
    @exclusivity(unchecked) private var footerKeys: [UInt8] = []
    @exclusivity(unchecked) private var recordCount: UInt64 = 0
    @exclusivity(unchecked) private var minimumSequence = UInt64.max
    @exclusivity(unchecked) private var maximumSequence: UInt64 = 0
    private var closed = false
    /// What ``finish()`` returned; nil before.
    private var finished: SegmentInfo?

    package init(fileSystem: any FileSystem, directory: String, fileNumber: UInt32, blockSize: Int) throws(SystemCallError) {
        self.fileSystem = fileSystem
        self.fileNumber = fileNumber
        self.directory = directory
        self.path = directory + "/" + SegmentFormat.fileName(fileNumber)
        self.blockSize = blockSize
        self.fd = try fileSystem.open(path, .createNew)
        pending = SegmentFormat.encodeHeader(fileNumber: fileNumber)
    }

    deinit {
        if !closed { try? fileSystem.close(fd) }
    }

    /// Adds a record; returns where it lands (its block and slot, packed).
    /// Cuts the current block first when the record would overflow it.
    package func add(key: UnsafeRawBufferPointer, sequence: UInt64, kind: OperationKind, value: UnsafeRawBufferPointer) throws(SystemCallError) -> RecordLocation {
        if !builder.isEmpty,
           builder.size + BlockBuilder.recordSize(key: key.count, value: value.count, sequence: sequence) > blockSize
            || builder.count == RecordLocation.maximumSlots {
            try cutBlock()
        }
        guard blocks.count < RecordLocation.maximumBlocks else {
            throw SystemCallError(call: "segment", errno: 27 /* EFBIG */, path: path)
        }
        let location = RecordLocation(block: UInt32(blocks.count), slot: UInt32(builder.count))
        builder.add(key: key, sequence: sequence, kind: kind, value: value)
        footerKeys.appendVarint(UInt64(key.count))
        footerKeys.append(contentsOf: key)
        footerKeys.appendVarint(sequence)
        footerKeys.append(kind.rawValue)
        recordCount += 1
        minimumSequence = min(minimumSequence, sequence)
        maximumSequence = max(maximumSequence, sequence)
        return location
    }

    package var isEmpty: Bool { recordCount == 0 }
    /// Bytes the file will have, roughly, if finished now.
    package var estimatedSize: UInt64 { fileOffset + UInt64(pending.count) + UInt64(builder.size / 2) }

    private func cutBlock() throws(SystemCallError) {
        let raw = builder.finish()
        let offset = fileOffset + UInt64(pending.count)
        let stored = raw.withUnsafeBytes { SegmentFormat.appendBlock(raw: $0, to: &pending) }
        blocks.append(.init(offset: offset, storedLength: stored, rawLength: UInt32(raw.count),
                            recordCount: UInt32(raw.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: raw.count - 4, as: UInt32.self) })))
        if pending.count >= 1 << 20 { try drain() }
    }

    private func drain() throws(SystemCallError) {
        try pending.withBytes { (bytes) throws(SystemCallError) in
            try fileSystem.writeAll(fd, bytes, at: fileOffset, path: path)
        }
        // Its writeback starts now, so that `finish`'s sync has little left
        // to write (a hint: that sync reports any writeback error).
        try? fileSystem.startWriteback(fd, offset: fileOffset, length: UInt64(pending.count))
        fileOffset += UInt64(pending.count)
        pending.removeAll(keepingCapacity: true)
    }

    /// Writes the last block, the footer and the trailer, fsyncs and closes the file.
    package func finish() throws(SystemCallError) -> SegmentInfo {
        if !builder.isEmpty { try cutBlock() }
        var rawFooter: [UInt8] = []
        rawFooter.appendVarint(UInt64(blocks.count))
        for b in blocks {
            rawFooter.appendVarint(b.offset)
            rawFooter.appendVarint(UInt64(b.storedLength))
            rawFooter.appendVarint(UInt64(b.rawLength))
            rawFooter.appendVarint(UInt64(b.recordCount))
        }
        rawFooter.append(contentsOf: footerKeys)
        footerKeys = []
        let footerOffset = fileOffset + UInt64(pending.count)
        pending.appendInteger(SegmentFormat.footerMagic)
        let compressedStart = pending.count
        let stored = rawFooter.withUnsafeBytes { LZ4.compress($0, appendingTo: &pending) }
        let footerCRC = pending.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[compressedStart...])) }
        let trailer = SegmentFormat.Trailer(
            footerOffset: footerOffset, footerStoredLength: UInt32(stored), footerRawLength: UInt32(rawFooter.count),
            footerCRC: footerCRC, blockCount: UInt32(blocks.count), recordCount: recordCount,
            minimumSequence: recordCount == 0 ? 0 : minimumSequence, maximumSequence: maximumSequence)
        pending.append(contentsOf: trailer.encoded())
        try drain()
        try fileSystem.sync(fd)
        closed = true
        try fileSystem.close(fd)
        let info = SegmentInfo(fileNumber: fileNumber, fileSize: fileOffset, recordCount: recordCount,
                               minimumSequence: trailer.minimumSequence, maximumSequence: maximumSequence)
        finished = info
        return info
    }

    /// The finished segment, opened for reading with the block table this
    /// writer kept rather than the one in its footer, which a flush would
    /// read back, check and decompress only to drop the key table beside it
    /// (450,000 keys at a time in the engine bench's flushes). The file was
    /// fsynced by ``finish()``; its size is checked again, as an open from
    /// the footer does. Throws as ``SegmentReader/open(fileSystem:directory:fileNumber:expectedSize:)``
    /// does when the file cannot be opened or has another size.
    ///
    /// ```swift
    /// let info = try writer.finish()
    /// // … the manifest names the segment …
    /// let reader = try writer.openFinished()
    /// ```
    package func openFinished() throws(StoreError) -> SegmentReader {
        guard let finished else { preconditionFailure("SegmentWriter.openFinished before finish()") }
        return try SegmentReader.open(fileSystem: fileSystem, directory: directory, written: finished, blocks: blocks)
    }

    /// Closes and deletes an unfinished file (best effort: it is an orphan anyway).
    package func abandon() {
        if !closed { try? fileSystem.close(fd); closed = true }
        try? fileSystem.remove(path)
    }
}

/// What the manifest records of a segment.
package struct SegmentInfo: Sendable, Equatable {
    package var fileNumber: UInt32
    package var fileSize: UInt64
    package var recordCount: UInt64
    package var minimumSequence: UInt64
    package var maximumSequence: UInt64
}
