#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// A ``FileSystem`` that passes every call to another one, records it, and
/// fails the calls a test chooses.
///
/// ```swift
/// // Enumerate every step a workload takes, then fail each one in turn.
/// let probe = FaultInjectingFileSystem()
/// try workload(probe, in: freshDirectory())
/// for (step, (operation, path)) in probe.log.enumerated() {
///     let n = probe.log[...step].filter { $0.0 == operation && $0.1 == path }.count
///     let fs = FaultInjectingFileSystem()
///     fs.inject(.error(EIO), on: operation, atCall: n, pathContains: path)
///     #expect(throws: (any Error).self) { try workload(fs, in: freshDirectory()) }
///     // ... then reopen with POSIXFileSystem() and check what survived.
/// }
/// ```
///
/// Each call has a *path*: the path argument; for fd-based calls, the path the
/// descriptor was opened with through this instance (`"<fd N>"` for a
/// descriptor it did not open); for ``rename(_:to:)``, `"source -> destination"`,
/// so `pathContains` matches either side. The path is what ``log`` records and
/// what `pathContains` is matched against (a plain substring test).
///
/// An injected fault replaces the call: the wrapped file system is not called
/// (except for the half write of ``Fault/shortWrite``), and the thrown
/// ``SystemCallError`` names the syscall ``POSIXFileSystem`` would have named
/// ("pwrite", "fdatasync", "rename", ...) and the call's path. One exception:
/// an injected `ENOENT` on ``status(_:)`` returns nil, as the real call does.
/// Failed calls are still counted and logged.
///
/// `@unchecked Sendable`: `base` is immutable and `Sendable`; every other
/// stored property is guarded by `lock`, which is never held across a call
/// into `base`, so calls from many threads proceed concurrently.
package final class FaultInjectingFileSystem: FileSystem, @unchecked Sendable {
    /// The calls a fault can be injected into, one per ``FileSystem`` requirement.
    package enum Operation: String, CaseIterable, Sendable {
        case open, close, read, write, sync, startWriteback, truncate, allocate, size, lock, rename, remove
        case makeDirectory, listDirectory, syncDirectory, status

        /// The syscall an injected failure names, as ``POSIXFileSystem`` would.
        var systemCall: String {
            switch self {
            case .open: "open"
            case .close: "close"
            case .read: "pread"
            case .write: "pwrite"
            case .sync: "fdatasync"
            case .startWriteback: "sync_file_range"
            case .truncate: "ftruncate"
            case .allocate: "posix_fallocate"
            case .size: "fstat"
            case .lock: "flock"
            case .rename: "rename"
            case .remove: "unlink"
            case .makeDirectory: "mkdir"
            case .listDirectory: "opendir"
            case .syncDirectory: "fsync"
            case .status: "stat"
            }
        }
    }

    /// What an injected fault does.
    package enum Fault: Sendable, Equatable {
        /// The call throws ``SystemCallError`` with this `errno`.
        case error(Int32)
        /// Only for ``Operation/write``: writes the first half of the bytes
        /// (`count / 2`) to the wrapped file system and returns that count;
        /// the next write call, on any descriptor, then fails with `ENOSPC`,
        /// as a disk that fills does. A write of fewer than 2 bytes cannot be
        /// short, so it fails with `ENOSPC` at once.
        case shortWrite
    }

    private struct Rule {
        var fault: Fault
        var operation: Operation
        var pathContains: String?
        /// The matching call that fires, counted from injection; nil: every one.
        var atCall: Int?
        var seen = 0
    }

    private let base: any FileSystem
    private let lock = Lock()
    // Guarded by `lock`:
    private var rules: [Rule] = []
    private var diskFullPending = false
    private var openPaths: [FileDescriptor: String] = [:]
    private var calls: [(Operation, String)] = []
    private var faultsFired = 0

    /// Wraps `base`, injecting nothing until told to.
    package init(wrapping base: any FileSystem = POSIXFileSystem()) {
        self.base = base
    }

    // MARK: Control

    /// Makes the `n`-th matching call of `operation` (1-based, counted from
    /// now) fail with `fault`, once. A call matches when its path contains
    /// `pathContains`, or always when that is nil.
    package func inject(_ fault: Fault, on operation: Operation, atCall n: Int, pathContains: String? = nil) {
        precondition(n >= 1, "atCall is 1-based")
        add(Rule(fault: fault, operation: operation, pathContains: pathContains, atCall: n))
    }

    /// Makes every matching call of `operation` from now on fail with `fault`,
    /// until ``clearFaults()``.
    package func injectAlways(_ fault: Fault, on operation: Operation, pathContains: String? = nil) {
        add(Rule(fault: fault, operation: operation, pathContains: pathContains, atCall: nil))
    }

    /// Removes every injected fault, including an `ENOSPC` pending after a
    /// ``Fault/shortWrite``. The log and the counts are kept.
    package func clearFaults() {
        lock.withLock {
            rules.removeAll()
            diskFullPending = false
        }
    }

    /// How many calls of `operation` were made (failed ones included), counting
    /// only those whose path contains `pathContains` when given.
    package func callCount(_ operation: Operation, pathContains: String? = nil) -> Int {
        lock.withLock {
            calls.reduce(0) { $0 + ($1.0 == operation && Self.matches($1.1, pathContains) ? 1 : 0) }
        }
    }

    /// Every call made through this instance, in order: its operation and path.
    package var log: [(Operation, String)] {
        lock.withLock { calls }
    }

    /// How many injected faults have fired (a ``Fault/shortWrite`` and the
    /// `ENOSPC` that follows it count as two).
    package var injectedFaultCount: Int {
        lock.withLock { faultsFired }
    }

    private func add(_ rule: Rule) {
        precondition(rule.fault != .shortWrite || rule.operation == .write, "shortWrite applies only to .write")
        lock.withLock { rules.append(rule) }
    }

    private static func matches(_ path: String, _ pathContains: String?) -> Bool {
        guard let pathContains else { return true }
        return path.contains(pathContains)
    }

    // MARK: Interception

    /// Records a call to `path` and decides whether a fault replaces it.
    private func intercept(_ operation: Operation, _ path: String) -> Fault? {
        lock.withLock { decide(operation, path, writeCount: 0) }
    }

    /// Records a call on `fd` and decides whether a fault replaces it; also
    /// returns the path `fd` was opened with, for the error. For a write,
    /// `writeCount` is the byte count, so that a short write arms the `ENOSPC`
    /// for the next write in the same critical section.
    private func intercept(_ operation: Operation, _ fd: FileDescriptor, writeCount: Int = 0) -> (fault: Fault?, path: String?) {
        lock.withLock {
            let path = openPaths[fd]
            return (decide(operation, path ?? "<fd \(fd.rawValue)>", writeCount: writeCount), path)
        }
    }

    /// Must hold `lock`. Logs the call; every rule for `operation` whose filter
    /// matches counts it, and the first one due (in injection order) fires.
    /// A pending `ENOSPC` beats every rule.
    private func decide(_ operation: Operation, _ path: String, writeCount: Int) -> Fault? {
        calls.append((operation, path))
        var fired: Fault? = nil
        if operation == .write && diskFullPending {
            diskFullPending = false
            fired = .error(ENOSPC)
        }
        var index = 0
        while index < rules.count {
            if rules[index].operation == operation && Self.matches(path, rules[index].pathContains) {
                rules[index].seen += 1
                if let n = rules[index].atCall {
                    if rules[index].seen == n {
                        if fired == nil { fired = rules[index].fault }
                        rules.remove(at: index)
                        continue
                    }
                } else if fired == nil {
                    fired = rules[index].fault
                }
            }
            index += 1
        }
        if fired == .shortWrite && writeCount >= 2 { diskFullPending = true }
        if fired != nil { faultsFired += 1 }
        return fired
    }

    /// Intercepts a path-based call; throws if a fault fires.
    private func check(_ operation: Operation, _ path: String, errorPath: String?) throws(SystemCallError) {
        if case .error(let code)? = intercept(operation, path) {
            throw SystemCallError(call: operation.systemCall, errno: code, path: errorPath)
        }
    }

    /// Intercepts an fd-based call; throws if a fault fires.
    private func check(_ operation: Operation, _ fd: FileDescriptor) throws(SystemCallError) {
        let (fault, path) = intercept(operation, fd)
        if case .error(let code)? = fault {
            throw SystemCallError(call: operation.systemCall, errno: code, path: path)
        }
    }

    // MARK: FileSystem

    package func open(_ path: String, _ mode: FileOpenMode) throws(SystemCallError) -> FileDescriptor {
        try check(.open, path, errorPath: path)
        let fd = try base.open(path, mode)
        lock.withLock { openPaths[fd] = path }
        return fd
    }

    package func close(_ fd: FileDescriptor) throws(SystemCallError) {
        try check(.close, fd)
        // Forget the descriptor before the real close: once closed, its number
        // may be reused at once by an open on another thread.
        lock.withLock { _ = openPaths.removeValue(forKey: fd) }
        try base.close(fd)
    }

    package func read(_ fd: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(SystemCallError) -> Int {
        try check(.read, fd)
        return try base.read(fd, into: buffer, at: offset)
    }

    package func write(_ fd: FileDescriptor, _ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(SystemCallError) -> Int {
        let (fault, path) = intercept(.write, fd, writeCount: bytes.count)
        switch fault {
        case nil:
            return try base.write(fd, bytes, at: offset)
        case .error(let code)?:
            throw SystemCallError(call: "pwrite", errno: code, path: path)
        case .shortWrite?:
            guard bytes.count >= 2 else { throw SystemCallError(call: "pwrite", errno: ENOSPC, path: path) }
            return try base.write(fd, UnsafeRawBufferPointer(rebasing: bytes[..<(bytes.count / 2)]), at: offset)
        }
    }

    package func sync(_ fd: FileDescriptor) throws(SystemCallError) {
        try check(.sync, fd)
        try base.sync(fd)
    }

    package func startWriteback(_ fd: FileDescriptor, offset: UInt64, length: UInt64) throws(SystemCallError) {
        try check(.startWriteback, fd)
        try base.startWriteback(fd, offset: offset, length: length)
    }

    package func truncate(_ fd: FileDescriptor, to size: UInt64) throws(SystemCallError) {
        try check(.truncate, fd)
        try base.truncate(fd, to: size)
    }

    package func allocate(_ fd: FileDescriptor, size: UInt64) throws(SystemCallError) {
        try check(.allocate, fd)
        try base.allocate(fd, size: size)
    }

    package func size(_ fd: FileDescriptor) throws(SystemCallError) -> UInt64 {
        try check(.size, fd)
        return try base.size(fd)
    }

    package func lockExclusive(_ fd: FileDescriptor) throws(SystemCallError) {
        try check(.lock, fd)
        try base.lockExclusive(fd)
    }

    package func lockHolder(_ fd: FileDescriptor) -> LockHolder? { base.lockHolder(fd) }

    package func rename(_ source: String, to destination: String) throws(SystemCallError) {
        try check(.rename, "\(source) -> \(destination)", errorPath: source)
        try base.rename(source, to: destination)
    }

    package func remove(_ path: String) throws(SystemCallError) {
        try check(.remove, path, errorPath: path)
        try base.remove(path)
    }

    package func makeDirectory(_ path: String) throws(SystemCallError) {
        try check(.makeDirectory, path, errorPath: path)
        try base.makeDirectory(path)
    }

    package func listDirectory(_ path: String) throws(SystemCallError) -> [String] {
        try check(.listDirectory, path, errorPath: path)
        return try base.listDirectory(path)
    }

    package func syncDirectory(_ path: String) throws(SystemCallError) {
        try check(.syncDirectory, path, errorPath: path)
        try base.syncDirectory(path)
    }

    package func status(_ path: String) throws(SystemCallError) -> FileStatus? {
        switch intercept(.status, path) {
        case nil: return try base.status(path)
        case .error(let code)? where code == ENOENT: return nil
        case .error(let code)?: throw SystemCallError(call: "stat", errno: code, path: path)
        case .shortWrite?: preconditionFailure("shortWrite applies only to .write")
        }
    }
}
