/// The system calls StrataStore makes, behind one protocol.
///
/// Every byte the engine reads or writes, and every fsync, rename and unlink,
/// goes through a `FileSystem`. ``POSIXFileSystem`` is the real one: thin,
/// documented wrappers over the syscalls. ``FaultInjectingFileSystem`` wraps
/// another and makes a chosen call fail (ENOSPC, EIO, a short write, a failed
/// fsync or rename), which is how the fault-injection tests drive every error
/// path of the write, flush and compaction code (the seam swift-system's
/// `Mocking.swift` provides, made per-instance so background threads see it).
///
/// Rules every implementation follows:
/// 1. Calls are safe from any thread at once (the store's writer, its flush and
///    compaction workers and readers all call in concurrently).
/// 2. A failure throws ``SystemCallError`` naming the call, the `errno` and the
///    path; nothing is retried silently, except `EINTR`.
/// 3. `write` and `read` may transfer fewer bytes than asked; callers loop
///    (``FileSystem/writeAll(_:_:at:path:)`` and ``FileSystem/readAll(_:into:at:path:)`` do).
package protocol FileSystem: Sendable {
    /// `open(2)`. New files get mode 0600.
    func open(_ path: String, _ mode: FileOpenMode) throws(SystemCallError) -> FileDescriptor
    /// `close(2)`.
    func close(_ fd: FileDescriptor) throws(SystemCallError)
    /// `pread(2)`: up to `buffer.count` bytes at `offset`; 0 at end of file.
    func read(_ fd: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(SystemCallError) -> Int
    /// `pwrite(2)`: up to `bytes.count` bytes at `offset`; returns how many were written.
    func write(_ fd: FileDescriptor, _ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(SystemCallError) -> Int
    /// `fdatasync(2)` (`F_FULLFSYNC` on Darwin): the file's data is durable when it returns.
    func sync(_ fd: FileDescriptor) throws(SystemCallError)
    /// `sync_file_range(2)` with `SYNC_FILE_RANGE_WRITE`: starts writing the
    /// range's dirty pages back and returns without waiting. It makes nothing
    /// durable; it leaves a later ``sync(_:)`` less to write. A hint: callers
    /// ignore its failure (a writeback error is still reported by that later
    /// `sync`). Fails with `ENOSYS` where the call does not exist (Darwin).
    func startWriteback(_ fd: FileDescriptor, offset: UInt64, length: UInt64) throws(SystemCallError)
    /// `ftruncate(2)`.
    func truncate(_ fd: FileDescriptor, to size: UInt64) throws(SystemCallError)
    /// `posix_fallocate(2)` of the file's first `size` bytes: the file is at
    /// least `size` long and its blocks are allocated; what was never
    /// written reads as zeros. Fails with `EOPNOTSUPP` where the file system
    /// cannot (and always off Linux), `ENOSPC`, `EFBIG`, `EIO`.
    func allocate(_ fd: FileDescriptor, size: UInt64) throws(SystemCallError)
    /// `fstat(2)`'s size.
    func size(_ fd: FileDescriptor) throws(SystemCallError) -> UInt64
    /// `flock(fd, LOCK_EX | LOCK_NB)`: `EWOULDBLOCK` when another open file holds it.
    func lockExclusive(_ fd: FileDescriptor) throws(SystemCallError)
    /// The process that holds the `flock` on `fd`'s file, for an error
    /// message: nil when it cannot be told (no `/proc/locks`, or the lock was
    /// let go in the meantime). Never fails.
    func lockHolder(_ fd: FileDescriptor) -> LockHolder?
    /// `rename(2)`: atomically replaces `destination`.
    func rename(_ source: String, to destination: String) throws(SystemCallError)
    /// `unlink(2)`.
    func remove(_ path: String) throws(SystemCallError)
    /// `mkdir(2)` with mode 0700.
    func makeDirectory(_ path: String) throws(SystemCallError)
    /// The names in a directory, without "." and "..".
    func listDirectory(_ path: String) throws(SystemCallError) -> [String]
    /// Opens the directory, `fsync(2)`s it and closes it, so that a file
    /// created, renamed or removed in it survives a crash.
    func syncDirectory(_ path: String) throws(SystemCallError)
    /// `stat(2)`: nil when nothing is at `path` (`ENOENT`).
    func status(_ path: String) throws(SystemCallError) -> FileStatus?
}

/// An open file descriptor.
package struct FileDescriptor: Hashable, Sendable {
    package var rawValue: Int32
    package init(rawValue: Int32) { self.rawValue = rawValue }
}

/// How ``FileSystem/open(_:_:)`` opens a file.
package enum FileOpenMode: Sendable, Hashable {
    /// `O_RDONLY`.
    case readOnly
    /// `O_RDWR`; the file must exist.
    case readWrite
    /// `O_RDWR | O_CREAT | O_EXCL`, mode 0600: fails with `EEXIST` if the file exists.
    case createNew
    /// `O_RDWR | O_CREAT`, mode 0600: opens or creates (used for the lock file).
    case createOrOpen
}

/// The process holding a lock (``FileSystem/lockHolder(_:)``).
package struct LockHolder: Sendable, Hashable {
    package var pid: Int32
    /// Its command name (`/proc/PID/comm`), when it could be read.
    package var command: String?
    /// Whether it is this process (another open of the same file here).
    package var isThisProcess: Bool
}

/// What ``FileSystem/status(_:)`` reports.
package struct FileStatus: Sendable, Hashable {
    package var isDirectory: Bool
    package var size: UInt64
    /// Which file this is and when its data last changed — device, inode,
    /// modification time in nanoseconds — when the file system says; a file
    /// replaced by a rename has another.
    package var identity: [UInt64]?

    package init(isDirectory: Bool, size: UInt64, identity: [UInt64]? = nil) {
        self.isDirectory = isDirectory
        self.size = size
        self.identity = identity
    }
}

/// A failed system call: which call, on which path, and its `errno`.
package struct SystemCallError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The call's name, as in its man page: "pwrite", "fdatasync", "rename".
    package var call: String
    package var errno: Int32
    package var path: String?
    /// True for a write that transferred fewer bytes than asked and then could
    /// not go on; set by ``FileSystem/writeAll(_:_:at:path:)``.
    package var isShortWrite: Bool = false

    package init(call: String, errno: Int32, path: String? = nil, isShortWrite: Bool = false) {
        self.call = call
        self.errno = errno
        self.path = path
        self.isShortWrite = isShortWrite
    }

    package var description: String {
        "\(call)(\(path ?? "")) failed: errno \(errno)" + (isShortWrite ? " (short write)" : "")
    }
}

extension FileSystem {
    /// Writes all of `bytes` at `offset`, looping over short writes. A write
    /// that makes no progress fails with `EIO` and `isShortWrite` set.
    package func writeAll(_ fd: FileDescriptor, _ bytes: UnsafeRawBufferPointer, at offset: UInt64, path: String? = nil) throws(SystemCallError) {
        var done = 0
        while done < bytes.count {
            let rest = UnsafeRawBufferPointer(rebasing: bytes[done...])
            let n: Int
            do {
                n = try write(fd, rest, at: offset + UInt64(done))
            } catch {
                var error = error
                if error.path == nil { error.path = path }
                if done > 0 { error.isShortWrite = true }
                throw error
            }
            if n <= 0 { throw SystemCallError(call: "pwrite", errno: 5 /* EIO */, path: path, isShortWrite: true) }
            done += n
        }
    }

    /// Reads exactly `buffer.count` bytes at `offset`; returns fewer only at end of file.
    package func readAll(_ fd: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64, path: String? = nil) throws(SystemCallError) -> Int {
        var done = 0
        while done < buffer.count {
            let rest = UnsafeMutableRawBufferPointer(rebasing: buffer[done...])
            let n: Int
            do {
                n = try read(fd, into: rest, at: offset + UInt64(done))
            } catch {
                var error = error
                if error.path == nil { error.path = path }
                throw error
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Reads a file into memory, from `offset` (the start by default) to its end.
    package func readFile(_ path: String, from offset: Int = 0) throws(SystemCallError) -> [UInt8] {
        try readFile(path, header: 0, from: offset).tail
    }

    /// Reads a file's first `header` bytes (fewer when it is shorter) and
    /// its bytes from `offset` to its end, through one open: a reader that
    /// reads on in a file can check that the file is still the one it read.
    ///
    /// `atMost`: read no more than this many bytes from `offset` (a log
    /// made ahead of its frames is zeros past them, to its end).
    package func readFile(_ path: String, header: Int, from offset: Int, atMost limit: Int = .max) throws(SystemCallError) -> (header: [UInt8], tail: [UInt8]) {
        let fd = try open(path, .readOnly)
        defer { try? close(fd) }
        var head = [UInt8](repeating: 0, count: header)
        if header > 0 {
            let n = try head.withUnsafeMutableBytes { buffer in
                Result { () throws(SystemCallError) -> Int in try readAll(fd, into: buffer, at: 0, path: path) }
            }.get()
            if n < head.count { head.removeLast(head.count - n) }
        }
        return (head, try readTail(fd, from: offset, atMost: limit, path: path))
    }

    private func readTail(_ fd: FileDescriptor, from offset: Int, atMost limit: Int, path: String) throws(SystemCallError) -> [UInt8] {
        let size = Int(try self.size(fd))
        guard size > offset else { return [] }
        var bytes = [UInt8](repeating: 0, count: min(size - offset, limit))
        let n = try bytes.withUnsafeMutableBytes { buffer in
            Result { () throws(SystemCallError) -> Int in try readAll(fd, into: buffer, at: UInt64(offset), path: path) }
        }.get()
        if n < bytes.count { bytes.removeLast(bytes.count - n) }
        return bytes
    }
}
