#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Runs `work` on a worker thread while the calling (main) thread spins the
/// main run loop, so that main-queue blocks run on the real main thread.
///
/// The loop runs without a deadline, as an app's main loop does: each turn with
/// a deadline arms a Dispatch timer for it and cancels it after, and both wake
/// libdispatch's manager thread (and the cancel a worker), from the main
/// thread. Turned once per main-queue block, that is several wake-ups per
/// block: threads the kernel may then run on the main thread's core. The
/// worker wakes the loop once, with an empty block, when it is done.
enum MainThreadDriver {
    static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) -> Result<T, any Error> {
        mainThread.set(pthread_self())
        let box = LockedBox<Result<T, any Error>?>(nil)
        let thread = Thread {
            let result = Result { try work() }
            box.set(result)
            DispatchQueue.main.async {}
        }
        thread.stackSize = 8 << 20
        thread.start()
        while box.get() == nil {
            _ = RunLoop.main.run(mode: .default, before: .distantFuture)
        }
        return box.get()!
    }

    /// The thread that called ``run(_:)``, which drains the main queue.
    private static let mainThread = LockedBox<pthread_t?>(nil)

    /// CPU time the main thread has used so far, in milliseconds (its own
    /// clock, read from any thread): unlike a stall, it does not depend on
    /// how the machine schedules threads. Nil before ``run(_:)`` or where the
    /// clock cannot be read.
    static func mainThreadCPUMilliseconds() -> Double? {
        #if os(Linux)
        guard let thread = mainThread.get() else { return nil }
        var clock = clockid_t()
        var time = timespec()
        guard pthread_getcpuclockid(thread, &clock) == 0, clock_gettime(clock, &time) == 0 else { return nil }
        return Double(time.tv_sec) * 1e3 + Double(time.tv_nsec) / 1e6
        #else
        return nil  // no per-thread CPU clock of another thread here (reported as 0)
        #endif
    }
}

/// What the calling thread used: its CPU time and how often it was switched
/// out, by its own choice (a wait) or not (preempted). Taken before and after
/// a stretch of work, it tells a long stretch that worked from one that
/// waited for a lock or for a CPU.
struct ThreadUsage: Sendable {
    var cpuNanoseconds: UInt64 = 0
    var voluntarySwitches = 0
    var involuntarySwitches = 0

    /// The calling thread's usage so far (zero where it cannot be read).
    static func current() -> ThreadUsage {
        #if os(Linux)
        var time = timespec()
        var usage = rusage()
        // RUSAGE_THREAD (1) is behind _GNU_SOURCE, which Glibc's module map leaves out.
        guard clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time) == 0, getrusage(__rusage_who_t(1), &usage) == 0 else { return ThreadUsage() }
        return ThreadUsage(cpuNanoseconds: UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec),
                           voluntarySwitches: usage.ru_nvcsw, involuntarySwitches: usage.ru_nivcsw)
        #else
        return ThreadUsage()
        #endif
    }

    static func - (after: ThreadUsage, before: ThreadUsage) -> ThreadUsage {
        ThreadUsage(cpuNanoseconds: after.cpuNanoseconds &- before.cpuNanoseconds,
                    voluntarySwitches: after.voluntarySwitches - before.voluntarySwitches,
                    involuntarySwitches: after.involuntarySwitches - before.involuntarySwitches)
    }
}

/// A value shared between threads.
///
/// `@unchecked Sendable`: `value` is guarded by `lock`.
final class LockedBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func set(_ newValue: Value) { lock.withLock { value = newValue } }
    func get() -> Value { lock.withLock { value } }
    /// Changes the value in place, under the lock, and returns what `body` does.
    func update<T>(_ body: (inout Value) -> T) -> T { lock.withLock { body(&value) } }
}
