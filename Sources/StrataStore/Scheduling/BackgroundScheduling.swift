internal import CStrataScheduling
import Synchronization

/// Runs Strata's background work — the blocks of private-queue contexts
/// that run long (an import, a writer's saves), the store's flushes and
/// compactions, the freeing of objects a main-queue context let go of — so
/// that it does not delay the main thread.
///
/// On Darwin, Dispatch's quality of service does this: the main thread runs
/// at user-interactive priority and background queues below it. Linux's
/// libdispatch ignores quality of service, and its scheduler (EEVDF, kernel
/// 6.6 and later) may let a running thread finish its time slice before a
/// thread that just woke gets the CPU. With two cores busy importing, the main
/// thread's timer then fires milliseconds late.
///
/// The remedy is the knob EEVDF provides for it: a thread's own slice
/// (`sched_setattr(2)`, `sched_runtime`; honoured from kernel 6.12). While
/// background work runs, its thread asks for a long slice, `slice`; a
/// thread that wakes with a shorter one (the main thread, with the default)
/// preempts it at once instead of waiting its turn. The thread's share of the
/// CPU is unchanged — the nice value stays as it was — and the slice it had
/// is restored when the work ends, because Dispatch's worker threads go on to
/// run other code. It needs no privilege.
///
/// A thread that is runnable but not waking gets no such preemption; the
/// long loops of background work pass yield points for it, which are on
/// exactly while the long slice is.
///
/// Nested use costs one `sched_getattr` and changes nothing: the inner run
/// finds the slice already long. Where the kernel lacks the knob (Darwin,
/// Linux before 6.12), the first attempt finds out and later runs make no
/// system call; a real-time or idle thread is left as it is.
///
/// It is on by default. To keep every thread's scheduling as it is:
///
/// ```swift
/// import StrataStore
///
/// BackgroundScheduling.isEnabled = false
/// ```
public enum BackgroundScheduling {
    /// The slice background work runs with, in nanoseconds. 20 ms: several
    /// times the default (0.7 ms × (1 + log₂ cores)), so a default-slice
    /// thread always counts as the shorter one, and short enough that two
    /// background threads sharing a core still take turns promptly.
    package static let slice: UInt64 = 20_000_000

    /// Whether background work asks for the long slice; on by default. Takes
    /// effect for work that starts after the change.
    public static var isEnabled: Bool {
        get { enabled.load(ordering: .relaxed) }
        set { enabled.store(newValue, ordering: .relaxed) }
    }

    /// Whether this system honours a thread's slice: true until the first
    /// attempt finds that it does not.
    public static var isSupported: Bool { support.load(ordering: .relaxed) != Support.absent.rawValue }

    private static let enabled = Atomic<Bool>(true)
    private static let support = Atomic<UInt8>(Support.unknown.rawValue)

    private enum Support: UInt8 { case unknown, present, absent }

    /// Runs `body` with the calling thread's slice at least ``slice``, and
    /// restores the thread's own slice after.
    ///
    /// ```swift
    /// flushQueue.async {
    ///     BackgroundScheduling.run { flush(frozen) }
    /// }
    /// ```
    package static func run<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        let previous = lengthenSlice()
        defer { restoreSlice(previous) }
        return try body()
    }

    /// A thread's slice and whether threads it creates start from the default.
    package struct ThreadSlice: Equatable, Sendable {
        package var nanoseconds: UInt64
        package var resetOnFork: Bool
    }

    /// The calling thread's slice, nil where it cannot be read.
    package static func currentThreadSlice() -> ThreadSlice? {
        var nanoseconds: UInt64 = 0
        var resetOnFork: Int32 = 0
        guard strata_thread_slice(&nanoseconds, &resetOnFork) == 0 else { return nil }
        return ThreadSlice(nanoseconds: nanoseconds, resetOnFork: resetOnFork != 0)
    }

    /// The calling thread's slice in nanoseconds, nil where it cannot be read.
    package static func currentSlice() -> UInt64? { currentThreadSlice()?.nanoseconds }

    /// Lengthens the calling thread's slice to ``slice`` and returns the one to
    /// restore with ``restoreSlice(_:)``; nil when nothing was changed.
    ///
    /// A thread inherits its creator's slice: with the long one, every thread
    /// Dispatch spawns from inside background work (it does, to run what that
    /// work queues) would keep it for good, whatever it ran later — the main
    /// queue's work among it where `dispatchMain()` hands the main queue to
    /// worker threads. So the long slice goes with SCHED_FLAG_RESET_ON_FORK,
    /// which starts such threads from the default. (It also starts them at
    /// nice 0 where the thread had a negative nice value, which only a
    /// privileged process can set.)
    package static func lengthenSlice() -> ThreadSlice? {
        guard isEnabled, isSupported, let current = currentThreadSlice(), current.nanoseconds < slice else { return nil }
        guard strata_set_thread_slice(slice, 1) == 0 else { return nil }
        if support.load(ordering: .relaxed) == Support.unknown.rawValue {
            // A kernel before 6.12 accepts the value and ignores it.
            let honoured = currentSlice() == slice
            support.store(honoured ? Support.present.rawValue : Support.absent.rawValue, ordering: .relaxed)
            if !honoured {
                _ = strata_set_thread_slice(current.nanoseconds, current.resetOnFork ? 1 : 0)
                return nil
            }
        }
        markBackgroundWork(true)
        return current
    }

    /// Whether the calling thread can take the long slice now (it is tried
    /// and given back): false where the kernel ignores a thread's own slice,
    /// or background scheduling is off. Tests use it to skip.
    package static var honoursThreadSlices: Bool {
        let previous = lengthenSlice()
        defer { restoreSlice(previous) }
        return previous != nil && currentSlice() == slice
    }

    /// Gives the calling thread back the slice ``lengthenSlice()`` returned
    /// (nothing for nil).
    package static func restoreSlice(_ previous: ThreadSlice?) {
        guard let previous else { return }
        markBackgroundWork(false)
        _ = strata_set_thread_slice(previous.nanoseconds, previous.resetOnFork ? 1 : 0)
    }
}
