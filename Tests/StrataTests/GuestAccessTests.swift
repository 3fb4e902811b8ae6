import Dispatch
import Foundation
@testable import Strata
import StrataStore
import Testing

/// Contract C17 (better than Core Data): a child never waits for
/// its parent's disk write — while the writer's save is in its fsync, the
/// child's save into the writer (and its faults and fetches through it) run
/// at once, as guests; the writer then keeps what they changed as unsaved.
@Suite struct GuestAccessTests {
    ///     writer queue                        test thread (the child)
    ///     insert A; save(): park, write, ─┐
    ///       fsync (held by the gate)      │   child: insert B; save()  → returns at once
    ///       ...                           │   (recorded for the parked writer, Rule 10)
    ///     gate opens ◀────────────────────┘   signal(gate)
    ///     save returns: A clean, B unsaved
    ///     save() again: B written
    @Test("C17: a child's save completes while the writer is in its fsync")
    func childSaveDuringWriterFsync() throws {
        let stack = try GatedWriterStack()
        let writer = stack.writer, child = stack.child
        writer.performAndWait {
            let a = Recipe(context: writer)
            a.name = "A"
        }
        let done = DispatchSemaphore(value: 0)
        let failure = LockedError()
        #expect(stack.startBlockedWriterSave(done, failure))

        let childSide = stack.runChildWhileWriterHeld {
            let b = Recipe(context: child)
            b.name = "B"
            try child.save()
        }
        #expect(childSide.finishedWhileHeld, "the child's save waited for the writer's fsync")
        _ = done.wait(timeout: .now() + 10)
        #expect(failure.error == nil && childSide.error == nil)

        #expect(try stack.storedNames() == ["A"])
        #expect(writer.performAndWait { writer.hasChanges })  // B arrived during the write
        try writer.performAndWait { try writer.save() }
        #expect(try stack.storedNames() == ["A", "B"])
        #expect(!writer.performAndWait { writer.hasChanges })
    }

    /// A guest that changes an object the parked save is writing leaves it
    /// dirty with the newer values (written by the next save), and one that
    /// deletes an object the save is inserting has it deleted by the next save.
    @Test("C17: changes a guest makes to objects in flight are kept for the next save")
    func guestChangesToObjectsInFlight() throws {
        let stack = try GatedWriterStack()
        let writer = stack.writer, child = stack.child
        let (soupID, breadID) = try writer.performAndWait { () throws -> (ObjectID, ObjectID) in
            let soup = Recipe(context: writer)
            soup.name = "Soup"
            try writer.save()
            soup.servings = 2  // an update in flight
            let bread = Recipe(context: writer)
            bread.name = "Bread"  // an insert in flight
            return (soup.objectID, bread.objectID)
        }
        // The child registers both (through the writer) before the save.
        let held = child.performAndWait { [child.object(with: soupID), child.object(with: breadID)].map { $0.isDeleted } }
        #expect(held == [false, false])

        let done = DispatchSemaphore(value: 0)
        let failure = LockedError()
        #expect(stack.startBlockedWriterSave(done, failure))
        let childSide = stack.runChildWhileWriterHeld {
            let soup = child.object(with: soupID) as! Recipe
            soup.servings = 7
            child.delete(child.object(with: breadID))
            try child.save()
        }
        #expect(childSide.finishedWhileHeld)
        _ = done.wait(timeout: .now() + 10)
        #expect(failure.error == nil && childSide.error == nil, "\(String(describing: failure.error)) \(String(describing: childSide.error))")

        // The first save wrote Soup with 2 servings and inserted Bread.
        #expect(try stack.storedNames() == ["Bread", "Soup"])
        #expect(writer.performAndWait { writer.hasChanges })
        try writer.performAndWait { try writer.save() }
        #expect(try stack.storedNames() == ["Soup"])
        let fresh = ManagedObjectContext(.privateQueue, coordinator: stack.coordinator)
        let servings = try fresh.performAndWait { try (fresh.existingObject(with: soupID) as! Recipe).servings }
        #expect(servings == 7)
    }

    /// Found by StressTests: an insert whose save is in flight, deleted by a
    /// guest, came back in a guest's fetch once the save's rows were in the
    /// store — the writer no longer had the object, so it loaded the row.
    ///
    ///     writer queue                         test thread (the child)
    ///     insert X; save(): park, write ──┐
    ///       rows in the store; held       │    delete X; save()   (guest)
    ///       (afterStoreWriteForTesting)   │    fetch Recipes      (guest) → no X
    ///     released ◀──────────────────────┘
    ///     save returns: X gone; save() again removes its row
    @Test("C17: an in-flight insert a guest deleted stays deleted while its rows are already stored")
    func inFlightInsertDeletedByAGuestStaysDeleted() throws {
        let stack = try GatedWriterStack()
        let writer = stack.writer, child = stack.child
        let id = writer.performAndWait { () -> ObjectID in
            let x = Recipe(context: writer)
            x.name = "X"
            return x.objectID
        }
        let stored = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let first = LockedFlag()
        stack.coordinator.afterStoreWriteForTesting = {
            guard first.setOnce() else { return }
            stored.signal()
            _ = release.wait(timeout: .now() + 20)
        }
        let done = DispatchSemaphore(value: 0)
        let failure = LockedError()
        writer.perform {
            do { try writer.save() } catch { failure.set(error) }
            done.signal()
        }
        #expect(stored.wait(timeout: .now() + 10) == .success)

        let childDone = DispatchSemaphore(value: 0)
        let childFailure = LockedError()
        let seen = LockedStrings()
        Thread {
            do {
                try child.performAndWait {
                    child.delete(child.object(with: id))
                    try child.save()
                    seen.set(try child.fetch(FetchRequest<Recipe>()).map(\.name))
                }
            } catch { childFailure.set(error) }
            childDone.signal()
        }.start()
        let ranAsGuest = childDone.wait(timeout: .now() + 5) == .success
        release.signal()
        #expect(ranAsGuest)
        if !ranAsGuest { _ = childDone.wait(timeout: .now() + 10) }
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(failure.error == nil && childFailure.error == nil, "\(String(describing: failure.error)) \(String(describing: childFailure.error))")
        #expect(seen.value == [], "the child's fetch found the deleted object")

        #expect(try stack.storedNames() == ["X"])  // written before the delete
        try writer.performAndWait { try writer.save() }
        #expect(try stack.storedNames() == [])
    }
}

/// A flag that is set once, from any thread (`@unchecked Sendable`: guarded by `lock`).
final class LockedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var set = false
    /// True for the first caller only.
    func setOnce() -> Bool { lock.withLock { defer { set = true }; return !set } }
}

/// Strings reported from another thread (`@unchecked Sendable`: guarded by `lock`).
final class LockedStrings: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String]?
    func set(_ value: [String]) { lock.withLock { stored = value } }
    var value: [String]? { lock.withLock { stored } }
}

/// The first error reported from another thread.
///
/// `@unchecked Sendable`: `stored` is guarded by `lock`.
final class LockedError: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: (any Error)?
    func set(_ error: any Error) { lock.withLock { if stored == nil { stored = error } } }
    var error: (any Error)? { lock.withLock { stored } }
}
