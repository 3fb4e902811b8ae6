#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Foundation
@testable import Strata
import Testing

/// The recommended stack with a background child of the main context:
/// importer → main → writer → store.
private struct RecommendedStack {
    let directory = TemporaryDirectory()
    let coordinator: PersistentStoreCoordinator
    let writer: ManagedObjectContext
    let main: ManagedObjectContext
    let importer: ManagedObjectContext

    init() throws {
        let model = makeTracedModel()
        CopyThreads.shared.reset()  // the model's check of TracedNote made one copy
        coordinator = PersistentStoreCoordinator(model: model)
        try coordinator.addPersistentStore(.log, directory: directory.path + "/store")
        writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "writer")
        main = ManagedObjectContext(.mainQueue, parent: writer, name: "main")
        importer = ManagedObjectContext(.privateQueue, parent: main, name: "import")
    }

    /// Inserts notes with `texts` in the importer and saves them into main.
    @discardableResult
    func importNotes(_ texts: [String]) throws -> [ObjectID] {
        try importer.performAndWait { () throws -> [ObjectID] in
            let notes = texts.map { text -> TracedNote in
                let note = TracedNote(context: importer)
                note.text = text
                return note
            }
            try importer.save()
            return notes.map(\.objectID)
        }
    }

    /// The notes' texts as a fresh context on the coordinator reads them.
    func storedTexts() throws -> [String] {
        let fresh = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        return try fresh.performAndWait { try fresh.fetch(FetchRequest<TracedNote>()).map(\.text).sorted() }
    }

    /// The thread the main queue runs on.
    var mainThread: pthread_t { main.performAndWait { pthread_self() } }
}

/// Rule 13 (ConcurrencyRules.md): a `.mainQueue` context holds a child's
/// save of new objects as the child's change set, and makes their objects
/// only when something on the main queue asks for them. Serialized: the
/// copy threads are counted globally.
@Suite(.serialized) struct HeldChildSaveTests {
    ///     importer queue                 main queue                 writer queue
    ///     insert N1…N3; save() ───────▶  hold the change set
    ///                                    (no object made)
    ///                                    hasChanges: true
    ///                                    save() ─────────────────▶  record, take in
    ///                                    (still no object made)     (objects made here)
    ///                                                               save() → store
    @Test("Rule 13: a child's new objects pass through the main context without an object made there")
    func newObjectsPassThroughMainUnmade() throws {
        CopyThreads.shared.reset()
        let stack = try RecommendedStack()
        let main = stack.main, writer = stack.writer
        let mainThread = stack.mainThread
        let announced = LockedIDs()
        let observer = announced.collect(ManagedObjectContext.objectsDidChange, of: main, \.inserted)
        defer { NotificationCenter.default.removeObserver(observer) }

        let ids = try stack.importNotes(["N1", "N2", "N3"])
        #expect(main.performAndWait { main.hasChanges })
        #expect(Set(announced.all) == Set(ids), "objects-did-change carries the new IDs")
        #expect(CopyThreads.shared.count(on: mainThread).all == 0, "the main context made objects of a save it was not asked about")

        let saved = LockedIDs()
        try main.performAndWait { () throws in
            let observer = saved.collect(ManagedObjectContext.didSave, of: main, \.inserted)
            defer { NotificationCenter.default.removeObserver(observer) }
            try main.save()
        }
        #expect(Set(saved.all) == Set(ids), "did-save carries the handed-on IDs")
        #expect(!main.performAndWait { main.hasChanges })
        #expect(CopyThreads.shared.count(on: mainThread).on == 0)
        #expect(writer.performAndWait { writer.insertedObjects.count } == 3)
        try writer.performAndWait { try writer.save() }
        #expect(try stack.storedTexts() == ["N1", "N2", "N3"])
    }

