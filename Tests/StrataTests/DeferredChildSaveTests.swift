#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Foundation
import Strata
import StrataStore
import Testing

/// An object that records the thread each parent-side copy is made on (a
/// copy a parent makes of a child's insert is created with no context).
final class TracedNote: ManagedObject {
    @Attribute("text") var text: String

    required init(entity: EntityDescription, insertInto context: ManagedObjectContext?) {
        if context == nil { CopyThreads.shared.record() }
        super.init(entity: entity, insertInto: context)
    }
}

/// Threads that made parent-side copies of `TracedNote`s.
///
/// `@unchecked Sendable`: `threads` is guarded by `lock`.
final class CopyThreads: @unchecked Sendable {
    static let shared = CopyThreads()
    private let lock = NSLock()
    private var threads: [pthread_t] = []
    func record() { lock.withLock { threads.append(pthread_self()) } }
    func reset() { lock.withLock { threads.removeAll() } }
    /// How many copies were made on `thread`, and how many in all.
    func count(on thread: pthread_t) -> (on: Int, all: Int) {
        lock.withLock { (threads.filter { pthread_equal($0, thread) != 0 }.count, threads.count) }
    }
}

func makeTracedModel() -> ManagedObjectModel {
    try! ManagedObjectModel(entities: [
        EntityDescription(name: "TracedNote", managedObjectClass: TracedNote.self, properties: [.attribute("text", .string)]),
    ])
}

/// Rule 10 (ConcurrencyRules.md): a child's save of new objects into a
/// private parent that is idle or parked in its store write returns at once;
/// the parent takes the objects in later, on its own thread, in order, before
/// it does anything else. Serialized: the copy threads are counted globally.
@Suite(.serialized) struct DeferredChildSaveTests {
    ///     test thread (child)                   writer queue
    ///     insert N1…N3; save() → returns
    ///                                           (queued) take in N1…N3
    ///     writer.performAndWait { look } ─────▶ sees N1…N3, made here
    @Test("Rule 10: an idle parent takes a child's new objects in on its own queue")
    func idleParentTakesInsertsOnItsQueue() throws {
        let model = makeTracedModel()  // its check of TracedNote makes one copy
        CopyThreads.shared.reset()
        let stack = try GatedWriterStack(model: model)
        let writer = stack.writer, child = stack.child
        let (ids, childThread) = try child.performAndWait { () throws -> ([ObjectID], pthread_t) in
            let notes = (1...3).map { i -> TracedNote in
                let note = TracedNote(context: child)
                note.text = "N\(i)"
                return note
            }
            try child.save()
            return (notes.map(\.objectID), pthread_self())
        }
        let texts = writer.performAndWait {
            ids.map { (writer.registeredObject(for: $0) as? TracedNote)?.text ?? "missing" }
        }
        #expect(texts == ["N1", "N2", "N3"])
        #expect(writer.performAndWait { writer.insertedObjects.count } == 3)
        let copies = CopyThreads.shared.count(on: childThread)
        #expect(copies.all == 3)
        #expect(copies.on == 0, "the child's thread did the parent's share of the save")
    }

    ///     writer queue                          test thread (child)
    ///     insert A; save(): park, write,  ─┐
    ///       fsync (held by the gate)       │    insert B; save() → returns at once
    ///     gate opens ◀─────────────────────┘    signal(gate)
    ///     unpark: take in B (made here)
    ///     save() returns; the block sees B as unsaved
    @Test("Rule 10: a parked writer takes a child's new objects in when its write returns")
    func parkedWriterTakesInsertsAfterItsWrite() throws {
        let model = makeTracedModel()  // its check of TracedNote makes one copy
        CopyThreads.shared.reset()
        let stack = try GatedWriterStack(model: model)
        let writer = stack.writer, child = stack.child
        writer.performAndWait {
            let a = TracedNote(context: writer)
            a.text = "A"
        }
        let seen = AfterSave()
        let done = DispatchSemaphore(value: 0)
        stack.files.arm()
        writer.perform {
            do { try writer.save() } catch { seen.failure.set(error) }
            seen.set(texts: writer.insertedObjects.compactMap { ($0 as? TracedNote)?.text }, thread: pthread_self())
            done.signal()
        }
        #expect(stack.files.entered.wait(timeout: .now() + 10) == .success)

        let childSide = AfterSave()
        let childRun = stack.runChildWhileWriterHeld {
            let b = TracedNote(context: child)
            b.text = "B"
            try child.save()
            childSide.set(texts: [], thread: pthread_self())
        }
        #expect(childRun.finishedWhileHeld, "the child's save waited for the writer's fsync")
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(seen.failure.error == nil && childRun.error == nil)

        // The writer's own block, right after its save, already holds B.
        #expect(seen.texts == ["B"])
        let writerThread = try #require(seen.thread), childThread = try #require(childSide.thread)
        #expect(CopyThreads.shared.count(on: writerThread) == (on: 1, all: 1))
        #expect(CopyThreads.shared.count(on: childThread).on == 0)
        try writer.performAndWait { try writer.save() }
        let fresh = ManagedObjectContext(.privateQueue, coordinator: stack.coordinator)
        let stored = try fresh.performAndWait { try fresh.fetch(FetchRequest<TracedNote>()).map(\.text).sorted() }
        #expect(stored == ["A", "B"])
    }

