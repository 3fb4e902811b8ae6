import Foundation
import Testing

@testable import StrataStore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// A fresh directory under the system temporary directory, removed after `body`.
private func withScratchDirectory<T>(_ body: (String) throws -> T) throws -> T {
    let url = FileManager.default.temporaryDirectory
        .appendingPathComponent("strata-fs-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: false)
    defer { try? FileManager.default.removeItem(at: url) }
    return try body(url.path)
}

/// `stat(2)`'s permission bits for `path`.
private func permissionBits(_ path: String) -> mode_t? {
    var info = stat()
    guard stat(path, &info) == 0 else { return nil }
    return info.st_mode & 0o777
}

private func writeBytes(_ fs: some FileSystem, _ fd: FileDescriptor, _ bytes: [UInt8], at offset: UInt64, path: String? = nil) throws(SystemCallError) {
    try bytes.withUnsafeBytes { buffer in
        Result { () throws(SystemCallError) in try fs.writeAll(fd, buffer, at: offset, path: path) }
    }.get()
}

private func readBytes(_ fs: some FileSystem, _ fd: FileDescriptor, count: Int, at offset: UInt64) throws(SystemCallError) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: count)
    let n = try bytes.withUnsafeMutableBytes { buffer in
        Result { () throws(SystemCallError) -> Int in try fs.readAll(fd, into: buffer, at: offset) }
    }.get()
    return Array(bytes[..<n])
}

/// One `pwrite` of `bytes`; returns how many were written.
private func writeOnce(_ fs: some FileSystem, _ fd: FileDescriptor, _ bytes: [UInt8], at offset: UInt64) throws(SystemCallError) -> Int {
    try bytes.withUnsafeBytes { buffer in
        Result { () throws(SystemCallError) -> Int in try fs.write(fd, buffer, at: offset) }
    }.get()
}

@Suite("FileSystem")
struct FileSystemTests {
    let fs = POSIXFileSystem()

    // MARK: POSIXFileSystem

    @Test func roundTrip() throws {
        try withScratchDirectory { dir in
            let sub = dir + "/sub"
            try fs.makeDirectory(sub)
            #expect(try fs.status(sub)?.isDirectory == true)

            let path = sub + "/data.log"
            let fd = try fs.open(path, .createNew)
            let payload = Array("hello, strata store".utf8)
            try writeBytes(fs, fd, payload, at: 0, path: path)
            try writeBytes(fs, fd, [0xFF], at: UInt64(payload.count))
            try fs.sync(fd)
            #expect(try fs.size(fd) == UInt64(payload.count + 1))
            #expect(try readBytes(fs, fd, count: payload.count, at: 0) == payload)
            #expect(try readBytes(fs, fd, count: 10, at: UInt64(payload.count)) == [0xFF])  // short at EOF
            #expect(try readBytes(fs, fd, count: 4, at: 1000) == [])

            try fs.truncate(fd, to: 5)
            #expect(try fs.size(fd) == 5)
            #expect(try readBytes(fs, fd, count: 100, at: 0) == Array("hello".utf8))
            try fs.truncate(fd, to: 8)  // zero-extends
            #expect(try readBytes(fs, fd, count: 100, at: 0) == Array("hello".utf8) + [0, 0, 0])
            try fs.close(fd)

            let renamed = sub + "/renamed.log"
            try fs.rename(path, to: renamed)
            try fs.syncDirectory(sub)
            #expect(try fs.status(path) == nil)
            let status = try #require(try fs.status(renamed))
            #expect(!status.isDirectory && status.size == 8 && status.identity?.count == 3)
            #expect(try fs.readFile(renamed) == Array("hello".utf8) + [0, 0, 0])

            // readWrite reopens an existing file without truncating it.
            let again = try fs.open(renamed, .readWrite)
            try writeBytes(fs, again, Array("J".utf8), at: 0)
            try fs.close(again)
            #expect(try fs.readFile(renamed).prefix(5) == ArraySlice("Jello".utf8))

            try fs.remove(renamed)
            #expect(try fs.status(renamed) == nil)
            #expect(try fs.listDirectory(sub) == [])
        }
    }

