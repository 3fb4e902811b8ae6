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
public final class StoreFollowing: Sendable {
    /// Whether the store's directory is watched (inotify, on Linux); false
    /// when it is looked at every 10 ms instead — another system, or inotify
    /// could not be had (`onError` heard why).
    public let watchesDirectory: Bool
    private let control: Control

    /// Follows `coordinator`'s store, woken by `signal`; `unavailable` is
    /// why there is no descriptor to wait on (`onError` hears it first).
    /// Takes `signal` over: it is closed when following ends, or now if
    /// this throws.
    init(
        signal: any StoreChangeSignal, unavailable: StrataError?, coordinator: PersistentStoreCoordinator,
        onError: @escaping @Sendable (StrataError) -> Void
    ) throws(StrataError) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else {
            let error = errno
            signal.close()
            throw StrataError(.storage, "cannot follow the store: pipe() failed (errno \(error))")
        }
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        }
        let wakeRead = fds[0]
        watchesDirectory = signal.descriptor >= 0
        let control = Control(wakeWrite: fds[1], onError: onError)
        self.control = control
        let thread = Thread { [weak coordinator] in
            control.followingThreadStarted()
            defer { control.end(closing: signal, wakeRead) }
            if let unavailable { control.report(unavailable) }
            Self.follow(signal, wake: wakeRead) { () -> UInt64? in
                guard let coordinator else { return nil }
                // The store's part, under the gate that `cancel()` waits
                // for; the notification and `onError` after it, outside.
                let outcome = control.gate.withLock { () -> Result<PersistentStoreCoordinator.CaughtUp, StrataError>? in
                    guard !control.isCancelled else { return nil }
                    do throws(StrataError) { return .success(try coordinator.catchUpWithoutNotifying()) } catch { return .failure(error) }
                }
                switch outcome {
                case nil:
                    return nil
                case .success(let caughtUp)?:
                    if !control.isCancelled { coordinator.postStoreDidChangeRemotely(caughtUp) }
                    return caughtUp.batches
                case .failure(let error)?:
                    // A closed coordinator has nothing more to follow.
                    if error.code == .noPersistentStore { return nil }
                    control.report(error)
                    return 0
                }
            }
        }
        thread.name = "strata.follow"
        thread.start()
    }

    deinit { control.cancel() }

    /// Stops following: no catch-up starts after this returns, and one
    /// under way when it is called has brought its changes into the store
    /// by then (its contexts' merges queued). It does not wait for the
    /// observers of a ``PersistentStoreCoordinator/storeDidChangeRemotely``
    /// being posted, nor for `onError`, so an observer that waits for the
    /// thread calling this cannot deadlock with it: the notification of the
    /// catch-up under way, or its `onError`, may still come just after this
    /// returns (remove the observer to be sure of silence). `onError` is let
    /// go of. Idempotent; may be called from an observer, from `onError`,
    /// or from anything else that runs on the following thread.
    public func cancel() { control.cancel() }

    /// What the following thread and its ``StoreFollowing`` share. The thread
    /// holds this, never the ``StoreFollowing``: so the last reference to
    /// that is never let go of on the thread, under the gate.
    ///
    /// `@unchecked Sendable`: `cancelled`, `ended`, `onError` and
    /// `followingThread` are guarded by `lock`; `gate` is held by the
    /// thread while a catch-up reads the store (and by `cancel()`, to wait
    /// for it); the wake pipe's write end is written under `lock` and
    /// closed by the thread when it ends, under `lock` (so `cancel()` never
    /// writes to a pipe with no reader, which would raise SIGPIPE).
    private final class Control: @unchecked Sendable {
        let lock = Lock()
        let gate = Lock()
        private var cancelled = false  // guarded by `lock`
        private var ended = false      // guarded by `lock`
        private var onError: (@Sendable (StrataError) -> Void)?  // guarded by `lock`
        /// The following thread, once it runs: a `cancel()` there (a
        /// context let go of under the gate can end an object whose `deinit`
        /// lets go of the last ``StoreFollowing``) does not wait for the
        /// gate it holds. Guarded by `lock`.
        private var followingThread: pthread_t?
        private let wakeWrite: Int32

        init(wakeWrite: Int32, onError: @escaping @Sendable (StrataError) -> Void) {
            self.wakeWrite = wakeWrite
            self.onError = onError
        }

        var isCancelled: Bool { lock.withLock { cancelled } }

        func followingThreadStarted() { lock.withLock { followingThread = pthread_self() } }

        /// Calls `onError` (outside the lock: it may cancel), unless cancelled.
        func report(_ error: StrataError) {
            lock.withLock { onError }?(error)
        }

        func cancel() {
            let onFollowingThread = lock.withLock { () -> Bool in
                let onFollowingThread = followingThread.map { pthread_equal($0, pthread_self()) != 0 } ?? false
                guard !cancelled else { return onFollowingThread }
                cancelled = true
                onError = nil
                // A thread that ended (its coordinator closed) closed the pipe.
                guard !ended else { return onFollowingThread }
                var byte: UInt8 = 1
                _ = write(wakeWrite, &byte, 1)
                return onFollowingThread
            }
            // A catch-up's store work under way ends first. On the following
            // thread there is none to wait for, or it is this thread's own
            // (the flag stops the next one).
            if !onFollowingThread { gate.withLock {} }
        }

        /// The thread's end: its descriptors closed.
        func end(closing signal: any StoreChangeSignal, _ wakeRead: Int32) {
            lock.withLock {
                ended = true
                onError = nil
                signal.close()
                close(wakeRead)
                close(wakeWrite)
            }
        }
    }

    /// Waits for a change (the signal, or a poll interval without one),
    /// drains what came, waits as long as ``CatchUpPacing`` says (for the
    /// rest of a stream's changes to come, drained too), and calls
    /// `catchUp` — which returns the saves it took in, or nil to stop —
    /// until the wake pipe is written or `catchUp` returns nil. A catch-up
    /// runs first, for what changed before the signal began.
    private static func follow(_ signal: any StoreChangeSignal, wake: Int32, catchUp: () -> UInt64?) {
        let watch = signal.descriptor
        // With a signal, the timeout is a safety net; without, it is the poll.
        let timeout: Int32 = watch >= 0 ? 250 : 10
        var fds = [pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
        if watch >= 0 { fds.append(pollfd(fd: watch, events: Int16(POLLIN), revents: 0)) }
        var lastStart = DispatchTime.now().uptimeNanoseconds
        var pacing = CatchUpPacing()
        guard var batches = catchUp() else { return }
        while true {
            // A change that came while the last catch-up ran is a stream's.
            var n = poll(&fds, nfds_t(fds.count), 0)
            let waiting = n > 0
            if n == 0 { n = poll(&fds, nfds_t(fds.count), timeout) }
            if n < 0 && errno != EINTR { return }
            if fds[0].revents != 0 { return }
            signal.drain()
            let wait = pacing.wait(since: DispatchTime.now().uptimeNanoseconds - lastStart, waiting: waiting, batches: batches)
            if wait > 0 {
                usleep(UInt32(wait / 1_000))
                signal.drain()
            }
            lastStart = DispatchTime.now().uptimeNanoseconds
            guard let taken = catchUp() else { return }
            batches = taken
        }
    }
}
