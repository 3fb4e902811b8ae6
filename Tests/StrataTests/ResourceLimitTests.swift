import ContainerCrashWorkload
import Foundation
import SharedTestSupport
import Strata
import StrataStore
import Testing

#if canImport(Glibc)
import Glibc
#endif

// Resource limits at the user's level (hardening issue, part 6): a full disk
// during a save, a segment flush and a compaction; too few file descriptors;
// a read-only file system. Each ends in a typed error that says what went
// wrong, loses nothing that was acknowledged, and after the limit is lifted
// (and the store reopened) the store works again.

@Suite struct ResourceLimitTests {
    typealias Workload = ContainerCrashWorkload

    enum Phase: String, CaseIterable, Sendable {
        case save, flush, compaction
    }

    /// ENOSPC from every write to the log (a save), to a new segment (a
    /// flush: the log grows past its limit) or during a compaction.
    @Test(arguments: Phase.allCases)
    func aFullDiskFailsTheOperationKeepsWhatWasSavedAndTheStoreRecovers(phase: Phase) throws {
        let directory = TemporaryDirectory()
        let store = directory.path + "/store"
        let disk = FaultInjectingFileSystem()
        var options = Workload.options(sync: .always)
        options.fileSystem = disk
        options.automaticCompaction = false
        let container = try PersistentContainer(name: "Full", model: Workload.makeModel(), directory: store, options: options)

        // Acknowledged saves before the disk fills.
        var acknowledged = 0
        for s in 1...40 {
            try container.saveAndWait { context in try Workload.applySave(s, in: context) }
            acknowledged = s
        }

        switch phase {
        case .save, .flush:
            disk.injectAlways(.error(ENOSPC), on: .write, pathContains: phase == .save ? ".wal" : ".seg")
        case .compaction:
            disk.injectAlways(.error(ENOSPC), on: .write)
        }
        var failure: StrataError?
        if phase == .compaction {
            do throws(StrataError) { try container.coordinator.compactStore() } catch { failure = error }
        } else {
            // A log write fails at once; a flush only once the log is full.
            for s in (acknowledged + 1)...(acknowledged + 400) {
                do {
                    try container.saveAndWait { context in try Workload.applySave(s, in: context) }
                    acknowledged = s
                } catch {
                    failure = error as? StrataError
                    break
                }
            }
        }
        let error = try #require(failure, "the \(phase) did not fail with the disk full")
        #expect(error.code == .storage, "\(error)")
        #expect("\(error)".contains("No space left on device") || "\(error)".contains("ENOSPC"), "the error does not say the disk is full: \(error)")
        #expect(disk.injectedFaultCount > 0)

        // What was saved stays readable from the store (a fresh context: the
        // writer itself still holds the failed save's changes, unsaved).
        let reader = ManagedObjectContext(.privateQueue, coordinator: container.coordinator, name: "reader")
        let readable = try reader.performAndWait { () throws -> Int in
            try Workload.Checkpoint.first(in: reader).map { Int($0.lastSave) } ?? -1
        }
        #expect(readable == acknowledged, "saves up to \(acknowledged) were acknowledged; the store reads \(readable)")
        try? container.coordinator.close()

        // Space returns: the store reopens with everything, and takes saves again.
        disk.clearFaults()
        var healthy = Workload.options(sync: .always)
        healthy.automaticCompaction = false
        let reopened = try PersistentContainer(name: "Full", model: Workload.makeModel(), directory: store, options: healthy)
        defer { try? reopened.coordinator.close() }
        let last = try reopened.writerContext.performAndWait { () throws -> Int in
            try Workload.Checkpoint.first(in: reopened.writerContext).map { Int($0.lastSave) } ?? -1
        }
        #expect(last == acknowledged, "after the disk filled, the reopened store ends at save \(last), not \(acknowledged)")
        var expected = ExpectedGraph()
        expected.advance(to: last)
        let recipes = try reopened.writerContext.performAndWait { () throws -> Int in try Workload.CrashRecipe.count(in: reopened.writerContext) }
        #expect(recipes == expected.recipes.count)
        try reopened.saveAndWait { context in try Workload.applySave(last + 1, in: context) }
        if phase == .compaction { try reopened.coordinator.compactStore() }
    }

