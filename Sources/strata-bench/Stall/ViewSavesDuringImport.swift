import Dispatch
import Foundation
import Histogram
import Strata
import StrataStore

/// The user's view of the seed stack under load: while the writer takes in
/// and saves a large import (made by a child of the writer, the container's
/// layout for imports), the view context saves a one-object edit every few
/// milliseconds, as a UI would. How long does each of those saves hold the
/// main queue, and how late does the main queue run meanwhile? (Rule 10:
/// neither may grow with the import.)
struct ViewSavesDuringImport {
    /// Objects the import child saves into the writer in one save.
    var importObjects: Int
    var ingredients: Int
    /// A one-object edit saved from the view context this often.
    var editEvery: DispatchTimeInterval = .milliseconds(4)
    /// Recipes stored first, which the view context edits in turn.
    var targets = 200

    /// Runs on a worker thread; the main thread must be spinning the main run loop.
    func run(directory: String) throws -> ViewSavesRun {
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

        let saves = ViewSaveTimes()
        let editor = DispatchSource.makeTimerSource(queue: .main)
        editor.schedule(deadline: .now(), repeating: editEvery, leeway: .nanoseconds(0))
        editor.setEventHandler {
            // On the main queue: the view context is used directly, as a UI does.
            let id = ids[saves.next() % ids.count]
            do {
                let recipe = try view.existingObject(with: id) as! BenchRecipe
                recipe.rating += 0.1
                let started = DispatchTime.now().uptimeNanoseconds
                let usage = ThreadUsage.current()
                try view.save()
                saves.record(DispatchTime.now().uptimeNanoseconds - started, ThreadUsage.current() - usage)
            } catch {
                saves.fail(error)
            }
        }
        let probe = StallProbe()
        probe.startProbing()
        let started = DispatchTime.now().uptimeNanoseconds
        editor.resume()
        // The import's save into the writer is recorded (the writer is idle);
        // the writer takes it in, then saves everything to the store.
        try importer.performAndWait { try importer.save() }
        try writer.performAndWait { try writer.save() }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        let stall = probe.stopProbing()
        let stopped = DispatchSemaphore(value: 0)
        editor.setCancelHandler { stopped.signal() }
        editor.cancel()
        stopped.wait()
        try saves.check()
        // The edits saved after the writer's save, and the import, reach the store.
        try view.performAndWait { try view.save() }
        try writer.performAndWait { try writer.save() }
        try checkStored(importObjects + targets, in: coordinator, by: "view saves")
        return saves.figures(importObjects: importObjects, writerSeconds: seconds, stall: stall)
    }
}

/// One round of ``ViewSavesDuringImport``.
struct ViewSavesRun: Codable, Sendable {
    var round = 0
    var importObjects: Int
    /// From the import child's save to the end of the writer's save.
    var writerSeconds: Double
    var saves: Int
    /// The longest, the median and the 99th percentile view-context save (ms).
    var longestSaveMs: Double
    /// The main thread's CPU time in the longest save (ms), and how often it
    /// was switched out meanwhile, waiting (voluntary) or preempted: a long
    /// save that did little work waited for a lock or for a CPU.
    var longestSaveCPUMs: Double
    var longestSaveWaits: Int
    var longestSavePreemptions: Int
    /// The most CPU time any one save used (ms).
    var mostSaveCPUMs: Double
    var medianSaveMs: Double
    var p99SaveMs: Double
    /// How late the main queue's 1 ms timer ran meanwhile.
    var stall: StallFigures
}

/// The durations of the view context's saves, recorded on the main queue.
///
/// `@unchecked Sendable`: `histogram`, `count`, `longest`, `mostCPU`, `edits`
/// and `error` are guarded by `lock`.
final class ViewSaveTimes: @unchecked Sendable {
    private let lock = NSLock()
    private var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
    private var count = 0
    private var longest: (nanoseconds: UInt64, usage: ThreadUsage) = (0, ThreadUsage())
    private var mostCPU: UInt64 = 0
    private var edits = 0
    private var error: (any Error)?

    /// The number of the next edit.
    func next() -> Int {
        lock.withLock {
            defer { edits += 1 }
            return edits
        }
    }

    func record(_ nanoseconds: UInt64, _ usage: ThreadUsage) {
        lock.withLock {
            _ = histogram.record(nanoseconds / 1000)
            count += 1
            if nanoseconds > longest.nanoseconds { longest = (nanoseconds, usage) }
            mostCPU = max(mostCPU, usage.cpuNanoseconds)
        }
    }

    func fail(_ error: any Error) { lock.withLock { if self.error == nil { self.error = error } } }
    func check() throws { if let error = lock.withLock({ self.error }) { throw error } }

    func figures(importObjects: Int, writerSeconds: Double, stall: StallFigures) -> ViewSavesRun {
        lock.withLock {
            ViewSavesRun(
                importObjects: importObjects, writerSeconds: writerSeconds, saves: count,
                longestSaveMs: Double(histogram.max) / 1000, longestSaveCPUMs: Double(longest.usage.cpuNanoseconds) / 1e6,
                longestSaveWaits: longest.usage.voluntarySwitches, longestSavePreemptions: longest.usage.involuntarySwitches,
                mostSaveCPUMs: Double(mostCPU) / 1e6, medianSaveMs: Double(histogram.valueAtPercentile(50)) / 1000,
                p99SaveMs: Double(histogram.valueAtPercentile(99)) / 1000, stall: stall)
        }
    }
}

/// The medians over the rounds of ``ViewSavesRun``.
struct ViewSavesSummary: Codable, Sendable {
    var rounds: Int
    var importObjects: Int
    var writerSeconds: Double
    var saves: Double
    /// The median over the rounds of each round's longest save, and the longest of all.
    var longestSaveMs: Double
    var worstSaveMs: Double
    /// The worst round's longest save: its CPU time, and how often the main
    /// thread was switched out in it, waiting or preempted.
    var worstSaveCPUMs: Double
    var worstSaveWaits: Int
    var worstSavePreemptions: Int
    /// The most CPU time any one save used, in any round.
    var mostSaveCPUMs: Double
    var medianSaveMs: Double
    var stall: StallMedians

    init(_ runs: [ViewSavesRun]) {
        rounds = runs.count
        importObjects = runs.first?.importObjects ?? 0
        writerSeconds = median(runs.map(\.writerSeconds))
        saves = median(runs.map { Double($0.saves) })
        longestSaveMs = median(runs.map(\.longestSaveMs))
        let worst = runs.max { $0.longestSaveMs < $1.longestSaveMs }
        worstSaveMs = worst?.longestSaveMs ?? 0
        worstSaveCPUMs = worst?.longestSaveCPUMs ?? 0
        worstSaveWaits = worst?.longestSaveWaits ?? 0
        worstSavePreemptions = worst?.longestSavePreemptions ?? 0
        mostSaveCPUMs = runs.map(\.mostSaveCPUMs).max() ?? 0
        medianSaveMs = median(runs.map(\.medianSaveMs))
        stall = StallMedians(runs.map(\.stall))
    }
}