    @Test func renameReplacesDestination() throws {
        try withScratchDirectory { dir in
            for (name, text) in [("a", "new"), ("b", "old contents")] {
                let fd = try fs.open(dir + "/" + name, .createNew)
                try writeBytes(fs, fd, Array(text.utf8), at: 0)
                try fs.close(fd)
            }
            try fs.rename(dir + "/a", to: dir + "/b")
            #expect(try fs.readFile(dir + "/b") == Array("new".utf8))
            #expect(try fs.listDirectory(dir) == ["b"])
        }
    }

    @Test func createNewOnExistingFileThrowsEEXIST() throws {
        try withScratchDirectory { dir in
            let path = dir + "/f"
            try fs.close(try fs.open(path, .createNew))
            let error = #expect(throws: SystemCallError.self) { try fs.open(path, .createNew) }
            #expect(error?.errno == EEXIST)
            #expect(error?.call == "open")
            #expect(error?.path == path)
            // createOrOpen opens it.
            try fs.close(try fs.open(path, .createOrOpen))
        }
    }

    @Test(arguments: [FileOpenMode.readOnly, .readWrite])
    func openMissingFileThrowsENOENTWithPath(mode: FileOpenMode) throws {
        try withScratchDirectory { dir in
            let path = dir + "/missing"
            let error = #expect(throws: SystemCallError.self) { try fs.open(path, mode) }
            #expect(error == SystemCallError(call: "open", errno: ENOENT, path: path))
            #expect(error?.description.contains(path) == true)
        }
    }

    @Test func newFileIs0600AndNewDirectoryIs0700() throws {
        try withScratchDirectory { dir in
            try fs.close(try fs.open(dir + "/new", .createNew))
            try fs.close(try fs.open(dir + "/lock", .createOrOpen))
            try fs.makeDirectory(dir + "/d")
            #expect(permissionBits(dir + "/new") == 0o600)
            #expect(permissionBits(dir + "/lock") == 0o600)
            #expect(permissionBits(dir + "/d") == 0o700)
        }
    }

    @Test func descriptorsAreCloseOnExec() throws {
        try withScratchDirectory { dir in
            let fd = try fs.open(dir + "/f", .createNew)
            defer { try? fs.close(fd) }
            #expect(fcntl(fd.rawValue, F_GETFD) & FD_CLOEXEC != 0)
        }
    }

    @Test func lockExclusiveExcludesSecondOpenUntilFirstCloses() throws {
        try withScratchDirectory { dir in
            let path = dir + "/LOCK"
            let first = try fs.open(path, .createOrOpen)
            let second = try fs.open(path, .createOrOpen)
            defer { try? fs.close(second) }
            #if os(Linux)
            #expect(fs.lockHolder(first) == nil, "no lock is held yet")
            #endif
            try fs.lockExclusive(first)
            let error = #expect(throws: SystemCallError.self) { try fs.lockExclusive(second) }
            #expect(error?.errno == EWOULDBLOCK || error?.errno == EAGAIN)
            #expect(error?.call == "flock")
            #if os(Linux)
            // /proc/locks names the holder, through either descriptor of the file.
            let holder = fs.lockHolder(second)
            #expect(holder?.pid == getpid() && holder?.isThisProcess == true && holder?.command?.isEmpty == false, "\(String(describing: holder))")
            #endif
            try fs.close(first)
            try fs.lockExclusive(second)
        }
    }

    @Test func statusOfMissingPathIsNil() throws {
        try withScratchDirectory { dir in
            #expect(try fs.status(dir + "/nothing") == nil)
            #expect(try fs.status(dir)?.isDirectory == true)
            // A path through a file is ENOTDIR, which is an error, not "missing".
            try fs.close(try fs.open(dir + "/file", .createNew))
            let error = #expect(throws: SystemCallError.self) { try fs.status(dir + "/file/child") }
            #expect(error?.errno == ENOTDIR)
        }
    }

