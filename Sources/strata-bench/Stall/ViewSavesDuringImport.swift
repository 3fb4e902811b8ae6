import Dispatch
import Foundation
import Histogram
import Strata
import StrataStore

/// The user's view of the recommended stack under load: while the writer takes
/// in and saves a large import (made by a child of the writer, the container's
/// layout for imports), the view context saves a one-object edit every few
/// milliseconds, as a UI would. How long does each of those saves hold the main
/// queue, and how late does the main queue run meanwhile? (Rule 10: neither may
/// grow with the import.)
///
/// Each round runs the writer's save twice: once with the edits, once with
/// a ``ControlTask`` of a typical save's size on the same timer instead:
/// what any task that short suffers on this machine while the writer works
/// (it is preempted, its caches are cold, its core is shared), and how late
/// the main queue runs with the writer's work alone. A save's longest, and
/// the lateness beside the edits, set against the control's say how much of
/// them is the save's own.
struct ViewSavesDuringImport {
    /// Objects the import child saves into the writer in one save.
    var importObjects: Int
    var ingredients: Int
    /// A one-object edit saved from the view context this often.
    var editEveryMicroseconds = 4_000
    /// Recipes stored first, which the view context edits in turn.
    var targets = 200

    /// Runs on a worker thread; the main thread must be spinning the main run loop.
    func run(directory: String) throws -> ViewSavesRun {
        let control = ControlTask.calibrated()
        let controlRun = try writerSave(directory: directory + "-control", control: control)
        let edits = try writerSave(directory: directory, control: nil)
        return ViewSavesRun(importObjects: importObjects, writerSeconds: edits.seconds, controlMicroseconds: control.idleMicroseconds,
                            saves: edits.task, stall: edits.stall, control: controlRun.task, controlStall: controlRun.stall)
    }

    /// One run of ``writerSave(directory:control:)``.
    private struct WriterSave {
        /// From the import child's save to the end of the writer's save.
        var seconds: Double
        /// The edits' or the control task's times, and how late the main queue ran.
        var task: MainTaskFigures
        var stall: StallFigures
    }

    /// The writer takes in and saves the import while the main queue is
    /// probed, and, every ``editEveryMicroseconds``, runs `control` or, when
    /// nil, saves an edit.
    private func writerSave(directory: String, control: ControlTask?) throws -> WriterSave {
        try? FileManager.default.removeItem(atPath: directory)
        let coordinator = PersistentStoreCoordinator(model: try makeBenchModel())
        try coordinator.addPersistentStore(.log, directory: directory)
        defer { try? coordinator.close() }
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "writer")
        let view = ManagedObjectContext(.mainQueue, parent: writer, name: "view")
        view.automaticallyMergesChangesFromParent = true
        let importer = ManagedObjectContext(.privateQueue, parent: writer, name: "import")
        let targets = targets
        try writer.performAndWait {
            insertObjects(targets, ingredientsPerRecipe: 0, into: writer)
            try writer.save()
        }
        let ids = try view.performAndWait { try view.fetch(FetchRequest<BenchRecipe>()).map(\.objectID) }
        importer.performAndWait { insertObjects(importObjects, ingredientsPerRecipe: ingredients, into: importer, offset: targets) }

