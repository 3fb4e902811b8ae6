import Dispatch
import Foundation
import Histogram

/// A timer on the main queue every millisecond, on the real main thread
/// (strata-bench's main thread spins the main run loop): how late each tick
/// runs is how long the main queue was busy — what a UI would feel as a stall.
final class StallProbe: @unchecked Sendable {
    // `@unchecked Sendable`: every field below is guarded by `lock`; the
    // timer's handler runs on the main queue, the reader on the driver thread.
    private let lock = NSLock()
    private var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
    private var lastTick: UInt64 = 0
    private var start: UInt64 = 0
    private var lateOver8 = 0
    private var lateOver16 = 0
    private var ticks = 0
    /// (milliseconds since the start, lateness in milliseconds) for every tick.
    private var timeline: [(Double, Double)] = []
    private var timer: (any DispatchSourceTimer)?
    /// The main thread's scheduler statistics at the last tick, and the
    /// longest tick so far taken apart with them.
    private var lastSchedule: ThreadSchedule?
    private var worstTick: TickAnatomy?
    /// `/proc/thread-self/schedstat`, opened by the first tick (on the main
    /// thread); read only there.
    private var schedule = ThreadSchedule.Reader()

    static let interval: UInt64 = 1_000_000  // 1 ms

    func startProbing() {
        let timer = DispatchSource.makeTimerSource(queue: .main)
        timer.schedule(deadline: .now(), repeating: .nanoseconds(Int(Self.interval)), leeway: .nanoseconds(0))
        timer.setEventHandler { [self] in tick() }
        lock.withLock {
            start = DispatchTime.now().uptimeNanoseconds
            lastTick = 0
        }
        self.timer = timer
        timer.resume()
        Thread.sleep(forTimeInterval: 0.05)  // let it settle before measuring
        lock.withLock {
            histogram.reset()
            timeline.removeAll()
            lateOver8 = 0; lateOver16 = 0; ticks = 0
            lastTick = 0
            lastSchedule = nil
            worstTick = nil
            start = DispatchTime.now().uptimeNanoseconds
        }
    }

    /// The probe alone for `seconds`, nothing else running: the lateness
    /// this machine gives the main queue by itself (the floor of every layout).
    static func alone(for seconds: Double) -> StallFigures {
        let probe = StallProbe()
        probe.startProbing()
        Thread.sleep(forTimeInterval: seconds)
        return probe.stopProbing()
    }

    func stopProbing() -> StallFigures {
        Thread.sleep(forTimeInterval: 0.005)
        timer?.cancel()
        timer = nil
        return lock.withLock {
            schedule.close()
            return StallFigures(
                p50: Double(histogram.valueAtPercentile(50)) / 1000,
                p99: Double(histogram.valueAtPercentile(99)) / 1000,
                p999: Double(histogram.valueAtPercentile(99.9)) / 1000,
                max: Double(histogram.max) / 1000,
                ticks: ticks, ticksLaterThan8_3ms: lateOver8, ticksLaterThan16_7ms: lateOver16,
                longestTick: worstTick,
                timeline: timeline.map { StallFigures.Point(ms: $0.0, latenessMs: $0.1) })
        }
    }

    private func tick() {
        let now = DispatchTime.now().uptimeNanoseconds
        lock.withLock {
            let scheduled = schedule.read()
            defer { lastTick = now; lastSchedule = scheduled }
            guard lastTick != 0, now > lastTick else { return }
            let late = now - lastTick > Self.interval ? now - lastTick - Self.interval : 0
            if late > 0, Double(late) / 1e6 > (worstTick?.lateMs ?? 0), let before = lastSchedule, let after = scheduled {
                worstTick = TickAnatomy(lateNanoseconds: late, sinceLastTick: now - lastTick, before: before, after: after)
            }
            ticks += 1
            // Corrected for coordinated omission: a 30 ms stall also stands
            // for the ticks that could not fire during it.
            _ = histogram.recordCorrectedValue(late / 1000, expectedInterval: Self.interval / 1000)
            if late > 8_333_333 { lateOver8 += 1 }
            if late > 16_666_667 { lateOver16 += 1 }
            // `now` was read before the lock: a reset may have moved `start` past it.
            timeline.append((Double(now > start ? now - start : 0) / 1e6, Double(late) / 1e6))
        }
    }
}

/// How the main queue fared during one run (milliseconds).
struct StallFigures: Codable, Sendable {
    var p50: Double
    var p99: Double
    var p999: Double
    var max: Double
    var ticks: Int
    var ticksLaterThan8_3ms: Int
    var ticksLaterThan16_7ms: Int
    /// The longest tick taken apart (nil where the thread's scheduler
    /// statistics cannot be read).
    var longestTick: TickAnatomy?
    struct Point: Codable, Sendable { var ms: Double; var latenessMs: Double }
    var timeline: [Point]
}
