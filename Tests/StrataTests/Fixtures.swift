import Foundation
import SharedTestSupport
import Strata
import StrataStore
import Testing

// The model every object-graph test uses: recipes with ingredients (to-many,
// cascade), tags (many-to-many, nullify), an author (to-one; an author with
// recipes cannot be deleted: deny), and a one-to-one card.

final class Recipe: ManagedObject {
    @Attribute("name") var name: String
    @Attribute("servings") var servings: Int
    @Attribute("rating") var rating: Double
    @Attribute("notes") var notes: String?
    @Attribute("vegetarian") var vegetarian: Bool
    @Attribute("created") var created: Date
    @Attribute("photo") var photo: Data?
    @Attribute("uuid") var uuid: UUID?
    @Relationship("ingredients") var ingredients: Set<Ingredient>
    @Relationship("tags") var tags: Set<Tag>
    @Relationship("author") var author: Author?
    @Relationship("card") var card: Card?
}

final class Ingredient: ManagedObject {
    @Attribute("name") var name: String
    @Attribute("grams") var grams: Int32
    @Relationship("recipe") var recipe: Recipe?
}

final class Tag: ManagedObject {
    @Attribute("label") var label: String
    @Relationship("recipes") var recipes: Set<Recipe>
}

final class Author: ManagedObject {
    @Attribute("name") var name: String
    @Relationship("recipes") var recipes: Set<Recipe>
}

final class Card: ManagedObject {
    @Attribute("text") var text: String
    @Relationship("recipe") var recipe: Recipe?
}

/// A fresh model (an entity belongs to one model, so each test makes its own).
/// The test model; `recipeIndexes` declares indexes on Recipe.
/// `recipeUniqueness` and `authorUniqueness` declare uniqueness constraints.
func makeModel(
    recipeIndexes: [IndexDescription] = [], recipeUniqueness: [[String]] = [], authorUniqueness: [[String]] = []
) -> ManagedObjectModel {
    try! ManagedObjectModel(entities: [
        EntityDescription(name: "Recipe", managedObjectClass: Recipe.self, properties: [
            .attribute("name", .string),
            .attribute("servings", .integer64, defaultValue: .integer(1)),
            .attribute("rating", .double, defaultValue: .double(0)),
            .attribute("notes", .string, optional: true),
            .attribute("vegetarian", .bool, defaultValue: .bool(false)),
            .attribute("created", .date, defaultValue: .date(Date(timeIntervalSinceReferenceDate: 0))),
            .attribute("photo", .binaryData, optional: true),
            .attribute("uuid", .uuid, optional: true),
            .toMany("ingredients", "Ingredient", inverse: "recipe", deleteRule: .cascade),
            .toMany("tags", "Tag", inverse: "recipes"),
            .toOne("author", "Author", inverse: "recipes"),
            .toOne("card", "Card", inverse: "recipe", deleteRule: .cascade),
        ], indexes: recipeIndexes, uniquenessConstraints: recipeUniqueness),
        EntityDescription(name: "Ingredient", managedObjectClass: Ingredient.self, properties: [
            .attribute("name", .string),
            .attribute("grams", .integer32, defaultValue: .integer(0)),
            .toOne("recipe", "Recipe", inverse: "ingredients"),
        ]),
        EntityDescription(name: "Tag", managedObjectClass: Tag.self, properties: [
            .attribute("label", .string),
            .toMany("recipes", "Recipe", inverse: "tags"),
        ]),
        EntityDescription(name: "Author", managedObjectClass: Author.self, properties: [
            .attribute("name", .string),
            .toMany("recipes", "Recipe", inverse: "author", deleteRule: .deny),
        ], uniquenessConstraints: authorUniqueness),
        EntityDescription(name: "Card", managedObjectClass: Card.self, properties: [
            .attribute("text", .string),
            .toOne("recipe", "Recipe", inverse: "card"),
        ]),
    ])
}

