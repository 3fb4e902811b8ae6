#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif
internal import Dispatch
internal import StrataStore

/// The concurrency debug switch (contract C22): with
/// `STRATA_CONCURRENCY_DEBUG=1` in the environment when Strata first checks,
/// every use of a context or of one of its objects verifies that it runs on
/// the context's queue, and traps with a message naming the context, its
/// concurrency type and the offending thread and queue.
enum ConcurrencyDebug {
    static let isEnabled: Bool = {
        guard let value = getenv("STRATA_CONCURRENCY_DEBUG") else { return false }
        return String(cString: value) == "1"
    }()
}

/// With the debug switch on: reports a wait for a main-queue context that
/// has lasted ``threshold`` seconds, naming the context and the waiting
/// thread. Its likely cause is a main queue nothing drains — a command-line
/// tool or a server whose main thread never runs `RunLoop.main` or
/// `dispatchMain()`, where a child's save into the view context (or any
/// `performAndWait` on it) waits forever, as it would in Core Data.
enum MainQueueWaitWatchdog {
    private static let lock = Lock()
    nonisolated(unsafe) private static var _threshold: Double = 3  // guarded by `lock`
    nonisolated(unsafe) private static var _report: @Sendable (String) -> Void = {  // guarded by `lock`
        FileHandleStandardError.write($0 + "\n")
    }

    /// Seconds before a wait is reported (3). Tests shorten it.
    static var threshold: Double {
        get { lock.withLock { _threshold } }
        set { lock.withLock { _threshold = newValue } }
    }
    /// Where reports go (standard error). Tests capture them.
    static var report: @Sendable (String) -> Void {
        get { lock.withLock { _report } }
        set { lock.withLock { _report = newValue } }
    }

    /// A queue of its own: it gets a thread even while Dispatch's shared
    /// pool is busy (a report from a global queue could come only after the
    /// wait had ended, and be cancelled).
    private static let queue = DispatchQueue(label: "strata.main-queue-watchdog")

    /// Starts watching a wait for `context`'s queue; cancel the returned item
    /// when the wait ends. Nil (no cost) unless the switch is on and the
    /// caller is off the main queue waiting for a main-queue context.
    static func watch(_ context: ManagedObjectContext) -> DispatchWorkItem? {
        guard ConcurrencyDebug.isEnabled, context.concurrencyType == .mainQueue, !MainQueue.isCurrent else { return nil }
        let (name, waiter, seconds) = (context.name, ManagedObjectContext.currentExecutionDescription, threshold)
        let report = report
        let item = DispatchWorkItem {
            report("Strata: \(waiter) has waited \(seconds) s for context '\(name)' (.mainQueue). Is anything draining the main "
                + "queue? A command-line tool or a server must run RunLoop.main or dispatchMain(), or make its container with "
                + "PersistentContainer(…, viewContext: .privateQueue).")
        }
        queue.asyncAfter(deadline: .now() + seconds, execute: item)
        return item
    }
}

/// Which contexts' blocks the current thread is executing, innermost last.
///
/// This is what makes `performAndWait` reentrant (contract C6) and
/// what the queue checks consult: `DispatchQueue.sync` runs a block on the
/// calling thread, so a thread can be "inside" several contexts at once — an
/// import child's block that saves calls its parent's `performAndWait`, which
/// may call back into the child. `mainDepth` counts blocks entered from code
/// that was on the main queue, so that a main-queue context stays usable
/// inline from a private context's `performAndWait` issued on the main queue
/// (the `importContext.performAndWait { try importContext.save() }` pattern).
///
/// One instance per thread, reached through a pthread key; only its own
/// thread touches it, so it needs no lock — nor the runtime's exclusivity
/// checks, which every queue check paid twice.
final class ExecutionStack {
    @exclusivity(unchecked) var contexts: [UInt64] = []
    @exclusivity(unchecked) var mainDepth = 0

    /// Whether the thread is inside a block of the context with `serial`:
    /// mostly the innermost, looked at first.
    @inline(__always)
    func holds(_ serial: UInt64) -> Bool {
        contexts.last == serial || contexts.contains(serial)
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let rc = pthread_key_create(&key) { pointer in
            #if canImport(Darwin)
            Unmanaged<ExecutionStack>.fromOpaque(pointer).release()
            #else
            if let pointer { Unmanaged<ExecutionStack>.fromOpaque(pointer).release() }
            #endif
        }
        precondition(rc == 0, "pthread_key_create failed: \(rc)")
        return key
    }()

    /// This thread's stack.
    static var current: ExecutionStack {
        if let pointer = pthread_getspecific(key) {
            return Unmanaged<ExecutionStack>.fromOpaque(pointer).takeUnretainedValue()
        }
        let stack = ExecutionStack()
        pthread_setspecific(key, Unmanaged.passRetained(stack).toOpaque())
        return stack
    }
}

/// Marks the main queue, so that "am I on the main queue" is a queue check
/// (`DispatchQueue.getSpecific`) and not a thread check: after `dispatchMain()`
/// and in an async main, main-queue blocks run on worker threads.
enum MainQueue {
    private static let key = DispatchSpecificKey<Bool>()
    private static let marked: Bool = {
        DispatchQueue.main.setSpecific(key: key, value: true)
        return true
    }()

    /// On the main queue, or inside a context block entered from it.
    static var isCurrent: Bool {
        _ = marked
        return DispatchQueue.getSpecific(key: key) == true || ExecutionStack.current.mainDepth > 0
    }
}

/// Process-wide counter for context serial numbers.
enum ContextSerial {
    private static let lock = Lock()
    nonisolated(unsafe) private static var last: UInt64 = 0  // guarded by `lock`
    static func next() -> UInt64 { lock.withLock { last += 1; return last } }
}
