import Foundation
import SharedTestSupport
@testable import Strata
import StrataStore
import Testing

/// A batch update sets attributes of the objects a predicate selects
/// without making them in a context — and goes through what a save does:
/// the model's checks, uniqueness, indexes, history, and the merges that
/// bring contexts up to date.
@Suite struct BatchUpdateTests {
    static func container(_ directory: TemporaryDirectory, model: ManagedObjectModel = makeModel()) throws -> PersistentContainer {
        try PersistentContainer(name: "App", model: model, directory: directory.path + "/store", options: testStoreOptions(), viewContext: .privateQueue)
    }

    static func seed(_ container: PersistentContainer, count: Int) throws -> [ObjectID] {
        var ids: [ObjectID] = []
        try container.saveAndWait { context in
            for i in 0..<count {
                let recipe = Recipe(context: context)
                recipe.name = "R\(i)"
                recipe.servings = i
                ids.append(recipe.objectID)
            }
        }
        return ids
    }

    @Test func aBatchUpdateWritesTheSelectedObjectsAndContextsMerge() throws {
        let directory = TemporaryDirectory()
        let container = try Self.container(directory, model: makeModel(recipeIndexes: [IndexDescription("servings")]))
        let ids = try Self.seed(container, count: 100)
        // The view context holds two recipes: one the update selects, one it does not.
        let view = container.viewContext
        let (selected, other) = try view.performAndWait { () throws -> (Recipe, Recipe) in
            let a = try view.existingObject(with: ids[3]) as! Recipe
            let b = try view.existingObject(with: ids[50]) as! Recipe
            _ = (a.servings, b.servings)
            return (a, b)
        }
        let start = try #require(try container.coordinator.currentHistoryToken())

        var request = BatchUpdateRequest<Recipe>(where: #Predicate { $0.servings < 10 }, set: ["servings": .integer(100), "notes": .string("batch")])
        request.author = "maintenance"
        let result = try container.coordinator.execute(request)
        #expect(Set(result.objectIDs) == Set(ids[0..<10]))
        #expect(result.historyToken?.transactionNumber == start.transactionNumber + 1)

        // Merged into the view context, through the writer.
        container.writerContext.performAndWait {}
        #expect(view.performAndWait { (selected.servings, selected.notes) } == (100, "batch"))
        #expect(view.performAndWait { other.servings } == 50)
        // The index holds the new values.
        let reader = container.newBackgroundContext()
        try reader.performAndWait { () throws in
            let request = FetchRequest<Recipe>(predicate: #Predicate { $0.servings == 100 })
            #expect(try reader.explain(request).description.contains("USING INDEX"))
            #expect(try reader.count(for: request) == 10)
            #expect(try reader.count(for: FetchRequest<Recipe>(predicate: #Predicate { $0.servings < 10 })) == 0)
        }
        // One transaction, by its author, with what changed.
        let history = try container.coordinator.fetchHistory(HistoryRequest(after: start))
        #expect(history.count == 1 && history[0].author == "maintenance")
        #expect(history[0].changes.count == 10 && history[0].changes.allSatisfy { $0.kind == .update && $0.updatedProperties == ["servings", "notes"] })
        // Again: nothing left to change, nothing written.
        let again = try container.coordinator.execute(BatchUpdateRequest<Recipe>(where: #Predicate { $0.servings == 100 }, set: ["servings": .integer(100)]))
        #expect(again.objectIDs.isEmpty)
        #expect(try container.coordinator.currentHistoryToken() == result.historyToken)
        let verified = try ObjectStoreInspector(directory: directory.path + "/store").verifyRecords()
        #expect(verified.problems.isEmpty, "\(verified.problems)")
        try container.close()
    }

    /// Attributes no index holds are set in the stored records where they
    /// lie, without decoding them: every other attribute and relationship
    /// keeps its bytes, an object holding the values already is not
    /// written, the version moves (a context's copy from before conflicts),
    /// and neither the row cache nor a context holds the old values.
    @Test func aBatchUpdateOfAttributesNoIndexHoldsPatchesTheRecords() throws {
        let directory = TemporaryDirectory()
        let container = try Self.container(directory, model: makeModel(recipeIndexes: [IndexDescription("servings")]))
        let patched = "patched, longer than any note before: " + String(repeating: "ü", count: 150)
        var ids: [ObjectID] = []
        try container.saveAndWait { context in
            let author = Author(context: context)
            author.name = "Ada"
            for i in 0..<20 {
                let recipe = Recipe(context: context)
                recipe.name = "R\(i)"
                recipe.servings = i
                recipe.notes = i < 3 ? patched : i % 3 == 0 ? nil : "note \(i)"
                recipe.vegetarian = i < 2
                recipe.rating = Double(i) / 4
                recipe.photo = i % 2 == 0 ? Data(repeating: UInt8(i), count: i * 10) : nil
                recipe.uuid = i % 4 == 0 ? UUID() : nil
                recipe.author = i % 5 == 0 ? nil : author
                for g in 0..<(i % 3) {
                    let ingredient = Ingredient(context: context)
                    ingredient.name = "I\(i).\(g)"
                    ingredient.recipe = recipe
                }
                ids.append(recipe.objectID)
            }
        }
        let entity = try #require(container.coordinator.model.entity(named: "Recipe"))
        let (notesIndex, vegetarianIndex) = (try #require(entity.indexOfProperty("notes")), try #require(entity.indexOfProperty("vegetarian")))
        func stored() throws -> [[PropertyValue]] {
            try container.coordinator.storedSnapshots(ids).map { try #require($0).values }
        }
        let before = try stored()
        // The row cache holds every recipe; an editor on the store holds one with a change.
        let editor = ManagedObjectContext(.privateQueue, coordinator: container.coordinator)
        editor.automaticallyMergesChangesFromParent = false
        let edited = try editor.performAndWait { () throws -> Recipe in
            let recipe = try editor.existingObject(with: ids[5]) as! Recipe
            recipe.rating = 99
            return recipe
        }
        let start = try #require(try container.coordinator.currentHistoryToken())

        let request = BatchUpdateRequest<Recipe>(where: #Predicate { $0.servings < 10 }, set: ["notes": .string(patched), "vegetarian": .bool(true)])
        let result = try container.coordinator.execute(request)
        #expect(Set(result.objectIDs) == Set(ids[2..<10]))
        let after = try stored()
        for i in 0..<20 {
            var expected = before[i]
            if i < 10 {
                expected[notesIndex] = .string(patched)
                expected[vegetarianIndex] = .bool(true)
            }
            #expect(after[i] == expected, "recipe \(i)")
        }
        let history = try container.coordinator.fetchHistory(HistoryRequest(after: start))
        #expect(history.count == 1 && history[0].changes.count == 8)
        for change in history[0].changes {
            #expect(change.kind == .update && change.updatedProperties == (change.objectID == ids[2] ? ["vegetarian"] : ["notes", "vegetarian"]))
        }
        // The editor's copy is of the version before: its save conflicts.
        let conflict = editor.performAndWait { () -> StrataError? in
            do { try editor.save() } catch { return error as? StrataError }
            return nil
        }
        #expect(conflict?.code == .mergeConflict)
        editor.performAndWait { editor.refresh(edited, mergeChanges: false) }
        #expect(editor.performAndWait { (edited.notes, edited.vegetarian, edited.rating) } == (patched, true, 5.0 / 4))
        // Reopened: the same values, and the store checks clean.
        try container.close()
        let reopened = try Self.container(directory, model: makeModel(recipeIndexes: [IndexDescription("servings")]))
        #expect(try reopened.coordinator.storedSnapshots(ids).map { try #require($0).values } == after)
        try reopened.close()
        let verified = try ObjectStoreInspector(directory: directory.path + "/store").verifyRecords()
        #expect(verified.problems.isEmpty, "\(verified.problems)")
    }

    /// A stored record that does not read as its entity's — here a byte
    /// past its last property — stops the batch with a typed error: it is
    /// not patched and written on under a new version, nor is the batch.
    @Test func aBatchUpdateRefusesARecordThatDoesNotRead() throws {
        let directory = TemporaryDirectory()
        var container = try Self.container(directory)
        let ids = try Self.seed(container, count: 3)
        try container.close()
        let store = try StrataStore(directory: directory.path + "/store", options: testStoreOptions())
        let key = RecordCoding.key(ids[1])
        let record = try #require(try store.get(key))
        var batch = WriteBatch()
        batch.put(key, record + [0])
        _ = try store.write(batch)
        try store.close()

        container = try Self.container(directory)
        let error = #expect(throws: StrataError.self) {
            try container.coordinator.execute(BatchUpdateRequest<Recipe>(set: ["rating": .double(5)]))
        }
        #expect(error?.code == .corruptRecord)
        #expect(try container.coordinator.storedSnapshots([ids[0]]).first??.values[2] == .double(0))
        try container.close()
    }

    /// Setting nothing writes nothing, even of an entity with no properties.
    @Test func aBatchUpdateSettingNothingWritesNothing() throws {
        let model = try ManagedObjectModel(entities: [EntityDescription(name: "Marker", managedObjectClass: Marker.self, properties: [])])
        let coordinator = try makeCoordinator(model: model)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            _ = Marker(context: context)
            try context.save()
        }
        #expect(try coordinator.execute(BatchUpdateRequest<Marker>(set: [:])).updatedCount == 0)
    }

    @Test func aBatchUpdateInBatchesWritesEachAsOneTransaction() throws {
        let directory = TemporaryDirectory()
        let container = try Self.container(directory)
        _ = try Self.seed(container, count: 25)
        let start = try #require(try container.coordinator.currentHistoryToken())
        var request = BatchUpdateRequest<Recipe>(set: ["rating": .double(4.5)])
        request.batchSize = 10
        #expect(try container.coordinator.execute(request).objectIDs.count == 25)
        #expect(try container.coordinator.fetchHistory(HistoryRequest(after: start)).map(\.changes.count) == [10, 10, 5])
        try container.close()
    }

    @Test func aBatchUpdateChecksWhatASaveChecks() throws {
        let directory = TemporaryDirectory()
        let container = try Self.container(directory, model: makeModel(recipeUniqueness: [["name"]]))
        _ = try Self.seed(container, count: 5)
        func code(_ properties: [String: PropertyValue], where predicate: Predicate<Recipe>? = nil) -> StrataError.Code? {
            do {
                try container.coordinator.execute(BatchUpdateRequest<Recipe>(where: predicate, set: properties))
                return nil
            } catch {
                return error.code
            }
        }
        #expect(code(["serves": .integer(1)]) == .invalidArgument)           // no such attribute
        #expect(code(["author": .null]) == .invalidArgument)                 // a relationship
        #expect(code(["servings": .string("four")]) == .invalidArgument)     // the wrong type
        #expect(code(["name": .null]) == .validationFailed)                  // a required attribute
        // Two recipes with one name, under a uniqueness constraint: nothing is written.
        #expect(code(["name": .string("Soup")], where: #Predicate { $0.servings < 2 }) == .constraintConflict)
        let names = try container.viewContext.performAndWait { () throws -> Set<String> in
            Set(try Recipe.all(in: container.viewContext).map(\.name))
        }
        #expect(names == ["R0", "R1", "R2", "R3", "R4"])
        try container.close()
    }
}

/// An entity without properties.
final class Marker: ManagedObject {}
