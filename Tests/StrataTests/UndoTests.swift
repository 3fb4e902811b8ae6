import Foundation
import SharedTestSupport
@testable import Strata
import StrataStore
import Testing

/// A context's undo manager: undo and redo of inserts, updates, deletes and
/// relationship changes, a group per block, through saves.
@Suite struct UndoTests {
    /// What the context shows: every recipe and tag by ID, with its values
    /// and relationships (its pending changes included).
    static func world(_ context: ManagedObjectContext) throws -> [String: String] {
        // By entity and primary key: an ID is temporary until saved, the same object either way.
        func key(_ object: ManagedObject) -> String { "\(object.entity.name)/\(object.objectID.primaryKey)" }
        var world: [String: String] = [:]
        for recipe in try context.fetch(FetchRequest<Recipe>()) {
            world[key(recipe)] = "\(recipe.name)|\(recipe.servings)|\(recipe.tags.map(key).sorted())"
        }
        for tag in try context.fetch(FetchRequest<Tag>()) {
            world[key(tag)] = "\(tag.label)|\(tag.recipes.map(key).sorted())"
        }
        return world
    }

    /// The entries where `world` differs from `expected`: (shown, expected).
    static func difference(_ world: [String: String], _ expected: [String: String]) -> [String: (String?, String?)] {
        var difference: [String: (String?, String?)] = [:]
        for key in Set(world.keys).union(expected.keys) where world[key] != expected[key] { difference[key] = (world[key], expected[key]) }
        return difference
    }

