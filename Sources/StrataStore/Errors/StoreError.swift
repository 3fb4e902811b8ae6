/// An error thrown by ``StrataStore``.
///
/// Every error carries a ``Code`` to switch on, a message a person can read,
/// the file and offset it concerns where there is one, the `errno` of a failed
/// system call where there is one, and the source location that raised it
/// (modelled on swift-nio's `FileSystemError`).
///
/// ```swift
/// do {
///     let store = try StrataStore(directory: "/var/lib/app/store")
/// } catch let error as StoreError where error.code == .locked {
///     print("another process has the store open:", error.message)
/// }
/// ```
public struct StoreError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        fileprivate enum Value: String, Sendable {
            case notFound, notAStore, unsupportedVersion, locked, corruption
            case ioFailure, storeFailed, closed, invalidArgument, readOnly
        }
        fileprivate var value: Value

        /// The store directory or a file it needs does not exist.
        public static let notFound = Code(value: .notFound)
        /// The directory or file is not a Strata store (wrong magic).
        public static let notAStore = Code(value: .notAStore)
        /// The store was written by a format version this build does not read.
        public static let unsupportedVersion = Code(value: .unsupportedVersion)
        /// Another process, or another open in this process, holds the store's
        /// lock. On Linux the message names the holder: its process ID and
        /// command, or "another open in this process".
        public static let locked = Code(value: .locked)
        /// A checksum or structure check failed; ``StoreError/path`` and
        /// ``StoreError/offset`` say where.
        public static let corruption = Code(value: .corruption)
        /// A system call failed; ``StoreError/errno`` says why.
        public static let ioFailure = Code(value: .ioFailure)
        /// An earlier write or fsync failed, so the store refuses writes until
        /// it is reopened (the kernel may have dropped the unsynced pages).
        public static let storeFailed = Code(value: .storeFailed)
        /// The store was closed.
        public static let closed = Code(value: .closed)
        /// The call's arguments are not acceptable (an empty or oversized key, say).
        public static let invalidArgument = Code(value: .invalidArgument)
        /// The store was opened read-only and a write was attempted.
        public static let readOnly = Code(value: .readOnly)

        public var description: String { value.rawValue }
    }

    /// What kind of failure this is.
    public var code: Code
    /// A sentence saying what went wrong.
    public var message: String
    /// The file concerned, if any.
    public var path: String?
    /// The byte offset in ``path`` concerned, if any.
    public var offset: UInt64?
    /// The `errno` of the failed system call, if any.
    public var errno: Int32?
    /// The error underneath this one, if any.
    public var cause: (any Error & Sendable)?
    /// Where in Strata's source the error was raised.
    public var location: SourceLocation

    /// A place in Strata's source code.
    public struct SourceLocation: Sendable, Hashable, CustomStringConvertible {
        /// The source file, as `#fileID` gives it (`Module/File.swift`).
        public var file: String
        /// The line in that file.
        public var line: Int
        public var description: String { "\(file):\(line)" }

        package init(file: String, line: Int) {
            self.file = file
            self.line = line
        }
    }

    package init(
        _ code: Code,
        _ message: String,
        path: String? = nil,
        offset: UInt64? = nil,
        errno: Int32? = nil,
        cause: (any Error & Sendable)? = nil,
        file: String = #fileID,
        line: Int = #line
    ) {
        self.code = code
        self.message = message
        self.path = path
        self.offset = offset
        self.errno = errno
        self.cause = cause
        self.location = SourceLocation(file: file, line: line)
    }

    public var description: String {
        "StoreError.\(code): \(message)" + details
    }

    /// What the description says besides the message: the file, the
    /// `errno`, the cause (bracketed, each with a leading space). An error
    /// that wraps this one with the same message shows these alone, so the
    /// message is said once.
    package var details: String {
        var text = ""
        if let path { text += " [file: \(path)" + (offset.map { " @ offset \($0)" } ?? "") + "]" }
        if let errno { text += " [errno \(errno): \(String(cString: strerror(errno)))]" }
        if let cause { text += " [cause: \(cause)]" }
        return text
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

extension StoreError {
    /// A read that may have missed a key because a chunk of the index
    /// checkpoint could be neither read nor rebuilt from the segments (see
    /// `CheckpointChunkFiller`): the checkpoint is gone, so reopening the
    /// store rebuilds its index from the segments, and nothing is lost.
    static func damagedIndex(_ why: String, path: String? = nil, file: String = #fileID, line: Int = #line) -> StoreError {
        StoreError(.corruption, "\(why); reopen the store to rebuild its index from the segments", path: path, file: file, line: line)
    }
}
