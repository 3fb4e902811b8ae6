import SharedTestSupport
import Foundation
import Strata
import StrataStore
import Testing

// A small kitchen: dishes with components (to-many, cascade) and a cook
// (to-one; a cook's dishes are a to-many). Every attribute type appears.

final class Dish: ManagedObject {
    @Attribute("name") var name: String
    @Attribute("servings") var servings: Int
    @Attribute("rating") var rating: Double
    @Attribute("spicy") var spicy: Bool
    @Attribute("created") var created: Date
    @Attribute("photo") var photo: Data?
    @Attribute("tag") var tag: UUID?
    @Attribute("notes") var notes: String?
    @Relationship("components") var components: Set<Component>
    @Relationship("cook") var cook: Cook?
}

final class Component: ManagedObject {
    @Attribute("name") var name: String
    @Attribute("grams") var grams: Int32
    @Relationship("dish") var dish: Dish?
}

final class Cook: ManagedObject {
    @Attribute("name") var name: String
    @Relationship("dishes") var dishes: Set<Dish>
}

/// A fresh model (an entity belongs to one model).
/// `dishIndexes` and `dishUniqueness` declare indexes on Dish.
func makeKitchenModel(dishIndexes: [IndexDescription] = [], dishUniqueness: [[String]] = []) -> ManagedObjectModel {
    // The fixture is a constant; a failure here is a bug in the test itself.
    try! ManagedObjectModel(entities: [
        EntityDescription(name: "Dish", managedObjectClass: Dish.self, properties: [
            .attribute("name", .string),
            .attribute("servings", .integer64, defaultValue: .integer(1)),
            .attribute("rating", .double, defaultValue: .double(0)),
            .attribute("spicy", .bool, defaultValue: .bool(false)),
            .attribute("created", .date, defaultValue: .date(Date(timeIntervalSinceReferenceDate: 0))),
            .attribute("photo", .binaryData, optional: true),
            .attribute("tag", .uuid, optional: true),
            .attribute("notes", .string, optional: true),
            .toMany("components", "Component", inverse: "dish", deleteRule: .cascade),
            .toOne("cook", "Cook", inverse: "dishes"),
        ], indexes: dishIndexes, uniquenessConstraints: dishUniqueness),
        EntityDescription(name: "Component", managedObjectClass: Component.self, properties: [
            .attribute("name", .string),
            .attribute("grams", .integer32, defaultValue: .integer(0)),
            .toOne("dish", "Dish", inverse: "components"),
        ]),
        EntityDescription(name: "Cook", managedObjectClass: Cook.self, properties: [
            .attribute("name", .string),
            .toMany("dishes", "Dish", inverse: "cook"),
        ]),
    ])
}

/// A fresh directory, removed when the value goes away.
final class ScratchStore {
    let root: String
    /// The store's directory (inside `root`, not created until a store is made).
    var path: String { root + "/store" }

    init(_ name: String = #function) {
        let clean = name.filter { $0.isLetter || $0.isNumber }
        root = FileManager.default.temporaryDirectory
            .appendingPathComponent("strata-dump-tests/\(clean)-\(UUID().uuidString.prefix(8))").path
        try? FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: root) }
}

/// What the small store holds, by ID.
struct SmallStore {
    var soup: String
    var bread: String
    var ada: String
    var salt: String
    var water: String
    var pepper: String
}

