import Foundation
import StrataStore

/// A whole file system in memory, so that the harnesses can hand the engine
/// "files" without touching the disk: hundreds of thousands of opens a minute
/// would otherwise be mostly syscalls, and a crash would leave directories behind.
///
/// Paths are plain strings; a directory is any path some file sits under (or
/// one made with `makeDirectory`). Locks always succeed (one process, one store).
final class MemoryFileSystem: FileSystem, @unchecked Sendable {
    // Sendable because: `files`, `directories`, `open` and `nextDescriptor`
    // are guarded by `lock` (the store's background queues may call in).
    private let lock = Lock()
    private var files: [String: [UInt8]] = [:]
    private var directories: Set<String> = []
    private var open: [Int32: String] = [:]
    private var nextDescriptor: Int32 = 3

    init(directory: String, files: [String: [UInt8]] = [:]) {
        directories.insert(directory)
        for (name, bytes) in files { self.files[directory + "/" + name] = bytes }
    }

    /// The contents of every file under `directory`, by name.
    func contents(of directory: String) -> [String: [UInt8]] {
        lock.withLock {
            var result: [String: [UInt8]] = [:]
            for (path, bytes) in files where path.hasPrefix(directory + "/") {
                result[String(path.dropFirst(directory.count + 1))] = bytes
            }
            return result
        }
    }

    private func fail(_ call: String, _ code: Int32, _ path: String?) -> SystemCallError {
        SystemCallError(call: call, errno: code, path: path)
    }

    private func path(of fd: FileDescriptor, _ call: String) throws(SystemCallError) -> String {
        guard let path = open[fd.rawValue] else { throw fail(call, EBADF, nil) }
        return path
    }

    func open(_ path: String, _ mode: FileOpenMode) throws(SystemCallError) -> FileDescriptor {
        try lock.withLock { () throws(SystemCallError) -> FileDescriptor in
            let exists = files[path] != nil
            switch mode {
            case .readOnly, .readWrite:
                guard exists else { throw fail("open", ENOENT, path) }
            case .createNew:
                guard !exists else { throw fail("open", EEXIST, path) }
                files[path] = []
            case .createOrOpen:
                if !exists { files[path] = [] }
            }
            let fd = nextDescriptor
            nextDescriptor += 1
            open[fd] = path
            return FileDescriptor(rawValue: fd)
        }
    }

    func close(_ fd: FileDescriptor) throws(SystemCallError) {
        try lock.withLock { () throws(SystemCallError) in
            guard open.removeValue(forKey: fd.rawValue) != nil else { throw fail("close", EBADF, nil) }
        }
    }

    func read(_ fd: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(SystemCallError) -> Int {
        try lock.withLock { () throws(SystemCallError) -> Int in
            let bytes = files[try path(of: fd, "pread")] ?? []
            guard offset < UInt64(bytes.count) else { return 0 }
            let n = min(buffer.count, bytes.count - Int(offset))
            bytes.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[Int(offset)..<Int(offset) + n])) }
            return n
        }
    }

    func write(_ fd: FileDescriptor, _ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(SystemCallError) -> Int {
        try lock.withLock { () throws(SystemCallError) -> Int in
            let path = try path(of: fd, "pwrite")
            var file = files[path] ?? []
            let end = Int(offset) + bytes.count
            if file.count < end { file.append(contentsOf: repeatElement(0, count: end - file.count)) }
            file.withUnsafeMutableBytes { UnsafeMutableRawBufferPointer(rebasing: $0[Int(offset)..<end]).copyMemory(from: bytes) }
            files[path] = file
            return bytes.count
        }
    }

    func sync(_ fd: FileDescriptor) throws(SystemCallError) {}

    func startWriteback(_ fd: FileDescriptor, offset: UInt64, length: UInt64) throws(SystemCallError) {}

    func truncate(_ fd: FileDescriptor, to size: UInt64) throws(SystemCallError) {
        try lock.withLock { () throws(SystemCallError) in
            let path = try path(of: fd, "ftruncate")
            var file = files[path] ?? []
            if file.count > Int(size) { file.removeLast(file.count - Int(size)) } else { file.append(contentsOf: repeatElement(0, count: Int(size) - file.count)) }
            files[path] = file
        }
    }

    /// `posix_fallocate`: at least `size` long, zeros past what was written.
    func allocate(_ fd: FileDescriptor, size: UInt64) throws(SystemCallError) {
        try lock.withLock { () throws(SystemCallError) in
            let path = try path(of: fd, "posix_fallocate")
            var file = files[path] ?? []
            if file.count < Int(size) { file.append(contentsOf: repeatElement(0, count: Int(size) - file.count)) }
            files[path] = file
        }
    }

    func size(_ fd: FileDescriptor) throws(SystemCallError) -> UInt64 {
        try lock.withLock { () throws(SystemCallError) -> UInt64 in UInt64(files[try path(of: fd, "fstat")]?.count ?? 0) }
    }

    func lockExclusive(_ fd: FileDescriptor) throws(SystemCallError) {}
    func lockHolder(_ fd: FileDescriptor) -> LockHolder? { nil }

    func rename(_ source: String, to destination: String) throws(SystemCallError) {
        try lock.withLock { () throws(SystemCallError) in
            guard let bytes = files.removeValue(forKey: source) else { throw fail("rename", ENOENT, source) }
            files[destination] = bytes
        }
    }

    func remove(_ path: String) throws(SystemCallError) {
        try lock.withLock { () throws(SystemCallError) in
            guard files.removeValue(forKey: path) != nil else { throw fail("unlink", ENOENT, path) }
        }
    }

    func makeDirectory(_ path: String) throws(SystemCallError) {
        try lock.withLock { () throws(SystemCallError) in
            guard directories.insert(path).inserted else { throw fail("mkdir", EEXIST, path) }
        }
    }

    func listDirectory(_ path: String) throws(SystemCallError) -> [String] {
        try lock.withLock { () throws(SystemCallError) -> [String] in
            guard directories.contains(path) else { throw fail("opendir", ENOENT, path) }
            return files.keys.filter { $0.hasPrefix(path + "/") }.map { String($0.dropFirst(path.count + 1)) }.sorted()
        }
    }

    func syncDirectory(_ path: String) throws(SystemCallError) {}

    func status(_ path: String) throws(SystemCallError) -> FileStatus? {
        lock.withLock {
            if directories.contains(path) { return FileStatus(isDirectory: true, size: 0) }
            return files[path].map { FileStatus(isDirectory: false, size: UInt64($0.count)) }
        }
    }
}
