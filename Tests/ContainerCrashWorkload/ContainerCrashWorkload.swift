public import Foundation
public import Strata
public import StrataStore

/// The user-level crash test's workload: what the child process saves through
/// a ``PersistentContainer`` and what the parent expects to find after a kill.
///
/// Save `s` (1, 2, 3, …) is one atomic unit that
/// - inserts recipe `s` (a payload of a few bytes, 20 KB every 17th save) with
///   `1 + s % 4` ingredients;
/// - deletes recipe `s - 5` (its ingredients go by cascade) unless `s - 5` is a
///   multiple of 5, so the store keeps growing slowly while most data dies;
/// - every 4th save renames recipe `s - 2` and moves ingredient `i(s-1).0`
///   into it (a relationship change on both sides);
/// - sets the single checkpoint's `lastSave` to `s`.
///
/// So the checkpoint names the last save that landed, and the exact contents
/// of the store are a function of it: ``ExpectedGraph``. Recipe serials and
/// ingredient names are unique (uniqueness constraints, so unique indexes
/// that `strata-dump verify` checks after every kill, and that the
/// workload's lookups by serial and name read).
public enum ContainerCrashWorkload {
    public final class CrashRecipe: ManagedObject {
        @Attribute("serial") public var serial: Int64
        @Attribute("name") public var name: String
        @Attribute("payload") public var payload: Data
        @Relationship("ingredients") public var ingredients: Set<CrashIngredient>
    }

    public final class CrashIngredient: ManagedObject {
        @Attribute("name") public var name: String
        @Relationship("recipe") public var recipe: CrashRecipe?
    }

    public final class Checkpoint: ManagedObject {
        @Attribute("lastSave") public var lastSave: Int64
    }

    public static func makeModel() -> ManagedObjectModel {
        try! ManagedObjectModel(entities: [
            EntityDescription(name: "CrashRecipe", managedObjectClass: CrashRecipe.self, properties: [
                .attribute("serial", .integer64),
                .attribute("name", .string),
                .attribute("payload", .binaryData),
                .toMany("ingredients", "CrashIngredient", inverse: "recipe", deleteRule: .cascade),
            ], uniquenessConstraints: [["serial"]]),
            EntityDescription(name: "CrashIngredient", managedObjectClass: CrashIngredient.self, properties: [
                .attribute("name", .string),
                .toOne("recipe", "CrashRecipe", inverse: "ingredients"),
            ], uniquenessConstraints: [["name"]]),
            EntityDescription(name: "Checkpoint", managedObjectClass: Checkpoint.self, properties: [
                .attribute("lastSave", .integer64, defaultValue: .integer(0)),
            ]),
        ])
    }

    public final class Album: ManagedObject {}

    /// The model's next version, for the migration crash test: an entity
    /// whose name sorts first (every other entity moves), a required
    /// attribute with a default, and an index.
    public static func makeMigratedModel() -> ManagedObjectModel {
        try! ManagedObjectModel(entities: [
            EntityDescription(name: "Album", managedObjectClass: Album.self, properties: [.attribute("title", .string, optional: true)]),
            EntityDescription(name: "CrashRecipe", managedObjectClass: CrashRecipe.self, properties: [
                .attribute("serial", .integer64),
                .attribute("name", .string),
                .attribute("payload", .binaryData),
                .toMany("ingredients", "CrashIngredient", inverse: "recipe", deleteRule: .cascade),
                .attribute("rating", .double, defaultValue: .double(1.5)),
            ], indexes: [IndexDescription("name")], uniquenessConstraints: [["serial"]]),
            EntityDescription(name: "CrashIngredient", managedObjectClass: CrashIngredient.self, properties: [
                .attribute("name", .string),
                .toOne("recipe", "CrashRecipe", inverse: "ingredients"),
            ], uniquenessConstraints: [["name"]]),
            EntityDescription(name: "Checkpoint", managedObjectClass: Checkpoint.self, properties: [
                .attribute("lastSave", .integer64, defaultValue: .integer(0)),
            ]),
        ])
    }

