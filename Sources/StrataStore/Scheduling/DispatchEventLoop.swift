import Dispatch

/// Makes libdispatch create its event loop before a store takes descriptors.
///
/// On Linux, libdispatch creates its event loop (an epoll instance and an
/// eventfd) lazily, when the first worker of a global queue starts: the worker
/// that drains the main queue after `dispatchMain()`, one that runs Swift's
/// tasks, or one for `DispatchQueue.global().async`. If the process has no
/// descriptor left at that moment, libdispatch traps (`_dispatch_epoll_init`:
/// "epoll_create1() failed"). A store that took the last descriptors reports
/// `EMFILE` as a typed error; the app's next hop to the main queue would then
/// turn it into a crash. ResourceLimitTests caught exactly that on CI: the
/// container's store opened segments on one thread while the main queue's
/// first worker started on another.
///
/// So the first store opened in a process starts one global worker and waits
/// for it (once per process; about 0.2 ms here). Its queues (`flushQueue`,
/// a context's private queue) are overcommit queues, whose workers never
/// create the event loop. The wait is bounded: a caller that is itself a
/// global worker finds the loop made already, and must not wait for a second
/// worker while the pool is full. Darwin's libdispatch uses the kernel's
/// workqueue and kqueue, created at start-up, so there it does nothing.
enum DispatchEventLoop {
    /// Makes sure the event loop exists, or that the attempt was made.
    static func prepare() {
        _ = prepared
    }

    private static let prepared: Void = {
        #if os(Linux)
        let started = DispatchSemaphore(value: 0)
        DispatchQueue.global().async { started.signal() }
        _ = started.wait(timeout: .now() + .milliseconds(100))
        #endif
    }()
}
