import ContainerCrashWorkload
import Foundation
import SharedTestSupport
@testable import Strata
import StrataStore
import Testing

/// A container that opened a store read-only follows the process writing
/// it: `catchUpWithStore()` brings in that process's saves, whole and in
/// order, tells the contexts that merge (they refresh what they hold, let
/// go of what was deleted) and posts `storeDidChangeRemotely`;
/// `followStore()` does it whenever the store's files change.
@Suite struct FollowingAStoreTests {
    typealias Workload = ContainerCrashWorkload

    static func readOnly() -> StoreOptions {
        var options = Workload.options()
        options.readOnly = true
        return options
    }

    /// The IDs of the recipes with these serials, as `context` finds them.
    static func recipeIDs(_ serials: [Int], in context: ManagedObjectContext) throws -> Set<ObjectID> {
        try context.performAndWait { () throws -> Set<ObjectID> in
            Set(try serials.compactMap { serial in
                let wanted = Int64(serial)
                return try Workload.CrashRecipe.first(in: context, where: #Predicate { $0.serial == wanted })?.objectID
            })
        }
    }

    /// A container writing the store at `path`, and one reading it (with a private view context).
    static func writerAndReader(of path: String) throws -> (writer: PersistentContainer, reader: PersistentContainer) {
        let writer = try PersistentContainer(name: "Writer", model: Workload.makeModel(), directory: path, options: Workload.options())
        let reader = try PersistentContainer(name: "Reader", model: Workload.makeModel(), directory: path, options: readOnly(), viewContext: .privateQueue)
        return (writer, reader)
    }

    @Test func aReadOnlyContainerCatchesUpWithTheWritersSaves() throws {
        let directory = TemporaryDirectory()
        let store = directory.path + "/store"
        let writer = try PersistentContainer(name: "Writer", model: Workload.makeModel(), directory: store, options: Workload.options())
        for s in 1...20 { try writer.saveAndWait { context in try Workload.applySave(s, in: context) } }
        let reader = try PersistentContainer(name: "Reader", model: Workload.makeModel(), directory: store, options: Self.readOnly(), viewContext: .privateQueue)
        let view = reader.viewContext
        // The view context holds the checkpoint and a recipe save 21 deletes.
        let (checkpoint, doomed) = try view.performAndWait { () throws -> (Workload.Checkpoint, Workload.CrashRecipe) in
            (try #require(try Workload.Checkpoint.first(in: view)), try #require(try Workload.CrashRecipe.first(in: view, where: #Predicate { $0.serial == 16 })))
        }
        #expect(view.performAndWait { checkpoint.lastSave } == 20)
        let posted = Counter()
        let observer = NotificationCenter.default.addObserver(forName: PersistentStoreCoordinator.storeDidChangeRemotely, object: reader.coordinator, queue: nil) { note in
            if ObjectChanges(note) != nil { posted.increment() }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        #expect(try reader.coordinator.catchUpWithStore().isEmpty, "nothing was saved since the open")
        // A thread-confined context attached to the reader has no queue to
        // merge on: a catch-up passes it by, never calling its perform.
        let confined = ManagedObjectContext(.confinement, coordinator: reader.coordinator)

        for s in 21...30 { try writer.saveAndWait { context in try Workload.applySave(s, in: context) } }
        let changes = try reader.coordinator.catchUpWithStore()
        var expected = ExpectedGraph()
        expected.advance(to: 20)
        let before = expected.recipes
        expected.advance(to: 30)
        let deletedSerials = before.keys.filter { expected.recipes[$0] == nil }
        #expect(!deletedSerials.isEmpty)
        // The reader now finds the new recipes (a save that inserted one
        // and a later one that deleted it leave nothing to report).
        let inserted = try Self.recipeIDs(Array(21...30), in: reader.newBackgroundContext())
        #expect(inserted.count == expected.recipes.keys.filter { $0 > 20 }.count && inserted == Set(changes.inserted.filter { $0.entity.name == "CrashRecipe" }))
        #expect(try Self.recipeIDs(deletedSerials, in: view).isEmpty, "the deleted recipes are gone for the reader")
        #expect(changes.updated.contains(checkpoint.objectID))
        #expect(changes.deleted.contains(doomed.objectID))
        #expect(posted.value == 1)
        // The view context merged: the checkpoint it holds was refreshed,
        // the deleted recipe let go of; a fetch sees the writer's graph.
        // (The view's merge is queued by the reader's writer context's
        // merge block: once that has run, the view's is ahead of this read.)
        reader.writerContext.performAndWait {}
        let found = try ContainerCrashTests.readGraph(in: view)
        #expect(found.lastSave == 30 && found.recipes == expected.recipes && found.ingredients == expected.ingredients, "\(found.lastSave) \(ContainerCrashTests.difference(found, expected))")
        #expect(view.performAndWait { checkpoint.lastSave } == 30)
        #expect(view.performAndWait { doomed.isDeleted }, "the deleted recipe the view context held was let go of")
        // A catch-up counts the writer's saves it read in (its follower paces by them).
        try writer.saveAndWait { context in try Workload.applySave(31, in: context) }
        try writer.saveAndWait { context in try Workload.applySave(32, in: context) }
        let two = try reader.coordinator.catchUpWithoutNotifying()
        #expect(two.batches == 2 && !two.changes.isEmpty, "\(two.batches)")
        #expect(try reader.coordinator.catchUpWithoutNotifying().batches == 0)

        // Followed: each save shows up without a call.
        let following = try reader.coordinator.followStore()
        for s in 33...40 { try writer.saveAndWait { context in try Workload.applySave(s, in: context) } }
        let deadline = Date().addingTimeInterval(30)
        while view.performAndWait({ checkpoint.lastSave }) != 40 && Date() < deadline { usleep(2_000) }
        #expect(view.performAndWait { checkpoint.lastSave } == 40, "the follower brought in the writer's saves")
        following.cancel()
        // A follower whose coordinator closed ends by itself; cancelling it
        // then must not write to its closed wake pipe (SIGPIPE).
        let orphan = try reader.coordinator.followStore()
        try reader.coordinator.close()
        usleep(400_000)
        orphan.cancel()
        withExtendedLifetime(confined) {}
        try writer.coordinator.close()
    }

    /// A reader's lookup remembered before a catch-up is not taken as
    /// still first after it: the writer's saves name no index keys to the
    /// reader, so a key the writer moved away from is walked again. The
    /// recipe is not held by the reader's context (only its ID is kept), so
    /// a stale answer would come back unjudged, as a fault.
    @Test func aLookupRememberedBeforeACatchUpIsWalkedAgain() throws {
        let directory = TemporaryDirectory()
        let (writer, reader) = try Self.writerAndReader(of: directory.path + "/store")
        try writer.saveAndWait { context in
            for serial in 1...3 {
                let recipe = Workload.CrashRecipe(context: context)
                recipe.serial = Int64(serial)
                recipe.name = "recipe \(serial)"
                recipe.payload = Data()
            }
        }
        _ = try reader.coordinator.catchUpWithStore()
        let context = reader.newBackgroundContext()
        let id = try context.performAndWait { () throws -> ObjectID in
            try #require(try Workload.CrashRecipe.first(in: context, where: \.serial, equals: 2)).objectID
        }
        try writer.saveAndWait { context in
            try #require(try Workload.CrashRecipe.first(in: context, where: \.serial, equals: 2)).serial = 200
        }
        _ = try reader.coordinator.catchUpWithStore()
        try context.performAndWait { () throws in
            let walks = context.keyLookups.walks
            #expect(try Workload.CrashRecipe.first(in: context, where: \.serial, equals: 2) == nil, "serial 2 is gone")
            #expect(context.keyLookups.walks == walks + 1)
            #expect(try Workload.CrashRecipe.first(in: context, where: \.serial, equals: 200)?.objectID == id)
        }
        try writer.close()
        try reader.close()
    }

    /// `cancel()` waits for a catch-up's store work, never for the
    /// notification's observers: an observer that waits for the thread
    /// calling `cancel()` cannot deadlock with it.
    ///
    ///     follow thread                       this thread
    ///     catch-up: save 1 read in
    ///     post → observer: arrived.signal()   arrived.wait()
    ///            observer: waits for released cancel()   ← returns, the observer still waiting
    ///                                         released.signal()
    ///            observer returns
    ///     no catch-up after cancel()          save 2: no notification
    @Test func cancellingDoesNotWaitForTheNotificationsObservers() throws {
        let directory = TemporaryDirectory()
        let (writer, reader) = try Self.writerAndReader(of: directory.path + "/store")
        let arrived = DispatchSemaphore(value: 0)
        let released = DispatchSemaphore(value: 0)
        let notified = Counter()
        let observer = NotificationCenter.default.addObserver(
            forName: PersistentStoreCoordinator.storeDidChangeRemotely, object: reader.coordinator, queue: nil
        ) { _ in
            notified.increment()
            arrived.signal()
            _ = released.wait(timeout: .now() + 30)
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        let following = try reader.coordinator.followStore()
        #expect(following.watchesDirectory)
        try writer.saveAndWait { context in try Workload.applySave(1, in: context) }
        #expect(arrived.wait(timeout: .now() + 30) == .success, "the follower did not bring save 1 in")
        let cancelled = DispatchSemaphore(value: 0)
        Thread {
            following.cancel()
            cancelled.signal()
        }.start()
        #expect(cancelled.wait(timeout: .now() + 5) == .success, "cancel() waited for the observer")
        released.signal()
        try writer.saveAndWait { context in try Workload.applySave(2, in: context) }
        usleep(300_000)
        #expect(notified.value == 1, "a catch-up ran after cancel() returned")
        try reader.coordinator.close()
        try writer.coordinator.close()
    }

    /// Without inotify (here: its instance refused, as at the per-user
    /// limit), a follower says so once and looks at the store every 10 ms.
    @Test func aFollowerWithoutInotifySaysSoAndPolls() throws {
        let directory = TemporaryDirectory()
        let store = directory.path + "/store"
        let (writer, reader) = try Self.writerAndReader(of: store)
        let errors = CheckLog()
        let following = try reader.coordinator.followStore(onError: { errors.record("\($0)") }, makeWatch: {
            errno = EMFILE
            return -1
        })
        #expect(!following.watchesDirectory)
        try writer.saveAndWait { context in try Workload.applySave(1, in: context) }
        let deadline = Date().addingTimeInterval(30)
        while try Self.recipeIDs(Array(1...10), in: reader.newBackgroundContext()).isEmpty && Date() < deadline { usleep(5_000) }
        #expect(try !Self.recipeIDs(Array(1...10), in: reader.newBackgroundContext()).isEmpty, "the polling follower did not bring save 1 in")
        // And a save after the follower started, by polling.
        try writer.saveAndWait { context in try Workload.applySave(2, in: context) }
        while try Self.recipeIDs([2], in: reader.newBackgroundContext()).isEmpty && Date() < deadline { usleep(5_000) }
        #expect(try Self.recipeIDs([2], in: reader.newBackgroundContext()).count == 1, "the polling follower did not bring save 2 in")
        following.cancel()
        #expect(errors.problems.count == 1 && errors.problems.first?.contains("following by looking every 10 ms") == true, "\(errors.problems)")
        try reader.coordinator.close()
        try writer.coordinator.close()
    }

    /// A follower's pacing: each change, the milliseconds from the last
    /// catch-up's start to it, whether it was already waiting when that
    /// catch-up ended, and the saves that catch-up took in (three or more,
    /// or one waiting: a stream):
    ///
    ///     idle      5/1   2/1   1.5/1   0.4/1               → at once ×3, then 0.6 (1 ms apart at least)
    ///     stream    0.2 waiting/1   0.2 waiting/5   0.2/12   5 waiting/12
    ///                                               → wait 1.8, 3.8, 3.8, 0; interval 2, 4, 4, 4
    ///               (the third: nothing waiting — the writer paused — but twelve saves taken in)
    ///     2 ms      2/2   2/1   0.5/1               → at once, at once, 0.5; interval 2, 1, 1
    ///
    /// It fails if an idle reader waits for a change more than 1 ms after
    /// the last catch-up began, if a stream's catch-ups come closer than
    /// the interval or the interval passes 4 ms, if a writer's pause ends
    /// the stream while catch-ups still take in many saves, if two saves a
    /// catch-up (a writer saving every 2 ms, at the longest interval) count
    /// as a stream, or if it does not come back down.
    @Test func aFollowerCatchesUpAtOnceWhenIdleAndPacesAStream() {
        let ms: UInt64 = 1_000_000
        var pacing = CatchUpPacing()
        func step(_ since: UInt64, waiting: Bool = false, batches: UInt64 = 1) -> (wait: UInt64, interval: UInt64) {
            let wait = pacing.wait(since: since, waiting: waiting, batches: batches)
            return (wait, pacing.interval)
        }
        let idle = [5 * ms, 2 * ms, 3 * ms / 2, 2 * ms / 5].map { step($0) }
        #expect(idle.map(\.wait) == [0, 0, 0, 3 * ms / 5] && idle.allSatisfy { $0.interval == ms }, "\(idle)")
        let stream = [step(ms / 5, waiting: true), step(ms / 5, waiting: true, batches: 5), step(ms / 5, batches: 12), step(5 * ms, waiting: true, batches: 12)]
        #expect(stream.map(\.wait) == [9 * ms / 5, 19 * ms / 5, 19 * ms / 5, 0], "\(stream)")
        #expect(stream.map(\.interval) == [2 * ms, 4 * ms, 4 * ms, 4 * ms], "\(stream)")
        let paced = [step(2 * ms, batches: 2), step(2 * ms), step(ms / 2)]
        #expect(paced.map(\.wait) == [0, 0, ms / 2] && paced.map(\.interval) == [2 * ms, ms, ms], "\(paced)")
    }

    /// Catching up is for stores opened read-only: one open for writing, or
    /// in memory, is a typed error, and so is following one.
    @Test func catchingUpAStoreOpenForWritingIsATypedError() throws {
        let directory = TemporaryDirectory()
        let writer = try PersistentContainer(name: "Writer", model: Workload.makeModel(), directory: directory.path + "/store", options: Workload.options())
        #expect { try writer.coordinator.catchUpWithStore() } throws: { ($0 as? StrataError)?.code == .invalidArgument }
        #expect { try writer.coordinator.followStore() } throws: { ($0 as? StrataError)?.code == .invalidArgument }
        let memory = try PersistentContainer(name: "Memory", model: Workload.makeModel(), directory: nil)
        #expect { try memory.coordinator.catchUpWithStore() } throws: { ($0 as? StrataError)?.code == .invalidArgument }
        try writer.coordinator.close()
    }

    /// Across processes: a child saves through a container in a loop and is
    /// SIGKILLed at a random moment, cycle after cycle, on one store, while
    /// this process follows the store read-only (`followStore`). At every
    /// catch-up, the graph a fresh context reads is exactly saves
    /// 1...lastSave (never part of a save), inverses agreeing, and lastSave
    /// never goes back; at the end it has every acknowledged save.
    @Test func aReaderProcessSeesWholeSavesInOrderWhileTheWriterIsKilled() async throws {
        let child = try #require(builtExecutable(named: "strata-container-crash-child"), "the crash child was not built beside the tests")
        let directory = TemporaryDirectory()
        let store = directory.path + "/store"
        let seed = testSeed()
        // The store made first, so that the reader can open it before the kills.
        do {
            let first = try PersistentContainer(name: "Seed", model: Workload.makeModel(), directory: store, options: Workload.options())
            try first.saveAndWait { context in try Workload.applySave(1, in: context) }
            try first.coordinator.close()
        }
        let reader = try PersistentContainer(name: "Reader", model: Workload.makeModel(), directory: store, options: Self.readOnly(), viewContext: .privateQueue)
        let checks = CheckLog()
        let observer = NotificationCenter.default.addObserver(forName: PersistentStoreCoordinator.storeDidChangeRemotely, object: reader.coordinator, queue: nil) { _ in
            checks.check(reader)
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        let errors = CheckLog()
        let following = try reader.coordinator.followStore { error in errors.record("catch-up failed: \(error)") }
        let cycles = Int(ProcessInfo.processInfo.environment["STRATA_FOLLOW_CYCLES"] ?? "") ?? 6
        let outcome = await runOnDedicatedThread(timeout: Double(cycles) * 10 + 60) { () -> (acknowledged: Int, problems: [String]) in
            var random = SeededGenerator(seed: seed)
            var acknowledged = 1
            for cycle in 0..<cycles {
                let deadline = Date().addingTimeInterval(Double.random(in: 0.2...0.8, using: &random))
                guard let run = try? runCrashChild(child, [store], killWhen: { _ in Date() >= deadline }) else {
                    return (acknowledged, ["cycle \(cycle): the child did not run"])
                }
                if !run.said.isEmpty { return (acknowledged, ["cycle \(cycle): the child said \(run.said)"]) }
                acknowledged = max(acknowledged, run.highest)
            }
            return (acknowledged, [])
        }
        let (acknowledged, problems) = try #require(outcome, "the writer's cycles did not finish in time (seed \(seed))")
        #expect(problems.isEmpty, "\(problems) (seed \(seed))")
        // The last kill's saves come in too.
        let deadline = Date().addingTimeInterval(30)
        while checks.lastSave < acknowledged && Date() < deadline { usleep(5_000) }
        following.cancel()
        _ = try? reader.coordinator.catchUpWithStore()
        checks.check(reader)
        #expect(checks.problems.isEmpty, "\(checks.problems.prefix(5)) (seed \(seed))")
        #expect(errors.problems.isEmpty, "\(errors.problems.prefix(3)) (seed \(seed))")
        #expect(checks.lastSave >= acknowledged, "the reader ends at save \(checks.lastSave); \(acknowledged) were acknowledged (seed \(seed))")
        #expect(checks.count > cycles, "the reader checked the graph at \(checks.count) catch-ups")
        print("following a killed writer: \(checks.count) catch-ups checked, last save \(checks.lastSave), \(acknowledged) acknowledged (seed \(seed))")
        try reader.coordinator.close()
    }
}

/// The graph checks the notification observer makes, and their problems.
/// `@unchecked Sendable`: every property is guarded by `lock`.
private final class CheckLog: @unchecked Sendable {
    private let lock = NSLock()
    private var _problems: [String] = []
    private var _lastSave = 0
    private var _count = 0

    var problems: [String] { lock.withLock { _problems } }
    var lastSave: Int { lock.withLock { _lastSave } }
    var count: Int { lock.withLock { _count } }

    func record(_ problem: String) { lock.withLock { _problems.append(problem) } }

    /// Reads the graph through a fresh context of `reader` and checks it is
    /// exactly saves 1...its lastSave, and that lastSave did not go back.
    func check(_ reader: PersistentContainer) {
        do {
            let found = try ContainerCrashTests.readGraph(in: reader.newBackgroundContext())
            var expected = ExpectedGraph()
            expected.advance(to: found.lastSave)
            lock.withLock {
                _count += 1
                if found.lastSave < _lastSave { _problems.append("last save went back from \(_lastSave) to \(found.lastSave)") }
                if found.recipes != expected.recipes || found.ingredients != expected.ingredients {
                    _problems.append("at save \(found.lastSave) the graph is not saves 1...\(found.lastSave): \(ContainerCrashTests.difference(found, expected))")
                }
                _problems += found.inverseProblems + found.payloadProblems
                _lastSave = max(_lastSave, found.lastSave)
            }
        } catch {
            record("reading the graph failed: \(error)")
        }
    }
}

/// A count several threads add to.
/// `@unchecked Sendable`: `count` is guarded by `lock`.
private final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}
