/// Appends frames to one write-ahead log file.
///
/// Owned by the store's write leader: only one thread at a time calls it
/// (see `StrataStore+Write.swift`), so it needs no lock of its own.
package final class LogWriter {
    package let fileNumber: UInt32
    package let path: String
    package let salt: UInt32
    private let fileSystem: any FileSystem
    private let fd: FileDescriptor
    /// Where the next frame goes: the end of the valid log.
    package private(set) var offset: UInt64
    private var closed = false

    /// Creates a new log file and writes its header. With `durable`, the file
    /// and its directory entry are fsynced before this returns, so that frames
    /// later acknowledged as durable are never in a file a crash can lose.
    package init(fileSystem: any FileSystem, directory: String, fileNumber: UInt32, durable: Bool) throws(SystemCallError) {
        self.fileSystem = fileSystem
        self.fileNumber = fileNumber
        self.path = directory + "/" + LogFormat.fileName(fileNumber)
        var generator = SystemRandomNumberGenerator()
        var salt = UInt32.random(in: 1...UInt32.max, using: &generator)
        if salt == 0 { salt = 1 }
        self.salt = salt
        let fd = try fileSystem.open(path, .createNew)
        self.fd = fd
        let header = LogFormat.encodeFileHeader(salt: salt, fileNumber: fileNumber)
        do throws(SystemCallError) {
            let path = self.path
            try header.withBytes { (b) throws(SystemCallError) in try fileSystem.writeAll(fd, b, at: 0, path: path) }
            if durable {
                try fileSystem.sync(fd)
                try fileSystem.syncDirectory(directory)
            }
        } catch {
            try? fileSystem.close(fd)
            closed = true
            throw error
        }
        offset = UInt64(header.count)
    }

    deinit { if !closed { try? fileSystem.close(fd) } }

    /// Writes `frames` (whole frames, encoded by ``LogFormat/appendFrame``) at the end of the log.
    package func append(_ frames: [UInt8]) throws(SystemCallError) {
        try frames.withBytes { (b) throws(SystemCallError) in try fileSystem.writeAll(fd, b, at: offset, path: path) }
        offset += UInt64(frames.count)
    }

    /// Makes everything appended so far durable.
    package func sync() throws(SystemCallError) {
        try fileSystem.sync(fd)
    }

    package func close() throws(SystemCallError) {
        guard !closed else { return }
        closed = true
        try fileSystem.close(fd)
    }
}
