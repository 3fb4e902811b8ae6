import ContainerCrashWorkload
import SharedTestSupport
import Foundation
import Strata
import StrataStore
import Testing

/// Crash testing at the user's level (hardening issue, part 1): a child
/// process saves through a ``PersistentContainer`` in a loop — block saves
/// and view-context saves, with inserts, cascading deletes and relationship
/// moves — printing each save whose call returned. The test SIGKILLs it at a
/// random moment, cycle after cycle, on one store. After every kill:
///
/// 1. `strata-dump verify` passes on the store as the kill left it;
/// 2. the store reopens through a container, and every acknowledged save is
///    there (the checkpoint is at least the highest acknowledgement);
/// 3. no save is there in part: the whole graph is exactly the graph after
///    saves 1...checkpoint (``ExpectedGraph``);
/// 4. inverse relationships agree on both sides.
///
/// CI runs `STRATA_CONTAINER_CRASH_CYCLES` cycles (default 100: the store
/// grows with every cycle and each is checked whole, so the run grows as
/// the square of the cycles);
/// `make crash-long` runs thousands.
@Suite struct ContainerCrashTests {
    struct Outcome: Sendable {
        var failures: [String] = []
        var kills = 0
        var killsAfterNewAcknowledgements = 0
        var lastSave = 0
        var objects = 0
    }

    @Test func acknowledgedSavesSurviveSIGKILLWholeWithInversesAgreeing() async throws {
        let child = try #require(builtExecutable(named: "strata-container-crash-child"), "the crash child was not built beside the tests")
        let dump = try #require(builtExecutable(named: "strata-dump"), "strata-dump was not built beside the tests")
        let cycles = Int(ProcessInfo.processInfo.environment["STRATA_CONTAINER_CRASH_CYCLES"] ?? "") ?? 100
        let seed = testSeed()
        let directory = TemporaryDirectory()
        let store = directory.path + "/store"
        // A stuck child or reopen fails the test instead of hanging the run.
        let outcome = await runOnDedicatedThread(timeout: Double(cycles) * 3 + 120) {
            Self.killCycles(child: child, dump: dump, store: store, cycles: cycles, seed: seed)
        }
        let result = try #require(outcome, "the crash cycles did not finish in time (seed \(seed))")
        for failure in result.failures { Issue.record("\(failure) (seed \(seed))") }
        print("container crash test: \(result.kills) kills, \(result.killsAfterNewAcknowledgements) after new acknowledgements, \(result.lastSave) saves in the end, \(result.objects) live objects (seed \(seed))")
        #expect(result.lastSave > cycles, "the children did too little work to prove anything")
    }

    static func killCycles(child: String, dump: String, store: String, cycles: Int, seed: UInt64) -> Outcome {
        var random = SeededGenerator(seed: seed)
        var outcome = Outcome()
        var expected = ExpectedGraph()
        var acknowledged = 0
        for cycle in 0..<cycles {
            // 1. Run the child for a random while, then kill it.
            let deadline = Date().addingTimeInterval(Double.random(in: 0.05...0.4, using: &random))
            let run: CrashChildRun
            do { run = try runCrashChild(child, [store]) { _ in Date() >= deadline } } catch {
                outcome.failures.append("cycle \(cycle): the child did not start: \(error)")
                return outcome
            }
            outcome.kills += 1
            let highest = run.highest
            if !run.said.isEmpty { outcome.failures.append("cycle \(cycle): the child said \(run.said)") }
            if !run.killed { outcome.failures.append("cycle \(cycle): the child exited by itself (\(run.status))") }
            if highest > acknowledged { outcome.killsAfterNewAcknowledgements += 1 }
            acknowledged = max(acknowledged, highest)

            // A child killed before it made the store (a slow start on a
            // busy machine) acknowledged nothing and left nothing to check:
            // no directory, or one with no MANIFEST yet (killed while making
            // it: the LOCK is there, and the next open creates the store).
            if acknowledged == 0 && !FileManager.default.fileExists(atPath: store + "/MANIFEST") { continue }

            // 2. strata-dump verify, on the store as the kill left it.
            do {
                let verify = try runToCompletion(dump, ["verify", store])
                if verify.status != 0 {
                    outcome.failures.append("cycle \(cycle): strata-dump verify exited \(verify.status): \(verify.stdout)\(verify.stderr)")
                }
            } catch {
                outcome.failures.append("cycle \(cycle): strata-dump did not run: \(error)")
            }

            // 3. Reopen and compare the whole graph with the expected one.
            do {
                let found = try readGraph(store)
                if found.lastSave < acknowledged {
                    outcome.failures.append("cycle \(cycle): save \(acknowledged) was acknowledged but the store ends at save \(found.lastSave)")
                    return outcome
                }
                expected.advance(to: found.lastSave)
                outcome.failures += found.inverseProblems.map { "cycle \(cycle): \($0)" }
                if found.recipes != expected.recipes || found.ingredients != expected.ingredients {
                    outcome.failures.append("cycle \(cycle): the store is not exactly saves 1...\(found.lastSave): \(difference(found, expected))")
                    return outcome
                }
                outcome.failures += found.payloadProblems.map { "cycle \(cycle): \($0)" }
                // Each save is one transaction of the history, in its own
                // batch: never one without the other.
                if found.transactions != (0..<UInt64(found.lastSave)).map({ $0 + 1 }) || !found.transactionsWithoutCheckpoint.isEmpty {
                    outcome.failures.append("cycle \(cycle): the history holds \(found.transactions.count) transactions, "
                        + "\(found.transactions.first ?? 0)...\(found.transactions.last ?? 0), for saves 1...\(found.lastSave); "
                        + "without the checkpoint: \(found.transactionsWithoutCheckpoint)")
                }
                outcome.lastSave = found.lastSave
                outcome.objects = found.recipes.count + found.ingredients.count
                acknowledged = found.lastSave  // the save in flight may have landed: the child goes on from here
            } catch {
                outcome.failures.append("cycle \(cycle): reopening failed: \(error)")
                return outcome
            }
            if !outcome.failures.isEmpty { return outcome }
        }
        return outcome
    }

