import ArgumentParser
import Dispatch
import Foundation
import Strata
import StrataStore

/// `strata-bench compaction`: the space an import leaves behind after its
/// objects are updated and deleted, what compaction reclaims, how long it
/// takes, and how late the main queue runs meanwhile.
struct CompactionCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compaction",
        abstract: "Space before and after compacting an updated and thinned store, time, main-queue stall meanwhile."
    )

    @Option(help: "Objects imported first (recipes plus their ingredients).") var objects = 200_000
    @Option(help: "Keep the store in this directory (default: a temporary one, removed after).") var store: String?
    @Option(help: "Write every figure to this JSON file.") var json: String?

    struct Report: Codable, Sendable {
        var date: String
        var objects: Int
        var bytesBefore: UInt64
        var bytesAfter: UInt64
        var seconds: Double
        var stall: StallFigures
        var liveObjects: Int
    }

    func run() throws {
        let work = try WorkDirectory(store, scenario: "compaction")
        defer { work.cleanUp() }
        let root = work.path
        let path = root + "/store"
        let objects = objects
        let report = try MainThreadDriver.run { () throws -> Report in
            progress("compaction: importing \(objects) objects, then updating every recipe and deleting a quarter ...")
            try importStore(objects: objects, at: path)
            let coordinator = PersistentStoreCoordinator(model: try makeBenchModel())
            try coordinator.addPersistentStore(.log, directory: path)
            defer { try? coordinator.close() }
            let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
            try context.performAndWait {
                let recipes = try context.fetch(FetchRequest<BenchRecipe>())
                for (i, recipe) in recipes.enumerated() {
                    recipe.rating += 1
                    if i % 4 == 0 { context.delete(recipe) }  // cascades to its ingredients
                    if i % 2_000 == 1_999 { try context.save() }
                }
                try context.save()
            }
            let before = directorySize(path)
            progress("compaction: compacting ...")
            let probe = StallProbe()
            probe.startProbing()
            let elapsed = try seconds { try coordinator.compactStore() }
            let stall = probe.stopProbing()
            let after = directorySize(path)
            let check = ManagedObjectContext(.privateQueue, coordinator: coordinator)
            let live = try check.performAndWait {
                try check.count(for: FetchRequest<BenchRecipe>()) + check.count(for: FetchRequest<BenchIngredient>())
            }
            return Report(date: ISO8601DateFormatter().string(from: Date()), objects: objects, bytesBefore: before,
                          bytesAfter: after, seconds: elapsed, stall: stall, liveObjects: live)
        }.get()
        var table = Table("Compaction after updating every recipe and deleting a quarter, \(report.date)", "Figure")
        table.add("store bytes before", thousands(Double(report.bytesBefore)))
        table.add("store bytes after", thousands(Double(report.bytesAfter)))
        table.add("compaction time", fixed(report.seconds * 1000, 1) + " ms")
        table.add("longest main-queue stall meanwhile", fixed(report.stall.max, 2) + " ms")
        table.add("objects still stored (checked)", thousands(Double(report.liveObjects)))
        print(table.render())
        if let json { try writeJSON(report, to: json) }
    }
}
