import Dispatch
import Foundation
import Strata
import Testing

// The performAndWait chains that deadlock Core Data users (hardening issue,
// part 4) must finish in Strata. Each test forces the interleaving with
// semaphores (drawn beside it) and runs every thread under a watchdog, so a
// deadlock fails the test instead of hanging CI. The rule that makes them
// finish is Rule 9 in Strata.docc/ConcurrencyRules.md: a thread that would
// wait for a context held by a thread that is itself (transitively) waiting
// for this one runs the block at once, as a guest.

/// Two threads crossing: the first holds `first` and then waits for
/// `second`; the other holds `second` and then waits for `first`. Returns
/// what both blocks saw, or nil for a thread that did not finish in time.
private func crossing(
    _ first: ManagedObjectContext, then second: ManagedObjectContext,
    firstWork: @escaping @Sendable () -> Int, secondWork: @escaping @Sendable () -> Int
) async -> (Int?, Int?) {
    let firstInside = DispatchSemaphore(value: 0)
    let secondInside = DispatchSemaphore(value: 0)
    async let a: Int? = runOnDedicatedThread(timeout: 20) {
        first.performAndWait { () -> Int in
            firstInside.signal()
            _ = secondInside.wait(timeout: .now() + 10)
            return second.performAndWait { secondWork() }
        }
    }
    async let b: Int? = runOnDedicatedThread(timeout: 20) {
        second.performAndWait { () -> Int in
            secondInside.signal()
            _ = firstInside.wait(timeout: .now() + 10)
            // Give the first thread time to block on this context's queue.
            Thread.sleep(forTimeInterval: 0.05)
            return first.performAndWait { firstWork() }
        }
    }
    return await (a, b)
}