        let times = MainTaskTimes()
        let timer = control.map { controller($0, times: times) } ?? editor(view: view, editing: ids, times: times)
        let probe = StallProbe()
        probe.startProbing()
        let started = DispatchTime.now().uptimeNanoseconds
        timer.resume()
        // The import's save into the writer is recorded (the writer is idle);
        // the writer takes it in, then saves everything to the store.
        try importer.performAndWait { try importer.save() }
        try writer.performAndWait { try writer.save() }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        let stall = probe.stopProbing()
        let stopped = DispatchSemaphore(value: 0)
        timer.setCancelHandler { stopped.signal() }
        timer.cancel()
        stopped.wait()
        try times.check()
        // The edits saved after the writer's save, and the import, reach the store.
        try view.performAndWait { try view.save() }
        try writer.performAndWait { try writer.save() }
        try checkStored(importObjects + targets, in: coordinator, by: "view saves")
        return WriterSave(seconds: seconds, task: times.figures(), stall: stall)
    }

    /// A main-queue timer, not yet resumed, that saves a one-object edit
    /// from the view context.
    private func editor(view: ManagedObjectContext, editing ids: [ObjectID], times: MainTaskTimes) -> any DispatchSourceTimer {
        mainQueueTimer {
            // On the main queue: the view context is used directly, as a UI does.
            let id = ids[times.next() % ids.count]
            do {
                let recipe = try view.existingObject(with: id) as! BenchRecipe
                recipe.rating += 0.1
                let started = DispatchTime.now().uptimeNanoseconds
                let usage = ThreadUsage.current()
                try view.save()
                times.record(DispatchTime.now().uptimeNanoseconds - started, ThreadUsage.current() - usage)
            } catch {
                times.fail(error)
            }
        }
    }

    /// A main-queue timer, not yet resumed, that runs the control task.
    private func controller(_ control: ControlTask, times: MainTaskTimes) -> any DispatchSourceTimer {
        mainQueueTimer {
            let started = DispatchTime.now().uptimeNanoseconds
            let usage = ThreadUsage.current()
            control.run()
            times.record(DispatchTime.now().uptimeNanoseconds - started, ThreadUsage.current() - usage)
        }
    }

    /// Made only to be resumed: libdispatch traps on releasing a suspended timer.
    private func mainQueueTimer(_ handler: @escaping @Sendable () -> Void) -> any DispatchSourceTimer {
        let timer = DispatchSource.makeTimerSource(queue: .main)
        timer.schedule(deadline: .now(), repeating: .microseconds(editEveryMicroseconds), leeway: .nanoseconds(0))
        timer.setEventHandler(handler: handler)
        return timer
    }
}

/// One round of ``ViewSavesDuringImport``.
struct ViewSavesRun: Codable, Sendable {
    var round = 0
    var importObjects: Int
    /// From the import child's save to the end of the writer's save (with the edits).
    var writerSeconds: Double
    /// The control task's time on an idle core (µs, the fastest of its calibration runs).
    var controlMicroseconds: Double
    /// The view context's saves, and how late the main queue's 1 ms timer ran meanwhile.
    var saves: MainTaskFigures
    var stall: StallFigures
    /// The same for the control task, in the same writer save.
    var control: MainTaskFigures
    var controlStall: StallFigures
}

/// How long each run of one kind of main-queue task took in a round.
struct MainTaskFigures: Codable, Sendable {
    var count: Int
    /// The longest, the median and the 99th percentile run (ms).
    var longestMs: Double
    var medianMs: Double
    var p99Ms: Double
    /// The main thread's CPU time in the longest run (ms), and how often it
    /// was switched out meanwhile, waiting (voluntary) or preempted: a long
    /// run that did little work waited for a lock or for a CPU.
    var longestCPUMs: Double
    var longestWaits: Int
    var longestPreemptions: Int
    /// The most CPU time any one run used (ms).
    var mostCPUMs: Double
    /// The runs by how the main thread fared in them: never switched out
    /// (what the task itself costs, and the host's share, which the guest
    /// cannot see), preempted but never waiting (the machine's scheduling),
    /// or waiting at least once (for a lock, a condition or I/O: Strata's
    /// own waits). The longest of each (ms, 0 when there is none).
    var unswitchedLongestMs: Double
    var preemptedRuns: Int
    var preemptedLongestMs: Double
    var waitedRuns: Int
    var waitedLongestMs: Double
}

/// The durations of one kind of task on the main queue, recorded there.
///
/// `@unchecked Sendable`: `histogram`, `longest`, `mostCPU`, `byFate`,
/// `started` and `error` are guarded by `lock`.
final class MainTaskTimes: @unchecked Sendable {
    private let lock = NSLock()
    private var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
    private var longest: (nanoseconds: UInt64, usage: ThreadUsage) = (0, ThreadUsage())
    private var mostCPU: UInt64 = 0
    /// What happened to the main thread in a run.
    private enum Fate: Int, CaseIterable { case unswitched, preempted, waited }
    /// Runs and the longest of them (ns), by ``Fate``.
    private var byFate = Array(repeating: (runs: 0, longest: UInt64(0)), count: Fate.allCases.count)
    private var started = 0
    private var error: (any Error)?

    /// The number of the next run.
    func next() -> Int {
        lock.withLock {
            defer { started += 1 }
            return started
        }
    }

    func record(_ nanoseconds: UInt64, _ usage: ThreadUsage) {
        lock.withLock {
            _ = histogram.record(nanoseconds / 1000)
            if nanoseconds > longest.nanoseconds { longest = (nanoseconds, usage) }
            mostCPU = max(mostCPU, usage.cpuNanoseconds)
            let fate = (usage.voluntarySwitches > 0 ? Fate.waited : usage.involuntarySwitches > 0 ? .preempted : .unswitched).rawValue
            byFate[fate].runs += 1
            byFate[fate].longest = max(byFate[fate].longest, nanoseconds)
        }
    }