    /// Past ``DeferredChildSaves/limit`` recorded saves the child's save runs
    /// as a guest, which takes the recorded ones in first; an update of an
    /// object whose insert is still recorded does the same, so its conflict
    /// check finds the object at the version the child was given.
    @Test("Rule 10: recorded saves keep their order: many inserts, then an update, while the writer is parked")
    func recordedSavesKeepTheirOrder() throws {
        let stack = try GatedWriterStack(model: makeTracedModel())
        let writer = stack.writer, child = stack.child
        child.mergePolicy = .error  // an update that finds no object is a conflict
        writer.performAndWait {
            let w = TracedNote(context: writer)
            w.text = "W"
        }
        let done = DispatchSemaphore(value: 0)
        let failure = LockedError()
        #expect(stack.startBlockedWriterSave(done, failure))

        let childSide = stack.runChildWhileWriterHeld {
            var first: TracedNote?
            for i in 0..<40 {
                let note = TracedNote(context: child)
                note.text = "N\(i)"
                first = first ?? note
                try child.save()
            }
            first!.text = "first, changed"
            try child.save()
        }
        #expect(childSide.finishedWhileHeld)
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(failure.error == nil)
        #expect(childSide.error == nil, "\(String(describing: childSide.error))")

        try writer.performAndWait { try writer.save() }
        let fresh = ManagedObjectContext(.privateQueue, coordinator: stack.coordinator)
        let stored = try fresh.performAndWait { try Set(fresh.fetch(FetchRequest<TracedNote>()).map(\.text)) }
        #expect(stored == Set(["W", "first, changed"] + (1..<40).map { "N\($0)" }))
    }

    /// A child's update of an object whose insert an idle parent has not
    /// taken in yet comes after it (were it first, it would find no object:
    /// a conflict under `.error`), and a sibling sees the object.
    @Test("Rule 10: an object saved into an idle parent is found by the next save and by siblings")
    func idleParentThenUpdateAndSibling() throws {
        let stack = try GatedWriterStack(model: makeTracedModel())
        let writer = stack.writer, child = stack.child
        child.mergePolicy = .error
        let id = try child.performAndWait { () throws -> ObjectID in
            let note = TracedNote(context: child)
            note.text = "one"
            try child.save()
            note.text = "two"
            try child.save()
            return note.objectID
        }
        let sibling = ManagedObjectContext(.privateQueue, parent: writer, name: "sibling")
        let seen = try sibling.performAndWait { try (sibling.existingObject(with: id) as! TracedNote).text }
        #expect(seen == "two")
        #expect(writer.performAndWait { (writer.registeredObject(for: id) as? TracedNote)?.text } == "two")
    }
}

/// What a block saw, reported to the test thread.
///
/// `@unchecked Sendable`: `texts` and `thread` are guarded by `lock`.
private final class AfterSave: @unchecked Sendable {
    private let lock = NSLock()
    private var _texts: [String] = []
    private var _thread: pthread_t?
    let failure = LockedError()
    func set(texts: [String], thread: pthread_t) { lock.withLock { _texts = texts; _thread = thread } }
    var texts: [String] { lock.withLock { _texts } }
    var thread: pthread_t? { lock.withLock { _thread } }
}