    @Test("Rule 13: a fetch, an object by ID and the inserted objects see held objects, made then")
    func mainSeesHeldObjectsWhenItAsks() throws {
        CopyThreads.shared.reset()
        let stack = try RecommendedStack()
        let main = stack.main, mainThread = stack.mainThread
        let ids = try stack.importNotes(["a", "b"])
        let viaID = main.performAndWait { (main.object(with: ids[0]) as? TracedNote)?.text }
        #expect(viaID == "a")
        try stack.importNotes(["c"])
        let fetched = try main.performAndWait { try main.fetch(FetchRequest<TracedNote>()).map(\.text).sorted() }
        #expect(fetched == ["a", "b", "c"])
        // Made on the main queue, once each (the probe the other tests use).
        #expect(CopyThreads.shared.count(on: mainThread).on == 3)
        #expect(main.performAndWait { main.insertedObjects.count } == 3)
        try main.performAndWait { try main.save() }
        try stack.writer.performAndWait { try stack.writer.save() }
        #expect(try stack.storedTexts() == ["a", "b", "c"])
    }

    @Test("Rule 13: another child of the main context reads held objects through it")
    func siblingReadsHeldObjects() throws {
        CopyThreads.shared.reset()
        let stack = try RecommendedStack()
        let mainThread = stack.mainThread
        try stack.importNotes(["x", "y"])
        let sibling = ManagedObjectContext(.privateQueue, parent: stack.main, name: "sibling")
        // On the sibling's own queue (a `performAndWait` may run on this
        // thread, which may be the main one).
        let seen = LockedTexts()
        let done = DispatchSemaphore(value: 0)
        sibling.perform {
            seen.set((try? sibling.fetch(FetchRequest<TracedNote>()).map(\.text).sorted()) ?? ["fetch failed"])
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(seen.texts == ["x", "y"])
        #expect(CopyThreads.shared.count(on: mainThread).on == 0, "a child's read made the main context take the save in")
    }

    ///     importer                           main
    ///     insert A ("v1"); save() ───────▶   hold
    ///     A.text = "v2"; save() ─────────▶   take the held save in (A made),
    ///                                        then take the update: no conflict
    @Test("Rule 13: a child's update of a held object takes the held save in first")
    func updateOfHeldObjectTakesItInFirst() throws {
        let stack = try RecommendedStack()
        let importer = stack.importer, main = stack.main
        let id = try importer.performAndWait { () throws -> ObjectID in
            let note = TracedNote(context: importer)
            note.text = "v1"
            try importer.save()
            note.text = "v2"
            try importer.save()
            return note.objectID
        }
        #expect(main.performAndWait { (main.object(with: id) as? TracedNote)?.text } == "v2")
        try main.performAndWait { try main.save() }
        try stack.writer.performAndWait { try stack.writer.save() }
        #expect(try stack.storedTexts() == ["v2"])
    }

    ///     importer                          main queue
    ///     insert A ("v1"); save() ───────▶  hold A's save
    ///     A.text = "v2"; save():
    ///       takes the held save in ─────▶   block 1: A's copy made
    ///                                       (its init queues block P)
    ///                                       block P: reads A → "v1"
    ///       hands its update on ────────▶   block 2: A.text = "v2"
    ///
    /// One block doing both would run P after the update, reading "v2".
    @Test("Rule 13: a child's update of held objects takes them in ahead of it, in a main-queue block of their own")
    func heldSavesAreTakenInAheadOfAnUpdateInTheirOwnBlock() throws {
        let directory = TemporaryDirectory()
        let coordinator = PersistentStoreCoordinator(model: try ManagedObjectModel(entities: [
            EntityDescription(name: "ProbedNote", managedObjectClass: ProbedNote.self, properties: [.attribute("text", .string)]),
        ]))
        try coordinator.addPersistentStore(.log, directory: directory.path + "/store")
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "writer")
        let main = ManagedObjectContext(.mainQueue, parent: writer, name: "main")
        let importer = ManagedObjectContext(.privateQueue, parent: main, name: "import")
        let (note, id) = try importer.performAndWait { () throws -> (ProbedNote, ObjectID) in
            let note = ProbedNote(context: importer)
            note.text = "v1"
            try importer.save()
            return (note, note.objectID)
        }
        let seen = LockedTexts()
        let probeRan = DispatchSemaphore(value: 0)
        ProbedNote.onParentCopy.set {
            DispatchQueue.main.async {
                seen.set([main.performAndWait { (main.object(with: id) as? ProbedNote)?.text ?? "missing" }])
                probeRan.signal()
            }
        }
        defer { ProbedNote.onParentCopy.set(nil) }
        try importer.performAndWait { () throws in
            note.text = "v2"
            try importer.save()
        }
        #expect(probeRan.wait(timeout: .now() + 10) == .success, "the main context never made the held object")
        #expect(seen.texts == ["v1"], "the held save was taken in by the block that took the update")
        #expect(main.performAndWait { (main.object(with: id) as? ProbedNote)?.text } == "v2")
        try main.performAndWait { try main.save() }
        try writer.performAndWait { try writer.save() }
        let fresh = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        #expect(try fresh.performAndWait { try fresh.fetch(FetchRequest<ProbedNote>()).map(\.text) } == ["v2"])
    }

