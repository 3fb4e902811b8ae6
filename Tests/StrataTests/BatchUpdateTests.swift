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
