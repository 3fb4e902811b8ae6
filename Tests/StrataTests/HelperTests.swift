import Dispatch
import Foundation
import Strata
import StrataStore
import Testing

// Contract C18 and MagicalRecord's helpers: the default context, block
// saves, context factories, `object.in(context)` and the typed finders.
// Contract C1–C2 (which queue), C9 and C13 (parents), C14–C15 (IDs) are
// checked where the helpers lean on them.
//
// As in StackTests, anything that may wait for the main queue runs on it (via
// `DispatchQueue.main.async`), on a dedicated thread, or through the async
// `perform`: never blocking a cooperative thread on the main queue.

/// Marks the main queue so a test can ask "am I on it" as a queue question.
private let mainQueueMarker: DispatchSpecificKey<Bool> = {
    let key = DispatchSpecificKey<Bool>()
    DispatchQueue.main.setSpecific(key: key, value: true)
    return key
}()

private func onMainQueue() -> Bool { DispatchQueue.getSpecific(key: mainQueueMarker) == true }

/// Runs `body` on the main queue and hands back its value.
private func runOnMainQueue<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        DispatchQueue.main.async { continuation.resume(returning: body()) }
    }
}

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

/// The error code `body` throws, or nil when it does not throw.
private func thrownCode<T>(_ body: () throws(StrataError) -> T) -> StrataError.Code? {
    do throws(StrataError) {
        _ = try body()
        return nil
    } catch {
        return error.code
    }
}

/// A container with `count` recipes saved to its store: "Recipe 0" … with
/// servings 0, 1, 2, … and every even one vegetarian.
private func populatedContainer(_ count: Int) throws -> PersistentContainer {
    let container = try PersistentContainer(name: "Recipes", model: makeModel(), directory: nil)
    let writer = container.writerContext
    try writer.performAndWait { () throws(StrataError) in
        for i in 0..<count {
            let recipe = Recipe(context: writer)
            recipe.name = "Recipe \(i)"
            recipe.servings = i
            recipe.vegetarian = i % 2 == 0
        }
        try writer.save()
    }
    return container
}

@Suite struct HelperTests {

    // MARK: Context factories

    /// C18 (MagicalRecord's factories) over C1–C2, C4 and C9: each
    /// factory's concurrency type and parent; a `newContext()` save is an
    /// in-memory hand-off to its parent.
    @Test("C18: the context factories make the documented types with the documented parents")
    func factories() async throws {
        let container = try PersistentContainer(name: "Recipes", model: makeModel(), directory: nil)
        let editor = try container.newContext()
        #expect(editor.concurrencyType == .privateQueue)
        #expect(editor.parent === container.viewContext)
        let scratch = try container.newContext(parent: editor)
        #expect(scratch.concurrencyType == .privateQueue)
        #expect(scratch.parent === editor)
        let onWriter = try container.newContext(parent: container.writerContext)
        #expect(onWriter.parent === container.writerContext)

        let screen = container.newMainQueueContext()
        #expect(screen.concurrencyType == .mainQueue)
        #expect(screen.parent === container.writerContext)
        #expect(screen.automaticallyMergesChangesFromParent)

        let importer = container.newPrivateQueueContext()
        #expect(importer.concurrencyType == .privateQueue)
        #expect(importer.parent === container.writerContext)
        #expect(!importer.automaticallyMergesChangesFromParent)

        // C9: a save of the new context lands in its parent, not on disk.
        try await scratch.perform {
            let soup = Recipe(context: scratch)
            soup.name = "Soup"
            try scratch.save()
        }
        #expect(await editor.perform { editor.hasChanges })
        #expect(await container.viewContext.perform { !container.viewContext.hasChanges })
    }

    /// C3–C4: a `.confinement` parent is refused with a typed error (not
    /// the initializer's trap), and so is a parent of another coordinator.
    @Test("C3–C4: newContext(parent:) refuses a confinement parent and a foreign parent")
    func factoryMisuse() throws {
        let container = try PersistentContainer(name: "Recipes", model: makeModel(), directory: nil)
        let confined = ManagedObjectContext(.confinement, coordinator: container.coordinator, name: "Confined")
        #expect(thrownCode { () throws(StrataError) in try container.newContext(parent: confined) } == .contextMisuse)
        let other = try PersistentContainer(name: "Other", model: makeModel(), directory: nil)
        #expect(thrownCode { () throws(StrataError) in try container.newContext(parent: other.viewContext) } == .invalidArgument)
    }

