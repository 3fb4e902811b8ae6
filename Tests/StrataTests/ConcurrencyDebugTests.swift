import Dispatch
import Foundation
import Strata
import Testing

// Contract C22: with STRATA_CONCURRENCY_DEBUG=1, any use of a context
// or of one of its objects from outside its queue traps with a message naming
// the context, its concurrency type and the offending queue or thread; using a
// .mainQueue context directly on the main queue never traps.
//
// Every test is an exit test: the switch is read once per process, lazily, so
// each child process sets the variable first thing, before any Strata call.
// The parent process (running every other suite in parallel) never sets it.

/// Turns the switch on in this (exit-test child) process. Call before touching Strata.
private func debugSwitchOn() {
    setenv("STRATA_CONCURRENCY_DEBUG", "1", 1)
}

/// What a violation's message must contain: the context's name, its
/// concurrency type, and the offending thread.
private func expectViolationMessage(
    _ result: ExitTest.Result?, context: String, type: String, sourceLocation: SourceLocation = #_sourceLocation
) {
    guard let result else { return }  // the exit expectation itself already failed
    let stderr = String(decoding: result.standardErrorContent, as: UTF8.self)
    #expect(stderr.contains("concurrency violation"), "stderr: \(stderr)", sourceLocation: sourceLocation)
    #expect(stderr.contains("'\(context)'"), "stderr: \(stderr)", sourceLocation: sourceLocation)
    #expect(stderr.contains(type), "stderr: \(stderr)", sourceLocation: sourceLocation)
    #expect(stderr.contains("thread "), "stderr: \(stderr)", sourceLocation: sourceLocation)
}

@Suite struct ConcurrencyDebugTests {

    // MARK: Misuse traps