    /// A migration SIGKILLed at a random moment, cycle after cycle, each on
    /// a fresh copy of a store of 300 saves: after every kill `strata-dump
    /// verify` passes; the old model opens the store or refuses it as
    /// migrated (never anything else); and the new model reads exactly the
    /// graph of those 300 saves, whole, inverses agreeing — for the step
    /// inferred, and taken through a custom stage that rewrites every object.
    @Test(arguments: ["migrate", "migrate-custom"])
    func aMigrationKilledAtAnyMomentLeavesTheOldModelOrTheNew(mode: String) async throws {
        typealias Workload = ContainerCrashWorkload
        let child = try #require(builtExecutable(named: "strata-container-crash-child"), "the crash child was not built beside the tests")
        let dump = try #require(builtExecutable(named: "strata-dump"), "strata-dump was not built beside the tests")
        let cycles = Int(ProcessInfo.processInfo.environment["STRATA_MIGRATION_CRASH_CYCLES"] ?? "") ?? 16
        let directory = TemporaryDirectory()
        let seeded = directory.path + "/seeded"
        do {
            let container = try PersistentContainer(name: "Seed", model: Workload.makeModel(), directory: seeded, options: Workload.options())
            for s in 1...300 { try container.saveAndWait { context in try Workload.applySave(s, in: context) } }
            try container.coordinator.close()
        }
        var graph = ExpectedGraph()
        graph.advance(to: 300)
        let expected = graph, seed = testSeed(), root = directory.path
        let outcome = await runOnDedicatedThread(timeout: Double(cycles) * 5 + 60) { () -> (failures: [String], old: Int, new: Int) in
            var random = SeededGenerator(seed: seed)
            var failures: [String] = [], old = 0, new = 0
            for cycle in 0..<cycles {
                let store = root + "/cycle\(cycle)"
                do { try FileManager.default.copyItem(atPath: seeded, toPath: store) } catch {
                    return (["cycle \(cycle): cannot copy the store: \(error)"], old, new)
                }
                let deadline = Date().addingTimeInterval(Double.random(in: 0.0...0.15, using: &random))
                guard let run = try? runCrashChild(child, [mode, store], killWhen: { _ in Date() >= deadline }) else {
                    return (["cycle \(cycle): the child did not start"], old, new)
                }
                if !run.said.isEmpty { failures.append("cycle \(cycle): the child said \(run.said)") }
                if let verify = try? runToCompletion(dump, ["verify", store]), verify.status != 0 {
                    failures.append("cycle \(cycle): strata-dump verify exited \(verify.status): \(verify.stdout)\(verify.stderr)")
                }
                do {
                    let coordinator = PersistentStoreCoordinator(model: Workload.makeModel())
                    try coordinator.addPersistentStore(.log, directory: store, options: Workload.options())
                    try coordinator.close()
                    old += 1
                } catch let error as StrataError where error.code == .modelMismatch && error.message.contains("newer version") {
                    new += 1
                } catch {
                    failures.append("cycle \(cycle): the old model neither opened the store nor found it migrated: \(error)")
                }
                do {
                    let found = try Self.readGraph(store, model: Workload.makeMigratedModel())
                    if found.lastSave != 300 || found.recipes != expected.recipes || found.ingredients != expected.ingredients {
                        failures.append("cycle \(cycle): the migrated store is not exactly saves 1...300: \(Self.difference(found, expected))")
                    }
                    failures += (found.inverseProblems + found.payloadProblems).map { "cycle \(cycle): \($0)" }
                } catch {
                    failures.append("cycle \(cycle): the new model did not open the store: \(error)")
                }
                try? FileManager.default.removeItem(atPath: store)
                if !failures.isEmpty { break }
            }
            return (failures, old, new)
        }
        let result = try #require(outcome, "the migration crash test timed out")
        #expect(result.failures.isEmpty, "\(result.failures)")
        print("migration crash test (\(mode)): \(cycles) kills, \(result.old) left at the old model, \(result.new) at the new")
    }