    /// A read-only file system (EROFS on every open for writing is how it
    /// shows; tests run as root, so a chmod would not stop them): opening the
    /// store for writing is a typed error naming the call, the path and errno.
    @Test func aReadOnlyFileSystemIsATypedErrorAtOpen() throws {
        let directory = TemporaryDirectory()
        let store = directory.path + "/store"
        try PersistentContainer(name: "RO", model: Workload.makeModel(), directory: store, options: Workload.options()).close()
        let disk = FaultInjectingFileSystem()
        disk.injectAlways(.error(EROFS), on: .open)
        disk.injectAlways(.error(EROFS), on: .makeDirectory)
        var options = Workload.options()
        options.fileSystem = disk
        #expect {
            _ = try PersistentContainer(name: "RO", model: Workload.makeModel(), directory: store, options: options)
        } throws: { error in
            guard let error = error as? StrataError, error.code == .storage else { return false }
            let text = "\(error)"
            return text.contains("Read-only file system") && text.contains(store)
        }
    }

    /// A store another container holds open: a typed error that says so
    /// once — the engine's message is not repeated as its own cause.
    @Test func aLockedStoreSaysSoOnce() throws {
        let directory = TemporaryDirectory()
        let store = directory.path + "/store"
        let first = try PersistentContainer(name: "First", model: Workload.makeModel(), directory: store, options: Workload.options())
        defer { try? first.close() }
        do {
            _ = try PersistentContainer(name: "Second", model: Workload.makeModel(), directory: store, options: Workload.options())
            Issue.record("a second open of a held store succeeded")
        } catch {
            #expect(error.code == .storage, "\(error)")
            let text = "\(error)"
            #expect(text.components(separatedBy: "is locked").count == 2, "\(text)")
            #expect(text.contains(store) && text.contains("StoreError.locked"), "\(text)")
        }
    }

    /// A read-only container opens beside one that has the store open for
    /// writing (an app's `list` command while its import runs): it reads
    /// what was saved to disk when it opened, and no later save; a new one
    /// reads those too. A save through the read-only one is a typed error.
    @Test func aReadOnlyContainerOpensBesideAWriter() throws {
        let directory = TemporaryDirectory()
        let store = directory.path + "/store"
        let writer = try PersistentContainer(name: "Writer", model: Workload.makeModel(), directory: store, options: Workload.options())
        defer { try? writer.close() }
        for s in 1...10 { try writer.saveAndWait { context in try Workload.applySave(s, in: context) } }
        var options = Workload.options()
        options.readOnly = true
        func lastSave(_ container: PersistentContainer) throws -> Int {
            try container.writerContext.performAndWait { () throws -> Int in
                try Workload.Checkpoint.first(in: container.writerContext).map { Int($0.lastSave) } ?? -1
            }
        }
        let reader = try PersistentContainer(name: "Reader", model: Workload.makeModel(), directory: store, options: options)
        defer { try? reader.close() }
        #expect(try lastSave(reader) == 10)
        for s in 11...15 { try writer.saveAndWait { context in try Workload.applySave(s, in: context) } }
        #expect(try lastSave(reader) == 10, "a read-only open reads the store as it was when it opened")
        let later = try PersistentContainer(name: "Later", model: Workload.makeModel(), directory: store, options: options)
        defer { try? later.close() }
        #expect(try lastSave(later) == 15)
        #expect(throws: StrataError.self) { try reader.saveAndWait { context in try Workload.applySave(16, in: context) } }
        #expect(try lastSave(writer) == 15)
    }

    /// Too few file descriptors (`ulimit -n`), in a child process so the test
    /// runner keeps its own: a container that cannot open its files exits
    /// with a one-line error, never a crash; one that can, works.
    /// Not under ThreadSanitizer (`make test-tsan` sets STRATA_SANITIZED):
    /// there even `ulimit -n 6` let the sanitized child save — its runtime
    /// changes the picture (not investigated), so the test proves nothing.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["STRATA_SANITIZED"] == nil))
    func tooFewFileDescriptorsIsAClearErrorNotACrash() throws {
        let child = try #require(builtExecutable(named: "strata-container-crash-child"), "the crash child was not built beside the tests")
        let directory = TemporaryDirectory()
        let store = directory.path + "/store"
        // A store of many segments (each one an open descriptor).
        var small = Workload.options(sync: .none)
        small.logSizeLimit = 16 << 10
        small.automaticCompaction = false
        let builder = try PersistentContainer(name: "FD", model: Workload.makeModel(), directory: store, options: small)
        for s in 1...150 { try builder.saveAndWait { context in try Workload.applySave(s, in: context) } }
        try builder.coordinator.close()
        let segments = try FileManager.default.contentsOfDirectory(atPath: store).filter { $0.hasSuffix(".seg") }.count
        #expect(segments >= 8, "the store has only \(segments) segments")
        var refused = 0
        for limit in [6, 8, 10, 12, 16, 24, 64] {
            // Either it exits (refused) or it acknowledges a save (it works);
            // a sanitized build starts slowly, so wait for one of the two.
            //
            // Out of Strata's reach (PROMISES.md): libdispatch's pool monitor
            // opens /proc/<thread>/stat once global work has waited a second,
            // and traps (SIGILL) without a descriptor — which a loaded machine
            // made happen once at `ulimit -n 6`. Such a run, one that died by
            // SIGILL before Strata said anything, is tried again, twice; a trap
            // of Strata's own comes back every time and still fails.
            var attempts = 0
            var run: CrashChildRun
            repeat {
                attempts += 1
                let deadline = Date().addingTimeInterval(60)
                run = try runCrashChild("/bin/sh", ["-c", "ulimit -n \(limit) && exec \"$0\" \"$1\"", child, store]) {
                    $0.snapshot.highest > 0 || Date() >= deadline
                }
            } while !run.killed && run.status == SIGILL && !run.said.contains(where: { $0.hasPrefix("error ") }) && attempts < 3
            if run.highest > 0 { continue }
            let said = run.said.joined(separator: "\n")
            if !run.killed {
                #expect(run.status == 1, "ulimit -n \(limit): exit \(run.status): \(said)")
                #expect(said.contains("Too many open files") || said.contains("EMFILE"), "ulimit -n \(limit): \(said)")
                refused += 1
            } else {
                Issue.record("ulimit -n \(limit): the child neither saved nor exited with an error in 60 s: \(said)")
            }
        }
        #expect(refused > 0, "no limit was low enough to be refused")
        #expect(refused < 7, "even 64 descriptors were not enough")
    }
}
