import Foundation
import Strata

/// The recipe-like objects the object-graph benchmarks import.
final class BenchRecipe: ManagedObject {
    @Attribute("name") var name: String
    @Attribute("servings") var servings: Int
    @Attribute("rating") var rating: Double
    @Attribute("created") var created: Date
    @Relationship("ingredients") var ingredients: Set<BenchIngredient>
}

final class BenchIngredient: ManagedObject {
    @Attribute("name") var name: String
    @Attribute("grams") var grams: Int
    @Relationship("recipe") var recipe: BenchRecipe?
}

/// The bench model; `recipeIndexes` and `recipeUniqueness` declare indexes
/// and uniqueness constraints on recipes (a store made with them opens only
/// with them).
func makeBenchModel(recipeIndexes: [IndexDescription] = [], recipeUniqueness: [[String]] = []) throws -> ManagedObjectModel {
    try ManagedObjectModel(entities: [
        EntityDescription(name: "Recipe", managedObjectClass: BenchRecipe.self, properties: [
            .attribute("name", .string),
            .attribute("servings", .integer64),
            .attribute("rating", .double),
            .attribute("created", .date),
            .toMany("ingredients", "Ingredient", inverse: "recipe", deleteRule: .cascade),
        ], indexes: recipeIndexes, uniquenessConstraints: recipeUniqueness),
        EntityDescription(name: "Ingredient", managedObjectClass: BenchIngredient.self, properties: [
            .attribute("name", .string),
            .attribute("grams", .integer64),
            .toOne("recipe", "Recipe", inverse: "ingredients"),
        ]),
    ])
}

/// Inserts `count` objects into `context` (on its queue): with
/// `ingredientsPerRecipe` > 0, recipes each with that many ingredients, the
/// total counting both.
func insertObjects(_ count: Int, ingredientsPerRecipe: Int, into context: ManagedObjectContext, offset: Int = 0) {
    let base = Date(timeIntervalSinceReferenceDate: 700_000_000)
    var made = 0
    var n = offset
    while made < count {
        let recipe = BenchRecipe(context: context)
        recipe.name = "Recipe \(n)"
        recipe.servings = n % 6 + 1
        recipe.rating = Double(n % 50) / 10
        recipe.created = base.addingTimeInterval(Double(n))
        made += 1
        for j in 0..<ingredientsPerRecipe where made < count {
            let ingredient = BenchIngredient(context: context)
            ingredient.name = "Ingredient \(j) of \(n)"
            ingredient.grams = 10 * (j + 1)
            ingredient.recipe = recipe
            made += 1
        }
        n += 1
    }
}