    /// The graph as a fresh container finds it.
    struct FoundGraph {
        var lastSave = 0
        var recipes: [Int: String] = [:]
        var ingredients: [String: Int] = [:]
        var inverseProblems: [String] = []
        var payloadProblems: [String] = []
        /// The store's history: each transaction's number, and those that
        /// did not write the checkpoint (as every save of the workload does).
        var transactions: [UInt64] = []
        var transactionsWithoutCheckpoint: [UInt64] = []
    }

    static func readGraph(_ store: String, model: ManagedObjectModel = ContainerCrashWorkload.makeModel()) throws -> FoundGraph {
        typealias Workload = ContainerCrashWorkload
        let container = try PersistentContainer(
            name: "CrashCheck", model: model, directory: store, options: Workload.options())
        defer { try? container.coordinator.close() }
        return try readGraph(in: container.writerContext)
    }

    /// The graph as `context` sees it.
    static func readGraph(in context: ManagedObjectContext) throws -> FoundGraph {
        typealias Workload = ContainerCrashWorkload
        return try context.performAndWait { () throws -> FoundGraph in
            var graph = FoundGraph()
            graph.lastSave = Int(try Workload.Checkpoint.first(in: context)?.lastSave ?? 0)
            for transaction in try context.persistentStoreCoordinator.fetchHistory() {
                graph.transactions.append(transaction.token.transactionNumber)
                if !transaction.entityNames.contains("Checkpoint") { graph.transactionsWithoutCheckpoint.append(transaction.token.transactionNumber) }
            }
            for recipe in try Workload.CrashRecipe.all(in: context) {
                let serial = Int(recipe.serial)
                graph.recipes[serial] = recipe.name
                if recipe.payload != Workload.payload(serial) { graph.payloadProblems.append("recipe \(serial)'s payload differs") }
                for ingredient in recipe.ingredients where ingredient.recipe !== recipe {
                    graph.inverseProblems.append("recipe \(serial) lists \(ingredient.name), whose recipe is \(ingredient.recipe.map { "\($0.serial)" } ?? "nil")")
                }
            }
            for ingredient in try Workload.CrashIngredient.all(in: context) {
                guard let recipe = ingredient.recipe else {
                    graph.inverseProblems.append("ingredient \(ingredient.name) has no recipe")
                    continue
                }
                graph.ingredients[ingredient.name] = Int(recipe.serial)
                if !recipe.ingredients.contains(ingredient) {
                    graph.inverseProblems.append("ingredient \(ingredient.name) names recipe \(recipe.serial), which does not list it")
                }
            }
            return graph
        }
    }

    static func difference(_ found: FoundGraph, _ expected: ExpectedGraph) -> String {
        let recipes = Set(found.recipes.keys).union(expected.recipes.keys).filter { found.recipes[$0] != expected.recipes[$0] }
        let ingredients = Set(found.ingredients.keys).union(expected.ingredients.keys).filter { found.ingredients[$0] != expected.ingredients[$0] }
        let r = recipes.sorted().prefix(3).map { "recipe \($0): found \(found.recipes[$0] ?? "none"), expected \(expected.recipes[$0] ?? "none")" }
        let i = ingredients.sorted().prefix(3).map { "\($0): found in \(found.ingredients[$0].map(String.init) ?? "none"), expected in \(expected.ingredients[$0].map(String.init) ?? "none")" }
        return (r + i).joined(separator: "; ")
    }
}