/// A fresh directory, removed when the test ends.
final class TemporaryDirectory {
    let path: String
    init(_ name: String = #function) {
        let clean = name.filter { $0.isLetter || $0.isNumber }
        path = FileManager.default.temporaryDirectory
            .appendingPathComponent("strata-graph-tests/\(clean)-\(UUID().uuidString.prefix(8))").path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Store options for tests: no fsync (crash safety is the engine's tests' business).
func testStoreOptions() -> StoreOptions {
    var options = StoreOptions()
    options.syncMode = .none
    return options
}

/// A coordinator over a fresh store: on disk under `directory`, or in memory.
func makeCoordinator(_ directory: TemporaryDirectory? = nil, model: ManagedObjectModel = makeModel()) throws -> PersistentStoreCoordinator {
    let coordinator = PersistentStoreCoordinator(model: model)
    if let directory {
        try coordinator.addPersistentStore(.log, directory: directory.path + "/store", options: testStoreOptions())
    } else {
        try coordinator.addPersistentStore(.inMemory)
    }
    return coordinator
}

/// Saved recipes numbered 0 … count-1: recipe i is called `name(i)` ("R<i>"
/// unless given) and serves i. Returns their IDs in that order.
func seedNumberedRecipes(
    _ coordinator: PersistentStoreCoordinator, count: Int, name: @escaping (Int) -> String = { "R\($0)" }
) throws -> [ObjectID] {
    let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
    return try context.performAndWait {
        var ids: [ObjectID] = []
        for i in 0..<count {
            let r = Recipe(context: context)
            r.name = name(i)
            r.servings = i
            ids.append(r.objectID)
        }
        try context.save()
        return ids
    }
}

/// Collects notifications of one name from one object, thread-safely.
final class NotificationRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var received: [ObjectChanges] = []  // guarded by `lock`
    private var token: (any NSObjectProtocol)?

    init(_ name: Notification.Name, from object: AnyObject) {
        token = NotificationCenter.default.addObserver(forName: name, object: object, queue: nil) { [weak self] note in
            guard let self, let changes = ObjectChanges(note) else { return }
            self.lock.withLock { self.received.append(changes) }
        }
    }
    deinit { if let token { NotificationCenter.default.removeObserver(token) } }

    var all: [ObjectChanges] { lock.withLock { received } }
}

/// Waits (without blocking the main queue) until `condition` holds or `seconds` pass.
func eventually(_ seconds: Double = 5, _ condition: () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        try? await Task.sleep(nanoseconds: 2_000_000)
    }
    return condition()
}

/// A writer on a fresh store, a middle context and its child: the three
/// levels whose pending changes the randomized read tests lay over each
/// other. Random edits at several levels conflict; every level resolves
/// them with object trump (any resolution will do there).
final class ThreeLevelStack {
    let coordinator: PersistentStoreCoordinator
    let writer: ManagedObjectContext
    let middle: ManagedObjectContext
    let child: ManagedObjectContext
    var contexts: [ManagedObjectContext] { [writer, middle, child] }

    init(model: ManagedObjectModel) throws {
        coordinator = try makeCoordinator(TemporaryDirectory(), model: model)
        writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "writer")
        middle = ManagedObjectContext(.privateQueue, parent: writer, name: "middle")
        child = ManagedObjectContext(.privateQueue, parent: middle, name: "child")
        for context in [writer, middle, child] { context.performAndWait { context.mergePolicy = .mergeByPropertyObjectTrump } }
    }

    /// What each context changed and has not saved, kept referenced so its
    /// registered objects stay (only the test's thread touches it).
    private var held: [ObjectIdentifier: [Recipe]] = [:]

    /// One random step in one of the three contexts: insert up to
    /// `inserts` recipes (made by `insert`), change four fetched ones (by
    /// `change`), delete two, save, or refresh every object.
    func randomStep(
        _ random: inout SeededGenerator, inserts: Int,
        insert: (ManagedObjectContext, inout SeededGenerator) -> Recipe, change: (Recipe, inout SeededGenerator) -> Void
    ) throws {
        let context = contexts[Int.random(in: 0..<3, using: &random)]
        var objects = held[ObjectIdentifier(context)] ?? []
        let operation = Int.random(in: 0..<10, using: &random)
        var local = SeededGenerator(seed: random.next())
        try context.performAndWait { () throws in
            switch operation {
            case 0..<4:
                for _ in 0..<Int.random(in: 1...inserts, using: &local) { objects.append(insert(context, &local)) }
            case 4..<6:
                for recipe in try context.fetch(FetchRequest<Recipe>()).shuffled(using: &local).prefix(4) {
                    change(recipe, &local)
                    objects.append(recipe)
                }
            case 6:
                for recipe in try context.fetch(FetchRequest<Recipe>()).shuffled(using: &local).prefix(2) { context.delete(recipe) }
            case 7..<9:
                try context.save()
                objects.removeAll { $0.managedObjectContext == nil || $0.isDeleted }
            default:
                context.refreshAllObjects()
            }
        }
        held[ObjectIdentifier(context)] = objects
    }
}
