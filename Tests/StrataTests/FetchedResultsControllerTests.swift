import Foundation
import SharedTestSupport
@testable import Strata
import StrataStore
import Testing

/// Fetched-results controllers: after every change that reaches a context,
/// the controller's results are a fresh fetch's, and the difference it
/// delivered turns the old results into the new ones.
@Suite struct FetchedResultsControllerTests {
    /// Recipes rated 2 or more, by servings (the sections), then name.
    static func request() -> FetchRequest<Recipe> {
        FetchRequest(predicate: #Predicate { $0.rating >= 2 }, sortBy: [SortDescriptor(\.servings), SortDescriptor(\.name)])
    }

    /// What a controller heard, and the results it held after each delivery.
    final class Recorder: @unchecked Sendable {
        // Written and read on the context's queue only.
        var ids: [ObjectID]
        var sections: [[ObjectID]]
        var deliveries = 0
        var problems: [String] = []
        let controller: FetchedResultsController<Recipe>

        init(_ controller: FetchedResultsController<Recipe>) {
            self.controller = controller
            ids = controller.objectIDs
            sections = Self.sectioned(controller)
            controller.onChange = { [unowned self] difference in self.heard(difference) }
        }

        static func sectioned(_ controller: FetchedResultsController<Recipe>) -> [[ObjectID]] {
            controller.sections.map { Array(controller.objectIDs[$0.range]) }
        }

        /// Applies `difference` to what was held, as a list view would, and
        /// checks it gives what the controller now holds.
        func heard(_ difference: FetchedResultsDifference) {
            deliveries += 1
            let now = controller.objectIDs
            if difference.isEmpty { problems.append("an empty difference was delivered") }
            if now == ids && difference.updated.isEmpty { problems.append("a delivery that changed nothing: \(difference)") }
            guard let applied = ids.applying(difference.objectIDs) else {
                problems.append("the flat difference does not apply")
                return
            }
            if applied != now { problems.append("the flat difference gives \(applied.count) IDs, not the \(now.count) held") }
            // By positions: deletions and moves out (old positions, highest first),
            // section deletions, section insertions, then insertions and moves in.
            var sections = self.sections
            var removals = difference.deleted.map { ($0.position, $0.objectID) } + difference.moved.map { ($0.from, $0.objectID) }
            removals.sort { $0.0 > $1.0 }
            for (position, id) in removals {
                guard position.section < sections.count, position.item < sections[position.section].count,
                      sections[position.section][position.item] == id else {
                    problems.append("no \(id) at \(position) to remove")
                    return
                }
                sections[position.section].remove(at: position.item)
            }
            for section in difference.deletedSections.sorted(by: >) {
                guard sections[section].isEmpty else { problems.append("deleted section \(section) still holds objects"); return }
                sections.remove(at: section)
            }
            for section in difference.insertedSections.sorted() { sections.insert([], at: section) }
            var insertions = difference.inserted.map { ($0.position, $0.objectID) } + difference.moved.map { ($0.to, $0.objectID) }
            insertions.sort { $0.0 < $1.0 }
            for (position, id) in insertions {
                guard position.section < sections.count, position.item <= sections[position.section].count else {
                    problems.append("no room for \(id) at \(position)")
                    return
                }
                sections[position.section].insert(id, at: position.item)
            }
            let held = Self.sectioned(controller)
            if sections != held { problems.append("the positions give \(sections.map(\.count)), not \(held.map(\.count))") }
            for update in difference.updated where held[update.to.section][update.to.item] != update.objectID {
                problems.append("updated \(update.objectID) is not at \(update.to)")
            }
            ids = now
            self.sections = held
        }
    }

    /// A fresh fetch's IDs in the controller's order (ties by primary key).
    static func oracle(_ context: ManagedObjectContext, limit: Int = 0) throws -> [ObjectID] {
        let all = try context.fetch(request()).map { ($0.servings, $0.name, $0.objectID) }
        // Strings by Swift's order, as a SortDescriptor of a String key path without a comparator.
        let sorted = all.sorted { a, b in
            if a.0 != b.0 { return a.0 < b.0 }
            if a.1 != b.1 { return a.1 < b.1 }
            return a.2.primaryKey < b.2.primaryKey
        }.map(\.2)
        return limit > 0 ? Array(sorted.prefix(limit)) : sorted
    }

    @Test(arguments: 0..<24) func aControllerFollowsEveryChangeAtEveryLevel(seed: Int) throws {
        var random = SeededGenerator(seed: UInt64(seed) &* 0x2545_F491_4F6C_DD1D &+ 11)
        let coordinator = try makeCoordinator(TemporaryDirectory())
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "writer")
        let middle = ManagedObjectContext(.privateQueue, parent: writer, name: "middle")
        let child = ManagedObjectContext(.privateQueue, parent: middle, name: "child")
        let contexts = [writer, middle, child]
        for context in contexts { context.performAndWait { context.automaticallyMergesChangesFromParent = true } }
        // Some stored recipes to begin with.
        try writer.performAndWait { () throws in
            for i in 0..<30 {
                let recipe = Recipe(context: writer)
                recipe.name = "R\(i % 11)"
                recipe.servings = i % 4
                recipe.rating = Double(i % 5)
            }
            try writer.save()
        }
        let limit = seed % 3 == 2 ? 7 : 0
        let updates = seed % 2 == 1
        var recorders: [Recorder] = []
        for context in contexts {
            try context.performAndWait { () throws in
                var request = Self.request()
                request.fetchLimit = limit
                let controller = try FetchedResultsController(fetchRequest: request, context: context, sectionBy: \Recipe.servings, reportsUpdates: updates)
                try controller.performFetch()
                recorders.append(Recorder(controller))
            }
        }
        var held: [Recipe] = []
        var log: [String] = []
        // Fewer steps under ThreadSanitizer (`make test-tsan` sets STRATA_SANITIZED).
        let steps = ProcessInfo.processInfo.environment["STRATA_SANITIZED"] == nil ? 40 : 15
        for step in 0..<steps {
            let operation = Int(random.next() % 12)
            var local = SeededGenerator(seed: random.next())
            switch operation {
            case 0..<6:
                // Edits in the child: insert, change sort, predicate or other values, delete.
                let description = try child.performAndWait { () throws -> String in
                    let recipes = try child.fetch(FetchRequest<Recipe>())
                    var done: [String] = []
                    for _ in 0..<Int(local.next() % 4) + 1 {
                        switch local.next() % 6 {
                        case 0:
                            let recipe = Recipe(context: child)
                            recipe.name = "N\(local.next() % 13)"
                            recipe.servings = Int(local.next() % 5)
                            recipe.rating = Double(local.next() % 5)
                            held.append(recipe)
                            done.append("insert")
                        case 1 where !recipes.isEmpty:
                            let recipe = recipes[Int(local.next() % UInt64(recipes.count))]
                            recipe.servings = Int(local.next() % 5)
                            held.append(recipe)
                            done.append("servings")
                        case 2 where !recipes.isEmpty:
                            let recipe = recipes[Int(local.next() % UInt64(recipes.count))]
                            recipe.rating = Double(local.next() % 5)
                            held.append(recipe)
                            done.append("rating")
                        case 3 where !recipes.isEmpty:
                            let recipe = recipes[Int(local.next() % UInt64(recipes.count))]
                            recipe.notes = "n\(local.next())"
                            held.append(recipe)
                            done.append("notes")
                        case 4 where !recipes.isEmpty:
                            let recipe = recipes[Int(local.next() % UInt64(recipes.count))]
                            recipe.name = "R\(local.next() % 11)"
                            held.append(recipe)
                            done.append("name")
                        case 5 where !recipes.isEmpty:
                            child.delete(recipes[Int(local.next() % UInt64(recipes.count))])
                            done.append("delete")
                        default: break
                        }
                    }
                    return "child: " + done.joined(separator: ",")
                }
                log.append(description)
            case 6, 7:
                try child.performAndWait { try child.save() }
                log.append("child saves")
            case 8:
                try middle.performAndWait { try middle.save() }
                log.append("middle saves")
            case 9:
                try writer.performAndWait { try writer.save() }
                log.append("writer saves")
            case 10:
                let servings = Int(local.next() % 5), rating = Double(local.next() % 5)
                _ = try coordinator.execute(BatchUpdateRequest<Recipe>(where: #Predicate { $0.servings == servings }, set: ["rating": .double(rating)]))
                log.append("batch: rating \(rating) where servings \(servings)")
            default:
                child.performAndWait { child.refreshAllObjects() }
                log.append("child refreshes")
            }
            // Let merges run their course through the levels.
            for _ in 0..<3 { for context in contexts { context.performAndWait {} } }
            for (level, context) in contexts.enumerated() {
                let recorder = recorders[level]
                try context.performAndWait { () throws in
                    let expected = try Self.oracle(context, limit: limit)
                    let held = recorder.controller.objectIDs
                    #expect(held == expected, "seed \(seed) step \(step) \(context.name): \(held.count) held, \(expected.count) fetched after \(log.suffix(3))")
                    #expect(recorder.problems.isEmpty, "seed \(seed) step \(step) \(context.name): \(recorder.problems) after \(log.suffix(3))")
                    #expect(recorder.ids == held, "seed \(seed) step \(step) \(context.name): a change was not delivered")
                    recorder.problems.removeAll()
                }
            }
            if held.count > 200 { held.removeFirst(100) }
        }
        withExtendedLifetime(held) {}
    }

    /// A fetch's sort and a controller's order compare sort values as the
    /// descriptors do (Swift's `<`, a string comparator, an optional's
    /// order, reversed): the results come in the order Foundation sorts the
    /// objects in, ties aside.
    @Test func sortValuesCompareAsTheDescriptorsDo() throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        var random = SeededGenerator(seed: 42)
        let names = ["R9", "R10", "r10", "Réunion", "reunion", "Zebra", "apple", "Apple", "ä", "b", "R1", "r2"]
        try context.performAndWait { () throws in
            for i in 0..<80 {
                let recipe = Recipe(context: context)
                recipe.name = names[Int(random.next() % UInt64(names.count))]
                recipe.servings = Int(random.next() % 4)
                recipe.rating = Double(random.next() % 7) / 2
                recipe.notes = random.next() % 3 == 0 ? nil : names[i % names.count]
                recipe.created = Date(timeIntervalSinceReferenceDate: Double(random.next() % 5))
            }
            try context.save()
        }
        let orders: [[SortDescriptor<Recipe>]] = [
            [SortDescriptor(\.name)],
            [SortDescriptor(\.name, comparator: .lexical)],
            [SortDescriptor(\.name, comparator: .lexical, order: .reverse)],
            [SortDescriptor(\.notes), SortDescriptor(\.rating, order: .reverse)],
            [SortDescriptor(\.notes, order: .reverse), SortDescriptor(\.created)],
            [SortDescriptor(\.servings, order: .reverse), SortDescriptor(\.name, comparator: .lexical)],
        ]
        for descriptors in orders {
            try context.performAndWait { () throws in
                let fetched = try context.fetch(FetchRequest<Recipe>(sortBy: descriptors))
                let expected = fetched.sorted(using: descriptors)
                func keys(_ recipes: [Recipe]) -> [String] {
                    recipes.map { "\($0.name)|\($0.notes ?? "nil")|\($0.rating)|\($0.servings)|\($0.created.timeIntervalSinceReferenceDate)" }
                }
                // Ties may come in any order: compare runs of equal sort values as sets.
                var runs: [[String]] = [], expectedRuns: [[String]] = []
                for (list, out) in [(fetched, 0), (expected, 1)] {
                    var grouped: [[String]] = []
                    var previous: Recipe?
                    for (recipe, key) in zip(list, keys(list)) {
                        if let previous, descriptors.allSatisfy({ $0.compare(previous, recipe) == .orderedSame }) {
                            grouped[grouped.count - 1].append(key)
                        } else {
                            grouped.append([key])
                        }
                        previous = recipe
                    }
                    if out == 0 { runs = grouped.map { $0.sorted() } } else { expectedRuns = grouped.map { $0.sorted() } }
                }
                #expect(runs == expectedRuns, "\(descriptors)")
                let controller = try FetchedResultsController(fetchRequest: FetchRequest<Recipe>(sortBy: descriptors), context: context)
                try controller.performFetch()
                #expect(controller.objectIDs == fetched.map(\.objectID), "a controller's order is the fetch's, ties by ID: \(descriptors)")
            }
        }
    }

    /// `updates()`, asked for off the context's queue: the results first,
    /// then one element per change that changed them, in order, read from
    /// another task.
    @Test(.timeLimit(.minutes(1))) func updatesDeliverTheResultsThenEachChange() async throws {
        let coordinator = try makeCoordinator()
        _ = try seedNumberedRecipes(coordinator, count: 3)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let controller = try context.performAndWait { () throws -> FetchedResultsController<Recipe> in
            let controller = try FetchedResultsController(
                fetchRequest: FetchRequest<Recipe>(sortBy: [SortDescriptor(\.servings, order: .reverse)]), context: context)
            try controller.performFetch()
            return controller
        }
        // Asked for off the context's queue: it starts on the queue, with the results then.
        var updates = controller.updates().makeAsyncIterator()
        let first = await updates.next()
        #expect(first?.objectIDs.count == 3 && first?.difference.isEmpty == true)
        let added = try context.performAndWait { () throws -> ObjectID in
            let recipe = Recipe(context: context)
            recipe.servings = 10
            return recipe.objectID
        }
        let second = await updates.next()
        #expect(second?.objectIDs.first == added)
        #expect(second?.difference.inserted.map(\.position) == [.init(section: 0, item: 0)])
        context.performAndWait {
            (try? context.existingObject(with: added)).map { ($0 as! Recipe).notes = "no move" }  // nothing to deliver
            (try? context.existingObject(with: added)).map { ($0 as! Recipe).servings = -1 }  // to the end
        }
        let third = await updates.next()
        #expect(third?.objectIDs.last == added)
        #expect(third?.difference.moved.map(\.from) == [.init(section: 0, item: 0)])
        #expect(third?.difference.moved.map(\.to) == [.init(section: 0, item: 3)])
    }

    /// A consumer that falls behind: 120 changes (inserts, moves, deletes)
    /// and a new fetch wait for it, and each element it then reads holds the
    /// results the controller had after that change — rebuilt from the
    /// element before it and the change's difference, since what waits is
    /// the difference, not the whole list.
    @Test(.timeLimit(.minutes(1))) func aConsumerThatFallsBehindGetsEveryChangeInOrder() async throws {
        let coordinator = try makeCoordinator()
        let ids = try seedNumberedRecipes(coordinator, count: 40)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let (controller, expected) = try context.performAndWait { () throws -> (FetchedResultsController<Recipe>, [[ObjectID]]) in
            let controller = try FetchedResultsController(
                fetchRequest: FetchRequest<Recipe>(predicate: #Predicate { $0.servings >= 0 }, sortBy: [SortDescriptor(\.servings)]), context: context)
            try controller.performFetch()
            return (controller, [controller.objectIDs])
        }
        var updates = controller.updates().makeAsyncIterator()
        var lists = expected
        try context.performAndWait { () throws in
            controller.onChange = { _ in lists.append(controller.objectIDs) }
            var random = SeededGenerator(seed: 7)
            var recipes = try ids.map { try context.existingObject(with: $0) as! Recipe }
            for step in 0..<120 {
                switch random.next() % 3 {
                case 0:
                    let recipe = Recipe(context: context)
                    recipe.servings = Int(random.next() % 100)
                    recipes.append(recipe)
                case 1:
                    recipes[Int(random.next() % UInt64(recipes.count))].servings = Int(random.next() % 100) - 10  // a move, or out
                default:
                    if recipes.count > 10 { context.delete(recipes.remove(at: Int(random.next() % UInt64(recipes.count)))) }
                }
                context.processPendingChanges()
                if step == 60 {
                    try controller.performFetch()  // new results, then changes after them
                    lists.append(controller.objectIDs)
                }
            }
            controller.onChange = nil
        }
        #expect(lists.count > 80)
        for (n, list) in lists.enumerated() {
            let update = await updates.next()
            #expect(update?.objectIDs == list, "element \(n) of \(lists.count)")
        }
    }

    /// The first element read by one iterator, the next by a `for await`
    /// over the same sequence (a second iterator, which goes on where the
    /// first stopped): the second gets the whole list, not the change
    /// applied to nothing.
    @Test(.timeLimit(.minutes(1))) func aSecondIteratorGoesOnFromTheFirst() async throws {
        let coordinator = try makeCoordinator()
        _ = try seedNumberedRecipes(coordinator, count: 5)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let controller = try context.performAndWait { () throws -> FetchedResultsController<Recipe> in
            let controller = try FetchedResultsController(fetchRequest: FetchRequest<Recipe>(sortBy: [SortDescriptor(\.servings)]), context: context)
            try controller.performFetch()
            return controller
        }
        let updates = controller.updates()
        var first = updates.makeAsyncIterator()
        #expect(await first.next()?.objectIDs.count == 5)
        let expected = context.performAndWait { () -> [ObjectID] in
            Recipe(context: context).servings = -1  // an insert at the front, which applies to any list
            context.processPendingChanges()
            return controller.objectIDs
        }
        for await update in updates {
            #expect(update.objectIDs == expected, "got \(update.objectIDs.count) IDs, expected \(expected.count)")
            break
        }
    }

    /// A NaN sorts after every number, in a fetch and in a controller: one
    /// place in a total order, where a binary search finds it (Swift's `<`
    /// says a NaN is neither before nor after anything).
    @Test func aNaNSortsLastAndKeepsItsPlace() throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            for rating in [2.0, .nan, 1.0, 3.0] {
                let recipe = Recipe(context: context)
                recipe.name = "stored"
                recipe.rating = rating
            }
            try context.save()
            let request = FetchRequest<Recipe>(sortBy: [SortDescriptor(\.rating)])
            let controller = try FetchedResultsController(fetchRequest: request, context: context)
            try controller.performFetch()
            let ratings = controller.fetchedObjects.map(\.rating)
            #expect(Array(ratings.prefix(3)) == [1, 2, 3] && ratings.last?.isNaN == true, "\(ratings)")
            var recipes: [Recipe] = []
            for rating in [0.5, .nan, 2.5, 4.0, .nan] {
                let recipe = Recipe(context: context)
                recipe.rating = rating
                recipes.append(recipe)
                context.processPendingChanges()
                #expect(controller.objectIDs == (try context.fetch(request)).map(\.objectID))
            }
            recipes[1].rating = 1.5  // out of the NaNs
            recipes[2].rating = .nan  // into them
            context.processPendingChanges()
            let fetched = try context.fetch(request)
            #expect(controller.objectIDs == fetched.map(\.objectID))
            #expect(fetched.suffix(3).allSatisfy(\.rating.isNaN) && !fetched.dropLast(3).contains { $0.rating.isNaN })
        }
    }

    @Test func anEditOutsideThePredicateAndTheSortDeliversNothing() throws {
        let coordinator = try makeCoordinator()
        _ = try seedNumberedRecipes(coordinator, count: 10)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            let controller = try FetchedResultsController(
                fetchRequest: FetchRequest<Recipe>(predicate: #Predicate { $0.servings >= 3 }, sortBy: [SortDescriptor(\.servings)]),
                context: context)
            try controller.performFetch()
            var heard: [FetchedResultsDifference] = []
            controller.onChange = { heard.append($0) }
            // The same request with `reportsUpdates`: the edit is an update in place.
            let reporting = try FetchedResultsController(
                fetchRequest: FetchRequest<Recipe>(predicate: #Predicate { $0.servings >= 3 }, sortBy: [SortDescriptor(\.servings)]),
                context: context, reportsUpdates: true)
            try reporting.performFetch()
            var reported: [FetchedResultsDifference] = []
            reporting.onChange = { reported.append($0) }
            let recipes = try context.fetch(FetchRequest<Recipe>(sortBy: [SortDescriptor(\.servings)]))
            recipes[5].notes = "edited"
            context.processPendingChanges()
            #expect(heard.isEmpty)
            #expect(reported.count == 1)
            #expect(reported.last?.updated.map(\.objectID) == [recipes[5].objectID])
            #expect(reported.last?.updated.map(\.to) == [.init(section: 0, item: 2)])
            #expect(reported.last.map { $0.inserted.isEmpty && $0.deleted.isEmpty && $0.moved.isEmpty } == true)
            recipes[5].servings = 1  // leaves the results
            context.processPendingChanges()
            #expect(heard.count == 1)
            #expect(heard.last?.deleted.map(\.position) == [.init(section: 0, item: 2)])
            recipes[1].servings = 0  // still out
            context.processPendingChanges()
            #expect(heard.count == 1)
        }
    }

    @Test func aMainQueueControllerTakesHeldImportsWithoutMakingTheirObjects() throws {
        let directory = TemporaryDirectory()
        let container = try PersistentContainer(name: "frc", model: makeModel(), directory: directory.path + "/store", options: testStoreOptions())
        let view = container.viewContext
        let controller = try view.performAndWait { () throws -> FetchedResultsController<Recipe> in
            let controller = try FetchedResultsController(
                fetchRequest: FetchRequest<Recipe>(sortBy: [SortDescriptor(\.servings, order: .reverse)]), context: view)
            try controller.performFetch()
            return controller
        }
        let importer = container.newBackgroundContext()
        try importer.performAndWait { () throws in
            for i in 0..<500 {
                let recipe = Recipe(context: importer)
                recipe.name = "R\(i)"
                recipe.servings = i
            }
            try importer.save()
        }
        // The difference is computed off the main queue, then taken in by a main-queue block.
        let deadline = Date().addingTimeInterval(10)
        while view.performAndWait({ controller.objectIDs.count }) < 500 && Date() < deadline { usleep(2_000) }
        view.performAndWait {
            #expect(controller.objectIDs.count == 500)
            #expect(view.heldSaveCount == 1, "the import's save is held, its objects not made")
            #expect(view.registry.isEmpty)
            #expect(controller.fetchedObjects.first?.servings == 499)
        }
    }
}
