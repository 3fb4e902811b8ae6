import Foundation
@testable import Strata
import Testing

/// What keeping inverses in step costs, pinned without a clock: the
/// storage a target's set lives in, before and after each change.
@Suite struct InverseUpkeepCostTests {
    /// Inverse upkeep, and a change made to the set's own side, edit the
    /// set where it lies: after the first change (which must copy it, the
    /// committed values sharing it), each object taken out of a tag's
    /// recipes or put back leaves the tag's set in the same storage. (A set still held by a match on the value while it was
    /// edited was copied whole at every change: an import that moved many
    /// objects off one target paid the target's size each time.)
    @Test func inverseUpkeepEditsATargetsSetInPlace() throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            let tag = Tag(context: context)
            tag.label = "quick"
            let recipes = (0..<50).map { i in
                let recipe = Recipe(context: context)
                recipe.name = "R\(i)"
                recipe.tags = [tag]
                return recipe
            }
            try context.save()
            let index = try #require(tag.entity.indexOfProperty("recipes"))
            // The set's storage, by address: a copy moves it (the old one is
            // freed only once the new one exists, so two in a row differ).
            func storage() -> Int {
                guard case .objects(let ids) = tag.values[index] else { return 0 }
                return unsafeBitCast(ids, to: Int.self)
            }
            var storages: [Int] = []
            for recipe in recipes.prefix(6) {
                recipe.tags = []
                storages.append(storage())
            }
            for (i, recipe) in recipes.prefix(6).enumerated() where i.isMultiple(of: 2) {
                recipe.tags = [tag]
                storages.append(storage())
            }
            // And through the set's own side, by name.
            for recipe in recipes[10..<13] {
                tag.remove(recipe, from: "recipes")
                storages.append(storage())
            }
            #expect(Set(storages).count == 1, "\(storages)")
            #expect(tag.recipes.count == 44)
        }
    }
}
