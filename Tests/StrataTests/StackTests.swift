import Dispatch
import Foundation
import Strata
import StrataStore
import Testing

/// Marks the main queue so a test can ask "am I on it" as a queue question.
private let mainQueueMarker: DispatchSpecificKey<Bool> = {
    let key = DispatchSpecificKey<Bool>()
    DispatchQueue.main.setSpecific(key: key, value: true)
    return key
}()

private func onMainQueue() -> Bool { DispatchQueue.getSpecific(key: mainQueueMarker) == true }

/// `@unchecked Sendable`: `value` is guarded by `lock`.
private final class Box<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var _value: T
    init(_ value: T) { _value = value }
    var value: T {
        get { lock.withLock { _value } }
        set { lock.withLock { _value = newValue } }
    }
}

private func batches(_ container: PersistentContainer) -> Int {
    container.coordinator.storeStatistics?.batchesWritten ?? -1
}

/// Contract C16–C18: the recommended stack, ready-made in
/// `PersistentContainer`, end to end on disk.
///
/// Anything that may wait for the main queue (a save into the view context,
/// `save(wait: true)`) runs on a dedicated thread or through the async
/// `perform`: blocking one of Swift's two cooperative threads on the main
/// queue would starve the tests running beside this one.
@Suite struct StackTests {
    /// C16: the writer owns the coordinator, the main-queue view context
    /// is its child; saving the view context is an in-memory hand-off, the
    /// writer's save is the one disk write; `save(wait: true)` returns durable.
    @Test("C16: saving the view context writes nothing; the writer's save is one batch")
    func viewSaveIsInMemoryWriterSaveHitsDisk() async throws {
        let directory = TemporaryDirectory()
        let model = makeModel()
        let container = try PersistentContainer(name: "Recipes", model: model, directory: directory.path + "/store", options: testStoreOptions())
        #expect(container.writerContext.concurrencyType == .privateQueue)
        #expect(container.writerContext.parent == nil)
        #expect(container.viewContext.concurrencyType == .mainQueue)
        #expect(container.viewContext.parent === container.writerContext)

        let view = container.viewContext
        let before = batches(container)
        try await view.perform {
            let soup = Recipe(context: view)
            soup.name = "Soup"
            try view.save()
        }
        #expect(batches(container) == before)  // in memory only
        let writer = container.writerContext
        #expect(writer.performAndWait { writer.hasChanges })

        await runOnDedicatedThread { container.save(wait: true) }
        #expect(batches(container) == before + 1)
        #expect(!writer.performAndWait { writer.hasChanges })
        let closed = await runOnDedicatedThread { Result { () throws(StrataError) in try container.close() } }
        try closed.get()

        let reopened = try PersistentContainer(name: "Recipes", model: model, directory: directory.path + "/store", options: testStoreOptions())
        let names = try await reopened.performBackgroundTask { context in
            try context.fetch(FetchRequest<Recipe>()).map(\.name)
        }
        #expect(names == ["Soup"])
    }

    /// C16: the non-blocking save returns after the hand-off; its
    /// completion reports the disk save, which is then durable.
    @Test("C16: save(wait: false) completes after the disk save")
    func nonBlockingSaveCompletes() async throws {
        let directory = TemporaryDirectory()
        let container = try PersistentContainer(name: "Recipes", model: makeModel(), directory: directory.path + "/store", options: testStoreOptions())
        let view = container.viewContext
        await view.perform {
            let soup = Recipe(context: view)
            soup.name = "Soup"
        }
        let result = Box<Result<Void, StrataError>?>(nil)
        container.save(wait: false) { result.value = $0 }
        let finished = await eventually(10) { result.value != nil }
        #expect(finished)
        if case .failure(let error) = result.value { Issue.record("save failed: \(error)") }
        #expect(batches(container) >= 2)  // the model record, then the save
        let fresh = ManagedObjectContext(.privateQueue, coordinator: container.coordinator)
        #expect(try fresh.performAndWait { try fresh.count(for: FetchRequest<Recipe>()) } == 1)
    }

    /// C17: a private import child of the main context saves into it,
    /// the main context into the writer, the writer to disk; the data is there
    /// after reopening, relationships and all. Only the writer's saves write.
    @Test("C17: import child → main → writer → disk, then reopen")
    func importThroughTheStack() async throws {
        let directory = TemporaryDirectory()
        let model = makeModel()
        let container = try PersistentContainer(name: "Recipes", model: model, directory: directory.path + "/store", options: testStoreOptions())
        let view = container.viewContext, writer = container.writerContext
        let importer = container.newBackgroundContext()
        #expect(importer.parent === view)
        for round in 0..<3 {
            let before = batches(container)
            try await importer.perform {
                for i in 0..<50 {
                    let recipe = Recipe(context: importer)
                    recipe.name = "Recipe \(round)-\(i)"
                    let ingredient = Ingredient(context: importer)
                    ingredient.name = "Salt"
                    ingredient.recipe = recipe
                }
                try importer.save()
            }
            #expect(await view.perform { view.hasChanges })
            try await view.perform { try view.save() }
            #expect(batches(container) == before)  // main → writer is in memory
            try await writer.perform { try writer.save() }
            #expect(batches(container) == before + 1)
        }
        let closed = await runOnDedicatedThread { Result { () throws(StrataError) in try container.close() } }
        try closed.get()
        let reopened = try PersistentContainer(name: "Recipes", model: model, directory: directory.path + "/store", options: testStoreOptions())
        let (recipes, linked) = try await reopened.performBackgroundTask { context in
            let recipes = try context.fetch(FetchRequest<Recipe>())
            return (recipes.count, recipes.filter { $0.ingredients.count == 1 && $0.ingredients.first?.recipe === $0 }.count)
        }
        #expect(recipes == 150)
        #expect(linked == 150)
    }