    @Test("C22: a .privateQueue context used outside perform traps, naming it")
    func privateContextUsedOutsidePerformTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            debugSwitchOn()
            let coordinator = try makeCoordinator()
            let importer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "DebugImporter")
            _ = importer.hasChanges  // outside any block
        }
        expectViolationMessage(result, context: "DebugImporter", type: ".privateQueue")
    }

    @Test("C22: inserting into a .privateQueue context outside perform traps")
    func insertOutsidePerformTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            debugSwitchOn()
            let coordinator = try makeCoordinator()
            let importer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "DebugImporter")
            _ = Recipe(context: importer)
        }
        expectViolationMessage(result, context: "DebugImporter", type: ".privateQueue")
    }

    @Test("C22: an object of a .privateQueue context used outside perform traps, naming the context")
    func objectUsedOutsidePerformTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            debugSwitchOn()
            let coordinator = try makeCoordinator()
            let importer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "DebugImporter")
            let soup = importer.performAndWait { () -> Recipe in  // fine: inside the block
                let soup = Recipe(context: importer)
                soup.name = "Soup"
                return soup
            }
            _ = soup.name  // the object escaped its context's queue
        }
        expectViolationMessage(result, context: "DebugImporter", type: ".privateQueue")
    }

    @Test("C22: writing an object of a .privateQueue context outside perform traps")
    func objectWrittenOutsidePerformTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            debugSwitchOn()
            let coordinator = try makeCoordinator()
            let importer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "DebugImporter")
            let soup = importer.performAndWait { Recipe(context: importer) }
            soup.servings = 3
        }
        expectViolationMessage(result, context: "DebugImporter", type: ".privateQueue")
    }

    @Test("C22: a .privateQueue context used inside another context's block traps")
    func privateContextUsedFromAnotherContextsBlockTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            debugSwitchOn()
            let coordinator = try makeCoordinator()
            let importer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "DebugImporter")
            let other = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "Other")
            other.performAndWait {
                _ = importer.registeredObjects  // on Other's queue, not DebugImporter's
            }
        }
        expectViolationMessage(result, context: "DebugImporter", type: ".privateQueue")
    }

    @Test("C22: a .mainQueue context used directly off the main queue traps")
    func mainContextUsedOffTheMainQueueTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            debugSwitchOn()
            let coordinator = try makeCoordinator()
            let main = ManagedObjectContext(.mainQueue, coordinator: coordinator, name: "DebugMain")
            let done = DispatchSemaphore(value: 0)
            Thread {
                _ = main.hasChanges  // a background thread, no perform
                done.signal()
            }.start()
            _ = done.wait(timeout: .now() + 10)  // the trap ends the process first
        }
        expectViolationMessage(result, context: "DebugMain", type: ".mainQueue")
    }

    @Test("C22: an object of a .mainQueue context used off the main queue traps")
    func mainObjectUsedOffTheMainQueueTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            debugSwitchOn()
            let coordinator = try makeCoordinator()
            let main = ManagedObjectContext(.mainQueue, coordinator: coordinator, name: "DebugMain")
            let id = await MainActor.run { () -> ObjectID in
                let soup = Recipe(context: main)
                soup.name = "Soup"
                return soup.objectID
            }
            let done = DispatchSemaphore(value: 0)
            Thread {
                let soup = main.performAndWait { main.object(with: id) as! Recipe }  // fine
                _ = soup.name  // not fine: off the main queue, outside the block
                done.signal()
            }.start()
            _ = done.wait(timeout: .now() + 10)
        }
        expectViolationMessage(result, context: "DebugMain", type: ".mainQueue")
    }

    @Test("C22: a .confinement context used off its thread traps")
    func confinementContextUsedOffItsThreadTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            debugSwitchOn()
            let coordinator = try makeCoordinator()
            let importer = ManagedObjectContext(.confinement, coordinator: coordinator, name: "DebugConfined")
            let done = DispatchSemaphore(value: 0)
            Thread {
                _ = importer.insertedObjects
                done.signal()
            }.start()
            _ = done.wait(timeout: .now() + 10)
        }
        expectViolationMessage(result, context: "DebugConfined", type: ".confinement")
    }

    // MARK: Correct use does not trap

    /// C22: with the switch on, every correct use runs to a clean exit.
    @Test("C22: correct use does not trap with the switch on")
    func correctUseDoesNotTrap() async {
        await #expect(processExitsWith: .success) {
            debugSwitchOn()
            try await exerciseCorrectUse()
        }
    }

    /// C22: the same correct use, followed by one deliberate misuse: the
    /// process must die at the misuse (proving the switch was on) and not
    /// before (stderr shows the marker printed after the correct use).
    @Test("C22: the switch was on during the correct use (a later misuse traps)")
    func correctUseThenMisuse() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            debugSwitchOn()
            try await exerciseCorrectUse()
            FileHandle.standardError.write(Data("CORRECT-USE-DONE\n".utf8))
            let coordinator = try makeCoordinator()
            let late = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "Deliberate")
            _ = late.hasChanges
        }
        if let result {
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("CORRECT-USE-DONE"))
            #expect(text.contains("'Deliberate'"))
        }
        expectViolationMessage(result, context: "Deliberate", type: ".privateQueue")
    }
}

/// Every use the contract allows, in one process with the debug switch on:
/// perform, performAndWait and async perform on private contexts; a
/// .mainQueue context directly on the main queue and through perform from a
/// background thread; nested performAndWait through parents; saves up a
/// writer ← main ← importer stack; a .confinement context on its thread;
/// objects inside their context's blocks; ObjectIDs across queues.
private func exerciseCorrectUse() async throws {
    do {
        try await correctUseScenario()
    } catch {
        // An exit test's thrown error leaves no trace on stderr: say what went wrong.
        FileHandle.standardError.write(Data("correct use failed: \(error)\n".utf8))
        throw error
    }
}