    func fail(_ error: any Error) { lock.withLock { if self.error == nil { self.error = error } } }
    func check() throws { if let error = lock.withLock({ self.error }) { throw error } }

    func figures() -> MainTaskFigures {
        lock.withLock {
            MainTaskFigures(
                count: Int(histogram.totalCount), longestMs: Double(histogram.max) / 1000,
                medianMs: Double(histogram.valueAtPercentile(50)) / 1000, p99Ms: Double(histogram.valueAtPercentile(99)) / 1000,
                longestCPUMs: Double(longest.usage.cpuNanoseconds) / 1e6, longestWaits: longest.usage.voluntarySwitches,
                longestPreemptions: longest.usage.involuntarySwitches, mostCPUMs: Double(mostCPU) / 1e6,
                unswitchedLongestMs: Double(byFate[Fate.unswitched.rawValue].longest) / 1e6,
                preemptedRuns: byFate[Fate.preempted.rawValue].runs, preemptedLongestMs: Double(byFate[Fate.preempted.rawValue].longest) / 1e6,
                waitedRuns: byFate[Fate.waited.rawValue].runs, waitedLongestMs: Double(byFate[Fate.waited.rawValue].longest) / 1e6)
        }
    }
}

/// The medians over the rounds of ``ViewSavesRun``.
struct ViewSavesSummary: Codable, Sendable {
    var rounds: Int
    var importObjects: Int
    var writerSeconds: Double
    var saves: MainTaskSummary
    var controlMicroseconds: Double
    var stall: StallMedians
    var control: MainTaskSummary
    var controlStall: StallMedians

    init(_ runs: [ViewSavesRun]) {
        rounds = runs.count
        importObjects = runs.first?.importObjects ?? 0
        writerSeconds = median(runs.map(\.writerSeconds))
        saves = MainTaskSummary(runs.map(\.saves))
        controlMicroseconds = median(runs.map(\.controlMicroseconds))
        control = MainTaskSummary(runs.map(\.control))
        stall = StallMedians(runs.map(\.stall))
        controlStall = StallMedians(runs.map(\.controlStall))
    }
}

/// The medians over the rounds of one kind of task's ``MainTaskFigures``.
struct MainTaskSummary: Codable, Sendable {
    var count: Double
    /// The median over the rounds of each round's longest run, and the longest of all.
    var longestMs: Double
    var worstMs: Double
    /// The worst round's longest run: its CPU time, and how often the main
    /// thread was switched out in it, waiting or preempted.
    var worstCPUMs: Double
    var worstWaits: Int
    var worstPreemptions: Int
    /// The most CPU time any one run used, in any round.
    var mostCPUMs: Double
    var medianMs: Double
    /// Over all rounds: how many runs there were; the longest run never
    /// switched out; the runs preempted but never waiting, and the longest;
    /// the runs that waited, and the longest (see ``MainTaskFigures``).
    var runs: Int
    var unswitchedLongestMs: Double
    var preemptedRuns: Int
    var preemptedLongestMs: Double
    var waitedRuns: Int
    var waitedLongestMs: Double

    init(_ rounds: [MainTaskFigures]) {
        count = median(rounds.map { Double($0.count) })
        longestMs = median(rounds.map(\.longestMs))
        let worst = rounds.max { $0.longestMs < $1.longestMs }
        worstMs = worst?.longestMs ?? 0
        worstCPUMs = worst?.longestCPUMs ?? 0
        worstWaits = worst?.longestWaits ?? 0
        worstPreemptions = worst?.longestPreemptions ?? 0
        mostCPUMs = rounds.map(\.mostCPUMs).max() ?? 0
        medianMs = median(rounds.map(\.medianMs))
        runs = rounds.reduce(0) { $0 + $1.count }
        unswitchedLongestMs = rounds.map(\.unswitchedLongestMs).max() ?? 0
        preemptedRuns = rounds.reduce(0) { $0 + $1.preemptedRuns }
        preemptedLongestMs = rounds.map(\.preemptedLongestMs).max() ?? 0
        waitedRuns = rounds.reduce(0) { $0 + $1.waitedRuns }
        waitedLongestMs = rounds.map(\.waitedLongestMs).max() ?? 0
    }
}
