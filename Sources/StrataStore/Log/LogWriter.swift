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
    /// Whether this log's writes are left to the OS (`.none`): then it starts
    /// their writeback as it goes (``append(_:)``).
    private let startsWritebackEarly: Bool
    /// Where the writeback last started ends.
    private var writebackStart: UInt64 = 0
    /// How long a durable log's file is made ahead of its frames
    /// (``FileSystem/allocate(_:size:)``), or nil: the file grows with each
    /// append (a log left to the OS, or a file system that refused). The
    /// sync after each batch then writes the batch alone, not the file's
    /// new size with it (a good part of a small batch's sync, when the
    /// file grows). What follows the frames reads as zeros, which end a
    /// log (``LogFormat``); ``close()`` cuts them off.
    private var allocatedEnd: UInt64?

    /// How far ahead of its frames a durable log's file is made at a time:
    /// 1 MiB, or the log's size limit when that is less.
    private let allocationStep: UInt64

    /// How much a log left to the OS writes between two starts of writeback.
    static let writebackStep: UInt64 = 4 << 20

    /// Creates a new log file and writes its header. With `durable`, the file
    /// and its directory entry are fsynced before this returns, so that frames
    /// later acknowledged as durable are never in a file a crash can lose.
    /// `sizeLimit`: the size at which the store moves on to a new log.
    package init(fileSystem: any FileSystem, directory: String, fileNumber: UInt32, durable: Bool, sizeLimit: Int) throws(SystemCallError) {
        self.fileSystem = fileSystem
        self.fileNumber = fileNumber
        self.path = directory + "/" + LogFormat.fileName(fileNumber)
        var generator = SystemRandomNumberGenerator()
        var salt = UInt32.random(in: 1...UInt32.max, using: &generator)
        if salt == 0 { salt = 1 }
        self.salt = salt
        self.startsWritebackEarly = !durable
        self.allocationStep = UInt64(min(1 << 20, max(sizeLimit, 1 << 12)))
        let fd = try fileSystem.open(path, .createNew)
        self.fd = fd
        let header = LogFormat.encodeFileHeader(salt: salt, fileNumber: fileNumber)
        do throws(SystemCallError) {
            let path = self.path
            try header.withBytes { (b) throws(SystemCallError) in try fileSystem.writeAll(fd, b, at: 0, path: path) }
            if durable {
                // Made ahead before the sync, which makes the size durable too.
                if (try? fileSystem.allocate(fd, size: allocationStep)) != nil { allocatedEnd = allocationStep }
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
    ///
    /// A log that is not durable starts the writeback of every
    /// ``writebackStep`` it writes (``FileSystem/startWriteback(_:offset:length:)``):
    /// a rotation syncs the whole log, under every sync mode, before the next
    /// one takes writes, on the write leader with every writer waiting; with
    /// the pages already on their way, that sync has little left to write.
    package func append(_ frames: [UInt8]) throws(SystemCallError) {
        if let end = allocatedEnd, offset + UInt64(frames.count) > end {
            // The next step made ahead; where the file system refuses (full,
            // say), the log grows with its appends from here.
            let next = (offset + UInt64(frames.count) + allocationStep) / allocationStep * allocationStep
            allocatedEnd = (try? fileSystem.allocate(fd, size: next)) != nil ? next : nil
        }
        try frames.withBytes { (b) throws(SystemCallError) in try fileSystem.writeAll(fd, b, at: offset, path: path) }
        offset += UInt64(frames.count)
        if startsWritebackEarly && offset - writebackStart >= Self.writebackStep {
            // A hint: if it fails, the rotation's sync does all the work, and
            // reports any writeback error.
            try? fileSystem.startWriteback(fd, offset: writebackStart, length: offset - writebackStart)
            writebackStart = offset
        }
    }

    /// Makes everything appended so far durable.
    package func sync() throws(SystemCallError) {
        try fileSystem.sync(fd)
    }

    /// Closes the file, cut to its frames first when it was made ahead of
    /// them (a cut that fails leaves zeros after them, which end a log as
    /// its end does).
    package func close() throws(SystemCallError) {
        guard !closed else { return }
        closed = true
        if let end = allocatedEnd, end > offset { try? fileSystem.truncate(fd, to: offset) }
        try fileSystem.close(fd)
    }
}