@Suite struct DeadlockTests {
    /// A child waits on its parent while the parent is inside a block that
    /// needs the child's queue.
    ///
    ///     thread A                          thread B
    ///     child.performAndWait {            parent.performAndWait {
    ///       ── both inside ──────────────────────
    ///       parent.performAndWait {…}         child.performAndWait {…}
    ///       (waits for B's parent block)      (would wait for A: a cycle —
    ///                                          runs at once as a guest)
    ///     }                                 }
    @Test func aChildAndItsParentWaitingForEachOtherFinish() async throws {
        let coordinator = try makeCoordinator()
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "Parent")
        let child = ManagedObjectContext(.privateQueue, parent: parent, name: "Child")
        let (a, b) = await crossing(child, then: parent, firstWork: {
            (try? child.count(for: FetchRequest<Recipe>())) ?? -1
        }, secondWork: {
            let soup = Recipe(context: parent)
            soup.name = "Soup"
            return parent.insertedObjects.count
        })
        #expect(a == 1, "the parent's block did not run for the child")
        // Whichever thread closed the cycle ran first: B as the child's guest
        // (before A's insert: 0) or, had A come last, A as the parent's (1).
        #expect(b == 0 || b == 1, "the child's block did not run for the parent")
    }

    /// The same with the main queue: a background child waits on its
    /// main-queue parent while the main queue is inside a block that needs
    /// the child.
    @Test func aChildAndItsMainQueueParentWaitingForEachOtherFinish() async throws {
        let coordinator = try makeCoordinator()
        let main = ManagedObjectContext(.mainQueue, coordinator: coordinator, name: "Main")
        let child = ManagedObjectContext(.privateQueue, parent: main, name: "Child")
        let (a, b) = await crossing(child, then: main, firstWork: {
            let soup = Recipe(context: child)
            soup.name = "Soup"
            return child.insertedObjects.count
        }, secondWork: {
            main.insertedObjects.count + 7
        })
        #expect(a == 7)
        #expect(b == 0 || b == 1)
    }

    /// Plain main-queue code (no context block) waits for a child that is
    /// waiting for its main-queue parent.
    ///
    ///     thread A                          main queue
    ///     child.performAndWait {            (a block, in no context)
    ///       ── both inside ──────────────────────
    ///       main.performAndWait {…}           child.performAndWait {…}
    ///       (waits for the main queue)        (a cycle: runs as a guest)
    @Test func mainQueueCodeAndABackgroundChildWaitingForEachOtherFinish() async throws {
        let coordinator = try makeCoordinator()
        let main = ManagedObjectContext(.mainQueue, coordinator: coordinator, name: "Main")
        let child = ManagedObjectContext(.privateQueue, parent: main, name: "Child")
        let childInside = DispatchSemaphore(value: 0)
        let mainInside = DispatchSemaphore(value: 0)
        let mainDone = DispatchSemaphore(value: 0)
        let mainSaw = ConcurrencyTestBox<Int?>(nil)
        DispatchQueue.main.async {
            mainInside.signal()
            _ = childInside.wait(timeout: .now() + 10)
            Thread.sleep(forTimeInterval: 0.05)
            mainSaw.withLock { $0 = child.performAndWait { child.registeredObjects.count } }
            mainDone.signal()
        }
        let a = await runOnDedicatedThread(timeout: 20) { () -> Int in
            child.performAndWait { () -> Int in
                _ = Recipe(context: child)
                childInside.signal()
                _ = mainInside.wait(timeout: .now() + 10)
                return main.performAndWait { main.registeredObjects.count + 3 }
            }
        }
        let mainFinished = await runOnDedicatedThread(timeout: 20) { mainDone.wait(timeout: .now() + 15) == .success }
        #expect(a == 3)
        #expect(mainFinished == true)
        #expect(mainSaw.value == 1)
    }

    /// A child saves into its parent (a synchronous call into the parent)
    /// while the parent's block waits for the child — for a parent in memory
    /// and for one attached to the coordinator (whose children's calls take
    /// the guest path of Rule 6).
    ///
    ///     thread A                          thread B
    ///     child.performAndWait {            parent.performAndWait {
    ///       insert                            ── both inside ──
    ///       child.save() → into parent        child.performAndWait { count }
    ///       (waits for B's parent block)      (a cycle: runs as a guest, sees 1)
    ///     }                                 }
    @Test(arguments: [false, true])
    func aChildSavingIntoAParentThatWaitsForItFinishes(parentOnCoordinator: Bool) async throws {
        let coordinator = try makeCoordinator(TemporaryDirectory())
        let root = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "Root")
        let parent = parentOnCoordinator ? root : ManagedObjectContext(.privateQueue, parent: root, name: "Parent")
        let child = ManagedObjectContext(.privateQueue, parent: parent, name: "Child")
        let childInside = DispatchSemaphore(value: 0)
        let parentInside = DispatchSemaphore(value: 0)
        async let saved: Bool? = runOnDedicatedThread(timeout: 20) {
            child.performAndWait { () -> Bool in
                let soup = Recipe(context: child)
                soup.name = "Soup"
                childInside.signal()
                _ = parentInside.wait(timeout: .now() + 10)
                do { try child.save() } catch { return false }
                return true
            }
        }
        async let counted: Int? = runOnDedicatedThread(timeout: 20) {
            parent.performAndWait { () -> Int in
                parentInside.signal()
                _ = childInside.wait(timeout: .now() + 10)
                Thread.sleep(forTimeInterval: 0.05)  // let A block on the parent
                return child.performAndWait { (try? child.count(for: FetchRequest<Recipe>())) ?? -1 }
            }
        }
        let (didSave, count) = await (saved, counted)
        #expect(didSave == true)
        #expect(count == 1)
        let inParent = await runOnDedicatedThread(timeout: 20) { parent.performAndWait { parent.insertedObjects.count } }
        #expect(inParent == 1, "the child's save reached the parent")
    }

    /// Saves nested inside fetches: saving in the loop over a fetch's
    /// results, and a child's fetch whose block saves the parent through
    /// `performAndWait` on the way.
    @Test func savesNestedInsideFetchesFinish() async throws {
        let directory = TemporaryDirectory()
        let coordinator = try makeCoordinator(directory)
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "Parent")
        let child = ManagedObjectContext(.privateQueue, parent: parent, name: "Child")
        let finished = await runOnDedicatedThread(timeout: 20) { () -> Int? in
            do {
                try parent.performAndWait { () throws in
                    for i in 0..<5 {
                        let soup = Recipe(context: parent)
                        soup.name = "Soup \(i)"
                    }
                    try parent.save()
                }
                return try child.performAndWait { () throws -> Int in
                    for recipe in try child.fetch(FetchRequest<Recipe>()) {
                        recipe.servings += 1
                        try child.save()
                        try parent.performAndWait { () throws in
                            _ = try parent.fetch(FetchRequest<Recipe>())
                            try parent.save()
                        }
                    }
                    return try child.fetch(FetchRequest<Recipe>()).map(\.servings).reduce(0, +)
                }
            } catch {
                Issue.record("\(error)")
                return nil
            }
        }
        #expect(finished == .some(10))
    }

    /// A save inside an objects-did-change observer of the same context (a
    /// notification posted at the end of a block) neither recurses forever
    /// nor deadlocks.
    @Test func aSaveInsideAnObjectsDidChangeObserverFinishes() async throws {
        let coordinator = try makeCoordinator(TemporaryDirectory())
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "Context")
        let saves = ConcurrencyTestBox(0)
        let token = NotificationCenter.default.addObserver(forName: ManagedObjectContext.objectsDidChange, object: context, queue: nil) { _ in
            // Posted on the context's queue, inside its block.
            if context.hasChanges {
                do { try context.save() } catch { Issue.record("\(error)") }
                saves.withLock { $0 += 1 }
            }
        }
        defer { NotificationCenter.default.removeObserver(token) }
        let stored = await runOnDedicatedThread(timeout: 20) { () -> Int in
            context.performAndWait {
                let soup = Recipe(context: context)
                soup.name = "Soup"
            }
            return context.performAndWait { (try? context.count(for: FetchRequest<Recipe>())) ?? -1 }
        }
        #expect(stored == 1)
        #expect(saves.value >= 1)
        #expect(!context.performAndWait { context.hasChanges })
    }
}