    // MARK: object.in(context)

    /// C14: an object saved only into its parent still has a temporary
    /// ID; `in(_:)` makes it permanent first (on the object's queue), then
    /// resolves it in a sibling context, which sees the same values.
    @Test("C14: in(_:) makes a temporary ID permanent, then resolves it in a sibling")
    func inContextWithTemporaryID() throws {
        let container = try PersistentContainer(name: "Recipes", model: makeModel(), directory: nil)
        let first = container.newPrivateQueueContext(name: "First")
        let second = container.newPrivateQueueContext(name: "Second")
        let (wasTemporary, isTemporaryAfter, resolvedID) = try first.performAndWait { () throws(StrataError) in
            let soup = Recipe(context: first)
            soup.name = "Soup"
            soup.servings = 3
            try first.save()  // into the writer: the ID stays temporary (contract C14)
            let wasTemporary = soup.objectID.isTemporaryID
            let local = try soup.in(second)
            let resolvedID = second.performAndWait { local.objectID }
            return (wasTemporary, soup.objectID.isTemporaryID, resolvedID)
        }
        #expect(wasTemporary)
        #expect(!isTemporaryAfter)
        #expect(!resolvedID.isTemporaryID)
        let (name, servings, owner) = second.performAndWait {
            let local = second.object(with: resolvedID) as! Recipe
            return (local.name, local.servings, local.managedObjectContext === second)
        }
        #expect(name == "Soup")
        #expect(servings == 3)
        #expect(owner)
    }

    /// C14: `in(_:)` of an object with a permanent ID gives the target's
    /// registered object when there is one — never a second copy — and the
    /// same object however often it is asked; the result belongs to the target.
    @Test("C14: in(_:) does not duplicate objects; permanent IDs resolve as they are")
    func inContextDoesNotDuplicate() throws {
        let container = try populatedContainer(3)
        let source = container.newPrivateQueueContext(name: "Source")
        let target = container.newPrivateQueueContext(name: "Target")
        // Held, so that they stay registered (a context lets go of fetched
        // objects nobody references when the block ends).
        let all = try target.performAndWait { () throws(StrataError) in try Recipe.all(in: target) }
        defer { withExtendedLifetime(all) {} }
        let registeredBefore = target.performAndWait { target.registeredObjects.count }
        #expect(registeredBefore == 3)
        let outcome = try source.performAndWait { () throws(StrataError) in
            let recipe = try Recipe.first(in: source, where: #Predicate { $0.name == "Recipe 1" })!
            let permanent = !recipe.objectID.isTemporaryID
            let a = try recipe.in(target)
            let b = try recipe.in(target)
            let same = a === b
            let (registered, isFetched, context) = try target.performAndWait { () throws(StrataError) in
                let fetched = try Recipe.first(in: target, where: #Predicate { $0.name == "Recipe 1" })
                return (target.registeredObjects.count, fetched === a, a.managedObjectContext === target)
            }
            let toItself = try recipe.in(source) === recipe
            return (permanent, same, registered, isFetched, context, toItself)
        }
        #expect(outcome.0, "a stored object's ID is permanent")
        #expect(outcome.1, "two in(_:) calls gave two objects")
        #expect(outcome.2 == registeredBefore, "in(_:) registered a duplicate")
        #expect(outcome.3, "in(_:) did not return the target's registered object")
        #expect(outcome.4)
        #expect(outcome.5, "in(_:) into the object's own context must return the object")
    }

    /// C13 and C15: a child sees its parent's unsaved insert, so `in(_:)`
    /// finds it there; a sibling cannot, and says so with `.objectNotFound`.
    /// `in(_:perform:)` runs its body on the target's queue.
    @Test("C13, C15: in(_:) reaches a child through unsaved changes; a sibling gets objectNotFound")
    func inContextVisibility() throws {
        let container = try PersistentContainer(name: "Recipes", model: makeModel(), directory: nil)
        let parent = container.newPrivateQueueContext(name: "Parent")
        let child = try container.newContext(parent: parent, name: "Child")
        let sibling = container.newPrivateQueueContext(name: "Sibling")
        let (childName, bodyCouldFetch, siblingCode) = try parent.performAndWait { () throws(StrataError) in
            let soup = Recipe(context: parent)  // inserted, never saved
            soup.name = "Soup"
            let (childName, bodyCouldFetch) = try soup.in(child) { local throws(StrataError) in
                // Recipe.count(in:) throws .contextMisuse off the child's queue.
                (local.name, try Recipe.count(in: child) == 1)
            }
            let siblingCode = thrownCode { () throws(StrataError) in try soup.in(sibling) }
            return (childName, bodyCouldFetch, siblingCode)
        }
        #expect(childName == "Soup")
        #expect(bodyCouldFetch)
        #expect(siblingCode == .objectNotFound)
    }

    /// C15: `in(_:)` reads the object, so off its context's queue it
    /// throws `.contextMisuse` (before touching anything); other misuse is
    /// `.invalidArgument`: a context of another coordinator, an object in no context.
    @Test("C15: in(_:) misuse throws typed errors")
    func inContextMisuse() throws {
        let container = try populatedContainer(1)
        let source = container.newPrivateQueueContext(name: "Source")
        let target = container.newPrivateQueueContext(name: "Target")
        let escaped = try source.performAndWait { () throws(StrataError) in try Recipe.first(in: source)! }
        // Here, on a test thread: not the source's queue.
        #expect(thrownCode { () throws(StrataError) in try escaped.in(target) } == .contextMisuse)

        let other = try PersistentContainer(name: "Other", model: container.model, directory: nil)
        let foreign = other.newPrivateQueueContext()
        let code = source.performAndWait { thrownCode { () throws(StrataError) in try escaped.in(foreign) } }
        #expect(code == .invalidArgument)

        let entity = container.model.entity(named: "Recipe")!
        let loose = Recipe(entity: entity, insertInto: nil)
        #expect(thrownCode { () throws(StrataError) in try loose.in(target) } == .invalidArgument)
    }

    /// C22, documenting `in(_:)`'s rule 3: the object it returns belongs
    /// to the target; touching it on the caller's (the source's) queue traps
    /// under the debug switch.
    @Test("C22: the result of in(_:) used off the target's queue traps")
    func inContextResultOffTargetQueueTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            setenv("STRATA_CONCURRENCY_DEBUG", "1", 1)
            let container = try PersistentContainer(name: "Recipes", model: makeModel(), directory: nil)
            let source = container.newPrivateQueueContext(name: "Source")
            let target = container.newPrivateQueueContext(name: "HelperTarget")
            try source.performAndWait { () throws(StrataError) in
                let soup = Recipe(context: source)
                soup.name = "Soup"
                try source.save()
                let local = try soup.in(target)
                _ = local.name  // on the source's queue, not the target's
            }
        }
        guard let result else { return }
        let stderr = String(decoding: result.standardErrorContent, as: UTF8.self)
        #expect(stderr.contains("concurrency violation"), "stderr: \(stderr)")
        #expect(stderr.contains("'HelperTarget'"), "stderr: \(stderr)")
    }

