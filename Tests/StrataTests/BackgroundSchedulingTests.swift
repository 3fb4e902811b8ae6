import Dispatch
import Foundation
@testable import Strata
import Synchronization
import StrataStore
import Testing

/// A private-queue context's blocks are background work: once a block of the
/// context has run 1 ms or more, its next ones run with `BackgroundScheduling`'s
/// long slice, so the main thread preempts them when it wakes; main-queue work
/// keeps its own slice. (`make test` runs these in a process of their own,
/// apart from the store suite that switches `BackgroundScheduling` off for a
/// moment.)
@Suite(.enabled(if: BackgroundScheduling.honoursThreadSlices, "this kernel ignores a thread's own slice (Linux before 6.12, or not Linux)"))
struct ContextBackgroundSchedulingTests {
    /// A block long enough to make the context's next ones background work.
    static func longBlock() { Thread.sleep(forTimeInterval: 0.002) }

    /// `performAndWait` from a thread runs the block on that thread, with the
    /// long slice; the thread has its own back when the call returns — also
    /// around a nested block of another private context, which must not give
    /// it back early.
    @Test func aPrivateBlockRunsWithTheLongSliceAndGivesItBack() async throws {
        let coordinator = try makeCoordinator()
        let outer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "outer")
        let inner = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "inner")
        let seen = await runOnDedicatedThread { () -> [UInt64?] in
            outer.performAndWait { Self.longBlock() }
            inner.performAndWait { Self.longBlock() }
            let before = BackgroundScheduling.currentSlice()
            let (inOuter, inInner, afterInner) = outer.performAndWait {
                let inOuter = BackgroundScheduling.currentSlice()
                let inInner = inner.performAndWait { BackgroundScheduling.currentSlice() }
                return (inOuter, inInner, BackgroundScheduling.currentSlice())
            }
            return [before, inOuter, inInner, afterInner, BackgroundScheduling.currentSlice()]
        }
        let long = BackgroundScheduling.slice
        #expect(seen[0].map { $0 < long } == true, "the thread started with \(String(describing: seen[0]))")
        #expect(Array(seen[1...3]) == [long, long, long])
        #expect(seen[4] == seen[0])
    }

    /// Quick blocks pay no system calls: a context whose last block was quick
    /// runs the next one with the thread's own slice, and one long block
    /// makes the following one background work again.
    ///
    /// "Quick" is a block's wall time, so a preemption, or ThreadSanitizer,
    /// can make any block long (it did, under `make test-tsan`). The test
    /// therefore times each block from outside, which bounds Strata's own
    /// measure from above, and checks the slice of a block only after one
    /// seen to take under 1 ms.
    @Test func onlyAContextRunningLongBlocksTakesTheLongSlice() async throws {
        let context = ManagedObjectContext(.privateQueue, coordinator: try makeCoordinator(), name: "reader")
        let seen = await runOnDedicatedThread { () -> [UInt64??] in
            let first = context.performAndWait { BackgroundScheduling.currentSlice() }
            let afterQuick = Self.sliceAfterAQuickBlock(of: context)
            context.performAndWait { Self.longBlock() }
            let afterLong = context.performAndWait { BackgroundScheduling.currentSlice() }
            let afterQuickAgain = Self.sliceAfterAQuickBlock(of: context)
            return [first, afterQuick, afterLong, afterQuickAgain]
        }
        let long = BackgroundScheduling.slice
        let own = try #require(seen[0] ?? nil, "no slice read")
        #expect(own < long)
        #expect(seen[1] != nil && seen[3] != nil, "no block took under 1 ms in 200 tries")
        #expect(seen[1] == own)
        #expect(seen[2] == long)
        #expect(seen[3] == own)
    }

    /// The slice a block of `context` saw, the block before it having taken
    /// under 1 ms from outside; nil if no block was that quick in 200 tries.
    static func sliceAfterAQuickBlock(of context: ManagedObjectContext) -> UInt64?? {
        var previousWasQuick = false
        for _ in 0..<200 {
            let started = DispatchTime.now().uptimeNanoseconds
            let slice = context.performAndWait { BackgroundScheduling.currentSlice() }
            if previousWasQuick { return slice }
            previousWasQuick = DispatchTime.now().uptimeNanoseconds - started < 1_000_000
        }
        return nil
    }

    /// A context holding many changes — its own, or a child's save recorded
    /// for it — runs its next block as background work even when its last
    /// block was quick: that block (a save, a take-in) will be long, and
    /// the first one is what the main thread would wait behind.
    @Test func aContextHoldingManyChangesTakesTheLongSliceAtOnce() async throws {
        let coordinator = try makeCoordinator()
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "writer")
        let importer = ManagedObjectContext(.privateQueue, parent: writer, name: "import")
        let seen = await runOnDedicatedThread { () -> [UInt64??] in
            // In quick blocks of 64 inserts.
            for block in 0..<64 {
                importer.performAndWait { for i in 0..<64 { Recipe(context: importer).name = "r\(block)-\(i)" } }
            }
            let holdingFew = Self.sliceAfterAQuickBlock(of: writer)
            let holdingMany = Self.sliceAfterAQuickBlock(of: importer)  // 4,096 inserted
            return [holdingFew, holdingMany]
        }
        let long = BackgroundScheduling.slice
        #expect(seen.allSatisfy { $0 != nil }, "no block took under 1 ms in 200 tries")
        #expect(seen[0].map { $0.map { $0 < long } } == true, "a context holding nothing took the long slice")
        #expect(seen[1] == long, "a context holding 4,096 inserted objects ran its block with its own slice")
    }

    /// A block queued with `perform` runs on a Dispatch worker, with the long slice.
    @Test func aQueuedPrivateBlockRunsWithTheLongSlice() async throws {
        let context = ManagedObjectContext(.privateQueue, coordinator: try makeCoordinator(), name: "worker")
        await context.perform { Self.longBlock() }
        let inside = await context.perform { BackgroundScheduling.currentSlice() }
        #expect(inside == BackgroundScheduling.slice)
    }

    /// A block's thread gives the long slice back only once its context has
    /// stopped counting the block: giving it back can cost the thread its
    /// core until the next scheduler tick, and a view context's save that
    /// waited for the writer to go idle waited that long too (3.9 ms, traced
    /// in `strata-bench stall`, row (d)). For `perform`, async `perform` and
    /// `performAndWait`.
    @Test func aBlockCountsFinishedBeforeItsThreadGivesTheLongSliceBack() async throws {
        let context = ManagedObjectContext(.privateQueue, coordinator: try makeCoordinator(), name: "writer")
        await context.perform { Self.longBlock() }
        let seen = Mutex<[UInt64?]>([])
        context.parking.condition.withLock {
            context.parking.onBlockFinished = { seen.withLock { $0.append(BackgroundScheduling.currentSlice()) } }
        }
        defer { context.parking.condition.withLock { context.parking.onBlockFinished = nil } }
        // Each block long, so that the next one takes the long slice too.
        await context.perform { Self.longBlock() }
        let queued = DispatchSemaphore(value: 0)
        Self.enqueue(on: context) { Self.longBlock(); queued.signal() }
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { queued.wait(); continuation.resume() }
        }
        _ = await runOnDedicatedThread { context.performAndWait { Self.longBlock() } }
        // The `perform` block signals before it ends: wait for its count.
        let deadline = ContinuousClock.now + .seconds(10)
        while seen.withLock({ $0.count }) < 3 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(1))
        }
        let slices = seen.withLock { $0 }
        #expect(slices.count == 3)
        #expect(slices.allSatisfy { $0 == BackgroundScheduling.slice }, "slices when the blocks stopped counting: \(slices)")
    }

    /// `perform` without waiting (from an async function, the async one is picked).
    static func enqueue(on context: ManagedObjectContext, _ block: @escaping @Sendable () -> Void) {
        context.perform(block)
    }

    /// The main queue's work is not background work: a main-queue context's
    /// block keeps the main thread's slice.
    @Test func aMainQueueBlockKeepsTheMainThreadsSlice() async throws {
        let main = ManagedObjectContext(.mainQueue, coordinator: try makeCoordinator(), name: "main")
        let inside = await main.perform { BackgroundScheduling.currentSlice() }
        #expect(inside.map { $0 < BackgroundScheduling.slice } == true, "the main thread ran with \(String(describing: inside))")
    }

    /// The objects a main-queue context lets go of after a save are freed on
    /// a background queue, as background work.
    @Test func releasedObjectsAreFreedAsBackgroundWork() async throws {
        let model = try ManagedObjectModel(entities: [
            EntityDescription(name: "FreedNote", managedObjectClass: FreedNote.self, properties: [.attribute("text", .string)]),
        ])
        let main = ManagedObjectContext(.mainQueue, coordinator: try makeCoordinator(model: model), name: "main")
        FreedNote.slices.withLock { $0.removeAll() }
        try await main.perform {
            for i in 0..<100 { FreedNote(context: main).text = "note \(i)" }
            try main.save()
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while FreedNote.slices.withLock({ $0.count }) < 100 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        let slices = FreedNote.slices.withLock { $0 }
        #expect(slices.count == 100)
        #expect(slices.allSatisfy { $0 == BackgroundScheduling.slice }, "freed with slices \(Set(slices.map { String(describing: $0) }))")
    }

    /// The loops a save runs yield their core only as background work:
    /// never on the main queue, whose core must not be given away — not in a
    /// main-queue context's save, nor in a private context's block the main
    /// queue waits for — and in a queued private block that holds many
    /// changes, they may.
    @Test @MainActor func aSaveYieldsItsCoreOnlyAsBackgroundWork() async throws {
        let coordinator = try makeCoordinator()
        let main = ManagedObjectContext(.mainQueue, coordinator: coordinator, name: "main")
        let forMain = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "private, for the main queue")
        let queued = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "private, queued")
        let yieldsBefore = BackgroundScheduling.yieldsOnThisThread
        let onMain = try main.performAndWait { () throws -> Bool in
            for i in 0..<20_000 { Recipe(context: main).name = "main \(i)" }
            try main.save()
            return BackgroundScheduling.yieldPointsAreActive
        }
        forMain.performAndWait { Self.longBlock() }
        let forMainActive = try forMain.performAndWait { () throws -> Bool in
            for i in 0..<20_000 { Recipe(context: forMain).name = "for main \(i)" }
            try forMain.save()
            return BackgroundScheduling.yieldPointsAreActive
        }
        #expect(!onMain)
        #expect(!forMainActive)
        #expect(BackgroundScheduling.yieldsOnThisThread == yieldsBefore, "the main thread yielded its core")
        await queued.perform { Self.longBlock() }
        let queuedActive = try await queued.perform { () throws -> Bool in
            for i in 0..<20_000 { Recipe(context: queued).name = "queued \(i)" }
            try queued.save()
            return BackgroundScheduling.yieldPointsAreActive
        }
        #expect(queuedActive)
    }

    /// Nor is a private context's block that the main queue waits for: it
    /// runs on the main thread, which keeps its slice.
    @Test @MainActor func aPrivateBlockRunForTheMainQueueKeepsItsSlice() throws {
        let context = ManagedObjectContext(.privateQueue, coordinator: try makeCoordinator(), name: "private")
        context.performAndWait { Self.longBlock() }
        let before = BackgroundScheduling.currentSlice()
        let inside = context.performAndWait { BackgroundScheduling.currentSlice() }
        #expect(inside == before)
        #expect(inside.map { $0 < BackgroundScheduling.slice } == true)
    }
}

/// Records the slice of the thread that frees it.
final class FreedNote: ManagedObject {
    static let slices = Mutex<[UInt64?]>([])
    @Attribute("text") var text: String
    deinit { Self.slices.withLock { $0.append(BackgroundScheduling.currentSlice()) } }
}
