import Dispatch
import Foundation
import Strata
import Testing

// Contract C5–C8: perform, performAndWait, the async perform, and one
// objects-did-change notification per block.
//
// Tests that take a concurrency type run for .privateQueue and .mainQueue.
// They are not on the main actor, so the main queue is free to run a
// .mainQueue context's blocks while the test waits. Interleavings are forced
// with semaphores and drawn next to each test; a timeout on a wait only turns
// a would-be hang (or a deadlock) into a failure.

private let queuedTypes: [ManagedObjectContext.ConcurrencyType] = [.privateQueue, .mainQueue]

private enum Boom: Error, Equatable {
    case boom(Int)
}

@Suite struct PerformTests {

    // MARK: C5 — perform enqueues; one at a time, in order; nested perform appended

    /// C5: perform returns before its block runs.
    ///
    ///     caller thread                        context queue
    ///     perform { wait(gate) … }  ─────────▶ block: wait(gate)       (blocked)
    ///     returned = true
    ///     signal(gate) ──────────────────────▶ block: saw returned == true
    ///
    /// Were the block run inline, the caller would sit in wait(gate) until it
    /// timed out, and the block would see returned == false.
    @Test("C5: perform returns before its block runs", arguments: queuedTypes)
    func performReturnsBeforeTheBlockRuns(_ type: ManagedObjectContext.ConcurrencyType) async throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(type, coordinator: coordinator, name: "Context")
        let sawReturned = await runOnDedicatedThread(timeout: 60) { () -> Bool? in
            let gate = DispatchSemaphore(value: 0)
            let done = DispatchSemaphore(value: 0)
            let returned = ConcurrencyTestBox(false)
            let seen = ConcurrencyTestBox<Bool?>(nil)
            context.perform {
                _ = gate.wait(timeout: .now() + 30)
                seen.withLock { $0 = returned.value }
                done.signal()
            }
            returned.withLock { $0 = true }
            gate.signal()
            _ = done.wait(timeout: .now() + 30)
            return seen.value
        }
        #expect(sawReturned == .some(.some(true)))
    }

    /// C5: on the main queue, perform on a .mainQueue context is not run
    /// inline either: the block waits until the main queue is free again.
    @Test("C5: perform on a .mainQueue context from the main queue is enqueued, not run inline")
    @MainActor func mainPerformFromTheMainQueueIsEnqueued() async throws {
        let coordinator = try makeCoordinator()
        let main = ManagedObjectContext(.mainQueue, coordinator: coordinator, name: "Main")
        let ran = ConcurrencyTestBox(false)
        enqueueBlock(main) { ran.withLock { $0 = true } }
        #expect(!ran.value)  // we still hold the main queue
        let hasRun: @Sendable () -> Bool = { ran.value }
        #expect(await eventually(30, hasRun))
    }

    /// C5: blocks of one context run one at a time, in enqueue order,
    /// whichever threads enqueue them.
    ///
    ///     thread 1..4 (each 250 times):  lock { ticket = next++; perform(block(ticket)) }
    ///     context queue:                 block(0) block(1) block(2) … block(999)
    ///
    /// Taking the ticket and calling perform under one lock makes the
    /// enqueue order observable: the run order must be 0, 1, 2, …, and no
    /// block may find another in flight.
    @Test("C5: blocks from many threads run one at a time in enqueue order", arguments: queuedTypes)
    func blocksRunSeriallyInEnqueueOrder(_ type: ManagedObjectContext.ConcurrencyType) async throws {
        let threads = 4
        let perThread = 250
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(type, coordinator: coordinator, name: "Context")
        let ticket = ConcurrencyTestBox(0)  // the lock around "take a ticket and enqueue"
        let inFlight = ConcurrencyTestBox(0)
        let overlaps = ConcurrencyTestBox(0)
        let ran = ConcurrencyTestBox<[Int]>([])
        let start = DispatchSemaphore(value: 0)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<threads {
                group.addTask {
                    await runOnDedicatedThread {
                        _ = start.wait(timeout: .now() + 10)  // all threads start together
                        for _ in 0..<perThread {
                            ticket.withLock { next in
                                let mine = next
                                next += 1
                                context.perform {
                                    if inFlight.withLock({ count in count += 1; return count }) > 1 {
                                        overlaps.withLock { $0 += 1 }
                                    }
                                    let recipe = Recipe(context: context)  // some work on the context
                                    recipe.name = "r\(mine)"
                                    recipe.servings = mine
                                    ran.withLock { $0.append(mine) }
                                    inFlight.withLock { $0 -= 1 }
                                }
                            }
                        }
                    }
                }
            }
            for _ in 0..<threads { start.signal() }
        }
        // A block enqueued after all of them runs after all of them.
        let inserted = await context.perform { context.insertedObjects.count }
        #expect(inserted == threads * perThread)
        #expect(overlaps.value == 0)
        #expect(ran.value == Array(0..<threads * perThread))
    }

    /// C5: a perform issued inside a block of the same context goes to the
    /// end of the queue.
    ///
    ///     test thread                       context queue
    ///     perform(A) ─────────────────────▶ A: wait(bEnqueued)
    ///     perform(B)                           │   queue now: [B]
    ///     signal(bEnqueued) ──────────────▶ A: log A1; perform(C)  queue: [B, C]
    ///                                          log A2
    ///                                       B: log B
    ///                                       C: log C; signal(done)
    ///
    /// Inline execution would log A1, C, A2, B.
    @Test("C5: perform from inside a block is appended to the queue, not run inline", arguments: queuedTypes)
    func nestedPerformIsAppended(_ type: ManagedObjectContext.ConcurrencyType) async throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(type, coordinator: coordinator, name: "Context")
        let log = await runOnDedicatedThread(timeout: 60) { () -> [String] in
            let log = ConcurrencyTestBox<[String]>([])
            let bEnqueued = DispatchSemaphore(value: 0)
            let done = DispatchSemaphore(value: 0)
            context.perform {
                _ = bEnqueued.wait(timeout: .now() + 15)
                log.withLock { $0.append("A1") }
                context.perform {
                    log.withLock { $0.append("C") }
                    done.signal()
                }
                log.withLock { $0.append("A2") }
            }
            context.perform { log.withLock { $0.append("B") } }
            bEnqueued.signal()
            _ = done.wait(timeout: .now() + 30)
            return log.value
        }
        #expect(log == ["A1", "A2", "B", "C"])
    }

    /// C5: also from inside a performAndWait block (nested inside a
    /// perform block), perform appends: the enqueued block runs after the
    /// whole outer block.
    @Test("C5: perform from inside a performAndWait block is appended", arguments: queuedTypes)
    func performInsidePerformAndWaitIsAppended(_ type: ManagedObjectContext.ConcurrencyType) async throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(type, coordinator: coordinator, name: "Context")
        let log = await runOnDedicatedThread(timeout: 20) { () -> [String] in
            let log = ConcurrencyTestBox<[String]>([])
            context.performAndWait {
                context.performAndWait {
                    context.perform { log.withLock { $0.append("enqueued") } }
                    log.withLock { $0.append("inner end") }
                }
                log.withLock { $0.append("outer end") }
            }
            context.performAndWait { log.withLock { $0.append("barrier") } }
            return log.value
        }
        #expect(log == ["inner end", "outer end", "enqueued", "barrier"])
    }

    // MARK: C6 — performAndWait

    /// C6: performAndWait waits for the blocks enqueued before it.
    ///
    ///     thread T1 (test)           context queue                 thread T2
    ///     perform(first) ──────────▶ first: signal(firstRunning)
    ///     wait(firstRunning)                wait(gate) …
    ///     start T2 ───────────────────────────────────────────────▶ performAndWait(second)
    ///     wait(t2Done, 0.3 s): must time out — T2 is still blocked     (blocked)
    ///     signal(gate) ────────────▶ first: log "first"
    ///                                second: log "second" ────────▶ returns 42; signal(t2Done)
    ///
    /// The 0.3 s wait is an assertion of no progress, not synchronisation: a
    /// correct performAndWait cannot return before the gate opens.
    @Test("C6: performAndWait waits for blocks enqueued before it", arguments: queuedTypes)
    func performAndWaitWaitsForEarlierBlocks(_ type: ManagedObjectContext.ConcurrencyType) async throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(type, coordinator: coordinator, name: "Context")
        let outcome = await runOnDedicatedThread(timeout: 30) { () -> (blockedWhileFirstRan: Bool, value: Int?, log: [String]) in
            let log = ConcurrencyTestBox<[String]>([])
            let firstRunning = DispatchSemaphore(value: 0)
            let gate = DispatchSemaphore(value: 0)
            let t2Done = DispatchSemaphore(value: 0)
            let value = ConcurrencyTestBox<Int?>(nil)
            context.perform {
                firstRunning.signal()
                _ = gate.wait(timeout: .now() + 10)
                log.withLock { $0.append("first") }
            }
            _ = firstRunning.wait(timeout: .now() + 10)
            Thread {
                let result = context.performAndWait { () -> Int in
                    log.withLock { $0.append("second") }
                    return 42
                }
                value.withLock { $0 = result }
                t2Done.signal()
            }.start()
            let blocked = t2Done.wait(timeout: .now() + 0.3) == .timedOut
            gate.signal()
            _ = t2Done.wait(timeout: .now() + 10)
            return (blocked, value.value, log.value)
        }
        #expect(outcome?.blockedWhileFirstRan == true)
        #expect(outcome?.value == 42)
        #expect(outcome?.log == ["first", "second"])
    }

    /// C6: performAndWait inside a block of the same context runs inline
    /// (on the same thread, before the next statement), however deep.
    @Test("C6: performAndWait is reentrant, nested 8 deep", arguments: queuedTypes)
    func performAndWaitIsReentrantAtDepth(_ type: ManagedObjectContext.ConcurrencyType) async throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(type, coordinator: coordinator, name: "Context")
        let depth = 8
        // From a plain thread, and from inside a perform block.
        let outcome = await runOnDedicatedThread(timeout: 60) { () -> (fromThread: [Int], fromPerform: [Int], value: Int, sameThread: Bool) in
            let log = ConcurrencyTestBox<[Int]>([])
            let threads = ConcurrencyTestBox<[pthread_t]>([])
            @Sendable func nest(_ level: Int) -> Int {
                context.performAndWait {
                    threads.withLock { $0.append(pthread_self()) }
                    log.withLock { $0.append(level) }
                    let below = level < depth ? nest(level + 1) : 0
                    log.withLock { $0.append(-level) }
                    return below + 1
                }
            }
            let value = nest(1)
            let fromThread = log.withLock { all in defer { all = [] }; return all }
            let done = DispatchSemaphore(value: 0)
            context.perform {
                _ = nest(1)
                done.signal()
            }
            _ = done.wait(timeout: .now() + 30)
            let ids = threads.value
            let sameThread = ids.count == 2 * depth
                && ids[..<depth].allSatisfy { pthread_equal($0, ids[0]) != 0 }
                && ids[depth...].allSatisfy { pthread_equal($0, ids[depth]) != 0 }
            return (fromThread, log.value, value, sameThread)
        }
        let expected = Array(1...depth) + (1...depth).reversed().map { -$0 }
        #expect(outcome?.fromThread == expected)
        #expect(outcome?.fromPerform == expected)
        #expect(outcome?.value == depth)
        #expect(outcome?.sameThread == true)
    }

    /// C6 (and C2): a .mainQueue context used on the main queue: nested
    /// performAndWait runs inline, 6 deep.
    @Test("C6: performAndWait on a .mainQueue context from the main queue is reentrant")
    @MainActor func mainPerformAndWaitFromTheMainQueueIsReentrant() throws {
        let coordinator = try makeCoordinator()
        let main = ManagedObjectContext(.mainQueue, coordinator: coordinator, name: "Main")
        var log: [Int] = []
        func nest(_ level: Int) {
            main.performAndWait {
                log.append(level)
                if level < 6 { nest(level + 1) }
            }
        }
        nest(1)
        #expect(log == [1, 2, 3, 4, 5, 6])
    }

    /// C6: reentrancy through a parent: a child's block calls
    /// parent.performAndWait, whose block calls child.performAndWait — that
    /// runs inline, without deadlock (a save does exactly this hop), and again
    /// through the parent, 5 levels deep.
    ///
    ///     child queue               parent queue
    ///     child block: log c1
    ///       parent.performAndWait ─▶ log p1
    ///                                 child.performAndWait (inline): log c2
    ///                                   parent.performAndWait (inline): log p2
    ///                                     child.performAndWait (inline): log c3
    ///                                 log p-end
    ///     log c-end
    @Test("C6: performAndWait is reentrant through a parent", arguments: [
        (ManagedObjectContext.ConcurrencyType.privateQueue, ManagedObjectContext.ConcurrencyType.privateQueue),
        (.privateQueue, .mainQueue),
        (.mainQueue, .privateQueue),
    ])
    func performAndWaitIsReentrantThroughAParent(
        _ childType: ManagedObjectContext.ConcurrencyType, _ parentType: ManagedObjectContext.ConcurrencyType
    ) async throws {
        let coordinator = try makeCoordinator()
        let parent = ManagedObjectContext(parentType, coordinator: coordinator, name: "Parent")
        let child = ManagedObjectContext(childType, parent: parent, name: "Child")
        let log = await runOnDedicatedThread(timeout: 60) { () -> [String] in
            let log = ConcurrencyTestBox<[String]>([])
            let done = DispatchSemaphore(value: 0)
            child.perform {
                log.withLock { $0.append("c1") }
                parent.performAndWait {
                    log.withLock { $0.append("p1") }
                    child.performAndWait {
                        log.withLock { $0.append("c2") }
                        parent.performAndWait {
                            log.withLock { $0.append("p2") }
                            child.performAndWait { log.withLock { $0.append("c3") } }
                        }
                    }
                    log.withLock { $0.append("p-end") }
                }
                log.withLock { $0.append("c-end") }
                done.signal()
            }
            _ = done.wait(timeout: .now() + 30)
            return log.value
        }
        #expect(log == ["c1", "p1", "c2", "p2", "c3", "p-end", "c-end"])
    }

    /// C6: the same hop from a grandchild's block through its parent and
    /// grandparent and back to the grandchild.
    @Test("C6: performAndWait is reentrant through two ancestors")
    func performAndWaitIsReentrantThroughTwoAncestors() async throws {
        let coordinator = try makeCoordinator()
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "Writer")
        let main = ManagedObjectContext(.mainQueue, parent: writer, name: "Main")
        let importer = ManagedObjectContext(.privateQueue, parent: main, name: "Importer")
        let log = await runOnDedicatedThread(timeout: 20) { () -> [String] in
            importer.performAndWait {
                var log = ["i"]
                main.performAndWait {
                    log.append("m")
                    writer.performAndWait {
                        log.append("w")
                        importer.performAndWait { log.append("i2") }
                        main.performAndWait { log.append("m2") }
                    }
                }
                return log
            }
        }
        #expect(log == ["i", "m", "w", "i2", "m2"])
    }

    /// C6: performAndWait returns the block's value and rethrows its
    /// error with its type (`catch` below binds a `Boom`, statically), also
    /// from deep inside nested blocks; the context stays usable afterwards.
    @Test("C6: performAndWait returns the value and rethrows the typed error", arguments: queuedTypes)
    func performAndWaitReturnsValueAndRethrows(_ type: ManagedObjectContext.ConcurrencyType) async throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(type, coordinator: coordinator, name: "Context")
        let outcome = await runOnDedicatedThread(timeout: 20) { () -> (value: String, caught: Boom?, nestedCaught: Boom?, after: Int) in
            let value = context.performAndWait { () -> String in
                let soup = Recipe(context: context)
                soup.name = "Soup"
                return soup.name
            }
            var caught: Boom?
            do throws(Boom) {
                _ = try context.performAndWait { () throws(Boom) -> Int in throw .boom(1) }
            } catch {
                caught = error
            }
            var nestedCaught: Boom?
            do throws(Boom) {
                try context.performAndWait { () throws(Boom) in
                    try context.performAndWait { () throws(Boom) in
                        try context.performAndWait { () throws(Boom) in throw .boom(3) }
                    }
                }
            } catch {
                nestedCaught = error
            }
            let after = context.performAndWait { context.insertedObjects.count }
            return (value, caught, nestedCaught, after)
        }
        #expect(outcome?.value == "Soup")
        #expect(outcome?.caught == .boom(1))
        #expect(outcome?.nestedCaught == .boom(3))
        #expect(outcome?.after == 1)
    }

    /// C6: the errors Strata throws come through performAndWait as themselves.
    @Test("C6: performAndWait rethrows a StrataError from save")
    func performAndWaitRethrowsStrataError() throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        #expect(throws: StrataError.self) {
            try context.performAndWait { () throws(StrataError) in
                _ = Recipe(context: context)  // "name" is required and unset
                try context.save()
            }
        }
    }

    // MARK: C7 — async perform

    /// C7: `await perform` hands back the block's value, having run it on
    /// the context's queue.
    @Test("C7: async perform returns the block's value", arguments: queuedTypes)
    func asyncPerformReturnsValue(_ type: ManagedObjectContext.ConcurrencyType) async throws {
        MainQueueCheck.install()
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(type, coordinator: coordinator, name: "Context")
        let (id, onMain) = await context.perform { () -> (ObjectID, Bool) in
            let soup = Recipe(context: context)
            soup.name = "Soup"
            return (soup.objectID, MainQueueCheck.isOnMainQueue)
        }
        #expect(onMain == (type == .mainQueue))
        let name = await context.perform { (context.object(with: id) as? Recipe)?.name }
        #expect(name == "Soup")
    }

    /// C7: `await perform` rethrows the block's typed error.
    @Test("C7: async perform throws the block's typed error", arguments: queuedTypes)
    func asyncPerformThrows(_ type: ManagedObjectContext.ConcurrencyType) async throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(type, coordinator: coordinator, name: "Context")
        do throws(Boom) {
            _ = try await context.perform { () throws(Boom) -> Int in throw .boom(7) }
            Issue.record("no error thrown")
        } catch {
            #expect(error == .boom(7))
        }
        await #expect(throws: StrataError.self) {
            try await context.perform { () throws(StrataError) in
                _ = Recipe(context: context)  // "name" is required and unset
                try context.save()
            }
        }
    }

    /// C7: the caller stays suspended until its block has run, after the
    /// blocks enqueued before it.
    ///
    ///     test task                    opener thread          context queue
    ///     perform(first) ─────────────────────────────────────▶ first: signal(firstRunning); wait(gate)
    ///                                  wait(firstRunning)
    ///     Task { signal(secondQueued);
    ///            await perform(second) }  ──▶ wait(secondQueued)
    ///                                  0.3 s: second not done (assertion of no progress)
    ///                                  signal(gate) ────────▶ first: log "first"
    ///                                                        second: log "second" ──▶ task resumes with 2
    ///
    /// The gate opens from a thread of its own, not from the test's task: the
    /// first block holds a Dispatch worker (or the main queue's), and on Linux
    /// Swift's tasks run on those same workers. With the pool full of tests
    /// that block, a task that was to open the gate waited for a worker the
    /// blocked ones would not free until their 30 s timeouts — the whole run
    /// stalled. The opener waits at most 5 s for the second perform to be
    /// queued, so a starved pool delays it that long at worst.
    @Test("C7: async perform suspends until its block has run, after earlier blocks", arguments: queuedTypes)
    func asyncPerformSuspendsUntilItsBlockRan(_ type: ManagedObjectContext.ConcurrencyType) async throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(type, coordinator: coordinator, name: "Context")
        let log = ConcurrencyTestBox<[String]>([])
        let firstRunning = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        let secondQueued = DispatchSemaphore(value: 0)
        let finished = ConcurrencyTestBox(false)
        enqueueBlock(context) {
            firstRunning.signal()
            _ = gate.wait(timeout: .now() + 30)
            log.withLock { $0.append("first") }
        }
        // Started here, synchronously: a task could itself wait for a worker.
        let opened = ConcurrencyTestBox<(started: Bool, finishedEarly: Bool)?>(nil)
        let openerDone = DispatchSemaphore(value: 0)
        Thread {
            let started = firstRunning.wait(timeout: .now() + 30) == .success
            _ = secondQueued.wait(timeout: .now() + 5)
            Thread.sleep(forTimeInterval: 0.3)
            let finishedEarly = finished.value
            gate.signal()
            opened.withLock { $0 = (started, finishedEarly) }
            openerDone.signal()
        }.start()
        let second = Task {
            secondQueued.signal()
            let value = await context.perform { () -> Int in
                log.withLock { $0.append("second") }
                return 2
            }
            finished.withLock { $0 = true }
            return value
        }
        _ = await runOnDedicatedThread { openerDone.wait(timeout: .now() + 40) }
        #expect(opened.value?.started == true)
        #expect(opened.value?.finishedEarly == false)
        #expect(await second.value == 2)
        #expect(log.value == ["first", "second"])
    }

    /// C7 and C2: awaiting a .mainQueue context's perform from the main
    /// actor does not deadlock: the caller suspends, freeing the main queue.
    @Test("C7: async perform on a .mainQueue context from the main actor")
    @MainActor func asyncMainPerformFromTheMainActor() async throws {
        MainQueueCheck.install()
        let coordinator = try makeCoordinator()
        let main = ManagedObjectContext(.mainQueue, coordinator: coordinator, name: "Main")
        let onMain = await main.perform { MainQueueCheck.isOnMainQueue }
        #expect(onMain)
    }

    // MARK: C8 — one objects-did-change notification per block

    /// C8: a block with many property writes, an insert, updates and a
    /// delete posts exactly one objects-did-change notification, naming the
    /// inserted, updated and deleted IDs.
    @Test("C8: one objects-did-change notification per block, with its IDs", arguments: queuedTypes)
    func oneNotificationPerBlock(_ type: ManagedObjectContext.ConcurrencyType) async throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(type, coordinator: coordinator, name: "Context")
        let (keptID, doomedID) = try await context.perform { () throws(StrataError) -> (ObjectID, ObjectID) in
            let kept = Recipe(context: context)
            kept.name = "Kept"
            let doomed = Recipe(context: context)
            doomed.name = "Doomed"
            try context.save()
            return (kept.objectID, doomed.objectID)
        }
        let recorder = NotificationRecorder(ManagedObjectContext.objectsDidChange, from: context)
        let newID = await context.perform { () -> ObjectID in
            let kept = context.object(with: keptID) as! Recipe
            for i in 0..<20 {
                kept.servings = i
                kept.rating = Double(i)
                kept.notes = "note \(i)"
            }
            let fresh = Recipe(context: context)
            for i in 0..<20 { fresh.name = "Fresh \(i)" }
            let salt = Ingredient(context: context)
            salt.name = "Salt"
            salt.recipe = fresh
            context.delete(context.object(with: doomedID))
            return fresh.objectID
        }
        let saltID = await context.perform { () -> ObjectID? in
            context.insertedObjects.first { $0 is Ingredient }?.objectID
        }
        let notes = recorder.all
        #expect(notes.count == 1)
        if let note = notes.first {
            #expect(Set(note.inserted) == Set([newID, saltID].compactMap { $0 }))
            #expect(note.updated == [keptID])
            #expect(note.deleted == [doomedID])
        }
    }

    /// C8: nested performAndWait blocks are part of the outer block: the
    /// one notification comes when the outermost block ends, not before.
    @Test("C8: nested blocks post one notification, when the outermost block ends", arguments: queuedTypes)
    func nestedBlocksPostOneNotification(_ type: ManagedObjectContext.ConcurrencyType) async throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(type, coordinator: coordinator, name: "Context")
        let recorder = NotificationRecorder(ManagedObjectContext.objectsDidChange, from: context)
        let outcome = await runOnDedicatedThread(timeout: 20) { () -> (duringOuter: Int, ids: Set<ObjectID>) in
            context.performAndWait {
                let a = Recipe(context: context)
                a.name = "A"
                let b = context.performAndWait { () -> Recipe in
                    let b = Recipe(context: context)
                    b.name = "B"
                    return b
                }
                a.servings = 2
                return (recorder.all.count, [a.objectID, b.objectID])
            }
        }
        #expect(outcome?.duringOuter == 0)
        let notes = recorder.all
        #expect(notes.count == 1)
        #expect(notes.first.map { Set($0.inserted) } == outcome?.ids)
    }

    /// C8: "per block": two blocks post two notifications, each with its
    /// own changes; a block that changes nothing posts none.
    @Test("C8: each block posts its own notification; a block without changes posts none", arguments: queuedTypes)
    func eachBlockPostsItsOwnNotification(_ type: ManagedObjectContext.ConcurrencyType) async throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(type, coordinator: coordinator, name: "Context")
        let recorder = NotificationRecorder(ManagedObjectContext.objectsDidChange, from: context)
        let first = await context.perform { () -> ObjectID in
            let soup = Recipe(context: context)
            soup.name = "Soup"
            return soup.objectID
        }
        let second = await context.perform { () -> ObjectID in
            let stew = Recipe(context: context)
            stew.name = "Stew"
            (context.object(with: first) as! Recipe).servings = 9  // still inserted: reported as inserted
            return stew.objectID
        }
        _ = await context.perform { context.hasChanges }  // reads only
        let notes = recorder.all
        #expect(notes.count == 2)
        #expect(notes.first?.inserted == [first])
        #expect(notes.last.map { Set($0.inserted) } == [first, second])
    }

    /// C8 and C2: a .mainQueue context used directly on the main queue
    /// (no block) gets one objects-did-change notification for all its
    /// writes, posted from a later main-queue block — not synchronously.
    @Test("C8: direct use of a .mainQueue context gets one notification from a main-queue block")
    @MainActor func directMainUseGetsOneNotificationFromAMainQueueBlock() async throws {
        MainQueueCheck.install()
        let coordinator = try makeCoordinator()
        let main = ManagedObjectContext(.mainQueue, coordinator: coordinator, name: "Main")
        let postedOnMain = ConcurrencyTestBox<[Bool]>([])
        let recorder = NotificationRecorder(ManagedObjectContext.objectsDidChange, from: main)
        let token = NotificationCenter.default.addObserver(
            forName: ManagedObjectContext.objectsDidChange, object: main, queue: nil
        ) { _ in
            postedOnMain.withLock { $0.append(MainQueueCheck.isOnMainQueue) }
        }
        defer { NotificationCenter.default.removeObserver(token) }
        let soup = Recipe(context: main)
        for i in 0..<20 {
            soup.name = "Soup \(i)"
            soup.servings = i
        }
        let stew = Recipe(context: main)
        stew.name = "Stew"
        #expect(recorder.all.isEmpty)  // not posted synchronously: we still hold the main queue
        let posted: @Sendable () -> Bool = { !recorder.all.isEmpty }
        #expect(await eventually(30, posted))
        // Let any further main-queue block that would post again run first.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.main.async { continuation.resume() }
        }
        let notes = recorder.all
        #expect(notes.count == 1)
        #expect(notes.first.map { Set($0.inserted) } == [soup.objectID, stew.objectID])
        #expect(postedOnMain.value == [true])
    }

    /// C8 and C2: a .mainQueue context's block run through perform from
    /// a background thread posts its one notification when the block ends.
    @Test("C8: a .mainQueue perform block from a background thread posts one notification")
    func mainBlockFromBackgroundPostsOneNotification() async throws {
        let coordinator = try makeCoordinator()
        let main = ManagedObjectContext(.mainQueue, coordinator: coordinator, name: "Main")
        let recorder = NotificationRecorder(ManagedObjectContext.objectsDidChange, from: main)
        let counts = await runOnDedicatedThread(timeout: 20) { () -> (inside: Int, after: Int) in
            let inside = main.performAndWait { () -> Int in
                let soup = Recipe(context: main)
                for i in 0..<10 { soup.name = "Soup \(i)" }
                return recorder.all.count
            }
            return (inside, recorder.all.count)
        }
        #expect(counts?.inside == 0)
        #expect(counts?.after == 1)
    }
}
