import ArgumentParser
import Dispatch
import Foundation
import Strata
import StrataStore

/// `strata-bench observe`: what a ``FetchedResultsController`` costs the
/// main queue. A list of every recipe of a store, sorted (highest rated
/// first), in a main-queue view context that merges the writer's changes:
/// a background context changes 1, 100 or 10,000 of them so that each moves
/// and saves; measured, the main thread's CPU from the save to the
/// controller's delivery (the merge, gathering the changed objects, taking
/// the new results in) and the wall time until the delivery (the difference
/// is computed off the main queue), beside re-running the fetch on the main
/// queue. Then the import of `stall`'s layout (b) with such a controller
/// following the imported recipes in the main context, beside the same
/// import without it and the probe alone.
struct ObserveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "observe",
        abstract: "A fetched-results controller in the view context: main-queue cost per change vs re-fetching, and stalls during an import it follows."
    )

    @Option(help: "Recipes in the observed store.") var objects = 100_000
    @Option(help: "Rounds per change size (medians).") var rounds = 5
    @Option(help: "Objects the followed import brings (recipes with 3 ingredients each).") var importObjects = 100_000
    @Option(help: "Rounds of the followed import, with and without the controller, interleaved.") var importRounds = 3
    @Option(help: "Keep the stores in this directory (default: a temporary one, removed after).") var store: String?

    struct Report: Sendable {
        var rows: [(changes: Int, mainCPUms: Double, deliveryMs: Double)] = []
        var refetchMs = 0.0
        var initialFetchMs = 0.0
        /// Nanoseconds per property read through the wrappers, tracking off and on (no observer).
        var readNanoseconds: (off: Double, on: Double) = (0, 0)
        /// Nanoseconds per object changed (inserted, then updated) with undo off and on.
        var undoNanoseconds: (off: Double, on: Double) = (0, 0)
        var imports: [(label: String, runs: [ImportRun])] = []
        var floor: StallFigures?
    }

    func run() throws {
        let work = try WorkDirectory(store, scenario: "observe")
        defer { work.cleanUp() }
        let objects = objects, rounds = rounds, importObjects = importObjects, importRounds = importRounds
        let outcome = MainThreadDriver.run { () throws -> Report in
            var report = try Self.changes(objects: objects, rounds: rounds, directory: work.path + "/list")
            report.floor = StallProbe.alone(for: 2)
            var without: [ImportRun] = [], with: [ImportRun] = []
            for round in 0..<importRounds {
                for observing in round % 2 == 0 ? [false, true] : [true, false] {
                    progress("observe: import (b), \(observing ? "with" : "without") a controller, round \(round + 1) ...")
                    let path = work.path + "/import-\(round)-\(observing)"
                    let run = try runImport(layout: .viewChildStack, objects: importObjects, saveEvery: 2_000, ingredients: 3,
                                            directory: path, observing: observing)
                    if observing { with.append(run) } else { without.append(run) }
                    try? FileManager.default.removeItem(atPath: path)
                }
            }
            report.imports = [("(b) import child -> main -> writer -> disk", without), ("  same, a controller following the recipes in main", with)]
            return report
        }
        let report = try outcome.get()
        print(render(report))
    }

    /// The list and the changes to it.
    static func changes(objects: Int, rounds: Int, directory: String) throws -> Report {
        let coordinator = PersistentStoreCoordinator(model: try makeBenchModel())
        try coordinator.addPersistentStore(.log, directory: directory)
        defer { try? coordinator.close() }
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "writer")
        progress("observe: \(objects) recipes ...")
        try writer.performAndWait { () throws in
            insertObjects(objects, ingredientsPerRecipe: 0, into: writer)
            try writer.save()
        }
        writer.performAndWait { writer.reset() }
        let view = ManagedObjectContext(.mainQueue, parent: writer, name: "view")
        view.performAndWait { view.automaticallyMergesChangesFromParent = true }
        let request = FetchRequest<BenchRecipe>(sortBy: [SortDescriptor(\.rating, order: .reverse)])
        var report = Report()
        let delivered = DispatchSemaphore(value: 0)
        let controller = try view.performAndWait { () throws -> FetchedResultsController<BenchRecipe> in
            let controller = try FetchedResultsController(fetchRequest: request, context: view)
            report.initialFetchMs = try seconds { try controller.performFetch() } * 1e3
            controller.onChange = { _ in delivered.signal() }
            return controller
        }
        report.readNanoseconds = try readCost(writer: writer, rounds: rounds)
        report.undoNanoseconds = try undoCost(writer: writer, objects: min(objects, 20_000), rounds: rounds)
        var refetches: [Double] = []
        for _ in 0..<rounds {
            refetches.append(try view.performAndWait { () throws -> Double in
                try seconds { _ = try view.fetchObjectIDs(request) } * 1e3
            })
        }
        report.refetchMs = median(refetches)
        var topRating = 10.0
        for changes in [1, 100, 10_000] where changes <= objects {
            var cpu: [Double] = [], wall: [Double] = []
            for round in 0..<rounds {
                progress("observe: \(changes) changed, round \(round + 1) ...")
                let editor = ManagedObjectContext(.privateQueue, parent: writer, name: "editor")
                let ids = view.performAndWait { controller.objectIDs }
                let chosen = Array(ids.shuffled().prefix(changes))
                let ratings = (0..<changes).map { i in topRating + Double(i) }
                topRating += Double(changes)
                // Each chosen recipe moves to the top of the list.
                try editor.performAndWait { () throws in
                    for (id, rating) in zip(chosen, ratings) { (try editor.existingObject(with: id) as! BenchRecipe).rating = rating }
                }
                let cpuBefore = MainThreadDriver.mainThreadCPUMilliseconds() ?? 0
                let started = DispatchTime.now().uptimeNanoseconds
                try editor.performAndWait { try editor.save() }  // into the writer, merged into the view
                guard delivered.wait(timeout: .now() + 60) == .success else {
                    throw ImportCheckFailure(description: "the controller did not deliver \(changes) changes")
                }
                wall.append(Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6)
                view.performAndWait {}
                cpu.append((MainThreadDriver.mainThreadCPUMilliseconds() ?? 0) - cpuBefore)
                let top = view.performAndWait { Array(controller.objectIDs.prefix(changes)) }
                guard Set(top) == Set(chosen) else { throw ImportCheckFailure(description: "the controller's first \(changes) are not the changed recipes") }
            }
            report.rows.append((changes, median(cpu), median(wall)))
        }
        return report
    }

    /// What a property read costs through the wrappers in a context that
    /// does not track observation and in one that does (with no observer:
    /// the registrar's bookkeeping alone), over every recipe's four attributes.
    static func readCost(writer: ManagedObjectContext, rounds: Int) throws -> (off: Double, on: Double) {
        var off: [Double] = [], on: [Double] = []
        for round in 0..<rounds {
            for tracking in round % 2 == 0 ? [false, true] : [true, false] {
                let context = ManagedObjectContext(.privateQueue, parent: writer, name: "reader")
                let nanoseconds = try context.performAndWait { () throws -> Double in
                    context.tracksObservation = tracking
                    context.retainsRegisteredObjects = true
                    var request = FetchRequest<BenchRecipe>()
                    request.returnsObjectsAsFaults = false
                    let recipes = try context.fetch(request)
                    var sum = 0.0
                    for recipe in recipes { sum += recipe.rating }  // every object's registrar made, when tracking
                    let reads = recipes.count * 4 * 10
                    let elapsed = seconds {
                        for _ in 0..<10 {
                            for recipe in recipes {
                                sum += recipe.rating + Double(recipe.servings) + Double(recipe.name.utf8.count)
                                sum += recipe.created.timeIntervalSinceReferenceDate
                            }
                        }
                    }
                    if sum == .infinity { print(sum) }
                    return elapsed * 1e9 / Double(reads)
                }
                if tracking { on.append(nanoseconds) } else { off.append(nanoseconds) }
            }
        }
        return (median(off), median(on))
    }

    /// What recording undo costs per changed object: `objects` recipes
    /// inserted in one block, then each updated in another, in a child of
    /// the writer (no save), with no undo manager and with one.
    static func undoCost(writer: ManagedObjectContext, objects: Int, rounds: Int) throws -> (off: Double, on: Double) {
        var off: [Double] = [], on: [Double] = []
        for round in 0..<rounds {
            for recording in round % 2 == 0 ? [false, true] : [true, false] {
                let context = ManagedObjectContext(.privateQueue, parent: writer, name: "editor")
                if recording { context.performAndWait { context.undoManager = ContextUndoManager() } }
                var recipes: [BenchRecipe] = []
                let inserting = seconds {
                    context.performAndWait {
                        for i in 0..<objects {
                            let recipe = BenchRecipe(context: context)
                            recipe.name = "Recipe \(i)"
                            recipe.servings = i % 6
                            recipes.append(recipe)
                        }
                    }
                }
                let updating = seconds {
                    context.performAndWait { for recipe in recipes { recipe.servings += 1 } }
                }
                if recording {
                    let undone = context.performAndWait { () -> Bool in
                        context.undoManager?.undo()
                        return recipes.allSatisfy { $0.servings < 6 }
                    }
                    guard undone else { throw ImportCheckFailure(description: "undo did not take the updates back") }
                }
                let nanoseconds = (inserting + updating) * 1e9 / Double(2 * objects)
                if recording { on.append(nanoseconds) } else { off.append(nanoseconds) }
            }
        }
        return (median(off), median(on))
    }

    func render(_ report: Report) -> String {
        var out = "strata-bench observe — \(objects) recipes sorted by rating in a main-queue view context (a child of the writer that merges its changes); "
        out += "\(ProcessInfo.processInfo.activeProcessorCount) cores; " + ISO8601DateFormatter().string(from: Date()) + "\n\n"
        var table = Table(["a background save moves N recipes in the list (medians of \(rounds))", "main CPU ms", "save -> delivery ms"])
        for row in report.rows {
            table.add("N = \(thousands(Double(row.changes)))", fixed(row.mainCPUms, 3), fixed(row.deliveryMs, 2))
        }
        table.add("re-running the fetch on the main queue instead", fixed(report.refetchMs, 2), "-")
        table.add("the controller's first fetch", fixed(report.initialFetchMs, 2), "-")
        out += table.render() + "\n"
        out += "a property read through the wrappers: \(fixed(report.readNanoseconds.off, 1)) ns in a context that does not track observation, "
        out += "\(fixed(report.readNanoseconds.on, 1)) ns in one that does (no observer)\n"
        out += "a changed object (an insert, then an update, in blocks of \(thousands(Double(min(objects, 20_000)))) objects): "
        out += "\(fixed(report.undoNanoseconds.off, 0)) ns without an undo manager, \(fixed(report.undoNanoseconds.on, 0)) ns recording undo\n\n"
        var stalls = Table(["import of \(thousands(Double(importObjects))) objects (medians of \(importRounds))", "import s", "p99 ms", "max ms", "worst max", "main CPU ms"])
        if let floor = report.floor {
            stalls.add("the probe alone, nothing imported", "-", fixed(floor.p99, 2), fixed(floor.max, 2), fixed(floor.max, 2), "-")
        }
        for (label, runs) in report.imports where !runs.isEmpty {
            stalls.add(label, fixed(median(runs.map(\.seconds)), 2), fixed(median(runs.map(\.stall.p99)), 2),
                       fixed(median(runs.map(\.stall.max)), 2), fixed(runs.map(\.stall.max).max() ?? 0, 2),
                       fixed(median(runs.map(\.mainThreadCPUms)), 1))
        }
        out += stalls.render()
        out += "\n(main CPU: the main thread's CPU from the save until the delivery was taken in, the merge included; the difference itself is computed off the main queue)\n"
        return out
    }
}
