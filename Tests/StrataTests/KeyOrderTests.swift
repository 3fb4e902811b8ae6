import SharedTestSupport
@testable import Strata
import Testing

/// A save writes its new objects in record-key order (entity number, then
/// primary key), whichever way the positions are found.
struct KeyOrderTests {
    /// What the order must be: a comparison sort of the record keys.
    static func expected(_ ids: [ObjectID]) -> [Int] {
        ids.indices.sorted { (ids[$0].entity.index, ids[$0].primaryKey) < (ids[$1].entity.index, ids[$1].primaryKey) }
    }

    static func ids(_ count: Int, keys: () -> UInt64, using generator: inout some RandomNumberGenerator) -> [ObjectID] {
        let entities = makeModel().entities
        return (0..<count).map { _ in
            ObjectID(entity: entities.randomElement(using: &generator)!, primaryKey: keys(), isTemporary: false)
        }
    }

    /// Dense keys (a save's usual), sparse keys over every byte, keys past
    /// 48 bits (the comparison sort), and saves below and at the radix
    /// sort's threshold; several entities mixed in each.
    @Test(arguments: [1, 2, 255, 256, 3_000])
    func positionsFollowTheRecordKeys(count: Int) {
        var generator = SeededGenerator(seed: UInt64(count))
        var next: UInt64 = 0
        var dense = Self.ids(count, keys: { next += 1; return next }, using: &generator)
        dense.shuffle(using: &generator)
        var keyGenerator = SeededGenerator(seed: 7)
        let sparse = Self.ids(count, keys: { keyGenerator.next() >> 16 }, using: &generator)
        let wide = Self.ids(count, keys: { keyGenerator.next() | 1 << 63 }, using: &generator)
        for ids in [dense, sparse, wide] {
            #expect(KeyOrder.positions(of: ids) == Self.expected(ids))
        }
    }

    /// Equal keys keep their order, and a byte in which every key agrees is
    /// skipped without disturbing the others.
    @Test func theRadixSortIsStable() {
        var generator = SeededGenerator(seed: 42)
        let keys = (0..<1_000).map { _ in UInt64.random(in: 0..<64, using: &generator) << 40 | 0xAB00 }
        let expected = keys.indices.sorted { (keys[$0], $0) < (keys[$1], $1) }
        #expect(KeyOrder.radixOrder(of: keys) == expected)
        #expect(KeyOrder.radixOrder(of: []) == [])
    }

    /// Keys that ascend already (a context's change set) come back in their
    /// order; one out of place at the end is still sorted.
    @Test func ascendingKeysKeepTheirOrder() {
        let entities = makeModel().entities.sorted { $0.index < $1.index }
        var ids: [ObjectID] = []
        for entity in entities {
            for key in 1...300 { ids.append(ObjectID(entity: entity, primaryKey: UInt64(key / 2), isTemporary: true)) }
        }
        #expect(KeyOrder.positions(of: ids) == Array(ids.indices))
        ids.append(ObjectID(entity: entities[0], primaryKey: 7, isTemporary: true))
        #expect(KeyOrder.positions(of: ids) == Self.expected(ids))
    }

    /// `forEach(in:)` visits each entry of a table once, with its object, in
    /// key order.
    @Test(arguments: [3, 1_000])
    func forEachVisitsATableInKeyOrder(count: Int) {
        let entities = makeModel().entities
        var generator = SeededGenerator(seed: UInt64(count))
        var table: [ObjectID: ManagedObject] = [:]
        for key in 1...count {
            let entity = entities.randomElement(using: &generator)!
            let id = ObjectID(entity: entity, primaryKey: UInt64(key), isTemporary: true)
            table[id] = ManagedObject(entity: entity, insertInto: nil)
        }
        var visited: [ObjectID] = []
        KeyOrder.forEach(in: table) { id, object in
            #expect(table[id] === object)
            visited.append(id)
        }
        let keys = Array(table.keys)
        #expect(visited == Self.expected(keys).map { keys[$0] })
    }

    /// A context's change set lists its new and its changed objects in key
    /// order, whatever order the hash tables hold them in, each with its
    /// values.
    @Test func aContextsChangeSetListsObjectsInKeyOrder() throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(.confinement, coordinator: coordinator)
        var made: [ManagedObject] = []
        for i in 0..<600 {
            if i % 3 == 0 {
                let ingredient = Ingredient(context: context)
                ingredient.name = "ingredient \(i)"
                made.append(ingredient)
            } else {
                let recipe = Recipe(context: context)
                recipe.name = "recipe \(i)"
                made.append(recipe)
            }
        }
        try context.save()
        for object in made { object.setValue("changed", forKey: "name") }
        for _ in 0..<300 { Recipe(context: context).name = "new" }
        let changes = try context.buildChangeSet()
        #expect(changes.inserted.count == 300 && changes.updated.count == 600)
        #expect(KeyOrder.positions(of: changes.inserted) == Array(changes.inserted.indices))
        #expect(KeyOrder.positions(of: changes.updated) == Array(changes.updated.indices))
        for (id, values) in zip(changes.updated, changes.updatedValues) {
            #expect(context.registeredObject(for: id)?.values == values)
        }
    }
}
