import Dispatch
import Foundation
import Strata
import Testing

// Contract C1–C4: the three concurrency types and which may be parents.
//
// Interleavings that matter are forced with semaphores and drawn next to the
// test. Timeouts on semaphore waits only turn a would-be hang into a failure.

@Suite struct ConcurrencyTypeTests {

    // MARK: C1 — .privateQueue owns a serial queue

    /// C1: each private context owns its own queue. Two contexts' blocks
    /// run at the same time; if they shared one queue (or the main queue), A
    /// would wait for B in vain.
    ///
    ///     queue of A                          queue of B
    ///     A: signal(aRunning)                 B: signal(bRunning)
    ///        wait(bRunning) ◀──────────────────┘    wait(aRunning) ◀── A
    ///        (both waits succeed only if A and B overlap)
    @Test("C1: each .privateQueue context owns its own queue")
    func privateContextsOwnSeparateQueues() throws {
        let coordinator = try makeCoordinator()
        let a = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "A")
        let b = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "B")
        let aRunning = DispatchSemaphore(value: 0)
        let bRunning = DispatchSemaphore(value: 0)
        let results = ConcurrencyTestBox<[String: Bool]>([:])
        let group = DispatchGroup()
        group.enter()
        a.perform {
            aRunning.signal()
            let sawB = bRunning.wait(timeout: .now() + 5) == .success
            results.withLock { $0["A saw B running"] = sawB }
            group.leave()
        }
        group.enter()
        b.perform {
            bRunning.signal()
            let sawA = aRunning.wait(timeout: .now() + 5) == .success
            results.withLock { $0["B saw A running"] = sawA }
            group.leave()
        }
        #expect(group.wait(timeout: .now() + 15) == .success)
        #expect(results.value == ["A saw B running": true, "B saw A running": true])
    }

    /// C1: a private context's queue is not the main queue: its blocks
    /// run while the main queue is busy (this test holds it), and off it.
    @Test("C1: a .privateQueue context does not need the main queue")
    @MainActor func privateContextRunsOffTheMainQueue() throws {
        MainQueueCheck.install()
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "Private")
        let done = DispatchSemaphore(value: 0)
        let onMain = ConcurrencyTestBox<Bool?>(nil)
        context.perform {
            onMain.withLock { $0 = MainQueueCheck.isOnMainQueue }
            done.signal()
        }
        // We are on the main queue and block it: the private block must still run.
        #expect(done.wait(timeout: .now() + 5) == .success)
        #expect(onMain.value == false)
        // performAndWait from the main queue: runs on the context's queue, not the main queue's.
        let insideOnMain = context.performAndWait { MainQueueCheck.isOnMainQueue }
        #expect(insideOnMain == false)
    }

    /// C1: every use goes through perform, performAndWait or the async
    /// perform, and all three reach the same context state, in order.
    @Test("C1: a .privateQueue context is used through perform, performAndWait and async perform")
    func privateContextUsedThroughAllThreeEntryPoints() async throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        enqueueBlock(context) {
            let soup = Recipe(context: context)
            soup.name = "Soup"
        }
        let seenByPerformAndWait = context.performAndWait { () -> [String] in
            let names = context.insertedObjects.compactMap { ($0 as? Recipe)?.name }
            let stew = Recipe(context: context)
            stew.name = "Stew"
            return names
        }
        #expect(seenByPerformAndWait == ["Soup"])
        let names = try await context.perform { () throws(StrataError) -> [String] in
            try context.save()
            return try context.fetch(FetchRequest<Recipe>(sortBy: [SortDescriptor(\.name)])).map(\.name)
        }
        #expect(names == ["Soup", "Stew"])
    }

    // MARK: C2 — .mainQueue

    /// C2: code on the main queue uses a .mainQueue context directly, no perform.
    @Test("C2: a .mainQueue context is used directly from the main queue")
    @MainActor func mainContextUsedDirectlyOnTheMainQueue() throws {
        let coordinator = try makeCoordinator()
        let main = ManagedObjectContext(.mainQueue, coordinator: coordinator, name: "Main")
        let soup = Recipe(context: main)
        soup.name = "Soup"
        soup.servings = 4
        #expect(main.hasChanges)
        #expect(main.insertedObjects == [soup])
        let fetched = try main.fetch(FetchRequest<Recipe>())
        #expect(fetched.map(\.name) == ["Soup"])
        try main.save()
        #expect(!main.hasChanges)
        #expect(!soup.objectID.isTemporaryID)
        // The save reached the store: a private context sees it.
        let reader = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let count = try reader.performAndWait { () throws(StrataError) -> Int in
            try reader.count(for: FetchRequest<Recipe>())
        }
        #expect(count == 1)
    }

    /// C2: off the main queue, a .mainQueue context goes through perform,
    /// performAndWait or async perform, and its blocks run on the main queue.
    /// (This test is not on the main actor, so the main queue is free to run them.)
    @Test("C2: a .mainQueue context is used through perform from a background thread")
    func mainContextUsedThroughPerformFromBackground() async throws {
        MainQueueCheck.install()
        let coordinator = try makeCoordinator()
        let main = ManagedObjectContext(.mainQueue, coordinator: coordinator, name: "Main")
        let outcome = await runOnDedicatedThread { () -> (performOnMain: Bool, waitOnMain: Bool, count: Int) in
            let performed = DispatchSemaphore(value: 0)
            let performOnMain = ConcurrencyTestBox(false)
            main.perform {
                performOnMain.withLock { $0 = MainQueueCheck.isOnMainQueue }
                let soup = Recipe(context: main)
                soup.name = "Soup"
                performed.signal()
            }
            _ = performed.wait(timeout: .now() + 10)
            let (waitOnMain, count) = main.performAndWait {
                (MainQueueCheck.isOnMainQueue, main.insertedObjects.count)
            }
            return (performOnMain.value, waitOnMain, count)
        }
        #expect(outcome.performOnMain)
        #expect(outcome.waitOnMain)
        #expect(outcome.count == 1)
        let asyncOnMain = await main.perform { MainQueueCheck.isOnMainQueue }
        #expect(asyncOnMain)
    }

    // MARK: C3 — .confinement

    /// C3: a .confinement context is used directly on the thread that
    /// created it: insert, save, fetch; performAndWait runs inline there.
    @Test("C3: a .confinement context is usable on its creating thread")
    func confinementContextUsableOnItsThread() async throws {
        let coordinator = try makeCoordinator()
        let outcome = await runOnDedicatedThread { () -> Result<(names: [String], inline: Bool, permanent: Bool), StrataError> in
            do throws(StrataError) {
                let thread = pthread_self()
                let importer = ManagedObjectContext(.confinement, coordinator: coordinator, name: "Importer")
                let soup = Recipe(context: importer)
                soup.name = "Soup"
                #expect(importer.hasChanges)
                try importer.save()
                let names = try importer.fetch(FetchRequest<Recipe>()).map(\.name)
                let inline = importer.performAndWait { pthread_equal(pthread_self(), thread) != 0 }
                return .success((names, inline, !soup.objectID.isTemporaryID))
            } catch {
                return .failure(error)
            }
        }
        let value = try outcome.get()
        #expect(value.names == ["Soup"])
        #expect(value.inline)
        #expect(value.permanent)
    }

    /// C3: perform on a .confinement context is a programming error.
    @Test("C3: perform on a .confinement context traps")
    func performOnConfinementTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let coordinator = try makeCoordinator()
            let importer = ManagedObjectContext(.confinement, coordinator: coordinator, name: "ConfinedImporter")
            importer.perform {}
        }
        if let result {
            let stderr = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(stderr.contains("ConfinedImporter"))
            #expect(stderr.contains(".confinement"))
        }
    }

    /// C3: the async perform on a .confinement context traps too.
    @Test("C3: async perform on a .confinement context traps")
    func asyncPerformOnConfinementTraps() async {
        await #expect(processExitsWith: .failure) {
            let coordinator = try makeCoordinator()
            let importer = ManagedObjectContext(.confinement, coordinator: coordinator, name: "ConfinedImporter")
            _ = await importer.perform { 1 }
        }
    }

    /// C3: a .confinement context is used only on its thread:
    /// performAndWait from another thread traps (even without the debug switch).
    @Test("C3: performAndWait on a .confinement context from another thread traps")
    func confinementUsedFromAnotherThreadTraps() async {
        await #expect(processExitsWith: .failure) {
            let coordinator = try makeCoordinator()
            let importer = ManagedObjectContext(.confinement, coordinator: coordinator, name: "ConfinedImporter")
            let done = DispatchSemaphore(value: 0)
            Thread {
                importer.performAndWait {}
                done.signal()
            }.start()
            _ = done.wait(timeout: .now() + 10)  // the trap ends the process first
        }
    }

    /// C3 and C4: a .confinement context cannot be a parent.
    @Test("C3, C4: a .confinement context cannot be the parent of a .privateQueue context")
    func confinementCannotParentPrivate() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let coordinator = try makeCoordinator()
            let importer = ManagedObjectContext(.confinement, coordinator: coordinator, name: "ConfinedParent")
            _ = ManagedObjectContext(.privateQueue, parent: importer)
        }
        if let result {
            #expect(String(decoding: result.standardErrorContent, as: UTF8.self).contains("ConfinedParent"))
        }
    }

    @Test("C3, C4: a .confinement context cannot be the parent of a .confinement context")
    func confinementCannotParentConfinement() async {
        await #expect(processExitsWith: .failure) {
            let coordinator = try makeCoordinator()
            let importer = ManagedObjectContext(.confinement, coordinator: coordinator)
            _ = ManagedObjectContext(.confinement, parent: importer)
        }
    }

    @Test("C3, C4: a .confinement context cannot be the parent of a .mainQueue context")
    func confinementCannotParentMain() async {
        await #expect(processExitsWith: .failure) {
            let coordinator = try makeCoordinator()
            let importer = ManagedObjectContext(.confinement, coordinator: coordinator)
            _ = ManagedObjectContext(.mainQueue, parent: importer)
        }
    }

    // MARK: C4 — .privateQueue and .mainQueue can be parents

    /// C4: a .privateQueue context is a parent of every kind of child.
    @Test("C4: a .privateQueue context can be a parent")
    func privateContextCanBeAParent() async throws {
        let coordinator = try makeCoordinator()
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "Parent")
        let child = ManagedObjectContext(.privateQueue, parent: parent, name: "Child")
        #expect(child.parent === parent)
        try child.performAndWait { () throws(StrataError) in
            Recipe(context: child).name = "Soup"
            try child.save()
        }
        #expect(parent.performAndWait { parent.hasChanges })
        // A .confinement child of a private parent, on its own thread.
        let confinedSaved = await runOnDedicatedThread { () -> Bool in
            let confined = ManagedObjectContext(.confinement, parent: parent, name: "Confined")
            Recipe(context: confined).name = "Stew"
            do { try confined.save() } catch { return false }
            return true
        }
        #expect(confinedSaved)
        #expect(parent.performAndWait { parent.insertedObjects.count } == 2)
    }

    /// C4: a .mainQueue context is a parent.
    @Test("C4: a .mainQueue context can be a parent")
    @MainActor func mainContextCanBeAParent() throws {
        let coordinator = try makeCoordinator()
        let main = ManagedObjectContext(.mainQueue, coordinator: coordinator, name: "Main")
        let child = ManagedObjectContext(.privateQueue, parent: main, name: "Child")
        #expect(child.parent === main)
        try child.performAndWait { () throws(StrataError) in
            Recipe(context: child).name = "Soup"
            try child.save()
        }
        #expect(main.hasChanges)
        #expect(main.insertedObjects.compactMap { ($0 as? Recipe)?.name } == ["Soup"])
    }
}

