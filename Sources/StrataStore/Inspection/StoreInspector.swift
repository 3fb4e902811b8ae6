/// Looks inside a store directory without opening the store and without
/// changing a byte of it.
///
/// A writable `StrataStore(directory:options:)` takes the store's lock,
/// truncates torn tails, deletes leftovers and starts a new log; a read-only
/// one builds the whole index. The inspector does none of that: it only
/// lists the directory and reads files, opened `O_RDONLY`. It never creates,
/// locks, truncates, renames or removes anything — not even `LOCK`.
///
/// Inspecting a store that another process has open works, and sees the files
/// as they are at that moment: a batch being appended may show as a torn tail,
/// and a flush or compaction that deletes a file between the listing and the
/// read gives an error that says so (run the inspection again).
///
/// ```swift
/// let inspector = try StoreInspector(directory: "/var/lib/app/store")
/// for log in try inspector.logs() {
///     for frame in log.frames { print(log.file, frame.offset, frame.sequence ?? 0, frame.status) }
/// }
/// let report = inspector.verify()
/// if !report.isClean { report.problems.forEach { print($0) } }
/// ```
///
/// Throws ``StoreError`` with `.notFound` (no directory, or no `MANIFEST` in an
/// empty one), `.notAStore` (a file, or a directory of other files),
/// `.corruption` or `.unsupportedVersion` (the manifest, with file and offset),
/// `.ioFailure` (a system call failed; the errno says why).
public final class StoreInspector: Sendable {
    /// The store's directory, as given.
    public let directory: String
    let fileSystem: any FileSystem
    /// The manifest as read when the inspector was made.
    let manifest: Manifest

    /// Reads `directory`'s manifest; throws when the directory is not a store.
    public init(directory: String) throws(StoreError) {
        self.directory = directory
        let fs = POSIXFileSystem()
        self.fileSystem = fs
        let status: FileStatus?
        do throws(SystemCallError) { status = try fs.status(directory) } catch {
            throw StoreError(.ioFailure, "cannot examine \(directory)", path: directory, errno: error.errno, cause: error)
        }
        guard let status else { throw StoreError(.notFound, "no store at \(directory): no such directory", path: directory) }
        guard status.isDirectory else { throw StoreError(.notAStore, "\(directory) is a file, not a store directory", path: directory) }
        let names = try Self.list(fs, directory)
        guard names.contains(Manifest.fileName) else {
            let foreign = names.filter { $0 != "LOCK" && $0 != Manifest.temporaryName }.sorted()
            if foreign.isEmpty { throw StoreError(.notFound, "no store at \(directory): the directory has no MANIFEST", path: directory) }
            throw StoreError(.notAStore, "\(directory) is not a Strata store: it has files (\(foreign.prefix(3).joined(separator: ", "))) but no MANIFEST", path: directory)
        }
        let path = directory + "/" + Manifest.fileName
        let bytes = try Self.read(fs, path)
        self.manifest = try Manifest(decoding: bytes, path: path)
    }

    /// The manifest as read when the inspector was made.
    public var manifestReport: ManifestReport {
        ManifestReport(nextFileNumber: manifest.nextFileNumber, logNumber: manifest.logNumber, lastSequence: manifest.lastSequence,
                       segments: manifest.segments.map { SegmentFormat.fileName($0.fileNumber) })
    }

    /// Every file in the directory, sorted by name.
    public func files() throws(StoreError) -> [StoreFileReport] { try listFiles().reports }

    /// The files, and why an open would not use the index checkpoint when
    /// there is one it would not use (its meta is read once, for both).
    private func listFiles() throws(StoreError) -> (reports: [StoreFileReport], checkpointRefusal: String?) {
        let live = Set(manifest.segments.map(\.fileNumber))
        var reports: [StoreFileReport] = []
        var checkpointRefusal: String?
        for name in try Self.list(fileSystem, directory).sorted() {
            let path = self.path(name)
            let status: FileStatus?
            do throws(SystemCallError) { status = try fileSystem.status(path) } catch {
                throw StoreError(.ioFailure, "cannot examine \(name)", path: path, errno: error.errno, cause: error)
            }
            guard let status else { continue }  // removed since the listing (the store is in use)
            let kind: StoreFileReport.Kind
            var isLive = true
            if name == "LOCK" {
                kind = .lock
            } else if name == Manifest.fileName {
                kind = .manifest
            } else if name == Manifest.temporaryName {
                kind = .manifestTemporary
                isLive = false
            } else if name == IndexCheckpoint.fileName {
                kind = .indexCheckpoint
                checkpointRefusal = IndexCheckpoint.refusal(fileSystem: fileSystem, directory: directory, segments: manifest.segments)
                isLive = checkpointRefusal == nil
            } else if name == IndexCheckpoint.temporaryName {
                kind = .indexCheckpointTemporary
                isLive = false
            } else if let n = Self.number(name, suffix: ".wal") {
                kind = .log
                isLive = n >= manifest.logNumber
            } else if let n = Self.number(name, suffix: ".seg") {
                kind = .segment
                isLive = live.contains(n)
            } else {
                kind = .other
                isLive = false
            }
            reports.append(StoreFileReport(name: name, kind: status.isDirectory ? .other : kind, size: status.size, isLive: isLive && !status.isDirectory))
        }
        return (reports, checkpointRefusal)
    }

