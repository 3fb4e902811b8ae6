import Dispatch

/// Makes libdispatch create the descriptors it creates lazily, and traps
/// without, before a store takes descriptors.
///
/// On Linux, libdispatch makes two of them on first use and crashes the
/// process if the call fails (`DISPATCH_INTERNAL_CRASH`, `EMFILE`):
///
/// - its event loop, an epoll instance and an eventfd, made when the first
///   worker of a global queue starts — one for Swift's tasks, for
///   `DispatchQueue.global().async`, for `concurrentPerform`;
/// - the main queue's eventfd, made by the first `DispatchQueue.main.async`
///   while the main thread drains the main queue itself (a run loop; after
///   `dispatchMain()` the main queue runs on a worker and needs none).
///
/// A store that took the last descriptors reports `EMFILE` as a typed error;
/// the app's next such hop (Strata's own main-queue notifications and save
/// completions among them) would then turn it into a crash.
/// ResourceLimitTests caught the first on CI: a container's store opened
/// segments on one thread while a global worker started on another.
///
/// So the first store opened in a process starts one global worker and waits
/// for it, and posts an empty block to the main queue (once per process). The
/// store's own queues (`flushQueue`, a context's private queue) are overcommit
/// queues, whose workers make nothing. The wait is bounded at 100 ms: from a
/// Swift task or a global worker while every worker is busy, no second worker
/// may come sooner — but then the event loop exists already, made by that busy
/// worker.
///
/// What remains out of reach: once the event loop exists, libdispatch's
/// pool monitor reads `/proc/<thread>/stat` every second while global work
/// waits, and traps if it cannot open it; a process out of descriptors with
/// global work queued for a second dies there, store or no store. Darwin's
/// libdispatch uses the kernel's workqueue and kqueue, made at start-up, so
/// there this does nothing.
enum DispatchEventLoop {
    /// Makes sure the descriptors exist, or that the attempt was made.
    static func prepare() {
        _ = prepared
    }

    private static let prepared: Void = {
        #if os(Linux)
        let started = DispatchSemaphore(value: 0)
        DispatchQueue.global().async { started.signal() }
        _ = started.wait(timeout: .now() + .milliseconds(100))
        // Makes the eventfd in the posting thread, at once; the block itself
        // runs whenever the main queue is next drained, or never.
        DispatchQueue.main.async {}
        #endif
    }()
}
