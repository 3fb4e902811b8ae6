import Dispatch
import Foundation
import Strata
import StrataStore

/// A file system whose fsync can be held shut, so a test can keep a save
/// "in the middle of its disk write" for as long as it likes.
final class GatedSyncFileSystem: ForwardingFileSystem, @unchecked Sendable {
    // `@unchecked Sendable`: `armed` and `failing` are guarded by `lock`; the semaphores are thread-safe.
    let base: any FileSystem = POSIXFileSystem()
    private let lock = NSLock()
    private var armed = false
    private var failing = false
    let entered = DispatchSemaphore(value: 0)
    let gate = DispatchSemaphore(value: 0)

    /// Holds the next fsync shut until ``gate`` is signalled; `failing`:
    /// it then fails with EIO instead of syncing.
    func arm(failing: Bool = false) { lock.withLock { armed = true; self.failing = failing } }

    func sync(_ fd: FileDescriptor) throws(SystemCallError) {
        let (hold, fail) = lock.withLock { () -> (Bool, Bool) in
            defer { armed = false }
            return (armed, armed && failing)
        }
        if hold {
            entered.signal()
            _ = gate.wait(timeout: .now() + 20)
        }
        if fail { throw SystemCallError(call: "fsync", errno: EIO, path: nil) }
        try base.sync(fd)
    }
}

/// Shared set-up: a writer on a store whose fsync can be held shut, and
/// a private child of it.
struct GatedWriterStack {
    let directory = TemporaryDirectory("guest")
    let files = GatedSyncFileSystem()
    let coordinator: PersistentStoreCoordinator
    let writer: ManagedObjectContext
    let child: ManagedObjectContext

    init(model: ManagedObjectModel = makeModel()) throws {
        var options = StoreOptions()
        options.syncMode = .always
        options.fileSystem = files
        coordinator = PersistentStoreCoordinator(model: model)
        try coordinator.addPersistentStore(.log, directory: directory.path + "/store", options: options)
        writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "writer")
        child = ManagedObjectContext(.privateQueue, parent: writer, name: "child")
    }

    /// Starts a writer save that will block in its fsync (and then fail,
    /// when `failing`); returns once it does (true), or after 10 s if it
    /// never does (false).
    func startBlockedWriterSave(_ done: DispatchSemaphore, _ failure: LockedError, failing: Bool = false) -> Bool {
        files.arm(failing: failing)
        let writer = writer
        writer.perform {
            do { try writer.save() } catch { failure.set(error) }
            done.signal()
        }
        return files.entered.wait(timeout: .now() + 10) == .success
    }

    func storedNames() throws -> [String] {
        let fresh = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        return try fresh.performAndWait { try fresh.fetch(FetchRequest<Recipe>()).map(\.name).sorted() }
    }

    /// Runs `body` in a block of the child, on a thread of its own, while a
    /// writer save started by ``startBlockedWriterSave(_:_:)`` is held in its
    /// fsync; then lets the fsync go. Returns whether the block finished
    /// while the writer was held (within 5 s), and what it threw.
    func runChildWhileWriterHeld(_ body: @escaping @Sendable () throws -> Void) -> (finishedWhileHeld: Bool, error: (any Error)?) {
        let finished = DispatchSemaphore(value: 0)
        let failure = LockedError()
        let child = child
        Thread {
            do { try child.performAndWait { try body() } } catch { failure.set(error) }
            finished.signal()
        }.start()
        let inTime = finished.wait(timeout: .now() + 5) == .success
        files.gate.signal()
        if !inTime { _ = finished.wait(timeout: .now() + 10) }
        return (inTime, failure.error)
    }
}
