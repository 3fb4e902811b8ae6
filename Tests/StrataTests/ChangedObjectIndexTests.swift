@testable import Strata
import Testing

/// ``ChangedObjectIndex``: where an object stands in a recorded child save,
/// the same whether it is answered by hash or by scan, and nothing for an
/// object the save leaves alone — inside its key range or out of it, of its
/// entities or another.
@Suite struct ChangedObjectIndexTests {
    private let model = makeModel()
    private var recipe: EntityDescription { model.entity(named: "Recipe")! }
    private var ingredient: EntityDescription { model.entity(named: "Ingredient")! }

    private func id(_ entity: EntityDescription, _ key: UInt64) -> ObjectID {
        ObjectID(entity: entity, primaryKey: key, isTemporary: false)
    }

    /// Recipes 1000…1000+n inserted, recipes 10 and 30 updated, recipe 20
    /// deleted; ingredients 1…n inserted (their keys overlap the recipes').
    /// With n = 40 or more, over ``ChangedObjectIndex/hashedAbove`` objects.
    private func changes(inserting n: Int) -> ChangeSet {
        var changes = ChangeSet()
        changes.inserted = (0..<UInt64(n)).map { id(recipe, 1_000 + $0) } + (1...UInt64(n)).map { id(ingredient, $0) }
        changes.updated = [id(recipe, 10), id(recipe, 30)]
        changes.deleted = [id(recipe, 20)]
        return changes
    }

    @Test("each object's position, by hash and by scan alike", arguments: [40, 100])
    func positions(inserting n: Int) {
        let changes = changes(inserting: n)
        for hashed in [false, true] {
            let index = ChangedObjectIndex(changes, hashed: hashed)
            for (i, id) in changes.inserted.enumerated() { #expect(index.position(of: id, in: changes) == .inserted(i)) }
            #expect(index.position(of: id(recipe, 10), in: changes) == .updated(0))
            #expect(index.position(of: id(recipe, 30), in: changes) == .updated(1))
            #expect(index.position(of: id(recipe, 20), in: changes) == .deleted(0))
        }
    }

    @Test("an object the save leaves alone has no position", arguments: [40, 100])
    func absent(inserting n: Int) {
        let changes = changes(inserting: n)
        let tag = model.entity(named: "Tag")!
        for hashed in [false, true] {
            let index = ChangedObjectIndex(changes, hashed: hashed)
            #expect(index.position(of: id(recipe, 15), in: changes) == nil, "inside the recipes' range")
            #expect(index.position(of: id(recipe, 9), in: changes) == nil, "below it")
            #expect(index.position(of: id(recipe, 5_000), in: changes) == nil, "above it")
            #expect(index.position(of: id(ingredient, 10_000), in: changes) == nil)
            #expect(index.position(of: id(tag, 1), in: changes) == nil, "an entity the save does not touch")
            #expect(index.position(of: id(ingredient, UInt64(n) + 1), in: changes) == nil)
        }
        let empty = ChangedObjectIndex(ChangeSet(), hashed: true)
        #expect(empty.position(of: id(recipe, 10), in: ChangeSet()) == nil, "an empty save")
    }

    @Test("an object listed twice answers as the scan does: updated before deleted before inserted")
    func listedTwice() {
        var changes = ChangeSet()
        changes.inserted = (1...100).map { id(recipe, $0) }
        changes.updated = [id(recipe, 50)]
        changes.deleted = [id(recipe, 60)]
        for hashed in [false, true] {
            let index = ChangedObjectIndex(changes, hashed: hashed)
            #expect(index.position(of: id(recipe, 50), in: changes) == .updated(0))
            #expect(index.position(of: id(recipe, 60), in: changes) == .deleted(0))
            #expect(index.position(of: id(recipe, 70), in: changes) == .inserted(69))
        }
    }
}
