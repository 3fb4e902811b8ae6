import Foundation
import SharedTestSupport
@testable import Strata
import StrataStore
import Testing

/// A batch delete removes objects without making them in a context, and
/// applies the relationships' delete rules as a context's delete does.
@Suite struct BatchDeleteTests {
    /// Two recipes with two ingredients and a card each (cascade), a tag
    /// both hold (nullify, many-to-many) and an author (nullify one way,
    /// deny the other).
    static func seed(_ container: PersistentContainer) throws -> (recipes: [ObjectID], ingredients: [ObjectID], tag: ObjectID, author: ObjectID) {
        var recipes: [ObjectID] = [], ingredients: [ObjectID] = []
        var tagID: ObjectID?, authorID: ObjectID?
        try container.saveAndWait { context in
            let tag = Tag(context: context)
            tag.label = "quick"
            let author = Author(context: context)
            author.name = "Ada"
            for i in 0..<2 {
                let recipe = Recipe(context: context)
                recipe.name = "R\(i)"
                recipe.servings = i
                recipe.tags = [tag]
                recipe.author = author
                let card = Card(context: context)
                card.text = "card \(i)"
                recipe.card = card
                for j in 0..<2 {
                    let ingredient = Ingredient(context: context)
                    ingredient.name = "I\(i)\(j)"
                    ingredient.recipe = recipe
                    ingredients.append(ingredient.objectID)
                }
                recipes.append(recipe.objectID)
            }
            (tagID, authorID) = (tag.objectID, author.objectID)
        }
        return (recipes, ingredients, tagID!, authorID!)
    }

    @Test func cascadeAndNullifyApplyAndContextsMerge() throws {
        let directory = TemporaryDirectory()
        let container = try BatchUpdateTests.container(directory)
        let seeded = try Self.seed(container)
        let view = container.viewContext
        // The view context holds the deleted recipe, one of its ingredients, and the tag.
        let (recipe, ingredient, tag) = try view.performAndWait { () throws -> (Recipe, Ingredient, Tag) in
            let recipe = try view.existingObject(with: seeded.recipes[0]) as! Recipe
            let ingredient = try view.existingObject(with: seeded.ingredients[0]) as! Ingredient
            let tag = try view.existingObject(with: seeded.tag) as! Tag
            _ = (recipe.name, ingredient.name, tag.recipes.count)
            return (recipe, ingredient, tag)
        }
        let start = try container.coordinator.currentHistoryToken()
        let result = try container.coordinator.execute(BatchDeleteRequest<Recipe>(where: #Predicate { $0.servings == 0 }))
        // The recipe, its two ingredients and its card; the tag and the author changed.
        #expect(result.deletedCount == 4 && result.updatedCount == 2)
        #expect(Set(result.objectIDs).isSuperset(of: [seeded.recipes[0], seeded.ingredients[0], seeded.ingredients[1], seeded.tag, seeded.author]))

        let reader = container.newBackgroundContext()
        try reader.performAndWait { () throws in
            #expect(try Recipe.all(in: reader).map(\.name) == ["R1"])
            #expect(try Set(Ingredient.all(in: reader).map(\.name)) == ["I10", "I11"])
            #expect(try Card.all(in: reader).map(\.text) == ["card 1"])
            let tag = try reader.existingObject(with: seeded.tag) as! Tag
            #expect(tag.recipes.map(\.objectID) == [seeded.recipes[1]])
            let author = try reader.existingObject(with: seeded.author) as! Author
            #expect(author.recipes.map(\.objectID) == [seeded.recipes[1]])
        }
        container.writerContext.performAndWait {}
        view.performAndWait {
            #expect(recipe.isDeleted || recipe.managedObjectContext == nil)
            #expect(ingredient.isDeleted || ingredient.managedObjectContext == nil)
            #expect(tag.recipes.map(\.objectID) == [seeded.recipes[1]])
        }
        let history = try container.coordinator.fetchHistory(HistoryRequest(after: start))
        #expect(history.count == 1 && history[0].contextName == "batch delete of Recipe")
        #expect(history[0].changes.filter { $0.kind == .delete }.count == 4)
        let verified = try ObjectStoreInspector(directory: directory.path + "/store").verifyRecords()
        #expect(verified.problems.isEmpty, "\(verified.problems)")
        try container.close()
    }

    /// An author still holding recipes is refused (deny), and nothing of
    /// that batch is written; once its recipes are gone it can go.
    @Test func denyRefusesWhileTheOtherSideHoldsObjects() throws {
        let directory = TemporaryDirectory()
        let container = try BatchUpdateTests.container(directory)
        let seeded = try Self.seed(container)
        do {
            try container.coordinator.execute(BatchDeleteRequest<Author>(objectIDs: [seeded.author]))
            Issue.record("an author holding recipes was deleted")
        } catch {
            #expect(error.code == .validationFailed)
            #expect(error.validationFailures.map(\.reason) == [.deleteDenied])
        }
        #expect(try container.coordinator.snapshot(for: seeded.author) != nil)
        var all = BatchDeleteRequest<Recipe>()
        all.batchSize = 1
        let heard = Recorded<BatchProgress>()
        all.progress = { heard.append($0) }
        try container.coordinator.execute(all)
        // Each recipe with its two ingredients and card.
        #expect(heard.values.map(\.completedCount) == [1, 2] && heard.values.map(\.result.deletedCount) == [4, 8])
        let result = try container.coordinator.execute(BatchDeleteRequest<Author>(objectIDs: [seeded.author]))
        #expect(result.objectIDs == [seeded.author])
        try container.close()
    }

    @Test func idsOfAnotherEntityAreRefusedAndThoseNotStoredPassedBy() throws {
        let directory = TemporaryDirectory()
        let container = try BatchUpdateTests.container(directory)
        let seeded = try Self.seed(container)
        #expect { try container.coordinator.execute(BatchDeleteRequest<Recipe>(objectIDs: [seeded.tag])) } throws: {
            ($0 as? StrataError)?.code == .invalidArgument
        }
        // Never saved, or deleted already.
        let view = container.viewContext
        let unsaved = view.performAndWait {
            defer { view.rollback() }
            return Recipe(context: view).objectID
        }
        #expect(try container.coordinator.execute(BatchDeleteRequest<Recipe>(objectIDs: [unsaved])).objectIDs.isEmpty)
        try container.coordinator.execute(BatchDeleteRequest<Recipe>(objectIDs: [seeded.recipes[0]]))
        #expect(try container.coordinator.execute(BatchDeleteRequest<Recipe>(objectIDs: [seeded.recipes[0]])).objectIDs.isEmpty)
        try container.close()
    }
}
