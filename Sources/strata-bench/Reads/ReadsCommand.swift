import ArgumentParser
import Dispatch
import Foundation
import Strata
import StrataStore

/// `strata-bench reads`: reading an imported store back — opening it cold,
/// fetching objects by ID, fetching by predicate.
struct ReadsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reads",
        abstract: "Cold open, fetch by ID and fetch by predicate on an imported store."
    )

    @Option(help: "Objects imported first (recipes plus their ingredients).") var objects = 200_000
    @Option(help: "Objects fetched by ID.") var lookups = 10_000
    @Option(help: "Runs per measurement; the table shows the median.") var repeats = 3
    @Option(help: "Keep the store in this directory (default: a temporary one, removed after).") var store: String?
    @Option(help: "Write every figure to this JSON file.") var json: String?

    struct Report: Codable, Sendable {
        var date: String
        var objects: Int
        var recipes: Int
        var lookups: Int
        var openMilliseconds: [Double] = []
        var byIDColdPerSecond: [Double] = []
        var byIDWarmPerSecond: [Double] = []
        var byPredicateScannedPerSecond: [Double] = []
        var byPredicateMatched = 0
    }

    func run() throws {
        let work = try WorkDirectory(store, scenario: "reads")
        defer { work.cleanUp() }
        let root = work.path
        let path = root + "/store"
        progress("reads: importing \(objects) objects ...")
        try importStore(objects: objects, at: path)
        var report = Report(date: ISO8601DateFormatter().string(from: Date()), objects: objects, recipes: 0, lookups: lookups)
        // One model for every open: object IDs belong to the model they were made with.
        let model = try makeBenchModel()
        for run in 0..<max(1, repeats) {
            progress("reads: run \(run + 1)/\(repeats)")
            var coordinator: PersistentStoreCoordinator!
            let open = try seconds {
                coordinator = PersistentStoreCoordinator(model: model)
                try coordinator.addPersistentStore(.log, directory: path)
            }
            report.openMilliseconds.append(open * 1000)
            let setup = ManagedObjectContext(.privateQueue, coordinator: coordinator)
            var ids = try setup.performAndWait { try setup.fetchObjectIDs(FetchRequest<BenchRecipe>()) }
            report.recipes = ids.count
            var generator = SystemRandomNumberGenerator()
            ids.shuffle(using: &generator)
            let sample = Array(ids.prefix(lookups))
            try coordinator.close()

            // Cold: a freshly opened store, empty row cache; warm: again, in a new context.
            coordinator = PersistentStoreCoordinator(model: model)
            try coordinator.addPersistentStore(.log, directory: path)
            for warm in [false, true] {
                let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
                let elapsed = try seconds {
                    try context.performAndWait {
                        for id in sample { _ = try (context.existingObject(with: id) as? BenchRecipe)?.servings }
                    }
                }
                if warm { report.byIDWarmPerSecond.append(Double(sample.count) / elapsed) } else { report.byIDColdPerSecond.append(Double(sample.count) / elapsed) }
            }
            let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
            var matched = 0
            let elapsed = try seconds {
                matched = try context.performAndWait { try context.count(for: FetchRequest<BenchRecipe>(predicate: #Predicate { $0.servings > 3 })) }
            }
            report.byPredicateMatched = matched
            report.byPredicateScannedPerSecond.append(Double(report.recipes) / elapsed)
            try coordinator.close()
        }
        var table = Table("Reads of \(thousands(Double(objects))) imported objects (\(thousands(Double(report.recipes))) recipes), median of \(repeats), \(report.date)", "Figure")
        table.add("cold open of the store", fixed(median(report.openMilliseconds), 1) + " ms")
        table.add("fetch \(thousands(Double(min(lookups, report.recipes)))) recipes by ID, freshly opened store", thousands(median(report.byIDColdPerSecond)) + " obj/s")
        table.add("  same, warm (new context, row cache filled)", thousands(median(report.byIDWarmPerSecond)) + " obj/s")
        table.add("fetch recipes by predicate (servings > 3), scanned", thousands(median(report.byPredicateScannedPerSecond)) + " obj/s")
        table.add("  matched", thousands(Double(report.byPredicateMatched)))
        print(table.render())
        if let json { try writeJSON(report, to: json) }
    }
}

/// Imports `objects` objects (recipes with `ingredientsPerRecipe`
/// ingredients each) into a new store at `path` from a private context,
/// saving every `saveEvery`.
func importStore(objects: Int, ingredientsPerRecipe: Int = 3, saveEvery: Int = 2_000, at path: String, model: ManagedObjectModel? = nil) throws {
    let coordinator = PersistentStoreCoordinator(model: try model ?? makeBenchModel())
    try coordinator.addPersistentStore(.log, directory: path)
    let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
    var offset = 0
    while offset < objects {
        let count = min(saveEvery, objects - offset)
        try context.performAndWait {
            insertObjects(count, ingredientsPerRecipe: ingredientsPerRecipe, into: context, offset: offset)
            try context.save()
        }
        offset += count
    }
    try coordinator.close()
}

func writeJSON(_ value: some Encodable, to path: String) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    try encoder.encode(value).write(to: URL(fileURLWithPath: path))
}
