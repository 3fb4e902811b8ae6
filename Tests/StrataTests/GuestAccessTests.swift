import Dispatch
import Foundation
import Strata
import StrataStore
import Testing

/// A file system whose fsync can be held shut, so a test can keep a save
/// "in the middle of its disk write" for as long as it likes.
private final class GatedSyncFileSystem: ForwardingFileSystem, @unchecked Sendable {
    // `@unchecked Sendable`: `armed` is guarded by `lock`; the semaphores are thread-safe.
    let base: any FileSystem = POSIXFileSystem()
    private let lock = NSLock()
    private var armed = false
    let entered = DispatchSemaphore(value: 0)
    let gate = DispatchSemaphore(value: 0)

    func arm() { lock.withLock { armed = true } }

    func sync(_ fd: FileDescriptor) throws(SystemCallError) {
        let hold = lock.withLock { () -> Bool in
            defer { armed = false }
            return armed
        }
        if hold {
            entered.signal()
            _ = gate.wait(timeout: .now() + 20)
        }
        try base.sync(fd)
    }
}

/// SEMANTICS.md line 17 (better than Core Data): a child never waits for
/// its parent's disk write — while the writer's save is in its fsync, the
/// child's save into the writer (and its faults and fetches through it) run
/// at once, as guests; the writer then keeps what they changed as unsaved.
@Suite struct GuestAccessTests {
    /// Shared set-up: a writer on a store whose fsync can be held shut, and
    /// a private child of it.
    private struct Stack {
        let directory = TemporaryDirectory("guest")
        let files = GatedSyncFileSystem()
        let coordinator: PersistentStoreCoordinator
        let writer: ManagedObjectContext
        let child: ManagedObjectContext

        init() throws {
            var options = StoreOptions()
            options.syncMode = .always
            options.fileSystem = files
            coordinator = PersistentStoreCoordinator(model: makeModel())
            try coordinator.addPersistentStore(.log, directory: directory.path + "/store", options: options)
            writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "writer")
            child = ManagedObjectContext(.privateQueue, parent: writer, name: "child")
        }

        /// Starts a writer save that will block in its fsync; returns once it does.
        func startBlockedWriterSave(_ done: DispatchSemaphore, _ failure: LockedError) {
            files.arm()
            let writer = writer
            writer.perform {
                do { try writer.save() } catch { failure.set(error) }
                done.signal()
            }
            _ = files.entered.wait(timeout: .now() + 10)
        }

        func storedNames() throws -> [String] {
            let fresh = ManagedObjectContext(.privateQueue, coordinator: coordinator)
            return try fresh.performAndWait { try fresh.fetch(FetchRequest<Recipe>()).map(\.name).sorted() }
        }
    }

    ///     writer queue                        test thread (the child)
    ///     insert A; save(): park, write, ─┐
    ///       fsync (held by the gate)      │   child: insert B; save()  → returns at once
    ///       ...                           │   (it ran as a guest of the parked writer)
    ///     gate opens ◀────────────────────┘   signal(gate)
    ///     save returns: A clean, B unsaved
    ///     save() again: B written
    @Test("Line 17: a child's save completes while the writer is in its fsync")
    func childSaveDuringWriterFsync() throws {
        let stack = try Stack()
        let writer = stack.writer, child = stack.child
        writer.performAndWait {
            let a = Recipe(context: writer)
            a.name = "A"
        }
        let done = DispatchSemaphore(value: 0)
        let failure = LockedError()
        stack.startBlockedWriterSave(done, failure)

        let childSaved = DispatchSemaphore(value: 0)
        let childFailure = LockedError()
        Thread {
            do {
                try child.performAndWait {
                    let b = Recipe(context: child)
                    b.name = "B"
                    try child.save()
                }
            } catch { childFailure.set(error) }
            childSaved.signal()
        }.start()
        let savedWhileBlocked = childSaved.wait(timeout: .now() + 5) == .success
        stack.files.gate.signal()
        #expect(savedWhileBlocked, "the child's save waited for the writer's fsync")
        if !savedWhileBlocked { _ = childSaved.wait(timeout: .now() + 10) }
        _ = done.wait(timeout: .now() + 10)
        #expect(failure.error == nil && childFailure.error == nil)

        #expect(try stack.storedNames() == ["A"])
        #expect(writer.performAndWait { writer.hasChanges })  // B arrived during the write
        try writer.performAndWait { try writer.save() }
        #expect(try stack.storedNames() == ["A", "B"])
        #expect(!writer.performAndWait { writer.hasChanges })
    }

    /// A guest that changes an object the parked save is writing leaves it
    /// dirty with the newer values (written by the next save), and one that
    /// deletes an object the save is inserting has it deleted by the next save.
    @Test("Line 17: changes a guest makes to objects in flight are kept for the next save")
    func guestChangesToObjectsInFlight() throws {
        let stack = try Stack()
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
        stack.startBlockedWriterSave(done, failure)
        let childDone = DispatchSemaphore(value: 0)
        let childFailure = LockedError()
        Thread {
            do {
                try child.performAndWait {
                    let soup = child.object(with: soupID) as! Recipe
                    soup.servings = 7
                    child.delete(child.object(with: breadID))
                    try child.save()
                }
            } catch { childFailure.set(error) }
            childDone.signal()
        }.start()
        let ranAsGuest = childDone.wait(timeout: .now() + 5) == .success
        stack.files.gate.signal()
        #expect(ranAsGuest)
        if !ranAsGuest { _ = childDone.wait(timeout: .now() + 10) }
        _ = done.wait(timeout: .now() + 10)
        #expect(failure.error == nil && childFailure.error == nil, "\(String(describing: failure.error)) \(String(describing: childFailure.error))")

        // The first save wrote Soup with 2 servings and inserted Bread.
        #expect(try stack.storedNames() == ["Bread", "Soup"])
        #expect(writer.performAndWait { writer.hasChanges })
        try writer.performAndWait { try writer.save() }
        #expect(try stack.storedNames() == ["Soup"])
        let fresh = ManagedObjectContext(.privateQueue, coordinator: stack.coordinator)
        let servings = try fresh.performAndWait { try (fresh.existingObject(with: soupID) as! Recipe).servings }
        #expect(servings == 7)
    }
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
