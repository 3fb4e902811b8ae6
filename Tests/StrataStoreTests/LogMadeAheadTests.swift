import Foundation
import SharedTestSupport
import Testing

@testable import StrataStore

/// A durable log's file is made ahead of its frames (`LogWriter`), so the
/// sync after each batch writes the batch and not a new file size: zeros
/// follow the frames, and every reader of a log must take the first
/// all-zero frame header, not the file's end, for the log's end.
@Suite struct LogMadeAheadTests {
    static func durableOptions(_ fileSystem: (any FileSystem)? = nil) -> StoreOptions {
        var options = smallOptions(sync: .always)
        options.logSizeLimit = 4 << 20
        if let fileSystem { options.fileSystem = fileSystem }
        return options
    }

    static func logPath(_ dir: ScratchDirectory) -> String {
        dir.store + "/" + dir.files().last { $0.hasSuffix(".wal") }!
    }

    static func fileSize(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? -1
    }

    /// Whether the file system under `directory` sets a file's size ahead
    /// (not off Linux, nor where `posix_fallocate` fails).
    static func fileSystemMakesFilesAhead(_ directory: String) -> Bool {
        let fs = POSIXFileSystem()
        guard let fd = try? fs.open(directory + "/probe", .createNew) else { return false }
        defer { try? fs.close(fd); try? fs.remove(directory + "/probe") }
        return (try? fs.allocate(fd, size: 4096)) != nil && (try? fs.size(fd)) == 4096
    }

    /// The whole log scanned as recovery scans it: where its frames end, and how.
    static func scan(_ path: String) -> (validLength: Int, end: LogScanner.End, frames: Int) {
        let bytes = readFileBytes(path)
        let scan = bytes.withUnsafeBytes { LogScanner($0, previousSequence: 0) }
        return (scan.validLength, scan.end, scan.frames.count)
    }

    @Test func aDurableLogIsMadeAheadOfItsFramesAndCutToThemAtClose() throws {
        let dir = ScratchDirectory()
        let store = try StrataStore(directory: dir.store, options: Self.durableOptions())
        for i in 0..<20 { try store.put("k\(i)", "v\(i)") }
        let path = Self.logPath(dir)
        let open = Self.scan(path)
        #expect(open.frames == 20 && open.end == .clean)
        if Self.fileSystemMakesFilesAhead(dir.path) {
            // Zeros past the frames, to a whole step: a clean end, not a torn one.
            #expect(Self.fileSize(path) >= 1 << 20, "the log was not made ahead")
            #expect(open.validLength < Self.fileSize(path))
        }
        // A reader beside the writer reads every batch, and nothing past them.
        var readOnly = Self.durableOptions()
        readOnly.readOnly = true
        let reader = try StrataStore(directory: dir.store, options: readOnly)
        #expect(try reader.string("k19") == "v19")
        try reader.close()
        try store.close()
        // Closed: cut to its frames.
        let closed = Self.scan(path)
        #expect(Self.fileSize(path) == closed.validLength && closed.end == .clean && closed.frames == 20)
        let reopened = try StrataStore(directory: dir.store, options: Self.durableOptions())
        #expect(reopened.recoveryReport.tornBytesDiscarded == 0)
        #expect(try reopened.string("k0") == "v0" && reopened.string("k19") == "v19")
        try reopened.close()
    }

    /// A writer that never closed (killed) leaves zeros after its last
    /// batch: the store opens with every batch, nothing discarded, and
    /// takes writes again.
    @Test func aStoreLeftWithZerosAfterItsFramesOpensWhole() throws {
        let dir = ScratchDirectory()
        let copy = ScratchDirectory()
        let store = try StrataStore(directory: dir.store, options: Self.durableOptions())
        for i in 0..<50 { try store.put("k\(i)", String(repeating: "v", count: i * 10)) }
        // The directory as a kill would leave it: copied while the writer has it open.
        try FileManager.default.copyItem(atPath: dir.store, toPath: copy.store)
        try store.close()
        let reopened = try StrataStore(directory: copy.store, options: Self.durableOptions())
        #expect(reopened.recoveryReport.tornBytesDiscarded == 0)
        #expect(reopened.sequence == 50)
        for i in [0, 25, 49] { #expect(try reopened.string("k\(i)") == String(repeating: "v", count: i * 10)) }
        try reopened.put("k50", "after")
        try reopened.close()
        let again = try StrataStore(directory: copy.store, options: Self.durableOptions())
        #expect(try again.string("k50") == "after" && again.sequence == 51)
        try again.close()
    }

    /// A reader following the writer reads on in a log made ahead: batches
    /// one at a time, and a batch larger than what a catch-up reads at
    /// first, each read on in the log (not by reading the store again).
    @Test func aFollowerReadsOnInALogMadeAhead() throws {
        let dir = ScratchDirectory()
        let writer = try StrataStore(directory: dir.store, options: Self.durableOptions())
        try writer.put("first", "1")
        var readOnly = Self.durableOptions()
        readOnly.readOnly = true
        let reader = try StrataStore(directory: dir.store, options: readOnly)
        for i in 0..<5 {
            try writer.put("small\(i)", "\(i)")
            let caughtUp = try reader.catchUp()
            #expect(!caughtUp.reopened && caughtUp.changedKeys == [bytes("small\(i)")])
        }
        let large = String(repeating: "x", count: 200_000)
        try writer.put("large", large)
        try writer.put("after", "1")
        let caughtUp = try reader.catchUp()
        #expect(!caughtUp.reopened)
        #expect(caughtUp.changedKeys == [bytes("after"), bytes("large")])
        #expect(try reader.string("large") == large && reader.string("after") == "1")
        // Nothing new: nothing read, nothing reopened.
        let idle = try reader.catchUp()
        #expect(!idle.changed && !idle.reopened)
        try writer.close()
        try reader.close()
    }

    /// A file system that will not make a file ahead (or runs out of room
    /// to) leaves the log to grow with its appends: nothing fails, nothing
    /// is lost.
    @Test(arguments: [0, 1])
    func aLogTheFileSystemWillNotMakeAheadGrowsWithItsAppends(refusingFromCall call: Int) throws {
        let dir = ScratchDirectory()
        let fs = FaultInjectingFileSystem()
        if call == 0 {
            fs.injectAlways(.error(EOPNOTSUPP), on: .allocate)
        } else {
            fs.inject(.error(ENOSPC), on: .allocate, atCall: 2)
        }
        var options = Self.durableOptions(fs)
        options.logSizeLimit = 64 << 10  // made ahead 64 KiB at a time: a second step comes soon
        let store = try StrataStore(directory: dir.store, options: options)
        let value = String(repeating: "v", count: 1_000)
        for i in 0..<100 { try store.put("k\(i)", value) }
        #expect(call == 0 ? fs.injectedFaultCount >= 1 : fs.injectedFaultCount == 1)
        try store.close()
        let reopened = try StrataStore(directory: dir.store, options: Self.durableOptions())
        #expect(reopened.recoveryReport.tornBytesDiscarded == 0)
        for i in [0, 50, 99] { #expect(try reopened.string("k\(i)") == value) }
        try reopened.close()
    }
}