    ///     writer: insert W (no child yet: publishes nothing)
    ///     main, importer created; importer saves N ──▶ main holds N
    ///     main.save(): the writer cannot check it (its publication is
    ///       incomplete) ──▶ synchronous path, once — no retry loop
    @Test("Rule 13: a hand-on the writer cannot record takes the synchronous path")
    func handOnIntoUnpublishedWriterTakesTheSynchronousPath() throws {
        let directory = TemporaryDirectory()
        let coordinator = PersistentStoreCoordinator(model: makeTracedModel())
        try coordinator.addPersistentStore(.log, directory: directory.path + "/store")
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "writer")
        writer.performAndWait { TracedNote(context: writer).text = "W" }
        let main = ManagedObjectContext(.mainQueue, parent: writer, name: "main")
        let importer = ManagedObjectContext(.privateQueue, parent: main, name: "import")
        try importer.performAndWait {
            TracedNote(context: importer).text = "N"
            try importer.save()
        }
        let saved = DispatchSemaphore(value: 0)
        let failure = LockedTexts()
        DispatchQueue.global().async {
            do { try main.performAndWait { try main.save() } } catch { failure.set(["\(error)"]) }
            saved.signal()
        }
        #expect(saved.wait(timeout: .now() + 20) == .success, "the main context's save never returned")
        #expect(failure.texts.isEmpty)
        try writer.performAndWait { try writer.save() }
        let fresh = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        #expect(try fresh.performAndWait { try fresh.fetch(FetchRequest<TracedNote>()).map(\.text).sorted() } == ["N", "W"])
    }

    @Test("Rule 13: rollback and reset drop held saves; a refused save of the main context keeps them")
    func rollbackDropsHeldSaves() throws {
        let stack = try RecommendedStack()
        let main = stack.main
        try stack.importNotes(["gone"])
        main.performAndWait { main.rollback() }
        #expect(!main.performAndWait { main.hasChanges })
        let importer = stack.importer
        #expect(try importer.performAndWait { try importer.count(for: FetchRequest<TracedNote>()) } == 0)
        try stack.importNotes(["gone too"])
        main.performAndWait { main.reset() }
        #expect(!main.performAndWait { main.hasChanges })
        try main.performAndWait { try main.save() }
        try stack.writer.performAndWait { try stack.writer.save() }
        #expect(try stack.storedTexts() == [])
    }

    ///     writer queue                        main queue
    ///     block: inside ─────────────────▶    save(): hands held N on;
    ///                                         the writer runs a block, so
    ///                                         the hand-on waits for it
    ///     main.performAndWait {  (a cycle: runs as main's guest)
    ///       object(with: N) — takes N in
    ///       delete(N)
    ///     }
    ///     block ends ─────────────────────▶   hand-on recorded; save returns
    ///                                         N's deletion still pending here
    ///     main.save(); writer.save() → the store has no N
    @Test("Rule 13: a held object a guest deletes while it is handed on stays deleted")
    func heldObjectDeletedByAGuestWhileHandedOnStaysDeleted() throws {
        let stack = try RecommendedStack()
        let main = stack.main, writer = stack.writer
        let id = try stack.importNotes(["N"])[0]
        try stack.importNotes(["kept"])
        let deletedAnnounced = LockedIDs()
        let observer = deletedAnnounced.collect(ManagedObjectContext.objectsDidChange, of: main, \.deleted)
        defer { NotificationCenter.default.removeObserver(observer) }
        let writerInside = DispatchSemaphore(value: 0), mainSaving = DispatchSemaphore(value: 0)
        let writerDone = DispatchSemaphore(value: 0)
        writer.perform {
            writerInside.signal()
            _ = mainSaving.wait(timeout: .now() + 10)
            // Until the hand-on waits for this block (registered: the call
            // below then closes the cycle and runs as main's guest).
            let deadline = DispatchTime.now() + 10
            while !WaitGraph.shared.hasWaiter(holding: WaitGraph.mainQueue) && DispatchTime.now() < deadline { usleep(1_000) }
            main.performAndWait {
                main.delete(main.object(with: id))
            }
            writerDone.signal()
        }
        #expect(writerInside.wait(timeout: .now() + 10) == .success)
        let pendingAfterSave = try main.performAndWait { () throws -> Bool in
            mainSaving.signal()
            try main.save()
            return main.hasChanges
        }
        #expect(writerDone.wait(timeout: .now() + 10) == .success)
        #expect(pendingAfterSave, "the guest's deletion was dropped with the save that carried N")
        #expect(deletedAnnounced.all == [id], "the deletion of N was not announced")
        try main.performAndWait { try main.save() }
        try writer.performAndWait { try writer.save() }
        #expect(try stack.storedTexts() == ["kept"])
    }

    ///     writer queue                        main queue
    ///                                         own: insert M, update U
    ///                                         (and delete D); held N
    ///     block: inside ─────────────────▶    save(): hands M, U, (D), N
    ///                                         on; the writer runs a block,
    ///                                         so the hand-on waits for it
    ///     main.performAndWait {  (a cycle: runs as main's guest)
    ///       reset() / rollback()
    ///     }
    ///     block ends ─────────────────────▶   hand-on taken in; save returns:
    ///                                         did-save lists M, U, (D), N —
    ///                                         the writer has them all
    @Test("Rule 9: a guest's reset or rollback during a hand-on leaves did-save listing what was saved",
          arguments: ["reset", "rollback"], [false, true])
    func guestResetDuringHandOnKeepsDidSave(call: String, withDelete: Bool) throws {
        let stack = try RecommendedStack()
        let main = stack.main, writer = stack.writer
        let stored = try stack.importNotes(["U", "D"])
        try main.performAndWait { try main.save() }
        try writer.performAndWait { try writer.save() }
        let (ownInsert, rolledBack) = try main.performAndWait { () throws -> (ObjectID, TracedNote) in
            let note = TracedNote(context: main)
            note.text = "M"
            let updated = try main.existingObject(with: stored[0]) as! TracedNote
            updated.text = "U2"
            if withDelete { main.delete(try main.existingObject(with: stored[1])) }
            return (note.objectID, updated)
        }
        let held = try stack.importNotes(["N"])[0]
        let savedInserts = LockedIDs(), savedUpdates = LockedIDs(), savedDeletes = LockedIDs()
        let observers = [
            savedInserts.collect(ManagedObjectContext.didSave, of: main, \.inserted),
            savedUpdates.collect(ManagedObjectContext.didSave, of: main, \.updated),
            savedDeletes.collect(ManagedObjectContext.didSave, of: main, \.deleted),
        ]
        defer { observers.forEach(NotificationCenter.default.removeObserver) }
        let writerInside = DispatchSemaphore(value: 0), mainSaving = DispatchSemaphore(value: 0)
        let writerDone = DispatchSemaphore(value: 0)
        writer.perform {
            writerInside.signal()
            _ = mainSaving.wait(timeout: .now() + 10)
            let deadline = DispatchTime.now() + 10
            while !WaitGraph.shared.hasWaiter(holding: WaitGraph.mainQueue) && DispatchTime.now() < deadline { usleep(1_000) }
            main.performAndWait { call == "reset" ? main.reset() : main.rollback() }
            writerDone.signal()
        }
        #expect(writerInside.wait(timeout: .now() + 10) == .success)
        try main.performAndWait {
            mainSaving.signal()
            try main.save()
        }
        #expect(writerDone.wait(timeout: .now() + 10) == .success)
        #expect(Set(savedInserts.all) == [ownInsert, held], "did-save left out inserts the writer took")
        #expect(savedUpdates.all == [stored[0]], "did-save left out the update the writer took")
        #expect(savedDeletes.all == (withDelete ? [stored[1]] : []), "did-save left out the deletion the writer took")
        if call == "rollback" {
            // Rolled back while in flight: the copy shows what was saved.
            main.performAndWait {
                #expect(rolledBack.text == "U2")
                #expect(!main.hasChanges)
                if withDelete { #expect(main.registeredObject(for: stored[1]) == nil) }
            }
        }
        try writer.performAndWait { try writer.save() }
        #expect(try stack.storedTexts() == (withDelete ? ["M", "N", "U2"] : ["D", "M", "N", "U2"]))
    }

    @Test("Rule 13: a full list of held saves takes the oldest in, not all of them")
    func fullListTakesInOneSave() throws {
        CopyThreads.shared.reset()
        let stack = try RecommendedStack()
        let main = stack.main, mainThread = stack.mainThread
        let limit = 256  // DeferredChildSaves.entryLimit
        for i in 0...limit { try stack.importNotes(["n\(i)"]) }
        #expect(CopyThreads.shared.count(on: mainThread).on == 1, "the main queue made more than one save's objects")
        #expect(main.performAndWait { main.insertedObjects.count } == limit + 1)
        try main.performAndWait { try main.save() }
        try stack.writer.performAndWait { try stack.writer.save() }
        #expect(try stack.storedTexts().count == limit + 1)
    }

    /// As above, with every save in one main-queue block: the oldest save,
    /// taken in before any objects-did-change went out, is announced with
    /// its objects, the others as held — each new object once.
    @Test("Rule 13: saves taken in to make room are announced once, in one block")
    func fullListInOneBlockAnnouncesEachObjectOnce() throws {
        let stack = try RecommendedStack()
        let main = stack.main
        let announced = LockedIDs()
        let observer = announced.collect(ManagedObjectContext.objectsDidChange, of: main, \.inserted)
        defer { NotificationCenter.default.removeObserver(observer) }
        let limit = 256  // DeferredChildSaves.entryLimit
        let ids = try main.performAndWait { () throws -> [ObjectID] in
            try (0...limit + 2).flatMap { i in try stack.importNotes(["n\(i)"]) }
        }
        #expect(announced.all.count == ids.count, "an object was announced twice, or not at all")
        #expect(Set(announced.all) == Set(ids))
        #expect(main.performAndWait { main.insertedObjects.count } == limit + 3)
    }

    ///     importer thread                     main queue            writer
    ///                                                                   save(): parked in
    ///                                                                   its fsync (held)
    ///     round 1…4: insert 500; save ──▶     hold; save() ──▶     recorded (2,000 waiting
    ///                                                                   beside the 5,000 written)
    ///     round 5: waits (the writer is
    ///       saving, 2,048 would be passed)
    ///                                                                   fsync let go: the save
    ///                                                                   ends, wakes the importer
    ///     rounds 5…8 go on                                              later saves take them
    ///
    /// Also with a uniqueness constraint (the main context takes those
    /// saves in instead of holding them: paced all the same), and with a
    /// writer save that fails in its fsync (the waiter goes on; nothing
    /// is lost from memory).
    @Test("Rule 13: an import through the main context waits while the saving writer has a full next save",
          arguments: ["plain", "unique names", "failing fsync"])
    func importWaitsForTheWriterBacklog(variant: String) throws {
        let stack = try GatedWriterStack(model: variant == "unique names" ? makeModel(recipeUniqueness: [["name"]]) : makeModel())
        let writer = stack.writer
        let main = ManagedObjectContext(.mainQueue, parent: writer, name: "main")
        let importer = ManagedObjectContext(.privateQueue, parent: main, name: "import")
        let written = 5_000  // the blocked save's: they leave with it, so they do not count
        writer.performAndWait { for i in 0..<written { Recipe(context: writer).name = "w\(i)" } }
        let writerDone = DispatchSemaphore(value: 0)
        let writerFailure = LockedError()
        #expect(stack.startBlockedWriterSave(writerDone, writerFailure, failing: variant == "failing fsync"),
                "the writer's save never reached its fsync")

        let rounds = 8, perRound = 500
        let finishedRounds = ConcurrencyTestBox(0)
        let importFailure = LockedError()
        let importDone = DispatchSemaphore(value: 0)
        Thread {
            do {
                for round in 0..<rounds {
                    try importer.performAndWait {
                        for i in 0..<perRound { Recipe(context: importer).name = "r\(round)-\(i)" }
                        try importer.save()
                    }
                    try main.performAndWait { try main.save() }
                    finishedRounds.withLock { $0 += 1 }
                }
            } catch { importFailure.set(error) }
            importDone.signal()
        }.start()
        // 4 rounds fit under the bound: 2,000 objects waiting, 2,500 with a fifth.
        let deadline = DispatchTime.now() + 10
        while finishedRounds.value < 4 && DispatchTime.now() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        Thread.sleep(forTimeInterval: 0.3)
        let whileHeld = finishedRounds.value
        stack.files.gate.signal()
        #expect(whileHeld == 4, "rounds an import finished while the writer was saving")
        #expect(importDone.wait(timeout: .now() + 20) == .success, "the import never finished once the writer's save ended")
        #expect(writerDone.wait(timeout: .now() + 10) == .success)
        #expect(importFailure.error == nil)
        guard variant == "failing fsync" else {
            #expect(writerFailure.error == nil)
            try writer.performAndWait { try writer.save() }
            #expect(try stack.storedNames().count == written + rounds * perRound)
            return
        }
        #expect((writerFailure.error as? StrataError)?.code == .storage, "the writer's save did not fail as its fsync did")
        #expect(writer.performAndWait { writer.insertedObjects.count } == written + rounds * perRound,
                "the writer lost objects when its save failed")
    }

    @Test("Rule 13: held saves and the main context's own changes go on as one change set, in order")
    func heldAndOwnChangesSaveTogether() throws {
        let stack = try RecommendedStack()
        let main = stack.main
        try stack.importNotes(["held 1"])
        try stack.importNotes(["held 2"])
        try main.performAndWait {
            let own = TracedNote(context: main)
            own.text = "own"
            try main.save()
            #expect(!main.hasChanges)
            // Saved objects are let go of; the own one is still usable.
            #expect(own.text == "own")
        }
        #expect(stack.writer.performAndWait { stack.writer.insertedObjects.count } == 3)
        try stack.writer.performAndWait { try stack.writer.save() }
        #expect(try stack.storedTexts() == ["held 1", "held 2", "own"])
    }
}