// MARK: - Helpers (this file's own)

/// A value behind an NSLock, which ThreadSanitizer models correctly.
final class ConcurrencyTestBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var _value: Value  // guarded by `lock`
    init(_ value: Value) { _value = value }
    var value: Value { lock.withLock { _value } }
    @discardableResult
    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        try lock.withLock { try body(&_value) }
    }
}

/// "Am I on the main queue?" as a queue check, not a thread check: after
/// `dispatchMain()`, main-queue blocks may run on worker threads.
enum MainQueueCheck {
    private static let key = DispatchSpecificKey<UInt8>()
    private static let installed: Bool = {
        DispatchQueue.main.setSpecific(key: key, value: 1)
        return true
    }()
    static func install() { _ = installed }
    static var isOnMainQueue: Bool {
        install()
        return DispatchQueue.getSpecific(key: key) == 1
    }
}

/// The fire-and-forget `perform`, callable from async code (where the call
/// `context.perform { … }` resolves to the async overload instead).
func enqueueBlock(_ context: ManagedObjectContext, _ block: @escaping @Sendable () -> Void) {
    context.perform(block)
}

/// Runs `body` on a new `Thread` and suspends (blocking no queue) until it returns.
func runOnDedicatedThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: body()) }.start()
    }
}

/// Runs `body` on a new `Thread`; nil if it has not returned after `seconds`
/// (a deadlock then fails the test instead of hanging the run; the stuck
/// thread is leaked).
func runOnDedicatedThread<T: Sendable>(timeout seconds: Double, _ body: @escaping @Sendable () -> T) async -> T? {
    let pending = ConcurrencyTestBox<CheckedContinuation<T?, Never>?>(nil)
    return await withCheckedContinuation { (continuation: CheckedContinuation<T?, Never>) in
        pending.withLock { $0 = continuation }
        Thread {
            let value = body()
            pending.withLock { $0.take() }?.resume(returning: value)
        }.start()
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) {
            pending.withLock { $0.take() }?.resume(returning: nil)
        }
    }
}
