import Dispatch
import Foundation
import StrataStore
import Synchronization
import Testing
@testable import Strata

/// Block saves from many threads share the writer's saves
/// (``WriterSaveGroups``): a caller waits for the first save that begins
/// after its changes reached the writer, and returns only once that save
/// is on disk — or throws its error.
@Suite("Writer save groups", .serialized)
struct WriterSaveGroupTests {
    /// A container whose fsyncs can be held shut (and failed), and the
    /// block saves running against it, a thread each.
    struct GatedContainer {
        let directory = TemporaryDirectory("savegroups")
        let files = GatedSyncFileSystem()
        let container: PersistentContainer

        init() throws {
            var options = StoreOptions()
            options.syncMode = .always
            options.fileSystem = files
            container = try PersistentContainer(
                name: "Groups", model: makeModel(), directory: directory.path + "/store", options: options, viewContext: .privateQueue)
        }

        /// `container.saveAndWait { insert a recipe named name }` on a
        /// thread of its own; `done` is signalled when it returns, with its
        /// error (if any) in `failure`.
        func blockSave(_ name: String, _ done: DispatchSemaphore, _ failure: LockedError) {
            let container = container
            Thread {
                do {
                    try container.saveAndWait { context in
                        let recipe = Recipe(context: context)
                        recipe.name = name
                    }
                } catch { failure.set(error) }
                done.signal()
            }.start()
        }

        /// `container.write { insert a recipe named name }` in a task of
        /// its own, suspended while it waits; as ``blockSave(_:_:_:)``.
        func asyncWrite(_ name: String, _ done: DispatchSemaphore, _ failure: LockedError) {
            let container = container
            Task.detached {
                do {
                    try await container.write { context in
                        let recipe = Recipe(context: context)
                        recipe.name = name
                    }
                } catch { failure.set(error) }
                done.signal()
            }
        }

        /// Waits (up to 10 s) until `count` callers are inside the writer's save groups.
        func waitForCallers(_ count: Int) -> Bool {
            let deadline = Date().addingTimeInterval(10)
            while container.writerSaves.callersForTesting < count {
                if Date() > deadline { return false }
                usleep(1_000)
            }
            return true
        }

        /// The recipes' names in the store, read by a context of its own.
        func storedNames() throws -> [String] {
            let reader = ManagedObjectContext(.privateQueue, coordinator: container.coordinator, name: "reader")
            return try reader.performAndWait { try reader.fetch(FetchRequest<Recipe>()).map(\.name).sorted() }
        }
    }

    ///     A                          B, C, D                    disk
    ///     saveAndWait: writer save
    ///       write, fsync ──────────────────────────────────────▶ held
    ///                                hand over (guests), join
    ///                                the next save; wait
    ///     fsync released ◀─────────────────────────────────────
    ///     A returns                  one of them saves all three:
    ///                                write, fsync ────────────▶ held
    ///                                (none of them has returned)
    ///                                fsync ends (or fails) ◀───
    ///                                all three return (or all throw)
    /// With `suspending`, B, C and D are tasks that `await container.write`:
    /// their save then runs in a block on the writer's queue, and none of
    /// them holds a thread while it waits. (This test's own thread, one of
    /// Swift's cooperative pool, blocks while it waits for them; they need
    /// another: the suite runs one test at a time, as `make test` runs all.)
    @Test("Saves that reach the writer while it syncs share its next save, and return only once it is stored (or throw its error)",
          arguments: [false, true], [false, true])
    func callersJoiningDuringASyncShareTheNextSave(failing: Bool, suspending: Bool) throws {
        let gated = try GatedContainer()
        let before = try #require(gated.container.coordinator.storeStatistics)
        gated.files.arm()
        let doneA = DispatchSemaphore(value: 0), doneOthers = DispatchSemaphore(value: 0)
        let failureA = LockedError()
        gated.blockSave("A", doneA, failureA)
        #expect(gated.files.entered.wait(timeout: .now() + 10) == .success, "A's save never reached its fsync")
        let failures = ["B", "C", "D"].map { name in
            let failure = LockedError()
            if suspending {
                gated.asyncWrite(name, doneOthers, failure)
            } else {
                gated.blockSave(name, doneOthers, failure)
            }
            return failure
        }
        #expect(gated.waitForCallers(4), "B, C and D never joined a save")
        gated.files.arm(failing: failing)  // the next fsync: the save B, C and D joined

        gated.files.gate.signal()
        #expect(doneA.wait(timeout: .now() + 10) == .success)
        #expect(failureA.error == nil)
        #expect(gated.files.entered.wait(timeout: .now() + 10) == .success, "the group's save never reached its fsync")
        #expect(doneOthers.wait(timeout: .now() + 0.2) == .timedOut, "a caller returned before its save's fsync ended")
        gated.files.gate.signal()
        for _ in 0..<3 { #expect(doneOthers.wait(timeout: .now() + 10) == .success) }
        if failing {
            for failure in failures {
                let error = try #require(failure.error as? StrataError, "a caller of the failed save was acknowledged")
                #expect("\(error)".contains("sync"), "\(error)")
            }
            #expect(try gated.storedNames() == ["A"])
        } else {
            for failure in failures { #expect(failure.error == nil, "\(failure.error.map { "\($0)" } ?? "")") }
            let after = try #require(gated.container.coordinator.storeStatistics)
            #expect(after.batchesWritten - before.batchesWritten == 2, "A's save and one for B, C and D")
            #expect(try gated.storedNames() == ["A", "B", "C", "D"])
        }
    }

    /// `try await container.save()`: the view context's changes are on
    /// disk when it returns (a fresh coordinator reads them).
    @Test func anAwaitedContainerSaveIsDurable() async throws {
        let directory = TemporaryDirectory("awaitedsave")
        let container = try PersistentContainer(name: "Awaited", model: makeModel(), directory: directory.path + "/store", viewContext: .privateQueue)
        let view = container.viewContext
        try await view.perform { () throws(StrataError) in
            let soup = Recipe(context: view)
            soup.name = "Soup"
        }
        try await container.save()
        let reader = ManagedObjectContext(.privateQueue, coordinator: container.coordinator, name: "reader")
        #expect(try reader.performAndWait { try reader.fetch(FetchRequest<Recipe>()).map(\.name) } == ["Soup"])
        // Tasks writing at once: every write acknowledged is stored.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<32 {
                group.addTask {
                    try await container.write { context in
                        let recipe = Recipe(context: context)
                        recipe.name = "written \(i)"
                    }
                }
            }
            try await group.waitForAll()
        }
        try container.close()
        let reopened = try PersistentContainer(name: "Awaited", model: makeModel(), directory: directory.path + "/store", viewContext: .privateQueue)
        let fresh = reopened.newBackgroundContext()
        #expect(try fresh.performAndWait { try fresh.count(for: FetchRequest<Recipe>()) } == 33)
        try reopened.close()
    }