private func correctUseScenario() async throws {
    let coordinator = try makeCoordinator()
    let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "Writer")
    let main = ManagedObjectContext(.mainQueue, parent: writer, name: "Main")
    let importer = ManagedObjectContext(.privateQueue, parent: main, name: "Importer")

    // performAndWait, with nested performAndWait through the parents and a save into main.
    let soupID = try importer.performAndWait { () throws(StrataError) -> ObjectID in
        let soup = Recipe(context: importer)
        soup.name = "Soup"
        main.performAndWait {
            writer.performAndWait {
                importer.performAndWait { soup.servings = 2 }
                _ = writer.hasChanges
            }
            _ = main.hasChanges
        }
        try importer.save()
        return soup.objectID
    }

    // perform (fire and forget), awaited through a semaphore on another thread.
    let performed = await runOnDedicatedThread { () -> Bool in
        let done = DispatchSemaphore(value: 0)
        importer.perform {
            (importer.object(with: soupID) as! Recipe).rating = 4.5
            done.signal()
        }
        return done.wait(timeout: .now() + 10) == .success
    }
    guard performed else { throw DebugTestFailure("perform did not run") }

    // async perform.
    let name = await importer.perform { (importer.object(with: soupID) as! Recipe).name }
    guard name == "Soup" else { throw DebugTestFailure("async perform read \(name)") }

    // The main context directly on the main queue: a private child's
    // performAndWait issued from there (its save into main runs inline on the
    // main queue), then direct reads, writes and a save into the writer.
    try await MainActor.run {
        try importer.performAndWait { () throws(StrataError) in
            (importer.object(with: soupID) as! Recipe).vegetarian = true
            try importer.save()
        }
        let soup = main.object(with: soupID) as! Recipe
        soup.notes = "hot"
        _ = soup.name
        _ = soup.vegetarian
        _ = main.insertedObjects
        try main.save()
    }

    // The main context through perform / performAndWait from a background thread,
    // and an import child's save into main from its own queue.
    let mainFromBackground = await runOnDedicatedThread { () -> Bool in
        let count = main.performAndWait { main.registeredObjects.count }
        let done = DispatchSemaphore(value: 0)
        main.perform {
            _ = (main.object(with: soupID) as! Recipe).notes
            done.signal()
        }
        // A fresh import child (the first one's snapshot of the soup predates main's edit).
        let importer2 = ManagedObjectContext(.privateQueue, parent: main, name: "Importer2")
        let saved = ConcurrencyTestBox(false)
        let savedDone = DispatchSemaphore(value: 0)
        importer2.perform {
            (importer2.object(with: soupID) as! Recipe).servings = 6
            saved.withLock { $0 = (try? importer2.save()) != nil }
            savedDone.signal()
        }
        return count > 0 && done.wait(timeout: .now() + 10) == .success
            && savedDone.wait(timeout: .now() + 10) == .success && saved.value
    }
    guard mainFromBackground else { throw DebugTestFailure("main context through perform failed") }
    let mainServings = await main.perform { (main.object(with: soupID) as! Recipe).servings }
    guard mainServings == 6 else { throw DebugTestFailure("main saw servings \(mainServings)") }

    // Main saves into the writer through perform; the writer saves to the store on its own queue.
    try await main.perform { () throws(StrataError) in try main.save() }
    try await writer.perform { () throws(StrataError) in try writer.save() }

    // A .confinement context, used on the thread that created it.
    let confined = await runOnDedicatedThread { () -> String in
        let confined = ManagedObjectContext(.confinement, coordinator: coordinator, name: "Confined")
        do {
            let soups = try confined.fetch(FetchRequest<Recipe>())
            let stew = Recipe(context: confined)
            stew.name = "Stew"
            _ = confined.performAndWait { confined.hasChanges }
            try confined.save()
            return soups.map { "\($0.name) \($0.servings) \($0.notes ?? "-") \($0.vegetarian)" }.joined(separator: ", ")
        } catch {
            return "error: \(error)"
        }
    }
    guard confined == "Soup 6 hot true" else { throw DebugTestFailure("confinement context read \(confined)") }
}

private struct DebugTestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
