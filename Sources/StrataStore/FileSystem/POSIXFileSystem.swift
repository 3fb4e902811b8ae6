import CStrataSystem
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// The real ``FileSystem``: thin wrappers over the POSIX system calls.
///
/// Each wrapper makes one syscall (two or three for ``listDirectory(_:)`` and
/// ``syncDirectory(_:)``), retries it while it fails with `EINTR`, and
/// otherwise throws ``SystemCallError`` with the call's name, `errno` and, for
/// path-based calls, the path. fd-based calls leave ``SystemCallError/path``
/// nil; ``FileSystem/writeAll(_:_:at:path:)`` and friends fill it in.
/// Every descriptor is opened `O_CLOEXEC`, so none leaks into a child process.
package struct POSIXFileSystem: FileSystem {
    package init() {}

    /// `open(2)` with `O_CLOEXEC` and, for the creating modes, mode 0600
    /// (less the umask). Fails with `ENOENT` (missing file or parent directory,
    /// for `.readOnly`/`.readWrite`), `EEXIST` (`.createNew` on an existing
    /// path), `EACCES`, `EISDIR` (a directory opened for writing), `EMFILE`/
    /// `ENFILE` (out of descriptors).
    package func open(_ path: String, _ mode: FileOpenMode) throws(SystemCallError) -> FileDescriptor {
        let flags: Int32
        switch mode {
        case .readOnly: flags = O_RDONLY
        case .readWrite: flags = O_RDWR
        case .createNew: flags = O_RDWR | O_CREAT | O_EXCL
        case .createOrOpen: flags = O_RDWR | O_CREAT
        }
        let fd = try retryingEINTR("open", path) { systemOpen(path, flags | O_CLOEXEC, 0o600) }
        return FileDescriptor(rawValue: fd)
    }

    /// `close(2)`. Never retried: the descriptor is released even when close
    /// fails, so a retry could close a descriptor another thread just opened.
    /// An `EINTR` is therefore treated as success; `EBADF` and `EIO` (a
    /// deferred write error on some file systems) throw.
    package func close(_ fd: FileDescriptor) throws(SystemCallError) {
        if systemClose(fd.rawValue) == -1 {
            let code = errno
            if code != EINTR { throw SystemCallError(call: "close", errno: code) }
        }
    }

    /// `pread(2)`: reads up to `buffer.count` bytes (at most 1 GiB per call) at
    /// `offset`; returns 0 at end of file. Fails with `EIO`, `EBADF`, `EISDIR`,
    /// `EINVAL` (offset beyond `Int64.max`).
    package func read(_ fd: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(SystemCallError) -> Int {
        let position = try fileOffset(offset, call: "pread")
        let count = min(buffer.count, maximumTransfer)
        return try retryingEINTR("pread", nil) { pread(fd.rawValue, buffer.baseAddress, count, position) }
    }

    /// `pwrite(2)`: writes up to `bytes.count` bytes (at most 1 GiB per call,
    /// since Darwin rejects more than `INT_MAX`) at `offset`; returns how many
    /// were written, which may be fewer. Fails with `ENOSPC`, `EDQUOT`, `EIO`,
    /// `EFBIG`, `EBADF` (not open for writing), `EINVAL` (offset beyond `Int64.max`).
    package func write(_ fd: FileDescriptor, _ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(SystemCallError) -> Int {
        let position = try fileOffset(offset, call: "pwrite")
        let count = min(bytes.count, maximumTransfer)
        return try retryingEINTR("pwrite", nil) { pwrite(fd.rawValue, bytes.baseAddress, count, position) }
    }

    /// `fdatasync(2)` on Linux; on Darwin `fcntl(F_FULLFSYNC)`, which also
    /// flushes the drive's cache, falling back to `fsync(2)` when the file
    /// system does not support it (`ENOTSUP`, `ENOTTY`, `EINVAL`: SMB, FAT).
    /// Fails with `EIO` (or `ENOSPC`/`EDQUOT`): the kernel may then have
    /// dropped the dirty pages, so the caller must treat the file's unsynced
    /// contents as lost, never retry and carry on.
    package func sync(_ fd: FileDescriptor) throws(SystemCallError) {
        #if canImport(Darwin)
        var result = fcntl(fd.rawValue, F_FULLFSYNC)
        while result == -1 && errno == EINTR { result = fcntl(fd.rawValue, F_FULLFSYNC) }
        if result != -1 { return }
        let code = errno
        guard code == ENOTSUP || code == ENOTTY || code == EINVAL else {
            throw SystemCallError(call: "fcntl", errno: code)
        }
        _ = try retryingEINTR("fsync", nil) { fsync(fd.rawValue) }
        #else
        _ = try retryingEINTR("fdatasync", nil) { fdatasync(fd.rawValue) }
        #endif
    }

    /// `sync_file_range(2)` with `SYNC_FILE_RANGE_WRITE` (through the C shim
    /// `strata_start_writeback`, as Glibc's module leaves the call out):
    /// queues the range's dirty pages for writeback. Fails with `ENOSYS` off
    /// Linux, `EBADF`, `ESPIPE`, `EIO`.
    package func startWriteback(_ fd: FileDescriptor, offset: UInt64, length: UInt64) throws(SystemCallError) {
        let start = try fileOffset(offset, call: "sync_file_range")
        let count = try fileOffset(length, call: "sync_file_range")
        _ = try retryingEINTR("sync_file_range", nil) { strata_start_writeback(fd.rawValue, Int64(start), Int64(count)) }
    }

    /// `ftruncate(2)`: cuts or zero-extends the file to `size`. Fails with
    /// `EINVAL` (not open for writing, or size beyond `Int64.max`), `EFBIG`, `EIO`.
    package func truncate(_ fd: FileDescriptor, to size: UInt64) throws(SystemCallError) {
        let length = try fileOffset(size, call: "ftruncate")
        _ = try retryingEINTR("ftruncate", nil) { ftruncate(fd.rawValue, length) }
    }

    /// `posix_fallocate(2)` from 0 to `size`, which returns its error
    /// rather than setting `errno`. `EOPNOTSUPP` off Linux.
    package func allocate(_ fd: FileDescriptor, size: UInt64) throws(SystemCallError) {
        #if os(Linux)
        let length = try fileOffset(size, call: "posix_fallocate")
        var code = posix_fallocate(fd.rawValue, 0, length)
        while code == EINTR { code = posix_fallocate(fd.rawValue, 0, length) }
        if code != 0 { throw SystemCallError(call: "posix_fallocate", errno: code) }
        #else
        throw SystemCallError(call: "posix_fallocate", errno: EOPNOTSUPP)
        #endif
    }

    /// `fstat(2)`'s `st_size`. Fails with `EBADF`, `EIO`.
    package func size(_ fd: FileDescriptor) throws(SystemCallError) -> UInt64 {
        var info = stat()
        _ = try retryingEINTR("fstat", nil) { fstat(fd.rawValue, &info) }
        return UInt64(info.st_size)
    }

    /// `flock(fd, LOCK_EX | LOCK_NB)`. Fails with `EWOULDBLOCK` (== `EAGAIN`)
    /// when another open file description holds the lock, including another
    /// `open` of the same file in this process. The lock goes with the last
    /// close of this descriptor.
    package func lockExclusive(_ fd: FileDescriptor) throws(SystemCallError) {
        _ = try retryingEINTR("flock", nil) { flock(fd.rawValue, LOCK_EX | LOCK_NB) }
    }

    /// The `flock` holder of `fd`'s file, from `/proc/locks`: the line of a
    /// held (not waited-for) `FLOCK` on the file's device and inode names the
    /// process that took it. Linux only; nil elsewhere and on any failure.
    package func lockHolder(_ fd: FileDescriptor) -> LockHolder? {
        #if os(Linux)
        var info = stat()
        guard fstat(fd.rawValue, &info) == 0, let locks = Self.readWhole("/proc/locks") else { return nil }
        let device = UInt64(info.st_dev)
        // The kernel's MAJOR() and MINOR() of a dev_t as glibc encodes it.
        let major = ((device >> 8) & 0xFFF) | ((device >> 32) & ~UInt64(0xFFF))
        let minor = (device & 0xFF) | ((device >> 12) & ~UInt64(0xFF))
        // "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234567 0 EOF"; a waiter's line has "->" after the number.
        for line in locks.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 6, fields[1] == "FLOCK", let pid = Int32(fields[4]) else { continue }
            let file = fields[5].split(separator: ":")
            guard file.count == 3, UInt64(file[0], radix: 16) == major, UInt64(file[1], radix: 16) == minor,
                  UInt64(file[2]) == UInt64(info.st_ino) else { continue }
            let command = Self.readWhole("/proc/\(pid)/comm").map { $0.split(separator: "\n").first.map(String.init) ?? $0 }
            return LockHolder(pid: pid, command: command, isThisProcess: pid == getpid())
        }
        #endif
        return nil
    }

    /// A file read to its end, as text: for `/proc` files, whose size
    /// `fstat` reports as 0. Nil on any failure.
    private static func readWhole(_ path: String) -> String? {
        let fd = systemOpen(path, O_RDONLY | O_CLOEXEC, 0)
        guard fd >= 0 else { return nil }
        defer { _ = systemClose(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { systemRead(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { return String(decoding: bytes, as: UTF8.self) }
            bytes += chunk[..<count]
        }
    }

    /// `rename(2)`: atomically replaces `destination` (durable only once the
    /// directory is synced). Fails with `ENOENT` (no source), `EXDEV` (across
    /// file systems), `EISDIR`/`ENOTDIR`/`ENOTEMPTY` (kind mismatch), `ENOSPC`.
    /// The error's path is `source`.
    package func rename(_ source: String, to destination: String) throws(SystemCallError) {
        _ = try retryingEINTR("rename", source) { systemRename(source, destination) }
    }

    /// `unlink(2)`: removes a file (not a directory). Fails with `ENOENT`,
    /// `EISDIR`/`EPERM` (a directory), `EACCES`.
    package func remove(_ path: String) throws(SystemCallError) {
        _ = try retryingEINTR("unlink", path) { unlink(path) }
    }

    /// `mkdir(2)` with mode 0700 (less the umask). Fails with `EEXIST`,
    /// `ENOENT` (missing parent), `EACCES`, `ENOSPC`.
    package func makeDirectory(_ path: String) throws(SystemCallError) {
        _ = try retryingEINTR("mkdir", path) { mkdir(path, 0o700) }
    }

    /// `opendir(3)`/`readdir(3)`/`closedir(3)`: the names in `path` except
    /// "." and "..", sorted so that workloads (and fault-injection logs) are
    /// deterministic. Fails with "opendir" `ENOENT`/`ENOTDIR`/`EACCES`/`EMFILE`,
    /// or "readdir" `EIO`.
    package func listDirectory(_ path: String) throws(SystemCallError) -> [String] {
        var stream = opendir(path)
        while stream == nil {
            let code = errno
            if code != EINTR { throw SystemCallError(call: "opendir", errno: code, path: path) }
            stream = opendir(path)
        }
        let directory = stream!
        defer { closedir(directory) }
        let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = readdir(directory) else {
                let code = errno
                if code != 0 { throw SystemCallError(call: "readdir", errno: code, path: path) }
                break
            }
            let name = String(cString: (UnsafeRawPointer(entry) + nameOffset).assumingMemoryBound(to: CChar.self))
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    /// Opens `path` with `O_RDONLY | O_DIRECTORY | O_CLOEXEC`, `fsync(2)`s it and
    /// closes it, so that entries created, renamed or removed in it survive a
    /// crash. Fails with "open" `ENOENT`/`ENOTDIR`, or "fsync" `EIO`.
    package func syncDirectory(_ path: String) throws(SystemCallError) {
        let fd = try retryingEINTR("open", path) { systemOpen(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0) }
        do {
            _ = try retryingEINTR("fsync", path) { fsync(fd) }
        } catch {
            _ = systemClose(fd)
            throw error
        }
        if systemClose(fd) == -1 {
            let code = errno
            if code != EINTR { throw SystemCallError(call: "close", errno: code, path: path) }
        }
    }

    /// `stat(2)`, following symbolic links: nil when nothing is at `path`
    /// (`ENOENT`). Fails with `ENOTDIR` (a path component is a file), `EACCES`.
    package func status(_ path: String) throws(SystemCallError) -> FileStatus? {
        var info = stat()
        while stat(path, &info) == -1 {
            let code = errno
            if code == ENOENT { return nil }
            if code != EINTR { throw SystemCallError(call: "stat", errno: code, path: path) }
        }
        #if canImport(Darwin)
        let modified = UInt64(truncatingIfNeeded: info.st_mtimespec.tv_sec) &* 1_000_000_000 &+ UInt64(truncatingIfNeeded: info.st_mtimespec.tv_nsec)
        #else
        let modified = UInt64(truncatingIfNeeded: info.st_mtim.tv_sec) &* 1_000_000_000 &+ UInt64(truncatingIfNeeded: info.st_mtim.tv_nsec)
        #endif
        return FileStatus(isDirectory: (info.st_mode & S_IFMT) == S_IFDIR, size: UInt64(info.st_size),
                          identity: [UInt64(truncatingIfNeeded: info.st_dev), UInt64(truncatingIfNeeded: info.st_ino), modified])
    }
}

/// The most ``POSIXFileSystem`` reads or writes in one call: Darwin fails
/// transfers over `INT_MAX` with `EINVAL`, and Linux stops short of 2 GiB anyway.
private let maximumTransfer = 1 << 30

/// Runs `body` until it returns something other than -1 with `errno == EINTR`;
/// throws any other failure as `call` on `path`.
@inline(__always)
private func retryingEINTR<Result: FixedWidthInteger>(
    _ call: String, _ path: String?, _ body: () -> Result
) throws(SystemCallError) -> Result {
    while true {
        let result = body()
        if result != -1 { return result }
        let code = errno
        if code != EINTR { throw SystemCallError(call: call, errno: code, path: path) }
    }
}

/// `offset` as an `off_t`, or `EINVAL` when it does not fit.
@inline(__always)
private func fileOffset(_ offset: UInt64, call: String) throws(SystemCallError) -> off_t {
    guard let position = off_t(exactly: offset) else { throw SystemCallError(call: call, errno: EINVAL) }
    return position
}

// The libc functions whose names ``POSIXFileSystem``'s own methods shadow.
private func systemOpen(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 { open(path, flags, mode) }
private func systemClose(_ fd: Int32) -> Int32 { close(fd) }
private func systemRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int { read(fd, buffer, count) }
private func systemRename(_ source: String, _ destination: String) -> Int32 { rename(source, destination) }