    /// The same step through a custom stage: every stored object is
    /// rewritten (each recipe's rating set to what inference would give it),
    /// 50 at a time, each batch written as it is done.
    public static func makeCustomPlan() throws -> MigrationPlan {
        try MigrationPlan(versions: [ModelVersion("1", model: makeModel()), ModelVersion("2", model: makeMigratedModel())], stages: [
            .custom(from: "1", to: "2", batchSize: 50) { objects in
                for object in objects where object.entity.name == "CrashRecipe" {
                    try object.setValue(.double(1.5), forKey: "rating")
                }
            },
        ])
    }

    /// Small logs and segments, so kills land in flushes and compactions too.
    public static func options(sync: StoreOptions.SyncMode = .grouped) -> StoreOptions {
        var options = StoreOptions()
        options.syncMode = sync
        options.logSizeLimit = 128 << 10
        options.blockSize = 4 << 10
        options.segmentSizeLimit = 256 << 10
        options.compactionDeadRatio = 0.25
        return options
    }

    public static func ingredientCount(_ s: Int) -> Int { 1 + s % 4 }
    public static func ingredientName(_ s: Int, _ j: Int) -> String { "i\(s).\(j)" }
    public static func deletes(_ s: Int) -> Int? { s > 5 && (s - 5) % 5 != 0 ? s - 5 : nil }
    /// Every 4th save: (recipe renamed and receiving the ingredient, the ingredient moved).
    public static func moves(_ s: Int) -> (recipe: Int, ingredient: String)? {
        s % 4 == 0 && s > 2 ? (s - 2, ingredientName(s - 1, 0)) : nil
    }
    public static func originalName(_ s: Int) -> String { "r\(s)" }
    public static func renamed(_ recipe: Int, by s: Int) -> String { "r\(recipe) v\(s)" }

    public static func payload(_ s: Int) -> Data {
        let length = (s * 31) % 300 + (s % 17 == 0 ? 20_000 : 0)
        return Data((0..<length).map { UInt8(truncatingIfNeeded: s &+ $0 &* 7) })
    }

    /// Makes save `s`'s changes in `context` (which sees everything saved before).
    public static func applySave(_ s: Int, in context: ManagedObjectContext) throws {
        let recipe = CrashRecipe(context: context)
        recipe.serial = Int64(s)
        recipe.name = originalName(s)
        recipe.payload = payload(s)
        for j in 0..<ingredientCount(s) {
            let ingredient = CrashIngredient(context: context)
            ingredient.name = ingredientName(s, j)
            ingredient.recipe = recipe
        }
        if let victim = deletes(s), let doomed = try findRecipe(victim, in: context) {
            context.delete(doomed)
        }
        if let move = moves(s), let target = try findRecipe(move.recipe, in: context) {
            target.name = renamed(move.recipe, by: s)
            let name = move.ingredient
            if let moved = try CrashIngredient.first(in: context, where: #Predicate { $0.name == name }) {
                moved.recipe = target
            }
        }
        let checkpoint = try Checkpoint.first(in: context) ?? Checkpoint(context: context)
        checkpoint.lastSave = Int64(s)
    }

    static func findRecipe(_ serial: Int, in context: ManagedObjectContext) throws -> CrashRecipe? {
        let wanted = Int64(serial)
        return try CrashRecipe.first(in: context, where: #Predicate { $0.serial == wanted })
    }
}

/// The exact object graph after saves 1...last, advanced incrementally.
public struct ExpectedGraph: Sendable {
    public private(set) var last = 0
    /// Live recipes: serial → name.
    public private(set) var recipes: [Int: String] = [:]
    /// Live ingredients: name → the serial of their recipe.
    public private(set) var ingredients: [String: Int] = [:]

    public init() {}

    public mutating func advance(to target: Int) {
        precondition(target >= last, "saves only accumulate")
        while last < target {
            last += 1
            let s = last
            recipes[s] = ContainerCrashWorkload.originalName(s)
            for j in 0..<ContainerCrashWorkload.ingredientCount(s) { ingredients[ContainerCrashWorkload.ingredientName(s, j)] = s }
            if let victim = ContainerCrashWorkload.deletes(s), recipes.removeValue(forKey: victim) != nil {
                ingredients = ingredients.filter { $0.value != victim }
            }
            if let move = ContainerCrashWorkload.moves(s), recipes[move.recipe] != nil {
                recipes[move.recipe] = ContainerCrashWorkload.renamed(move.recipe, by: s)
                if ingredients[move.ingredient] != nil { ingredients[move.ingredient] = move.recipe }
            }
        }
    }
}