/// IDs collected from notifications on any thread.
///
/// `@unchecked Sendable`: `ids` is guarded by `lock`.
private final class LockedIDs: @unchecked Sendable {
    private let lock = NSLock()
    private var ids: [ObjectID] = []
    func append(_ more: [ObjectID]) { lock.withLock { ids.append(contentsOf: more) } }
    var all: [ObjectID] { lock.withLock { ids } }

    /// Collects the IDs at `field` of every `name` notification `context`
    /// posts, on any thread, until the returned observer is removed.
    func collect(
        _ name: Notification.Name, of context: ManagedObjectContext, _ field: any KeyPath<ObjectChanges, [ObjectID]> & Sendable
    ) -> any NSObjectProtocol {
        NotificationCenter.default.addObserver(forName: name, object: context, queue: nil) { note in
            self.append(ObjectChanges(note)?[keyPath: field] ?? [])
        }
    }
}

/// Texts handed from a context's queue to the test.
///
/// `@unchecked Sendable`: `value` is guarded by `lock`.
private final class LockedTexts: @unchecked Sendable {
    private let lock = NSLock()
    private var value: [String] = []
    func set(_ texts: [String]) { lock.withLock { value = texts } }
    var texts: [String] { lock.withLock { value } }
}

/// A note whose parent-side copy (made with no context) runs a hook once
/// (``HeldChildSaveTests/heldSavesAreTakenInAheadOfAnUpdateInTheirOwnBlock()``).
final class ProbedNote: ManagedObject {
    @Attribute("text") var text: String

    static let onParentCopy = OneShotHook()

    required init(entity: EntityDescription, insertInto context: ManagedObjectContext?) {
        if context == nil { Self.onParentCopy.fire() }
        super.init(entity: entity, insertInto: context)
    }
}

/// An action run at most once, by whichever thread fires it first.
///
/// `@unchecked Sendable`: `action` is guarded by `lock`.
final class OneShotHook: @unchecked Sendable {
    private let lock = NSLock()
    private var action: (@Sendable () -> Void)?
    func set(_ action: (@Sendable () -> Void)?) { lock.withLock { self.action = action } }
    func fire() {
        let action = lock.withLock { () -> (@Sendable () -> Void)? in
            defer { self.action = nil }
            return self.action
        }
        action?()
    }
}
