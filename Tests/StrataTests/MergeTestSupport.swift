import Foundation
import Strata
import Testing

// Helpers for NotificationTests, AutomaticMergeTests and MergePolicyTests
// (contract C10, C19–C21). Names are prefixed so they cannot collide
// with other test files' helpers.

/// The three recipe attributes the merge tests change, as plain values.
struct MergeRecipeState: Equatable, Sendable, CustomStringConvertible {
    var name: String
    var servings: Int
    var rating: Double

    init(name: String, servings: Int, rating: Double) {
        self.name = name
        self.servings = servings
        self.rating = rating
    }

    init(_ recipe: Recipe) {
        self.init(name: recipe.name, servings: recipe.servings, rating: recipe.rating)
    }

    var description: String { "(\(name), \(servings), \(rating))" }
}

enum MergeSupport {
    /// Saves recipes named `names` (servings 1, rating 0) to the store through
    /// a context of their own; returns their IDs in order.
    static func seedRecipes(_ coordinator: PersistentStoreCoordinator, _ names: [String]) throws -> [ObjectID] {
        let seeder = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "seeder")
        return try seeder.performAndWait { () throws -> [ObjectID] in
            let recipes = names.map { name -> Recipe in
                let recipe = Recipe(context: seeder)
                recipe.name = name
                recipe.servings = 1
                recipe.rating = 0
                return recipe
            }
            try seeder.save()
            return recipes.map(\.objectID)
        }
    }

    static func seedRecipe(_ coordinator: PersistentStoreCoordinator, _ name: String = "Soup") throws -> ObjectID {
        try seedRecipes(coordinator, [name])[0]
    }

    /// What the store holds for `id`, read through a fresh context; nil when absent.
    static func storeState(_ coordinator: PersistentStoreCoordinator, _ id: ObjectID) -> MergeRecipeState? {
        let reader = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "reader")
        return reader.performAndWait { () -> MergeRecipeState? in
            guard let recipe = try? reader.existingObject(with: id) as? Recipe else { return nil }
            return MergeRecipeState(recipe)
        }
    }

    /// How many objects of `Result` the store holds, through a fresh context.
    static func storeCount<Result: ManagedObject>(_ coordinator: PersistentStoreCoordinator, _ type: Result.Type) throws -> Int {
        let reader = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "counter")
        return try reader.performAndWait { () throws -> Int in try reader.count(for: FetchRequest<Result>()) }
    }

    /// `context`'s present view of `id` (loading it if needed); nil when gone
    /// or deleted there (saved or not).
    static func state(in context: ManagedObjectContext, _ id: ObjectID) -> MergeRecipeState? {
        context.performAndWait { () -> MergeRecipeState? in
            guard let recipe = try? context.existingObject(with: id) as? Recipe, !recipe.isDeleted else { return nil }
            return MergeRecipeState(recipe)
        }
    }

    /// Runs `body` on `context`'s queue with the recipe `id` (loaded there).
    static func withRecipe<T>(_ context: ManagedObjectContext, _ id: ObjectID, _ body: (Recipe) throws -> T) throws -> T {
        try context.performAndWait { () throws -> T in
            let recipe = try context.existingObject(with: id) as! Recipe
            return try body(recipe)
        }
    }

    /// Saves `context` on its queue and returns the error it threw, if any.
    static func saveError(_ context: ManagedObjectContext) -> StrataError? {
        context.performAndWait { () -> StrataError? in
            do throws(StrataError) {
                try context.save()
                return nil
            } catch {
                return error
            }
        }
    }

    /// Lets every block already enqueued on `context` run.
    static func drain(_ context: ManagedObjectContext) {
        context.performAndWait {}
    }
}

/// Records whole notifications of one name from one object (also those
/// without a payload, such as will-save), thread-safely.
final class MergeNotificationLog: @unchecked Sendable {
    private let lock = NSLock()
    private var notes: [Notification] = []  // guarded by `lock`
    private var token: (any NSObjectProtocol)?

    init(_ name: Notification.Name, from object: AnyObject) {
        token = NotificationCenter.default.addObserver(forName: name, object: object, queue: nil) { [weak self] note in
            guard let self else { return }
            self.lock.withLock { self.notes.append(note) }
        }
    }
    deinit { if let token { NotificationCenter.default.removeObserver(token) } }

    var all: [Notification] { lock.withLock { notes } }
    var count: Int { lock.withLock { notes.count } }
    var payloads: [ObjectChanges] { all.compactMap { ObjectChanges($0) } }
    var last: Notification? { all.last }
}