    /// C17: the main queue's share of an import is bounded per save: after
    /// each round is saved through, the main context no longer holds the
    /// round's objects (nothing else references them), so its tables — and
    /// the work of its next save — do not grow with the import.
    @Test("C17: the main context does not accumulate an import's objects")
    func mainContextStaysSmall() async throws {
        let container = try PersistentContainer(name: "Recipes", model: makeModel(), directory: nil)
        let view = container.viewContext
        let importer = container.newBackgroundContext()
        var held: [Int] = []
        for round in 0..<4 {
            try await importer.perform {
                for i in 0..<200 {
                    let recipe = Recipe(context: importer)
                    recipe.name = "Recipe \(round)-\(i)"
                }
                try importer.save()
            }
            try await view.perform { try view.save() }
            held.append(await view.perform { view.registeredObjects.count })
        }
        #expect(held.allSatisfy { $0 <= 200 }, "registered objects per round: \(held)")
        let importerHeld = await importer.perform { importer.registeredObjects.count }
        #expect(importerHeld == 0)
    }

    /// C17: the main context's save into the writer does no disk I/O (no
    /// log write, no fsync), even with a store that syncs every write.
    @Test("C17: the main context's save does no disk I/O")
    func mainSaveDoesNoIO() async throws {
        let directory = TemporaryDirectory()
        var options = StoreOptions()
        options.syncMode = .always
        let container = try PersistentContainer(name: "Recipes", model: makeModel(), directory: directory.path + "/store", options: options)
        let before = container.coordinator.storeStatistics
        let view = container.viewContext
        try await view.perform {
            for i in 0..<100 {
                let recipe = Recipe(context: view)
                recipe.name = "Recipe \(i)"
            }
            try view.save()
        }
        let after = container.coordinator.storeStatistics
        #expect(after?.logSyncs == before?.logSyncs)
        #expect(after?.logBytesWritten == before?.logBytesWritten)
        await runOnDedicatedThread { container.save(wait: true) }
        #expect((container.coordinator.storeStatistics?.logSyncs ?? 0) > (before?.logSyncs ?? 0))
    }

    /// C18: the block runs off the main queue on a fresh private context,
    /// its changes reach the store, the completion runs on the main queue.
    @Test("C18: a save block runs off the main queue and completes on it")
    func saveBlock() async throws {
        _ = mainQueueMarker
        let container = try PersistentContainer(name: "Recipes", model: makeModel(), directory: nil)
        let blockOnMain = Box<Bool?>(nil)
        let blockContext = Box<ManagedObjectContext.ConcurrencyType?>(nil)
        let completionOnMain = Box<Bool?>(nil)
        let result = Box<Result<BlockSaveResult, any Error>?>(nil)
        container.save { context in
            blockOnMain.value = onMainQueue()
            blockContext.value = context.concurrencyType
            let soup = Recipe(context: context)
            soup.name = "Soup"
        } completion: { outcome in
            completionOnMain.value = onMainQueue()
            result.value = outcome
        }
        #expect(await eventually(10) { result.value != nil })
        #expect(blockOnMain.value == false)
        #expect(blockContext.value == .privateQueue)
        #expect(completionOnMain.value == true)
        guard case .success(.saved(let changes)) = result.value else {
            Issue.record("expected .saved, got \(String(describing: result.value))")
            return
        }
        #expect(changes.inserted.count == 1)
        let fresh = ManagedObjectContext(.privateQueue, coordinator: container.coordinator)
        #expect(try fresh.performAndWait { try fresh.fetch(FetchRequest<Recipe>()).map(\.name) } == ["Soup"])
    }

    /// C18: with no changes the completion still runs, saying so; a
    /// failed save reports its error, and nothing reaches the store.
    @Test("C18: a block with no changes, and a failing block, still complete")
    func saveBlockWithoutChangesAndWithErrors() async throws {
        let container = try PersistentContainer(name: "Recipes", model: makeModel(), directory: nil)
        let empty = Box<Result<BlockSaveResult, any Error>?>(nil)
        container.save { _ in } completion: { empty.value = $0 }
        #expect(await eventually(10) { empty.value != nil })
        #expect(empty.value.flatMap { try? $0.get() } == .nothingToSave)

        let failed = Box<Result<BlockSaveResult, any Error>?>(nil)
        container.save { context in
            _ = Recipe(context: context)  // `name` is required and unset
        } completion: { failed.value = $0 }
        #expect(await eventually(10) { failed.value != nil })
        guard case .failure(let error) = failed.value else {
            Issue.record("expected a failure, got \(String(describing: failed.value))")
            return
        }
        #expect((error as? StrataError)?.code == .validationFailed, "\(error)")
        let fresh = ManagedObjectContext(.privateQueue, coordinator: container.coordinator)
        #expect(try fresh.performAndWait { try fresh.count(for: FetchRequest<Recipe>()) } == 0)
    }

    /// C18: the blocking form returns once the changes are stored.
    @Test("C18: saveAndWait stores the block's changes before returning")
    func saveAndWaitStores() throws {
        let container = try PersistentContainer(name: "Recipes", model: makeModel(), directory: nil)
        let result = try container.saveAndWait { context in
            let soup = Recipe(context: context)
            soup.name = "Soup"
        }
        guard case .saved(let changes) = result else { Issue.record("expected .saved"); return }
        #expect(changes.inserted.count == 1)
        let fresh = ManagedObjectContext(.privateQueue, coordinator: container.coordinator)
        #expect(try fresh.performAndWait { try fresh.count(for: FetchRequest<Recipe>()) } == 1)
        #expect(try container.saveAndWait { _ in } == .nothingToSave)
    }
}