    /// Two writes of one object, forced to interleave: the second reads
    /// the recipe, the first saves it meanwhile, the second's save is
    /// refused (mergeConflict). With `retryingConflicts` the second block
    /// runs again on a fresh context and both increments land; without,
    /// the conflict comes back to the caller and only the first does.
    ///
    ///     write (B)                         saveAndWait (A)
    ///     read servings: 0
    ///     ───────────────────────────────▶  servings 0 → 1, saved to disk
    ///     servings 0 → 1, save: conflict
    ///     (retry) read servings: 1
    ///     servings 1 → 2, saved to disk
    @Test(arguments: [true, false])
    func aConflictingWriteRunsAgainWhenAskedTo(retrying: Bool) async throws {
        let setup = try GatedContainer()
        let container = setup.container
        try container.saveAndWait { context in
            let recipe = Recipe(context: context)
            recipe.name = "Soup"
            recipe.servings = 0
        }
        let attempts = Mutex(0)
        @Sendable func increment(_ context: ManagedObjectContext) throws {
            let soup = try #require(try Recipe.first(in: context, where: #Predicate { $0.name == "Soup" }))
            let first = attempts.withLock { $0 += 1; return $0 == 1 }
            let read = soup.servings
            if first {
                // Another request saves the same recipe after this one read it.
                try container.saveAndWait { other in
                    try #require(try Recipe.first(in: other, where: #Predicate { $0.name == "Soup" })).servings += 1
                }
            }
            soup.servings = read + 1
        }
        do {
            try await container.write(retryingConflicts: retrying ? 3 : 0, increment)
            #expect(retrying, "without retries the write must be refused")
        } catch let error as StrataError {
            #expect(!retrying && error.code == .mergeConflict, "\(error)")
        }
        #expect(attempts.withLock { $0 } == (retrying ? 2 : 1))
        let reader = ManagedObjectContext(.privateQueue, coordinator: container.coordinator, name: "reader")
        let stored = try reader.performAndWait { try reader.fetch(FetchRequest<Recipe>()).map(\.servings) }
        #expect(stored == [retrying ? 2 : 1])
        try container.close()
    }

    ///     caller (block context)            writer queue
    ///     save into the idle writer:
    ///       recorded, no take-in block queued
    ///     saveDurably: performAndWait ────▶ block: take the save in,
    ///                                        save to the store
    ///     returns ◀────────────────────────
    ///
    /// The durable save's block takes the block save in: a take-in block
    /// queued as well would be one more block, which that one would wait
    /// behind on another thread at every save.
    @Test("A block save into an idle writer runs one writer block, its durable save's, which takes the changes in and stores them",
          arguments: [false, true])
    func aBlockSaveIntoAnIdleWriterRunsOneWriterBlock(awaited: Bool) async throws {
        let gated = try GatedContainer()
        let container = gated.container, writer = container.writerContext
        writer.performAndWait {}  // idle, whatever opening queued
        let blocks = Mutex(0)
        writer.parking.condition.withLock { writer.parking.onBlockFinished = { blocks.withLock { $0 += 1 } } }
        defer { writer.parking.condition.withLock { writer.parking.onBlockFinished = nil } }
        for name in ["a", "b", "c"] {
            if awaited {
                try await container.write { Recipe(context: $0).name = name }
            } else {
                try container.saveAndWait { Recipe(context: $0).name = name }
            }
        }
        // A save's caller is woken from inside the writer's block, before
        // that block counts itself finished: count from the writer's queue,
        // behind it.
        let counted = writer.performAndWait { blocks.withLock { $0 } }
        #expect(counted == 3, "writer blocks for three block saves")
        #expect(writer.deferredChildSaves.count == 0)
        #expect(try gated.storedNames() == ["a", "b", "c"])
        let view = container.viewContext
        let seen = try view.performAndWait { try view.fetch(FetchRequest<Recipe>()).map(\.name).sorted() }
        #expect(seen == ["a", "b", "c"], "the view context merged the saves")
        try container.close()
    }
}