    /// C18 (the MagicalRecord pattern): inside a blocking block save
    /// started on the main queue, `in(_:)` brings a view-context object into
    /// the block's context (the caller's main queue counts as entered, Rule 4,
    /// so reading the view-context object there is allowed); the change
    /// reaches the store.
    @Test("C18: saveAndWait from the main queue, with object.in(blockContext)")
    func saveAndWaitWithInContext() async throws {
        _ = mainQueueMarker
        let container = try PersistentContainer(name: "Recipes", model: makeModel(), directory: nil)
        let view = container.viewContext
        try await view.perform {
            let soup = Recipe(context: view)
            soup.name = "Soup"
            try view.save()  // into the writer, in memory
        }
        let outcome = await runOnMainQueue { () -> Result<(BlockSaveResult, Bool), any Error> in
            Result { () throws in
                let soup = try Recipe.first(in: view, where: #Predicate { $0.name == "Soup" })!
                let blockOnMain = Box<Bool?>(nil)
                let saved = try container.saveAndWait { context in
                    blockOnMain.value = onMainQueue()
                    let local = try soup.in(context)
                    local.servings = 6
                }
                return (saved, blockOnMain.value == true)
            }
        }
        let (saved, blockOnMain) = try outcome.get()
        guard case .saved(let changes) = saved else { Issue.record("expected .saved, got \(saved)"); return }
        #expect(changes.updated.count == 1)
        // The caller waits on the main queue, but the block runs on the private
        // context's queue (contract C18: off the main queue), even though the
        // view context's object is usable there through in(_:).
        #expect(!blockOnMain, "the blocking save ran its block on the main queue")
        let fresh = ManagedObjectContext(.privateQueue, coordinator: container.coordinator)
        let servings = try fresh.performAndWait { () throws(StrataError) in try Recipe.all(in: fresh).map(\.servings) }
        #expect(servings == [6])
    }

    // MARK: Finders

    /// C13: typed finders with `#Predicate` and `SortDescriptor`, in a
    /// child that also has unsaved inserts of its own.
    @Test("C13: all/first/count with predicates and sort descriptors")
    func finders() throws {
        let container = try populatedContainer(6)
        let context = container.newPrivateQueueContext()
        try context.performAndWait { () throws(StrataError) in
            let extra = Recipe(context: context)  // unsaved: the finders see it
            extra.name = "Extra"
            extra.servings = 10
            extra.vegetarian = true

            #expect(try Recipe.all(in: context).count == 7)
            #expect(try Recipe.count(in: context) == 7)
            let hearty = try Recipe.all(in: context, where: #Predicate { $0.servings > 3 }, sortedBy: [SortDescriptor(\.servings, order: .reverse)])
            #expect(hearty.map(\.name) == ["Extra", "Recipe 5", "Recipe 4"])
            let vegetarian = try Recipe.all(in: context, where: #Predicate { $0.vegetarian }, sortedBy: [SortDescriptor(\.name)])
            #expect(vegetarian.map(\.name) == ["Extra", "Recipe 0", "Recipe 2", "Recipe 4"])
            #expect(try Recipe.count(in: context, where: #Predicate { $0.vegetarian }) == 4)
            #expect(try Recipe.count(in: context, where: #Predicate { !$0.vegetarian && $0.servings >= 3 }) == 2)
            // Two keys: servings descending, then name ascending among equals.
            let twin = Recipe(context: context)
            twin.name = "Another"
            twin.servings = 5
            let ordered = try Recipe.all(in: context, where: #Predicate { $0.servings >= 4 },
                                         sortedBy: [SortDescriptor(\.servings, order: .reverse), SortDescriptor(\.name)])
            #expect(ordered.map(\.name) == ["Extra", "Another", "Recipe 5", "Recipe 4"])
            context.delete(twin)  // an unsaved insert: gone at once
            #expect(try Recipe.count(in: context) == 7)
            #expect(try Recipe.first(in: context, sortedBy: [SortDescriptor(\.servings)])?.name == "Recipe 0")
            #expect(try Recipe.first(in: context, sortedBy: [SortDescriptor(\.servings, order: .reverse)])?.name == "Extra")
            #expect(try Recipe.first(in: context, where: #Predicate { $0.name.starts(with: "Recipe") }, sortedBy: [SortDescriptor(\.name, order: .reverse)])?.name == "Recipe 5")
            #expect(try Recipe.first(in: context, where: #Predicate { $0.name == "Recipe 3" })?.servings == 3)
        }
    }

    /// Empty results: nothing matches, or the entity has no objects at all.
    @Test("C13: finders on empty results: [], nil, 0")
    func findersEmpty() throws {
        let container = try populatedContainer(3)
        let context = container.newPrivateQueueContext()
        try context.performAndWait { () throws(StrataError) in
            #expect(try Recipe.all(in: context, where: #Predicate { $0.servings > 100 }).isEmpty)
            #expect(try Recipe.first(in: context, where: #Predicate { $0.name == "Nothing" }, sortedBy: [SortDescriptor(\.name)]) == nil)
            #expect(try Recipe.count(in: context, where: #Predicate { $0.servings < 0 }) == 0)
            #expect(try Tag.all(in: context).isEmpty)
            #expect(try Tag.first(in: context) == nil)
            #expect(try Tag.count(in: context) == 0)
        }
    }

    /// C1: a finder called off its context's queue throws
    /// `.contextMisuse` (with or without the debug switch); the base class
    /// has no entity of its own: `.invalidArgument`.
    @Test("C1: finders off the context's queue throw contextMisuse; ManagedObject itself is invalidArgument")
    func findersMisuse() throws {
        let container = try populatedContainer(2)
        let context = container.newPrivateQueueContext(name: "Finders")
        #expect(thrownCode { () throws(StrataError) in try Recipe.all(in: context) } == .contextMisuse)
        #expect(thrownCode { () throws(StrataError) in try Recipe.first(in: context) } == .contextMisuse)
        #expect(thrownCode { () throws(StrataError) in try Recipe.count(in: context) } == .contextMisuse)
        let other = container.newPrivateQueueContext(name: "Other")
        let insideOther = other.performAndWait { thrownCode { () throws(StrataError) in try Recipe.count(in: context) } }
        #expect(insideOther == .contextMisuse)
        let base = context.performAndWait { thrownCode { () throws(StrataError) in try ManagedObject.all(in: context) } }
        #expect(base == .invalidArgument)
    }
}

/// The helpers that use `PersistentContainer.default`, a process-wide value:
/// serialized, and each test puts the value back. No other suite sets it.
@Suite(.serialized) struct DefaultContextHelperTests {
    /// C2 and C18: the default context is the default container's
    /// main-queue view context; without a default, default-context helpers
    /// throw `.noPersistentStore`.
    @Test("C2, C18: the default context is the default container's main-queue viewContext")
    func defaultContext() async throws {
        let previous = PersistentContainer.default
        defer { PersistentContainer.default = previous }

        PersistentContainer.default = nil
        #expect(ManagedObjectContext.default == nil)
        let withoutDefault = await runOnMainQueue { thrownCode { () throws(StrataError) in try Recipe.count() } }
        #expect(withoutDefault == .noPersistentStore)

        let container = try PersistentContainer(name: "Recipes", model: makeModel(), directory: nil)
        PersistentContainer.default = container
        #expect(PersistentContainer.default === container)
        #expect(ManagedObjectContext.default === container.viewContext)
        #expect(ManagedObjectContext.default?.concurrencyType == .mainQueue)
        // Set from another thread, seen here: the value is shared, not per thread.
        let other = try PersistentContainer(name: "Other", model: makeModel(), directory: nil)
        await runOnDedicatedThread { PersistentContainer.default = other }
        #expect(ManagedObjectContext.default === other.viewContext)
    }

    /// C2 and C13: the default-context finders work on the main queue
    /// (and inside the default context's block) and throw `.contextMisuse`
    /// anywhere else.
    @Test("C2: default-context finders run on the main queue only")
    func defaultFinders() async throws {
        let previous = PersistentContainer.default
        defer { PersistentContainer.default = previous }
        let container = try populatedContainer(4)
        PersistentContainer.default = container

        let onMain = await runOnMainQueue { () -> Result<([String], String?, Int, Int), StrataError> in
            Result { () throws(StrataError) in
                (try Recipe.all(where: #Predicate { $0.servings >= 2 }, sortedBy: [SortDescriptor(\.name, order: .reverse)]).map(\.name),
                 try Recipe.first(sortedBy: [SortDescriptor(\.servings, order: .reverse)])?.name,
                 try Recipe.count(),
                 try Recipe.count(where: #Predicate { $0.vegetarian }))
            }
        }
        let (names, top, total, vegetarian) = try onMain.get()
        #expect(names == ["Recipe 3", "Recipe 2"])
        #expect(top == "Recipe 3")
        #expect(total == 4)
        #expect(vegetarian == 2)
        #expect(await runOnMainQueue { (try? Recipe.first(where: #Predicate { $0.name == "None" })) == .some(nil) })

        // Inside a block of the default context also counts as on its queue.
        let view = container.viewContext
        let inBlock = await view.perform { (try? Recipe.count()) ?? -1 }
        #expect(inBlock == 4)

        // Off the main queue: a test thread, a dedicated thread, another context's block.
        #expect(thrownCode { () throws(StrataError) in try Recipe.all() } == .contextMisuse)
        #expect(thrownCode { () throws(StrataError) in try Recipe.first() } == .contextMisuse)
        #expect(thrownCode { () throws(StrataError) in try Recipe.count() } == .contextMisuse)
        let onThread = await runOnDedicatedThread { thrownCode { () throws(StrataError) in try Recipe.count() } }
        #expect(onThread == .contextMisuse)
        let background = container.newPrivateQueueContext()
        let inOtherBlock = await background.perform { thrownCode { () throws(StrataError) in try Recipe.count() } }
        #expect(inOtherBlock == .contextMisuse)
    }

    /// C18 through the default container, MagicalRecord's way: the block
    /// runs off the main queue on a fresh private context and edits an
    /// existing object found by ID; the completion runs on the main queue,
    /// where the default-context finders already see the change.
    @Test("C18: default container's save block: off main, completion on main sees the change")
    func defaultSaveBlock() async throws {
        _ = mainQueueMarker
        let previous = PersistentContainer.default
        defer { PersistentContainer.default = previous }
        let container = try populatedContainer(2)
        PersistentContainer.default = container
        let soupID = try await container.viewContext.perform { () throws(StrataError) in
            try Recipe.first(in: container.viewContext, where: #Predicate { $0.name == "Recipe 1" })!.objectID
        }

        let blockOnMain = Box<Bool?>(nil)
        let blockType = Box<ManagedObjectContext.ConcurrencyType?>(nil)
        let completionOnMain = Box<Bool?>(nil)
        let seenInCompletion = Box<[Int]?>(nil)
        let result = Box<Result<BlockSaveResult, any Error>?>(nil)
        PersistentContainer.default!.save { context in
            blockOnMain.value = onMainQueue()
            blockType.value = context.concurrencyType
            let local = try context.existingObject(with: soupID, as: Recipe.self)
            local.servings = 42
            let bread = Recipe(context: context)
            bread.name = "Bread"
        } completion: { outcome in
            completionOnMain.value = onMainQueue()
            seenInCompletion.value = try? Recipe.all(sortedBy: [SortDescriptor(\.name)]).map(\.servings)
            result.value = outcome
        }
        #expect(await eventually(10) { result.value != nil })
        #expect(blockOnMain.value == false)
        #expect(blockType.value == .privateQueue)
        #expect(completionOnMain.value == true)
        guard case .success(.saved(let changes)) = result.value else {
            Issue.record("expected .saved, got \(String(describing: result.value))")
            return
        }
        #expect(changes.inserted.count == 1)
        #expect(changes.updated.count == 1)
        #expect(seenInCompletion.value == [1, 0, 42])  // Bread (default 1), Recipe 0, Recipe 1
        let fresh = ManagedObjectContext(.privateQueue, coordinator: container.coordinator)
        let stored = try fresh.performAndWait { () throws(StrataError) in
            try Recipe.all(in: fresh, sortedBy: [SortDescriptor(\.name)]).map { "\($0.name)=\($0.servings)" }
        }
        #expect(stored == ["Bread=1", "Recipe 0=0", "Recipe 1=42"])
    }

    /// C18: with no changes the completion still runs on the main queue,
    /// saying so; a block that throws, or whose save fails, completes on the
    /// main queue with the error, and nothing reaches the store.
    @Test("C18: default container's save block: no changes and failures complete on main")
    func defaultSaveBlockNoChangesAndFailures() async throws {
        _ = mainQueueMarker
        let previous = PersistentContainer.default
        defer { PersistentContainer.default = previous }
        let container = try PersistentContainer(name: "Recipes", model: makeModel(), directory: nil)
        PersistentContainer.default = container
        struct Refused: Error {}

        let cases: [(String, @Sendable (ManagedObjectContext) throws -> Void)] = [
            ("nothing", { _ in }),
            ("invalid", { context in _ = Recipe(context: context) }),  // `name` unset
            ("throws", { context in
                Recipe(context: context).name = "Never"
                throw Refused()
            }),
        ]
        var outcomes: [String: (Bool?, Result<BlockSaveResult, any Error>?)] = [:]
        for (label, block) in cases {
            let onMain = Box<Bool?>(nil)
            let result = Box<Result<BlockSaveResult, any Error>?>(nil)
            PersistentContainer.default!.save(block) { outcome in
                onMain.value = onMainQueue()
                result.value = outcome
            }
            #expect(await eventually(10) { result.value != nil }, "\(label): no completion")
            outcomes[label] = (onMain.value, result.value)
        }
        #expect(outcomes["nothing"]?.0 == true)
        #expect(outcomes["nothing"]?.1.flatMap { try? $0.get() } == .nothingToSave)
        for label in ["invalid", "throws"] {
            #expect(outcomes[label]?.0 == true, "\(label): completion off the main queue")
            guard case .failure(let error)? = outcomes[label]?.1 else {
                Issue.record("\(label): expected a failure, got \(String(describing: outcomes[label]?.1))")
                continue
            }
            // A failed save is a StrataError; the block's own error comes back as itself.
            if label == "invalid" {
                #expect((error as? StrataError)?.code == .validationFailed, "\(error)")
            } else {
                #expect(error is Refused, "\(error)")
            }
        }
        let fresh = ManagedObjectContext(.privateQueue, coordinator: container.coordinator)
        #expect(try fresh.performAndWait { () throws(StrataError) in try Recipe.count(in: fresh) } == 0)
    }
}
