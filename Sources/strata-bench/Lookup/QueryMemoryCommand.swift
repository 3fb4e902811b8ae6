import ArgumentParser
import Foundation
@_spi(Benchmarks) import Strata
import StrataStore

/// A query process's memory: a fresh process opens a store of recipes
/// whose names are indexed, runs a mixed query run from a fresh background
/// context per query (the way a server or a tool reads), and reports its
/// resident memory beside what the caches are allowed to hold. Run by
/// `strata-bench lookup` in a process of its own over its indexed store.
struct QueryMemoryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query-memory",
        abstract: "A query process's resident memory after a mixed query run over a store of indexed recipes, beside the caches' budgets.",
        shouldDisplay: false
    )

    @Option(help: "The store: recipes with `name` indexed (as `lookup` makes them).") var store: String
    @Option(help: "Recipes in the store.") var objects = 1_000_000

    /// What the child process reports, one line of JSON on standard output.
    struct Figures: Codable, Sendable {
        var residentMB: Double
        var residentTrimmedMB: Double
        var rowCacheBudgetMB: Double
        var rowCacheMB: Double
        var blockCacheBudgetMB: Double
        var indexMB: Double
        var queries: Int
        var seconds: Double
        /// Twice what the caches may hold and the index takes: the bound.
        var boundMB: Double { 2 * (rowCacheBudgetMB + blockCacheBudgetMB + indexMB) }
    }

    func run() throws {
        let model = try makeBenchModel(recipeIndexes: [IndexDescription("name")])
        let options = StoreOptions()
        let container = try PersistentContainer(name: "Query", model: model, directory: store, options: options, viewContext: .privateQueue)
        var random = SplitMix64(seed: 7)
        let count = objects
        func randomName() -> String { "Recipe \(Int(random.next() % UInt64(count)))" }
        var queries = 0
        let elapsed = try seconds {
            // Lookups by name through the index, a context each.
            for _ in 0..<10_000 {
                let name = randomName()
                let context = container.newBackgroundContext(childOfWriter: true)
                let found = try context.performAndWait { try BenchRecipe.first(in: context, where: #Predicate { $0.name == name }) != nil }
                guard found else { throw ValidationError("\(name) not found") }
                queries += 1
            }
            // An IN of 10,000 names, a page in name order, a count over a
            // scan and a filter over a scan in one context; then every
            // object as faults with each name read, in another.
            let names = (0..<10_000).map { _ in randomName() }
            let context = container.newBackgroundContext(childOfWriter: true)
            try context.performAndWait {
                let matched = try context.fetch(FetchRequest<BenchRecipe>(predicate: #Predicate { names.contains($0.name) })).count
                guard matched == Set(names).count else { throw ValidationError("the IN fetch found \(matched)") }
                var page = FetchRequest<BenchRecipe>(sortBy: [SortDescriptor(\.name)])
                page.fetchOffset = count / 2
                page.fetchLimit = 50
                guard try context.fetch(page).count == 50 else { throw ValidationError("the page is short") }
                _ = try context.count(for: FetchRequest<BenchRecipe>(predicate: #Predicate { $0.servings > 2 }))
                _ = try context.fetch(FetchRequest<BenchRecipe>(predicate: #Predicate { $0.rating > 4.5 })).count
            }
            queries += 4
            let all = container.newBackgroundContext(childOfWriter: true)
            let read = try all.performAndWait { try all.fetch(FetchRequest<BenchRecipe>()).reduce(0) { $0 &+ $1.name.utf8.count } }
            guard read > 0 else { throw ValidationError("no names read") }
            queries += 1
        }
        // The contexts above let go of their objects: a hand-back of free
        // pages that scheduled runs on its own queue; read after it.
        waitForScheduledMemoryHandBack()
        let resident = ResidentMemory.megabytes()
        let statistics = container.coordinator.storeStatistics ?? StoreStatistics()
        let figures = Figures(
            residentMB: resident, residentTrimmedMB: ResidentMemory.trimmedMegabytes(),
            rowCacheBudgetMB: Double(container.coordinator.rowCacheBudget) / 1_048_576,
            rowCacheMB: Double(container.coordinator.rowCacheStatistics.bytes) / 1_048_576,
            blockCacheBudgetMB: Double(options.blockCacheCapacity) / 1_048_576,
            indexMB: Double(statistics.indexBytes) / 1_048_576, queries: queries, seconds: elapsed)
        try container.close()
        let data = try JSONEncoder().encode(figures)
        print(String(decoding: data, as: UTF8.self))
    }

    /// Runs this command in a process of its own over `store` and returns
    /// what it reports.
    static func inChildProcess(store: String, objects: Int) throws -> Figures {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe")
        process.arguments = ["query-memory", "--store", store, "--objects", String(objects)]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw ValidationError("query-memory exited with status \(process.terminationStatus)") }
        guard let line = String(decoding: data, as: UTF8.self).split(separator: "\n").last else { throw ValidationError("query-memory printed nothing") }
        return try JSONDecoder().decode(Figures.self, from: Data(line.utf8))
    }
}
