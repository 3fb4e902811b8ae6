import Dispatch
import Foundation
@testable import Strata
import Testing

/// Servers and command-line tools (issue: a tool whose main thread waits on a
/// semaphore made no progress): a container whose view context has a
/// private queue never needs the main queue; with the debug switch on, a
/// wait for an undrained main queue is reported.
@Suite struct ServerLayoutTests {
    /// Everything a tool does — a background import into the view context,
    /// saving to disk, a block save with its completion, fetches — finishes
    /// while the main queue is blocked throughout.
    ///
    ///     main queue                 worker thread
    ///                                container(viewContext: .privateQueue)
    ///     blocked ───────────┐       background child: insert, save → view
    ///                        │       container.save(wait: true) → disk
    ///                        │       block save; its completion runs
    ///                        │       fetch from a child of the view context
    ///     released ◀─────────┘       (all must finish before the release)
    @Test func aPrivateViewContextNeverNeedsTheMainQueue() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path
        let model = makeModel()
        // Opening needs no main queue in either layout: made before the
        // main queue is blocked, which keeps the blocked window short for
        // the tests running beside this one.
        let container = try PersistentContainer(name: "Tool", model: model, directory: path, viewContext: .privateQueue)
        #expect(container.viewContext.concurrencyType == .privateQueue)
        let release = DispatchSemaphore(value: 0)
        let blocked = DispatchSemaphore(value: 0)
        DispatchQueue.main.async { blocked.signal(); _ = release.wait(timeout: .now() + 60) }
        let outcome = await runOnDedicatedThread(timeout: 60) { () -> [Int]? in
            blocked.wait()
            defer { release.signal() }
            do {
                let importer = container.newBackgroundContext()
                try importer.performAndWait { () throws(StrataError) in
                    for i in 0..<50 { let r = Recipe(context: importer); r.name = "R\(i)"; r.servings = i }
                    try importer.save()
                }
                try container.saveAndWait()
                let completed = DispatchSemaphore(value: 0)
                let result = ConcurrencyTestBox<Result<BlockSaveResult, any Error>?>(nil)
                container.save { context in
                    let r = Recipe(context: context); r.name = "block"
                } completion: { outcome in
                    result.withLock { $0 = outcome }
                    completed.signal()
                }
                guard completed.wait(timeout: .now() + 30) == .success, case .success(.saved)? = result.value else { return nil }
                let reader = container.newBackgroundContext()
                let found = try reader.performAndWait { () throws(StrataError) in
                    try reader.count(for: FetchRequest<Recipe>(predicate: #Predicate { $0.servings >= 40 }))
                }
                let total = try reader.performAndWait { () throws(StrataError) in try reader.count(for: FetchRequest<Recipe>()) }
                try container.close()
                return [found, total]
            } catch {
                Issue.record("\(error)")
                return nil
            }
        }
        #expect(outcome == [10, 51], "the tool's work waited for the blocked main queue")
        withExtendedLifetime(directory) {}
    }

    /// With the debug switch on, a wait of more than the watchdog's
    /// threshold for a main-queue context is reported, naming the context.
    @Test(.enabled(if: ConcurrencyDebug.isEnabled, "needs STRATA_CONCURRENCY_DEBUG=1 (make test sets it)"))
    func aWaitForAnUndrainedMainQueueIsReported() async throws {
        let reports = ConcurrencyTestBox<[String]>([])
        let (threshold, report) = (MainQueueWaitWatchdog.threshold, MainQueueWaitWatchdog.report)
        MainQueueWaitWatchdog.threshold = 0.2
        MainQueueWaitWatchdog.report = { text in reports.withLock { $0.append(text) } }
        defer { (MainQueueWaitWatchdog.threshold, MainQueueWaitWatchdog.report) = (threshold, report) }

        let coordinator = try makeCoordinator()
        let view = ManagedObjectContext(.mainQueue, coordinator: coordinator, name: "undrained-view")
        // (Whether a short wait goes unreported is not checked: with the
        // suite running beside it, the main queue can be late by more than
        // any threshold short enough for a test.)
        let blocked = DispatchSemaphore(value: 0)
        // 1.5 s from when the block starts (the main queue may be busy with
        // other tests' blocks before it).
        DispatchQueue.main.async { blocked.signal(); Thread.sleep(forTimeInterval: 1.5) }
        // Generous: other tests hold the main queue now and then (up to 30 s).
        let finished = await runOnDedicatedThread(timeout: 120) { () -> Bool in
            blocked.wait()
            return view.performAndWait { true }
        }
        #expect(finished == true)
        let mine = reports.value.filter { $0.contains("'undrained-view'") }
        #expect(mine.count == 1, "reports: \(reports.value)")
        #expect(mine.first?.contains("viewContext: .privateQueue") == true)
    }
}
