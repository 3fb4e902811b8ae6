/// A file system that passes every call to `base` unless it overrides it:
/// the starting point for test doubles that change one call (a slow or a
/// held-shut fsync) and leave the rest to the real thing.
///
/// ```swift
/// struct SlowSync: ForwardingFileSystem {
///     let base: any FileSystem = POSIXFileSystem()
///     func sync(_ fd: FileDescriptor) throws(SystemCallError) {
///         Thread.sleep(forTimeInterval: 0.005)
///         try base.sync(fd)
///     }
/// }
/// ```
package protocol ForwardingFileSystem: FileSystem {
    var base: any FileSystem { get }
}

extension ForwardingFileSystem {
    package func open(_ path: String, _ mode: FileOpenMode) throws(SystemCallError) -> FileDescriptor { try base.open(path, mode) }
    package func close(_ fd: FileDescriptor) throws(SystemCallError) { try base.close(fd) }
    package func read(_ fd: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(SystemCallError) -> Int {
        try base.read(fd, into: buffer, at: offset)
    }
    package func write(_ fd: FileDescriptor, _ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(SystemCallError) -> Int {
        try base.write(fd, bytes, at: offset)
    }
    package func sync(_ fd: FileDescriptor) throws(SystemCallError) { try base.sync(fd) }
    package func startWriteback(_ fd: FileDescriptor, offset: UInt64, length: UInt64) throws(SystemCallError) {
        try base.startWriteback(fd, offset: offset, length: length)
    }
    package func truncate(_ fd: FileDescriptor, to size: UInt64) throws(SystemCallError) { try base.truncate(fd, to: size) }
    package func allocate(_ fd: FileDescriptor, size: UInt64) throws(SystemCallError) { try base.allocate(fd, size: size) }
    package func size(_ fd: FileDescriptor) throws(SystemCallError) -> UInt64 { try base.size(fd) }
    package func lockExclusive(_ fd: FileDescriptor) throws(SystemCallError) { try base.lockExclusive(fd) }
    package func lockHolder(_ fd: FileDescriptor) -> LockHolder? { base.lockHolder(fd) }
    package func rename(_ source: String, to destination: String) throws(SystemCallError) { try base.rename(source, to: destination) }
    package func remove(_ path: String) throws(SystemCallError) { try base.remove(path) }
    package func makeDirectory(_ path: String) throws(SystemCallError) { try base.makeDirectory(path) }
    package func listDirectory(_ path: String) throws(SystemCallError) -> [String] { try base.listDirectory(path) }
    package func syncDirectory(_ path: String) throws(SystemCallError) { try base.syncDirectory(path) }
    package func status(_ path: String) throws(SystemCallError) -> FileStatus? { try base.status(path) }
}
