/// The store's table of contents: which segments are live, which logs still
/// need replaying, and the counters that survive a restart.
///
/// ```
/// MANIFEST := "STRATAMF" · version u32 · nextFileNumber u32 · logNumber u32 · reserved u32
///             · lastSequence u64 · segmentCount u32
///             · (fileNumber u32 · fileSize u64 · recordCount u64 · minSequence u64 · maxSequence u64)*
///             · crc32c(everything before) u32
/// ```
/// It is replaced whole, never edited: write `MANIFEST.tmp`, fsync it, rename
/// it over `MANIFEST`, fsync the directory. A crash at any point leaves either
/// the old manifest or the new one.
package struct Manifest: Sendable, Equatable {
    package static let fileName = "MANIFEST"
    package static let temporaryName = "MANIFEST.tmp"
    package static let magic: [UInt8] = Array("STRATAMF".utf8)
    package static let version: UInt32 = 1

    /// The next number to give a new file.
    package var nextFileNumber: UInt32 = 1
    /// Logs numbered at or above this are live and replayed on open; older ones
    /// were flushed into segments.
    package var logNumber: UInt32 = 0
    /// The highest sequence number held by any segment.
    package var lastSequence: UInt64 = 0
    /// The live segments.
    package var segments: [SegmentInfo] = []

    package init() {}

    package func encoded() -> [UInt8] {
        var bytes = Self.magic
        bytes.appendInteger(Self.version)
        bytes.appendInteger(nextFileNumber)
        bytes.appendInteger(logNumber)
        bytes.appendInteger(UInt32(0))
        bytes.appendInteger(lastSequence)
        bytes.appendInteger(UInt32(segments.count))
        for s in segments {
            bytes.appendInteger(s.fileNumber)
            bytes.appendInteger(s.fileSize)
            bytes.appendInteger(s.recordCount)
            bytes.appendInteger(s.minimumSequence)
            bytes.appendInteger(s.maximumSequence)
        }
        bytes.appendInteger(CRC32C.checksum(bytes))
        return bytes
    }

    /// The smallest manifest: header, counters and checksum, no segment.
    static let minimumSize = 8 + 4 * 4 + 8 + 4 + 4

    /// Decodes a manifest; `path` is for the error.
    ///
    /// The checks run in the order that keeps damage from passing for
    /// something else: the magic (a file that is not a manifest at all is
    /// `.notAStore`, but a magic one or two bits off, or a file cut inside
    /// it, is a damaged manifest), then the checksum over the whole file
    /// (the last four bytes in every version), and only then the version: a
    /// flipped bit in the version field is corruption, not a newer format.
    package init(decoding bytes: [UInt8], path: String) throws(StoreError) {
        let magicBitsOff = zip(bytes.prefix(8), Self.magic).reduce(0) { $0 + ($1.0 ^ $1.1).nonzeroBitCount }
        if bytes.count < 8 || magicBitsOff > 0 {
            guard magicBitsOff <= 2 else {
                throw StoreError(.notAStore, "MANIFEST is not a Strata manifest (bad magic)", path: path, offset: 0)
            }
            throw StoreError(.corruption, bytes.count < 8 ? "MANIFEST is truncated (\(bytes.count) bytes)" : "MANIFEST's magic is damaged",
                             path: path, offset: 0)
        }
        let decoded: Manifest? = bytes.withUnsafeBytes { all in
            guard all.count >= Self.minimumSize else { return nil }
            let body = UnsafeRawBufferPointer(rebasing: all[0..<(all.count - 4)])
            guard CRC32C.checksum(body) == UInt32(littleEndian: all.loadUnaligned(fromByteOffset: all.count - 4, as: UInt32.self)) else { return nil }
            var r = ByteReader(body, offset: 8)
            guard let version = r.readInteger(UInt32.self), version == Self.version else { return nil }
            var m = Manifest()
            m.nextFileNumber = r.readInteger()!
            m.logNumber = r.readInteger()!
            _ = r.readInteger(UInt32.self)
            m.lastSequence = r.readInteger()!
            let count = Int(r.readInteger(UInt32.self)!)
            guard count <= r.remaining / 36 else { return nil }
            for _ in 0..<count {
                guard let number: UInt32 = r.readInteger(), let size: UInt64 = r.readInteger(), let records: UInt64 = r.readInteger(),
                      let minimum: UInt64 = r.readInteger(), let maximum: UInt64 = r.readInteger()
                else { return nil }
                m.segments.append(SegmentInfo(fileNumber: number, fileSize: size, recordCount: records, minimumSequence: minimum, maximumSequence: maximum))
            }
            return r.isAtEnd ? m : nil
        }
        guard let decoded else {
            let checksumHolds = bytes.count >= Self.minimumSize && bytes.withUnsafeBytes { all in
                CRC32C.checksum(UnsafeRawBufferPointer(rebasing: all[0..<(all.count - 4)]))
                    == UInt32(littleEndian: all.loadUnaligned(fromByteOffset: all.count - 4, as: UInt32.self))
            }
            if checksumHolds, case let version = bytes.withUnsafeBytes({ UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: 8, as: UInt32.self)) }),
               version != Self.version {
                throw StoreError(.unsupportedVersion, "MANIFEST format version \(version) is not one this build reads (\(Self.version))", path: path, offset: 8)
            }
            throw StoreError(.corruption, "MANIFEST fails its checksum or structure checks", path: path, offset: 0)
        }
        // Every number the manifest names was handed out before it was
        // written, so each is below `nextFileNumber`. A manifest that breaks
        // this would have the store number its next log (or segment) at or
        // below one already in use: a log numbered below `logNumber` counts as
        // flushed and is deleted on the next open, with acknowledged batches in it.
        guard decoded.logNumber < decoded.nextFileNumber else {
            throw StoreError(.corruption, "MANIFEST names live logs from \(decoded.logNumber) on but its next file number is \(decoded.nextFileNumber)", path: path, offset: 12)
        }
        var numbers: Set<UInt32> = []
        for (i, segment) in decoded.segments.enumerated() where segment.fileNumber >= decoded.nextFileNumber || !numbers.insert(segment.fileNumber).inserted {
            throw StoreError(.corruption, "MANIFEST names segment \(segment.fileNumber) twice or at or above its next file number \(decoded.nextFileNumber)",
                             path: path, offset: UInt64(36 + 36 * i))
        }
        self = decoded
    }

    /// Replaces the directory's manifest with this one, atomically and durably.
    package func write(fileSystem: any FileSystem, directory: String) throws(SystemCallError) {
        let temporary = directory + "/" + Self.temporaryName
        if (try? fileSystem.status(temporary)) != nil { try fileSystem.remove(temporary) }
        let fd = try fileSystem.open(temporary, .createNew)
        do throws(SystemCallError) {
            try encoded().withBytes { (b) throws(SystemCallError) in try fileSystem.writeAll(fd, b, at: 0, path: temporary) }
            try fileSystem.sync(fd)
        } catch {
            try? fileSystem.close(fd)
            try? fileSystem.remove(temporary)
            throw error
        }
        try fileSystem.close(fd)
        try fileSystem.rename(temporary, to: directory + "/" + Self.fileName)
        try fileSystem.syncDirectory(directory)
    }
}