    @Test func listDirectoryNamesEntriesWithoutDotAndDotDot() throws {
        try withScratchDirectory { dir in
            #expect(try fs.listDirectory(dir) == [])
            for name in ["b.seg", "a.log", "MANIFEST"] { try fs.close(try fs.open(dir + "/" + name, .createNew)) }
            try fs.makeDirectory(dir + "/c")
            #expect(try fs.listDirectory(dir) == ["MANIFEST", "a.log", "b.seg", "c"])
            let error = #expect(throws: SystemCallError.self) { try fs.listDirectory(dir + "/missing") }
            #expect(error == SystemCallError(call: "opendir", errno: ENOENT, path: dir + "/missing"))
        }
    }

    @Test func failuresNameTheCallErrnoAndPath() throws {
        try withScratchDirectory { dir in
            #expect(throws: SystemCallError(call: "unlink", errno: ENOENT, path: dir + "/x")) { try fs.remove(dir + "/x") }
            #expect(throws: SystemCallError(call: "mkdir", errno: EEXIST, path: dir)) { try fs.makeDirectory(dir) }
            #expect(throws: SystemCallError(call: "rename", errno: ENOENT, path: dir + "/x")) { try fs.rename(dir + "/x", to: dir + "/y") }
            #expect(throws: SystemCallError(call: "open", errno: ENOENT, path: dir + "/x")) { try fs.syncDirectory(dir + "/x") }
            #expect(throws: SystemCallError(call: "open", errno: ENOTDIR, path: dir + "/f")) {
                try fs.close(try fs.open(dir + "/f", .createNew))
                try fs.syncDirectory(dir + "/f")
            }
            let fd = try fs.open(dir + "/f", .readOnly)
            defer { try? fs.close(fd) }
            #expect(throws: SystemCallError(call: "pwrite", errno: EBADF)) { _ = try writeOnce(fs, fd, [1], at: 0) }
            #expect(throws: SystemCallError(call: "pwrite", errno: EINVAL)) { _ = try writeOnce(fs, fd, [1], at: .max) }
            #expect(throws: SystemCallError(call: "fstat", errno: EBADF)) { _ = try fs.size(FileDescriptor(rawValue: -1)) }
            #expect(throws: SystemCallError(call: "close", errno: EBADF)) { try fs.close(FileDescriptor(rawValue: -1)) }
        }
    }

    // MARK: FaultInjectingFileSystem

    @Test func nthWriteFailsAndEarlierOnesSucceed() throws {
        try withScratchDirectory { dir in
            let injector = FaultInjectingFileSystem()
            injector.inject(.error(ENOSPC), on: .write, atCall: 3)
            let path = dir + "/f"
            let fd = try injector.open(path, .createNew)
            defer { try? injector.close(fd) }
            try writeBytes(injector, fd, [1], at: 0)
            try writeBytes(injector, fd, [2], at: 1)
            let error = #expect(throws: SystemCallError.self) { try writeBytes(injector, fd, [3], at: 2) }
            #expect(error == SystemCallError(call: "pwrite", errno: ENOSPC, path: path))
            #expect(injector.injectedFaultCount == 1)
            try writeBytes(injector, fd, [4], at: 2)  // the fault fired once
            #expect(try injector.readFile(path) == [1, 2, 4])
            #expect(injector.callCount(.write) == 4)
        }
    }

    @Test func shortWriteWritesHalfThenNextWriteFailsWithENOSPC() throws {
        try withScratchDirectory { dir in
            let injector = FaultInjectingFileSystem()
            let path = dir + "/f"
            let fd = try injector.open(path, .createNew)
            defer { try? injector.close(fd) }

            // A single pwrite: half the bytes, then the disk is full.
            injector.inject(.shortWrite, on: .write, atCall: 1)
            #expect(try writeOnce(injector, fd, Array(0..<10), at: 0) == 5)
            #expect(try fs.readFile(path) == Array(0..<5))
            let error = #expect(throws: SystemCallError.self) { _ = try writeOnce(injector, fd, [9], at: 5) }
            #expect(error?.errno == ENOSPC)
            #expect(try writeOnce(injector, fd, [5], at: 5) == 1)  // only the next write failed
            #expect(injector.injectedFaultCount == 2)

            // writeAll surfaces it as a short write.
            injector.inject(.shortWrite, on: .write, atCall: 1)
            let short = #expect(throws: SystemCallError.self) { try writeBytes(injector, fd, Array(repeating: 7, count: 8), at: 6, path: path) }
            #expect(short?.isShortWrite == true)
            #expect(short?.errno == ENOSPC)
            #expect(short?.path == path)
            #expect(try fs.readFile(path) == Array(0..<6) + [7, 7, 7, 7])

            // A write too small to be short fails at once.
            injector.inject(.shortWrite, on: .write, atCall: 1)
            #expect(throws: SystemCallError(call: "pwrite", errno: ENOSPC, path: path)) { _ = try writeOnce(injector, fd, [1], at: 0) }
            #expect(try writeOnce(injector, fd, [1], at: 100) == 1)
        }
    }

    @Test func pathContainsFiltersAndCounts() throws {
        try withScratchDirectory { dir in
            let injector = FaultInjectingFileSystem()
            injector.inject(.error(EIO), on: .write, atCall: 2, pathContains: ".seg")
            injector.inject(.error(EACCES), on: .remove, atCall: 1, pathContains: "MANIFEST")
            let log = try injector.open(dir + "/000001.log", .createNew)
            let seg = try injector.open(dir + "/000002.seg", .createNew)
            defer { try? injector.close(log); try? injector.close(seg) }
            try writeBytes(injector, log, [1], at: 0)
            try writeBytes(injector, seg, [1], at: 0)  // first .seg write
            try writeBytes(injector, log, [2], at: 1)  // not counted by the filter
            #expect(throws: SystemCallError(call: "pwrite", errno: EIO, path: dir + "/000002.seg")) {
                try writeBytes(injector, seg, [2], at: 1)
            }
            try injector.remove(dir + "/000001.log")
            try injector.close(try injector.open(dir + "/MANIFEST-1", .createNew))
            #expect(throws: SystemCallError(call: "unlink", errno: EACCES, path: dir + "/MANIFEST-1")) {
                try injector.remove(dir + "/MANIFEST-1")
            }
            #expect(try fs.status(dir + "/MANIFEST-1") != nil)  // the fault replaced the call
            #expect(injector.callCount(.write) == 4)
            #expect(injector.callCount(.write, pathContains: ".seg") == 2)
            #expect(injector.callCount(.write, pathContains: ".log") == 2)
            #expect(injector.callCount(.remove, pathContains: "MANIFEST") == 1)
            #expect(injector.callCount(.open, pathContains: "nothing") == 0)
            #expect(injector.injectedFaultCount == 2)
        }
    }

    @Test func renameMatchesEitherPath() throws {
        try withScratchDirectory { dir in
            let injector = FaultInjectingFileSystem()
            try injector.close(try injector.open(dir + "/MANIFEST.tmp", .createNew))
            injector.inject(.error(EXDEV), on: .rename, atCall: 1, pathContains: "/CURRENT")
            #expect(throws: SystemCallError(call: "rename", errno: EXDEV, path: dir + "/MANIFEST.tmp")) {
                try injector.rename(dir + "/MANIFEST.tmp", to: dir + "/CURRENT")
            }
            try injector.rename(dir + "/MANIFEST.tmp", to: dir + "/CURRENT")
            #expect(injector.log.last! == (.rename, "\(dir)/MANIFEST.tmp -> \(dir)/CURRENT"))
            #expect(injector.callCount(.rename, pathContains: "MANIFEST.tmp") == 2)
        }
    }

    @Test func callCountAndLogRecordEveryCallInOrder() throws {
        try withScratchDirectory { dir in
            let injector = FaultInjectingFileSystem()
            let path = dir + "/f"
            try injector.makeDirectory(dir + "/d")
            let fd = try injector.open(path, .createNew)
            try writeBytes(injector, fd, [1, 2, 3], at: 0)
            try injector.sync(fd)
            _ = try injector.size(fd)
            _ = try readBytes(injector, fd, count: 3, at: 0)
            try injector.truncate(fd, to: 1)
            try injector.lockExclusive(fd)
            try injector.close(fd)
            _ = try injector.listDirectory(dir)
            try injector.syncDirectory(dir)
            _ = try injector.status(path)
            try injector.rename(path, to: path + "2")
            try injector.remove(path + "2")
            injector.inject(.error(EIO), on: .sync, atCall: 1)
            let fd2 = try injector.open(path, .createNew)
            #expect(throws: SystemCallError(call: "fdatasync", errno: EIO, path: path)) { try injector.sync(fd2) }
            try injector.close(fd2)
            _ = try? injector.close(FileDescriptor(rawValue: 9999))  // never opened here

            let expected: [(FaultInjectingFileSystem.Operation, String)] = [
                (.makeDirectory, dir + "/d"), (.open, path), (.write, path), (.sync, path), (.size, path),
                (.read, path), (.truncate, path), (.lock, path), (.close, path), (.listDirectory, dir),
                (.syncDirectory, dir), (.status, path), (.rename, "\(path) -> \(path)2"), (.remove, path + "2"),
                (.open, path), (.sync, path), (.close, path), (.close, "<fd 9999>"),
            ]
            let log = injector.log
            #expect(log.map(\.0) == expected.map(\.0))
            #expect(log.map(\.1) == expected.map(\.1))
            for operation in FaultInjectingFileSystem.Operation.allCases {
                #expect(injector.callCount(operation) == expected.filter { $0.0 == operation }.count, "\(operation)")
            }
            #expect(injector.callCount(.close, pathContains: dir) == 2)
            #expect(injector.injectedFaultCount == 1)
        }
    }

    @Test func injectAlwaysFailsEveryMatchingCallUntilCleared() throws {
        try withScratchDirectory { dir in
            let injector = FaultInjectingFileSystem()
            injector.injectAlways(.error(EIO), on: .syncDirectory)
            injector.injectAlways(.error(ENOENT), on: .status, pathContains: "ghost")
            for _ in 0..<3 {
                #expect(throws: SystemCallError(call: "fsync", errno: EIO, path: dir)) { try injector.syncDirectory(dir) }
            }
            // An injected ENOENT on status reads as "missing", as the real call does.
            try injector.close(try injector.open(dir + "/ghost", .createNew))
            #expect(try injector.status(dir + "/ghost") == nil)
            #expect(try injector.status(dir) != nil)
            #expect(injector.injectedFaultCount == 4)
            injector.clearFaults()
            try injector.syncDirectory(dir)
            #expect(try injector.status(dir + "/ghost") != nil)
            #expect(injector.injectedFaultCount == 4)
        }
    }

    @Test func atCallCountsFromInjection() throws {
        try withScratchDirectory { dir in
            let injector = FaultInjectingFileSystem()
            for _ in 0..<3 { _ = try injector.status(dir) }
            injector.inject(.error(EIO), on: .status, atCall: 2)
            _ = try injector.status(dir)
            #expect(throws: SystemCallError(call: "stat", errno: EIO, path: dir)) { _ = try injector.status(dir) }
            _ = try injector.status(dir)
            #expect(injector.callCount(.status) == 6)
        }
    }

    /// The pattern the store's fault tests use: record a workload's steps, then
    /// fail each step in turn and check the workload reports it.
    @Test func everyStepOfAWorkloadCanBeFailed() throws {
        func workload(_ fs: some FileSystem, _ dir: String) throws(SystemCallError) {
            try fs.makeDirectory(dir + "/store")
            let fd = try fs.open(dir + "/store/000001.log", .createNew)
            try writeBytes(fs, fd, Array(repeating: 0xAB, count: 64), at: 0)
            try fs.sync(fd)
            try fs.close(fd)
            try fs.rename(dir + "/store/000001.log", to: dir + "/store/000002.log")
            try fs.syncDirectory(dir + "/store")
        }
        let probe = FaultInjectingFileSystem()
        try withScratchDirectory { dir in try workload(probe, dir) }
        let steps = probe.log
        #expect(steps.count == 7)
        for (step, (operation, _)) in steps.enumerated() {
            let n = steps[...step].filter { $0.0 == operation }.count
            let injector = FaultInjectingFileSystem()
            injector.inject(.error(EIO), on: operation, atCall: n)
            try withScratchDirectory { dir in
                let error = #expect(throws: SystemCallError.self, "step \(step): \(operation)") { try workload(injector, dir) }
                #expect(error?.errno == EIO)
                #expect(injector.log.count == step + 1)
            }
            #expect(injector.injectedFaultCount == 1)
        }
    }

    @Test func injectorIsSafeUnderConcurrentCalls() throws {
        try withScratchDirectory { dir in
            let injector = FaultInjectingFileSystem()
            injector.injectAlways(.error(EIO), on: .sync, pathContains: "odd")
            let threads = 8
            let rounds = 200
            let failures = Lock()
            nonisolated(unsafe) var unexpected: [String] = []  // guarded by `failures`
            DispatchQueue.concurrentPerform(iterations: threads) { thread in
                let path = dir + "/\(thread % 2 == 0 ? "even" : "odd")-\(thread)"
                do {
                    let fd = try injector.open(path, .createNew)
                    for round in 0..<rounds {
                        let byte = UInt8(truncatingIfNeeded: round)
                        try writeBytes(injector, fd, [byte], at: UInt64(round))
                        guard try readBytes(injector, fd, count: 1, at: UInt64(round)) == [byte] else {
                            failures.withLock { unexpected.append("\(path): read back wrong byte") }
                            return
                        }
                        do {
                            try injector.sync(fd)
                            if thread % 2 == 1 { failures.withLock { unexpected.append("\(path): sync did not fail") } }
                        } catch {
                            if thread % 2 == 0 || (error as? SystemCallError)?.errno != EIO { failures.withLock { unexpected.append("\(path): \(error)") } }
                        }
                        _ = try injector.status(path)
                    }
                    try injector.close(fd)
                } catch {
                    failures.withLock { unexpected.append("\(path): \(error)") }
                }
            }
            #expect(failures.withLock { unexpected } == [])
            #expect(injector.callCount(.write) == threads * rounds)
            #expect(injector.callCount(.sync, pathContains: "odd") == threads / 2 * rounds)
            #expect(injector.injectedFaultCount == threads / 2 * rounds)
            #expect(injector.log.count == threads * (2 + 4 * rounds))
            let names = try fs.listDirectory(dir)
            #expect(names.count == threads)
        }
    }

    // MARK: Lock

    @Test func lockSerializesConcurrentIncrements() {
        final class Counter: @unchecked Sendable {  // `value` guarded by `lock`
            let lock = Lock()
            var value = 0
        }
        let counter = Counter()
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<10_000 { counter.lock.withLock { counter.value += 1 } }
        }
        #expect(counter.lock.withLock { counter.value } == 80_000)
    }

    @Test func lockRethrowsAndReleases() {
        struct Boom: Error, Equatable {}
        let lock = Lock()
        #expect(throws: Boom()) { try lock.withLock { () throws(Boom) in throw Boom() } }
        #expect(lock.withLock { 42 } == 42)  // released after the throw
    }
}
