import Dispatch
import Foundation
import Strata
import StrataStore

/// The stack layouts `strata-bench stall` imports through.
enum ImportLayout: String, CaseIterable, Codable, Sendable {
    /// (a) one `.mainQueue` context attached to the coordinator: the import
    /// and every save to disk run on the main queue — the naive baseline.
    case naive
    /// (b) the recommended stack: a private import child of the main context →
    /// main → private writer → disk, saving every K objects. The raw value is
    /// the spelling `--layout`, the JSON reports and their tests use.
    case viewChildStack = "view-child"
    /// (c) the import as a private child of the writer; the main context
    /// merges the writer's changes by itself.
    case writerChild = "writer-child"
    /// One private context attached to the coordinator: no main queue
    /// involved, the like-for-like comparison with SQLite.
    case privateContext = "private-context"

    /// The layouts of the stall table.
    static let stallLayouts: [ImportLayout] = [.naive, .viewChildStack, .writerChild]

    var title: String {
        switch self {
        case .naive: "(a) main context on the coordinator"
        case .viewChildStack: "(b) import child -> main -> writer -> disk"
        case .writerChild: "(c) import child of writer, merged into main"
        case .privateContext: "Strata, private context on the coordinator"
        }
    }
}

/// One import's figures.
struct ImportRun: Codable, Sendable {
    var layout: String
    /// Which round of `strata-bench stall --repeats` this was (from 0).
    var round = 0
    var objects: Int
    var saveEvery: Int
    var seconds: Double
    var objectsPerSecond: Double
    var stall: StallFigures
    /// CPU the main thread used during the import, the probe's ticks
    /// included (the private-context layout's figure is the probe alone).
    var mainThreadCPUms: Double
    var bytesWritten: UInt64
    var fsyncs: Int
}

/// Imports `objects` recipe-like objects (recipes with `ingredients` each)
/// into a fresh store at `directory` through `layout`, saving every
/// `saveEvery` objects, while a ``StallProbe`` watches the main queue. Runs on a
/// worker thread; the main thread must be spinning the main run loop. With
/// `observing`, a ``FetchedResultsController`` in the main context follows
/// the imported recipes, newest first (a list on screen), throughout: it must
/// hold every one of them at the end.
func runImport(layout: ImportLayout, objects: Int, saveEvery: Int, ingredients: Int, directory: String, observing: Bool = false) throws -> ImportRun {
    let coordinator = PersistentStoreCoordinator(model: try makeBenchModel())
    try coordinator.addPersistentStore(.log, directory: directory)
    defer { try? coordinator.close() }
    let before = coordinator.storeStatistics
    let probe = StallProbe()
    probe.startProbing()
    let cpuBefore = MainThreadDriver.mainThreadCPUMilliseconds() ?? 0
    let started = DispatchTime.now().uptimeNanoseconds
    let chunks = stride(from: 0, to: objects, by: saveEvery).map { min(saveEvery, objects - $0) }
    var offset = 0
    switch layout {
    case .naive, .privateContext:
        let context = ManagedObjectContext(layout == .naive ? .mainQueue : .privateQueue, coordinator: coordinator, name: "import")
        for count in chunks {
            try context.performAndWait {
                insertObjects(count, ingredientsPerRecipe: ingredients, into: context, offset: offset)
                try context.save()
            }
            offset += count
        }
    case .viewChildStack, .writerChild:
        let viewChild = layout == .viewChildStack
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "writer")
        let main = ManagedObjectContext(.mainQueue, parent: writer, name: "main")
        main.automaticallyMergesChangesFromParent = !viewChild
        let importer = ManagedObjectContext(.privateQueue, parent: viewChild ? main : writer, name: "import")
        let failure = FailureBox()
        let controller = observing ? try main.performAndWait { () throws -> FetchedResultsController<BenchRecipe> in
            let controller = try FetchedResultsController(
                fetchRequest: FetchRequest<BenchRecipe>(sortBy: [SortDescriptor(\.created, order: .reverse)]), context: main)
            try controller.performFetch()
            return controller
        } : nil
        for count in chunks {
            try importer.performAndWait {
                insertObjects(count, ingredientsPerRecipe: ingredients, into: importer, offset: offset)
                try importer.save()
            }
            if viewChild { try main.performAndWait { try main.save() } }
            writer.perform { do { try writer.save() } catch { failure.set(error) } }
            offset += count
        }
        try writer.performAndWait { try writer.save() }
        main.performAndWait {}  // the merges queued on the main queue have run
        try failure.check()
        if let controller {
            let recipes = (objects + ingredients) / (ingredients + 1)
            let deadline = Date().addingTimeInterval(30)
            // Its last differences are computed off the main queue, then taken in there.
            while main.performAndWait({ controller.objectIDs.count }) < recipes && Date() < deadline { usleep(1_000) }
            let held = main.performAndWait { controller.objectIDs.count }
            guard held == recipes else { throw ImportCheckFailure(description: "the controller holds \(held) recipes of \(recipes)") }
        }
    }
    let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
    let mainThreadCPUms = (MainThreadDriver.mainThreadCPUMilliseconds() ?? 0) - cpuBefore
    let stall = probe.stopProbing()
    // Everything imported must be in the store.
    try checkStored(objects, in: coordinator, by: layout.rawValue)
    let after = coordinator.storeStatistics
    return ImportRun(
        layout: layout.rawValue, round: 0, objects: objects, saveEvery: saveEvery, seconds: seconds,
        objectsPerSecond: Double(objects) / seconds, stall: stall, mainThreadCPUms: mainThreadCPUms,
        bytesWritten: (after?.logBytesWritten ?? 0) &- (before?.logBytesWritten ?? 0),
        fsyncs: (after?.logSyncs ?? 0) - (before?.logSyncs ?? 0))
}

struct ImportCheckFailure: Error, CustomStringConvertible {
    let description: String
}

/// Throws unless the store holds exactly `objects` recipes and ingredients
/// (`what` names the import in the error).
func checkStored(_ objects: Int, in coordinator: PersistentStoreCoordinator, by what: String) throws {
    let check = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "check")
    let stored = try check.performAndWait {
        try check.count(for: FetchRequest<BenchRecipe>()) + check.count(for: FetchRequest<BenchIngredient>())
    }
    guard stored == objects else {
        throw ImportCheckFailure(description: "\(what): \(stored) of \(objects) objects reached the store")
    }
}

/// The first error of asynchronous writer saves.
///
/// `@unchecked Sendable`: `error` is guarded by `lock`.
final class FailureBox: @unchecked Sendable {
    private let lock = NSLock()
    private var error: (any Error)?
    func set(_ error: any Error) { lock.withLock { if self.error == nil { self.error = error } } }
    func check() throws { if let error = lock.withLock({ self.error }) { throw error } }
}