    /// Random blocks of inserts, edits, relationship changes and deletes,
    /// with saves between some; then undo back to the start, checking each
    /// state the blocks left, redo forward again, and the store holds the
    /// last state once saved.
    @Test(arguments: 0..<16) func undoAndRedoRetraceEveryBlock(seed: Int) throws {
        var random = SeededGenerator(seed: UInt64(seed) &* 0x2545_F491_4F6C_DD1D &+ 5)
        let coordinator = try makeCoordinator(TemporaryDirectory())
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            for i in 0..<4 {
                let recipe = Recipe(context: context)
                recipe.name = "R\(i)"
                let tag = Tag(context: context)
                tag.label = "T\(i)"
                recipe.tags = [tag]
            }
            try context.save()
            context.undoManager = ContextUndoManager()
        }
        var states = [try context.performAndWait { try Self.world(context) }]
        var held: [ManagedObject] = []
        var log: [String] = []
        let blocks = ProcessInfo.processInfo.environment["STRATA_SANITIZED"] == nil ? 12 : 6
        for _ in 0..<blocks {
            var local = SeededGenerator(seed: random.next())
            let done = try context.performAndWait { () throws -> String in
                var recipes = try context.fetch(FetchRequest<Recipe>())
                var tags = try context.fetch(FetchRequest<Tag>())
                held += recipes as [ManagedObject] + tags as [ManagedObject]
                var done: [String] = []
                for _ in 0..<Int(local.next() % 3) + 1 {
                    // Objects deleted earlier in the block are left alone.
                    recipes.removeAll(where: \.isDeleted)
                    tags.removeAll(where: \.isDeleted)
                    switch local.next() % 6 {
                    case 0:
                        let recipe = Recipe(context: context)
                        recipe.name = "N\(local.next() % 9)"
                        if let tag = tags.randomElement(using: &local) { recipe.tags = [tag] }
                        held.append(recipe)
                        done.append("insert")
                    case 1 where !recipes.isEmpty:
                        recipes.randomElement(using: &local)!.servings = Int(local.next() % 5)
                        done.append("servings")
                    case 2 where !recipes.isEmpty && !tags.isEmpty:
                        let recipe = recipes.randomElement(using: &local)!
                        switch local.next() % 3 {
                        case 0:
                            recipe.tags = Set(tags.shuffled(using: &local).prefix(Int(local.next() % 3)))
                            done.append("tags")
                        case 1:
                            recipe.add(tags.randomElement(using: &local)!, to: "tags")  // edited in place
                            done.append("add tag")
                        default:
                            // From the other side, in place.
                            if let tag = recipe.tags.sorted(by: { $0.label < $1.label }).first { tag.remove(recipe, from: "recipes") }
                            done.append("remove tag")
                        }
                    case 3 where !recipes.isEmpty:
                        context.delete(recipes.randomElement(using: &local)!)
                        done.append("delete recipe")
                    case 4 where !tags.isEmpty:
                        context.delete(tags.randomElement(using: &local)!)
                        done.append("delete tag")
                    default:
                        let tag = Tag(context: context)
                        tag.label = "NT\(local.next() % 9)"
                        held.append(tag)
                        done.append("insert tag")
                    }
                }
                return done.joined(separator: ",")
            }
            log.append(done)
            states.append(try context.performAndWait { try Self.world(context) })
            if random.next() % 3 == 0 {
                try context.performAndWait { try context.save() }
                log.append("save")
            }
        }
        // Blocks that changed nothing made no group: compare distinct states.
        var distinct = [states[0]]
        for state in states.dropFirst() where state != distinct.last { distinct.append(state) }
        try context.performAndWait { () throws in
            let manager = try #require(context.undoManager)
            for expected in distinct.dropLast().reversed() {
                #expect(manager.canUndo, "seed \(seed): \(log)")
                manager.undo()
                let world = try Self.world(context)
                #expect(world == expected, "seed \(seed): undo after \(log): \(Self.difference(world, expected))")
            }
            #expect(!manager.canUndo)
            try context.save()  // the undone state reaches the store
            for expected in distinct.dropFirst() {
                #expect(manager.canRedo)
                manager.redo()
                let world = try Self.world(context)
                #expect(world == expected, "seed \(seed): redo after \(log): \(Self.difference(world, expected))")
            }
            #expect(!manager.canRedo)
            try context.save()
        }
        let fresh = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        #expect(try fresh.performAndWait { try Self.world(fresh) } == distinct.last, "seed \(seed): the store holds the last state")
        withExtendedLifetime(held) {}
    }

    @Test func explicitGroupsLevelsAndWhatForgetsThem() throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let manager = ContextUndoManager(levelsOfUndo: 2)
        let recipe = context.performAndWait { () -> Recipe in
            context.undoManager = manager
            let recipe = Recipe(context: context)
            recipe.name = "one"
            return recipe
        }
        context.performAndWait {
            manager.beginUndoGrouping()
            recipe.servings = 1
        }
        context.performAndWait {
            recipe.servings = 2
            manager.endUndoGrouping()
        }
        context.performAndWait { recipe.servings = 3 }
        try context.performAndWait { () throws in
            recipe.servings = 4
            try context.save()  // inside the block: its group goes on
            recipe.name = "four"
        }
        context.performAndWait {
            // Groups: insert, 1→2 (explicit, across two blocks), 3, 4 and
            // the name (one block, a save in it); the limit keeps the last two.
            manager.undo()
            #expect(recipe.servings == 3 && recipe.name == "one", "the whole block, across its save")
            manager.undo()
            #expect(recipe.servings == 2)
            #expect(!manager.canUndo, "older groups beyond the limit are forgotten")
            manager.redo()
            #expect(recipe.servings == 3)
        }
        context.performAndWait { recipe.servings = 7 }  // a new change: nothing to redo
        context.performAndWait {
            #expect(!manager.canRedo)
            context.rollback()
            #expect(!manager.canUndo && !manager.canRedo, "rollback forgets every group")
        }
        let untouched = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        untouched.performAndWait {
            #expect(untouched.undoManager == nil, "undo is off unless a context is given a manager")
        }
    }

    /// Undoing the insert of an object another context has since deleted
    /// at the source (found so, it left this context) deletes nothing: the
    /// context holds no change, and the save writes none.
    @Test func undoingTheInsertOfAnObjectDeletedAtTheSourceChangesNothing() throws {
        let coordinator = try makeCoordinator(model: makeModel(recipeIndexes: [IndexDescription("servings")]))
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let other = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let (recipe, id) = try context.performAndWait { () throws -> (Recipe, ObjectID) in
            context.undoManager = ContextUndoManager()
            let soup = Recipe(context: context)
            soup.name = "Soup"
            soup.servings = 2
            try context.save()
            return (soup, soup.objectID)
        }
        try other.performAndWait { () throws in
            other.delete(try other.existingObject(with: id))
            try other.save()
        }
        try context.performAndWait { () throws in
            context.refresh(recipe, mergeChanges: true)
            #expect(recipe.isDeleted && !context.hasChanges)
            context.undoManager?.undo()
            #expect(!context.hasChanges && context.deletedObjects.isEmpty && context.registeredObject(for: id) == nil)
            try context.save()
        }
    }
}