/// A store with only log frames: four saves (insert, insert, update, delete).
@discardableResult
func buildSmallStore(at path: String) throws -> SmallStore {
    var options = StoreOptions()
    options.syncMode = .none
    let coordinator = PersistentStoreCoordinator(model: makeKitchenModel())
    try coordinator.addPersistentStore(.log, directory: path, options: options)
    let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
    let ids = try context.performAndWait { () throws -> SmallStore in
        let ada = Cook(context: context)
        ada.name = "Ada"
        let soup = Dish(context: context)
        soup.name = "Soup"
        soup.servings = 4
        soup.rating = 4.5
        soup.spicy = true
        soup.created = Date(timeIntervalSinceReferenceDate: 86_400)
        soup.photo = Data([1, 2, 3])
        soup.tag = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")
        soup.cook = ada
        let salt = Component(context: context)
        salt.name = "Salt"
        salt.grams = 5
        salt.dish = soup
        let water = Component(context: context)
        water.name = "Water"
        water.grams = 500
        water.dish = soup
        try context.save()

        let bread = Dish(context: context)
        bread.name = "Bread"
        bread.cook = ada
        let pepper = Component(context: context)
        pepper.name = "Pepper"
        pepper.grams = 2
        pepper.dish = bread
        try context.save()

        soup.servings = 6
        soup.notes = "add salt \"late\""
        try context.save()

        context.delete(water)
        try context.save()
        return SmallStore(soup: soup.objectID.description, bread: bread.objectID.description, ada: ada.objectID.description,
                          salt: salt.objectID.description, water: water.objectID.description, pepper: pepper.objectID.description)
    }
    try coordinator.close()
    return ids
}

/// A store whose logs were flushed into segments (a 4 KiB log limit, 4 KiB
/// blocks), with some objects updated and deleted after the flushes.
func buildFlushedStore(at path: String, dishes: Int = 300) throws {
    var options = StoreOptions()
    options.syncMode = .none
    options.logSizeLimit = 4 << 10
    options.blockSize = 4 << 10
    options.automaticCompaction = false
    let coordinator = PersistentStoreCoordinator(model: makeKitchenModel())
    try coordinator.addPersistentStore(.log, directory: path, options: options)
    let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
    try context.performAndWait { () throws in
        let cook = Cook(context: context)
        cook.name = "Grace"
        var all: [Dish] = []
        for i in 0..<dishes {
            let dish = Dish(context: context)
            dish.name = "Dish \(i) " + String(repeating: "lorem ipsum ", count: 4)
            dish.servings = i
            dish.cook = cook
            all.append(dish)
            if i % 25 == 24 { try context.save() }
        }
        try context.save()
        for dish in all.prefix(10) { dish.rating = 5 }
        try context.save()
        for dish in all.suffix(5) { context.delete(dish) }
        try context.save()
    }
    try coordinator.close()
}

// MARK: Running strata-dump

/// The `strata-dump` executable, built beside the test bundle.
let dumpExecutable = builtExecutable(named: "strata-dump")

typealias DumpResult = ProcessOutput

/// Runs strata-dump with `arguments`, and checks that the files under
/// `unchanged` (the store, if given) are byte-identical afterwards, none
/// added or removed.
func dump(_ arguments: [String], unchanged store: String? = nil, sourceLocation: SourceLocation = #_sourceLocation) throws -> DumpResult {
    let executable = try #require(dumpExecutable, "strata-dump was not built beside the tests", sourceLocation: sourceLocation)
    let before = store.map(snapshot)
    let output = try runToCompletion(executable, arguments)
    if let store, let before {
        let after = snapshot(store)
        #expect(after.keys.sorted() == before.keys.sorted(), "strata-dump \(arguments.first ?? "") added or removed files", sourceLocation: sourceLocation)
        for (name, bytes) in before where after[name] != bytes {
            Issue.record("strata-dump \(arguments.first ?? "") changed \(name)", sourceLocation: sourceLocation)
        }
    }
    return output
}

/// Every file in `directory` and its bytes.
func snapshot(_ directory: String) -> [String: Data] {
    var files: [String: Data] = [:]
    for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
        files[name] = FileManager.default.contents(atPath: directory + "/" + name) ?? Data()
    }
    return files
}

/// Flips every bit of the byte at `offset` in `path`.
func flipByte(_ path: String, at offset: UInt64) throws {
    let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
    defer { try? handle.close() }
    try handle.seek(toOffset: offset)
    let byte = try #require(try handle.read(upToCount: 1)?.first)
    try handle.seek(toOffset: offset)
    try handle.write(contentsOf: Data([~byte]))
}

func decodeJSON<T: Decodable>(_ type: T.Type, _ result: DumpResult) throws -> T {
    try JSONDecoder().decode(type, from: result.stdoutData)
}