    /// The files, the manifest, the record counts and what an open would
    /// notice: `strata-dump info`. Reads every block of every live segment
    /// (to size the records) and every live log.
    public func summary(describingKeys describe: ([UInt8]) -> String = StoreInspector.describeKey) throws(StoreError) -> StoreSummary {
        let (files, checkpointRefusal) = try listFiles()
        let contents = try self.contents()
        var notes = contents.notes
        for file in files where !file.isLive {
            switch file.kind {
            case .log, .segment, .manifestTemporary, .indexCheckpointTemporary:
                notes.append("\(file.name) is a leftover the manifest does not use; a writable open deletes it")
            case .indexCheckpoint:
                guard let why = checkpointRefusal else { break }
                notes.append("\(file.name), the index checkpoint, will not be used: \(why); an open builds the index from the segments, and a close replaces or removes it")
            case .other:
                notes.append("\(file.name) is not a store file")
            case .lock, .manifest: break
            }
        }
        return StoreSummary(directory: directory, files: files, manifest: manifestReport,
                            records: try contents.statistics(), notes: notes)
    }

    /// The merged, newest version of every key in the live files, for reads:
    /// what an open would see (a torn or damaged log tail is left out, as
    /// salvage recovery would).
    public func contents() throws(StoreError) -> StoreContents {
        try StoreContents(inspector: self)
    }

    /// A readable rendering of any key: printable ASCII as is, every other
    /// byte (and the backslash) as `\xNN`.
    @Sendable public static func describeKey(_ key: [UInt8]) -> String {
        var text = ""
        for byte in key {
            if byte >= 0x20 && byte < 0x7F && byte != 0x5C {
                text.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                let digits = String(byte, radix: 16)
                text += "\\x" + (byte < 16 ? "0" : "") + digits
            }
        }
        return text
    }

    // MARK: Helpers

    func path(_ name: String) -> String { directory + "/" + name }

    /// The live logs' numbers (at or above the manifest's log number) and the others, each ascending.
    func logNumbers() throws(StoreError) -> (live: [UInt32], stale: [UInt32]) {
        let all = try Self.list(fileSystem, directory).compactMap { Self.number($0, suffix: ".wal") }.sorted()
        return (all.filter { $0 >= manifest.logNumber }, all.filter { $0 < manifest.logNumber })
    }

    func segmentNumbersOnDisk() throws(StoreError) -> [UInt32] {
        try Self.list(fileSystem, directory).compactMap { Self.number($0, suffix: ".seg") }.sorted()
    }

    static func list(_ fs: any FileSystem, _ directory: String) throws(StoreError) -> [String] {
        do throws(SystemCallError) { return try fs.listDirectory(directory) } catch {
            throw StoreError(.ioFailure, "cannot list \(directory)", path: directory, errno: error.errno, cause: error)
        }
    }

    /// A whole file; a file that vanished since the listing is reported as the
    /// store changing underneath (another process has it open).
    static func read(_ fs: any FileSystem, _ path: String) throws(StoreError) -> [UInt8] {
        do throws(SystemCallError) { return try fs.readFile(path) } catch {
            if error.errno == ENOENT {
                throw StoreError(.ioFailure, "\(path) disappeared while it was being inspected: the store is in use and changed; run the inspection again", path: path, errno: error.errno, cause: error)
            }
            throw StoreError(.ioFailure, "cannot read \(path)", path: path, errno: error.errno, cause: error)
        }
    }

    static func number(_ name: String, suffix: String) -> UInt32? {
        guard name.hasSuffix(suffix) else { return nil }
        let digits = name.dropLast(suffix.count)
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return UInt32(digits)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif
