#if canImport(Glibc)
import Glibc
#endif

/// Where the time between two ticks of the probe went, on the main thread:
/// running (the main queue's own work), waiting for a CPU while runnable
/// (the machine's scheduling: another thread had the core), or asleep (the
/// timer's wakeup itself came late). The three add up to the time between
/// the ticks; the tick's lateness is that time less the 1 ms period.
///
/// Running is the main queue's work (Strata's, on the main queue); waiting
/// for a CPU is the machine's scheduling; asleep past the period is a late
/// timer, or the main queue blocked (then the stall's own rows, such as (d)'s
/// waits, say so).
struct TickAnatomy: Codable, Sendable {
    var lateMs: Double
    var runningMs: Double
    var waitingForCPUMs: Double
    var asleepMs: Double

    init(lateNanoseconds: UInt64, sinceLastTick: UInt64, before: ThreadSchedule, after: ThreadSchedule) {
        let running = after.runningNanoseconds &- before.runningNanoseconds
        let waiting = after.waitingNanoseconds &- before.waitingNanoseconds
        lateMs = Double(lateNanoseconds) / 1e6
        runningMs = Double(running) / 1e6
        waitingForCPUMs = Double(waiting) / 1e6
        asleepMs = Double(sinceLastTick > running + waiting ? sinceLastTick - running - waiting : 0) / 1e6
    }
}

/// The calling thread's scheduler statistics so far: Linux's
/// `/proc/thread-self/schedstat`, the time it ran and the time it waited on
/// a run queue, runnable but without a CPU.
struct ThreadSchedule: Sendable {
    var runningNanoseconds: UInt64
    var waitingNanoseconds: UInt64

    /// Reads the statistics of the thread that first calls ``read()``; a
    /// `pread` each time, no allocation.
    struct Reader {
        private var descriptor: Int32 = -2  // -2: not opened yet; -1: cannot be

        mutating func read() -> ThreadSchedule? {
            #if os(Linux)
            if descriptor == -2 { descriptor = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC) }
            guard descriptor >= 0 else { return nil }
            var buffer = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
            return withUnsafeMutableBytes(of: &buffer) { bytes -> ThreadSchedule? in
                let count = pread(descriptor, bytes.baseAddress, bytes.count, 0)
                guard count > 0 else { return nil }
                // "<ran ns> <waited ns> <timeslices>\n"
                var (running, waiting, field) = (UInt64(0), UInt64(0), 0)
                for byte in bytes.prefix(count) {
                    if byte == UInt8(ascii: " ") { field += 1; if field == 2 { break }; continue }
                    guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { break }
                    let digit = UInt64(byte - UInt8(ascii: "0"))
                    if field == 0 { running = running &* 10 &+ digit } else { waiting = waiting &* 10 &+ digit }
                }
                return field >= 1 ? ThreadSchedule(runningNanoseconds: running, waitingNanoseconds: waiting) : nil
            }
            #else
            return nil
            #endif
        }

        /// Closes the file; later reads return nil.
        mutating func close() {
            #if os(Linux)
            if descriptor >= 0 { _ = Glibc.close(descriptor) }
            #endif
            descriptor = -1
        }
    }
}
