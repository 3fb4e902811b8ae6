#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// What wakes a coordinator following a store that another process writes
/// (``StoreFollowing``): a descriptor that becomes readable when the store
/// may have changed. A signal only says "look" — it may come for nothing,
/// and several changes may come as one — and the catch-up reads what
/// changed from the store; so a signal lost (a dropped connection, a
/// full event queue) costs a delay, never a change.
protocol StoreChangeSignal: AnyObject, Sendable {
    /// A descriptor to poll for reading; -1 when there is none, and the
    /// follower looks at the store at an interval instead.
    var descriptor: Int32 { get }
    /// Reads away, without blocking, what made ``descriptor`` readable.
    func drain()
    /// Closes ``descriptor``: called once, by the following thread as it
    /// ends (or by ``StoreFollowing`` when it cannot start one).
    func close()
}

/// The log store's signal: an inotify watch on the store's directory for
/// the writer's changes — appends to a log, new logs and segments, the
/// manifest's switch (Linux; elsewhere none, and the follower polls).
final class DirectoryWatch: StoreChangeSignal {
    let descriptor: Int32

    /// A watch on `directory`, or none and why there is none (another
    /// system: no reason). `makeWatch` makes the inotify instance (a seam:
    /// tests make it fail). Throws ``StrataError/Code/storage`` when the
    /// instance is had but the directory cannot be watched.
    static func watching(_ directory: String, makeWatch: () -> Int32) throws(StrataError) -> (DirectoryWatch, unavailable: StrataError?) {
        #if os(Linux)
        let watch = makeWatch()
        guard watch >= 0 else {
            let error = errno
            return (DirectoryWatch(descriptor: -1), StrataError(.storage, """
                cannot watch \(directory) for the writer's changes (inotify_init1: errno \(error); the per-user limit \
                fs.inotify.max_user_instances may be reached): following by looking every 10 ms instead
                """))
        }
        guard inotify_add_watch(watch, directory, UInt32(IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_DELETE)) >= 0 else {
            let error = errno
            closeDescriptor(watch)
            throw StrataError(.storage, "cannot watch \(directory) for the writer's changes (inotify_add_watch: errno \(error))")
        }
        return (DirectoryWatch(descriptor: watch), nil)
        #else
        return (DirectoryWatch(descriptor: -1), nil)
        #endif
    }

    /// A new inotify instance (-1 where there is none).
    static func makeWatch() -> Int32 {
        #if os(Linux)
        inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        #else
        -1
        #endif
    }

    private init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// The events say only that something changed: all of them are read
    /// away, and one catch-up reads what they announce.
    func drain() {
        guard descriptor >= 0 else { return }
        withUnsafeTemporaryAllocation(byteCount: 4096, alignment: 8) { buffer in
            while read(descriptor, buffer.baseAddress, buffer.count) > 0 {}
        }
    }

    func close() {
        if descriptor >= 0 { closeDescriptor(descriptor) }
    }
}

/// `close(2)`, out of reach of the signals' own `close()`.
private func closeDescriptor(_ descriptor: Int32) {
    _ = close(descriptor)
}
