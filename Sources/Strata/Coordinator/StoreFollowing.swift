import Foundation
internal import StrataStore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// A coordinator following the store it opened read-only, from
/// ``PersistentStoreCoordinator/followStore(onError:)``: each change to the
/// store's files brings a ``PersistentStoreCoordinator/catchUpWithStore()``,
/// on a thread of its own, until ``cancel()`` or the end of this object.
/// It does not keep the coordinator alive.
///
/// `@unchecked Sendable`: `cancelled`, `ended` and `followingThread` are
/// guarded by `lock`; the descriptors are made by `init` and closed by the
/// thread when it ends, under `lock` (so ``cancel()`` never writes to a
/// pipe with no reader, which would raise SIGPIPE).
public final class StoreFollowing: @unchecked Sendable {
    private let lock = Lock()
    private var cancelled = false  // guarded by `lock`
    private var ended = false      // guarded by `lock`
    /// The following thread, once it runs: ``cancel()`` called on it
    /// (from `onError`) does not wait for itself. Guarded by `lock`.
    private var followingThread: pthread_t?
    /// Written to by ``cancel()`` to wake the thread.
    private let wakeWrite: Int32
    /// Signalled by the thread when it ends.
    private let finished = DispatchSemaphore(value: 0)

    init(directory: String, coordinator: PersistentStoreCoordinator, onError: @escaping @Sendable (StrataError) -> Void) throws(StrataError) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else {
            throw StrataError(.storage, "cannot follow the store: pipe() failed (errno \(errno))")
        }
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        }
        let wakeRead = fds[0]
        wakeWrite = fds[1]
        #if os(Linux)
        let watch = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        // Appends to a log, new logs and segments, the manifest's switch.
        if watch >= 0, inotify_add_watch(watch, directory, UInt32(IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_DELETE)) < 0 {
            let error = errno
            close(watch)
            close(wakeRead)
            close(wakeWrite)
            throw StrataError(.storage, "cannot watch \(directory) for the writer's changes (inotify_add_watch: errno \(error))")
        }
        #else
        let watch: Int32 = -1
        #endif
        let finished = self.finished
        let started = DispatchSemaphore(value: 0)
        let wakeWrite = self.wakeWrite
        let lock = self.lock
        let thread = Thread { [weak self, weak coordinator] in
            lock.withLock { self?.followingThread = pthread_self() }
            started.signal()
            defer {
                lock.withLock {
                    self?.ended = true
                    if watch >= 0 { close(watch) }
                    close(wakeRead)
                    close(wakeWrite)
                }
                finished.signal()
            }
            Self.follow(watch: watch, wake: wakeRead) { () -> Bool in
                guard let coordinator else { return false }
                do throws(StrataError) { try coordinator.catchUpWithStore() } catch {
                    // A closed coordinator has nothing more to follow.
                    if error.code == .noPersistentStore { return false }
                    onError(error)
                }
                return true
            }
        }
        thread.name = "strata.follow"
        thread.start()
        started.wait()
    }

    deinit { cancel() }

    /// Stops following: no catch-up starts after this returns (one under
    /// way when it is called ends first). Idempotent.
    public func cancel() {
        let wait = lock.withLock { () -> Bool in
            guard !cancelled else { return false }
            cancelled = true
            // A thread that ended (its coordinator closed) closed the pipe.
            guard !ended else { return false }
            var byte: UInt8 = 1
            _ = write(wakeWrite, &byte, 1)
            // On the thread itself the wake is seen once `onError` returns.
            return !(followingThread.map { pthread_equal($0, pthread_self()) != 0 } ?? false)
        }
        if wait { finished.wait() }
    }

    /// The shortest time between the starts of two catch-ups: a writer
    /// saving thousands of times a second wakes each reader at most this
    /// often, each catch-up taking in every save since the last.
    static let minimumInterval: UInt64 = 1_000_000  // nanoseconds

    /// Waits for a change (an inotify event, or a poll interval without
    /// one), drains what came, and calls `catchUp`, until the wake pipe
    /// is written or `catchUp` returns false. A catch-up runs first, for
    /// what changed before the watch began.
    private static func follow(watch: Int32, wake: Int32, catchUp: () -> Bool) {
        // With a watch, the timeout is a safety net; without, it is the poll.
        let timeout: Int32 = watch >= 0 ? 250 : 10
        var fds = [pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
        if watch >= 0 { fds.append(pollfd(fd: watch, events: Int16(POLLIN), revents: 0)) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        // The events say only that something changed: all of them are
        // drained, and one catch-up reads what they announce.
        func drain() {
            guard watch >= 0 else { return }
            while buffer.withUnsafeMutableBytes({ read(watch, $0.baseAddress, $0.count) }) > 0 {}
        }
        var lastStart = DispatchTime.now().uptimeNanoseconds
        guard catchUp() else { return }
        while true {
            let n = poll(&fds, nfds_t(fds.count), timeout)
            if n < 0 && errno != EINTR { return }
            if fds[0].revents != 0 { return }
            drain()
            let since = DispatchTime.now().uptimeNanoseconds - lastStart
            if since < minimumInterval {
                usleep(UInt32((minimumInterval - since) / 1_000))
                drain()
            }
            lastStart = DispatchTime.now().uptimeNanoseconds
            guard catchUp() else { return }
        }
    }
}
