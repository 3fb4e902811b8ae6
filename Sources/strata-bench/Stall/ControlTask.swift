import Dispatch

/// A fixed piece of main-queue work the size of a typical one-object save:
/// small allocations, hashing, copies and releases, about
/// ``targetMicroseconds`` on an idle core. Row (d') of `stall` runs it in
/// place of each save, on the same timer, while the writer saves the same
/// import: whatever makes it slower meanwhile is the machine's (preemption,
/// a shared core, cold caches), not Strata's.
struct ControlTask: Sendable {
    static let targetMicroseconds = 50.0

    /// Rounds of the work per run.
    let rounds: Int
    /// The fastest of the calibration runs at ``rounds``, on an idle core (µs).
    let idleMicroseconds: Double

    /// Sized so that the fastest of several runs takes about
    /// ``targetMicroseconds`` on this machine now (call it while nothing else runs).
    static func calibrated() -> ControlTask {
        let perRound = fastest(of: ControlTask(rounds: 16, idleMicroseconds: 0)) / 16
        let sized = ControlTask(rounds: max(1, Int((targetMicroseconds / perRound).rounded())), idleMicroseconds: 0)
        return ControlTask(rounds: sized.rounds, idleMicroseconds: fastest(of: sized))
    }

    private static func fastest(of task: ControlTask) -> Double {
        var best = UInt64.max
        for _ in 0..<25 {
            let started = DispatchTime.now().uptimeNanoseconds
            task.run()
            best = min(best, DispatchTime.now().uptimeNanoseconds - started)
        }
        return Double(best) / 1000
    }

    /// Does the work: a small table of small arrays made, read and dropped per round.
    func run() {
        var table: [Int: [Int]] = [:]
        var sum = 0
        for round in 0..<rounds {
            table.removeAll()
            for key in 0..<32 { table[(key &* 2_654_435_761) ^ round] = [key, round, sum] }
            for (key, values) in table { sum &+= key ^ values[2] }
        }
        // Uses the result, so that the optimizer keeps the work.
        precondition(sum != Int.min, "the control task's checksum hit the one value it cannot have")
    }
}
