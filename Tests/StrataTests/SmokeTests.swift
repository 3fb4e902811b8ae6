import Foundation
import Strata
import Testing

@Suite struct SmokeTests {
    @Test func insertSaveReopenFetch() throws {
        let directory = TemporaryDirectory()
        let model = makeModel()
        do {
            let coordinator = try makeCoordinator(directory, model: model)
            let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
            try context.performAndWait {
                let soup = Recipe(context: context)
                soup.name = "Soup"
                soup.servings = 4
                let salt = Ingredient(context: context)
                salt.name = "Salt"
                salt.recipe = soup
                #expect(soup.ingredients == [salt])
                #expect(soup.objectID.isTemporaryID)
                try context.save()
                #expect(!soup.objectID.isTemporaryID)
            }
            try coordinator.close()
        }
        let coordinator = try makeCoordinator(directory, model: model)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let recipes = try context.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.servings > 2 }))
            #expect(recipes.count == 1)
            #expect(recipes.first?.name == "Soup")
            #expect(recipes.first?.ingredients.map(\.name) == ["Salt"])
        }
    }
}
