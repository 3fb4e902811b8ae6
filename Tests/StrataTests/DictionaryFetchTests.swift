import Foundation
import SharedTestSupport
@testable import Strata
import Testing

/// Dictionary fetches: chosen properties, distinct values, and counts,
/// sums, minimums, maximums and averages per group, checked against the
/// same computation done by hand over an object fetch.
@Suite struct DictionaryFetchTests {
    static let indexes = [IndexDescription("name"), IndexDescription("servings", "rating"), IndexDescription("created")]

    /// A recipe's attribute values, read in its context.
    struct Values {
        let name: String
        let servings: Int
        let rating: Double
        let vegetarian: Bool
        let created: Date

        init(_ recipe: Recipe) {
            (name, servings, rating, vegetarian, created) = (recipe.name, recipe.servings, recipe.rating, recipe.vegetarian, recipe.created)
        }
    }

    /// Counts per group by hand: the values of `key` of each object.
    static func naiveCounts<Key: Hashable>(_ objects: [Values], _ key: (Values) -> Key) -> [Key: Int] {
        objects.reduce(into: [:]) { $0[key($1), default: 0] += 1 }
    }

    /// A parent that changes an object a child holds, then back to what it
    /// last saved, saves nothing for it — and the child still holds its
    /// older values, which no level above describes any more. Found by the
    /// randomized test below: a count per group read from the index
    /// counted the object by the store's value, where the object fetch
    /// judged it by the child's.
    ///
    ///     writer   servings 4 ─ saved ──────────────────────────────────────
    ///     middle   4 ── 1 (child's save) ── 4 (set back) ── save: no change
    ///     child    4 ── 1, saved ───────────────────── holds 1 ── count per servings?
    @Test func aParentsChangeSetBackLeavesTheChildsOlderValuesSetAside() throws {
        let stack = try ThreeLevelStack(model: makeModel(recipeIndexes: Self.indexes))
        let (writer, middle, child) = (stack.writer, stack.middle, stack.child)
        let id = try writer.performAndWait { () throws in
            let recipe = Recipe(context: writer)
            recipe.name = "Soup"
            recipe.servings = 4
            try writer.save()
            return recipe.objectID
        }
        // Kept referenced: the child holds it (a context keeps only what is referenced or changed).
        let held = try child.performAndWait { () throws in
            let recipe = try child.existingObject(with: id) as! Recipe
            recipe.servings = 1
            try child.save()
            // A fetch: the child has sorted every store change so far.
            #expect(try child.count(for: FetchRequest<Recipe>(predicate: #Predicate { $0.servings == 1 })) == 1)
            return recipe
        }
        try middle.performAndWait { () throws in
            let recipe = try middle.existingObject(with: id) as! Recipe
            #expect(recipe.servings == 1)
            recipe.servings = 4  // what it last saved: no change to save
            try middle.save()
            #expect(!middle.hasChanges)
        }
        try child.performAndWait { () throws in
            #expect(held.servings == 1)  // its own, until refreshed (contract C10)
            let perServings = try child.fetch(DictionaryFetchRequest<Recipe>(propertiesToFetch: ["servings", .count()], groupBy: ["servings"]))
            #expect(try child.explain(DictionaryFetchRequest<Recipe>(propertiesToFetch: ["servings", .count()], groupBy: ["servings"])).description.hasSuffix("FOR GROUP BY"))
            #expect(perServings.map { [$0.value("servings", as: Int.self)!, $0.value("count", as: Int.self)!] } == [[1, 1]])
            #expect(try child.count(for: FetchRequest<Recipe>(predicate: #Predicate { $0.servings == 1 })) == 1)
            #expect(try child.count(for: FetchRequest<Recipe>(predicate: #Predicate { $0.servings == 4 })) == 0)
        }
    }

    /// The differential test: in every context of a stack with pending
    /// changes at each level, each dictionary fetch — counts per group read
    /// from an index, and aggregates read from records — equals what an
    /// object fetch with the same predicate, reduced by hand, gives;
    /// pending changes included or not, across saves and refreshes.
    @Test func groupsAndAggregatesAnswerAsTheObjectsDo() async throws {
        let seed = testSeed()
        var random = SeededGenerator(seed: seed)
        let stack = try ThreeLevelStack(model: makeModel(recipeIndexes: Self.indexes))
        let coordinator = stack.coordinator
        let contexts = stack.contexts
        let steps = ProcessInfo.processInfo.environment["STRATA_SANITIZED"] == nil ? 30 : 10
        for step in 0..<steps {
            await Task.yield()
            try stack.randomStep(&random, inserts: 8, insert: { context, random in
                let recipe = Recipe(context: context)
                recipe.name = ["Soup", "Stew", "Ré", "Re\u{301}", ""][Int.random(in: 0..<5, using: &random)]
                recipe.servings = Int.random(in: 0..<5, using: &random)
                recipe.rating = Double(Int.random(in: 0..<3, using: &random))
                recipe.vegetarian = Bool.random(using: &random)
                recipe.created = Date(timeIntervalSinceReferenceDate: Double(Int.random(in: 0..<1000, using: &random)))
                return recipe
            }, change: { recipe, random in
                recipe.servings = Int.random(in: 0..<5, using: &random)
                if Bool.random(using: &random) { recipe.name = "Pie" }
            })
            guard step % 3 == 2 || step == steps - 1 else { continue }
            let servings = step % 5
            let fresh = ManagedObjectContext(.privateQueue, parent: contexts[step % 3], name: "fresh")
            for context in contexts + [fresh] {
                try context.performAndWait { () throws in
                    for pending in [true, false] {
                        let label = "seed \(seed), step \(step), \(context.name), pending \(pending)"
                        // The objects, with the values the dictionary fetch
                        // reads: without pending changes, the source's, as a
                        // fresh context on the same source sees them (as in
                        // Core Data, where such a fetch reads the store).
                        func objects(_ predicate: Predicate<Recipe>?) throws -> [Values] {
                            if pending { return try context.fetch(FetchRequest<Recipe>(predicate: predicate)).map(Values.init) }
                            let sibling = if let parent = context.parent {
                                ManagedObjectContext(.privateQueue, parent: parent)
                            } else {
                                ManagedObjectContext(.privateQueue, coordinator: coordinator)
                            }
                            return try sibling.performAndWait { () throws in
                                try sibling.fetch(FetchRequest<Recipe>(predicate: predicate)).map(Values.init)
                            }
                        }
                        func rows(_ request: DictionaryFetchRequest<Recipe>) throws -> [DictionaryResult] {
                            var request = request
                            request.includesPendingChanges = pending
                            return try context.fetch(request)
                        }
                        // Counts per group, from the index's entries.
                        let bigger = #Predicate<Recipe> { $0.servings > servings }
                        for predicate in [nil, bigger] {
                            let request = DictionaryFetchRequest<Recipe>(predicate: predicate, propertiesToFetch: ["servings", .count()], groupBy: ["servings"])
                            #expect(try context.explain(request).description.hasSuffix("FOR GROUP BY"))
                            let found = try rows(request)
                            let expected = Self.naiveCounts(try objects(predicate)) { $0.servings }
                            #expect(found.map { $0.value("servings", as: Int.self)! } == expected.keys.sorted(), "\(label)")
                            #expect(Dictionary(uniqueKeysWithValues: found.map { ($0.value("servings", as: Int.self)!, $0.value("count", as: Int.self)!) }) == expected, "\(label)")
                        }
                        // Two grouped attributes, in another order than the index's.
                        let pairs = try rows(DictionaryFetchRequest<Recipe>(propertiesToFetch: [.count(as: "n")], groupBy: ["rating", "servings"]))
                        let expectedPairs = Self.naiveCounts(try objects(nil)) { [PropertyValue.double($0.rating), .integer(Int64($0.servings))] }
                        let rowsByPair = try rows(DictionaryFetchRequest<Recipe>(propertiesToFetch: ["rating", "servings", .count(as: "n")], groupBy: ["rating", "servings"]))
                        #expect(Dictionary(uniqueKeysWithValues: rowsByPair.map { ([$0["rating"]!, $0["servings"]!], $0.value("n", as: Int.self)!) }) == expectedPairs, "\(label)")
                        #expect(pairs.map { $0.value("n", as: Int.self)! } == rowsByPair.map { $0.value("n", as: Int.self)! })
                        // Names: "Ré" and "Re\u{301}" are one group, as Swift's == says.
                        let names = try rows(DictionaryFetchRequest<Recipe>(propertiesToFetch: ["name", .count()], groupBy: ["name"]))
                        let expectedNames = Self.naiveCounts(try objects(nil)) { $0.name }
                        #expect(Dictionary(uniqueKeysWithValues: names.map { ($0.value("name", as: String.self)!, $0.value("count", as: Int.self)!) }) == expectedNames, "\(label)")
                        // Aggregates, from the records (no index groups by vegetarian).
                        let aggregates = DictionaryFetchRequest<Recipe>(
                            propertiesToFetch: ["vegetarian", .count(), .sum("servings"), .min("rating"), .max("created"), .average("servings"), .min("name")],
                            groupBy: ["vegetarian"])
                        #expect(try context.explain(aggregates).index == nil)
                        let all = try objects(nil)
                        let found = try rows(aggregates)
                        #expect(found.map { $0.value("vegetarian", as: Bool.self)! } == Set(all.map(\.vegetarian)).sorted { !$0 && $1 }, "\(label)")
                        for row in found {
                            let group = all.filter { $0.vegetarian == row.value("vegetarian", as: Bool.self)! }
                            #expect(row.value("count", as: Int.self) == group.count, "\(label)")
                            #expect(row.value("sum(servings)", as: Int.self) == group.map(\.servings).reduce(0, +), "\(label)")
                            #expect(row.value("min(rating)", as: Double.self) == group.map(\.rating).min(), "\(label)")
                            #expect(row.value("max(created)", as: Date.self) == group.map(\.created).max(), "\(label)")
                            #expect(row.value("average(servings)", as: Double.self) == Double(group.map(\.servings).reduce(0, +)) / Double(group.count), "\(label)")
                            #expect(row.value("min(name)", as: String.self) == group.map(\.name).min(), "\(label)")
                        }
                        // The same counts through the records: a sum alongside forbids the index.
                        let throughRecords = try rows(DictionaryFetchRequest<Recipe>(predicate: bigger, propertiesToFetch: ["servings", .count(), .sum("servings")], groupBy: ["servings"]))
                        #expect(throughRecords.map { $0["count"] } == (try rows(DictionaryFetchRequest<Recipe>(predicate: bigger, propertiesToFetch: ["servings", .count()], groupBy: ["servings"]))).map { $0["count"] }, "\(label)")
                    }
                }
            }
        }
    }
}

extension DictionaryFetchTests {
    /// Recipes with 0, 1 and 3 ingredients, saved, plus an author.
    static func seedKitchen(_ coordinator: PersistentStoreCoordinator) throws {
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            let author = Author(context: context)
            author.name = "Ada"
            for (i, count) in [0, 1, 3].enumerated() {
                let recipe = Recipe(context: context)
                recipe.name = "R\(i)"
                recipe.servings = i + 1
                recipe.notes = i == 0 ? nil : "n\(i)"
                if i > 0 { recipe.author = author }
                for j in 0..<count {
                    let ingredient = Ingredient(context: context)
                    ingredient.name = "I\(i).\(j)"
                    ingredient.recipe = recipe
                }
            }
            try context.save()
        }
    }

    /// A name → ID map from a dictionary fetch (Core Data's `objectID`
    /// expression): each row's ID is the object's, whether the row was read
    /// from the store, from a parent's unsaved insert, or from this
    /// context's own change; nothing is registered to build it.
    @Test func objectIDColumnMapsKeysToObjectsWithoutRegisteringThem() throws {
        let coordinator = try makeCoordinator(TemporaryDirectory())
        try Self.seedKitchen(coordinator)
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let r3 = try parent.performAndWait { () throws in
            let recipe = Recipe(context: parent)
            recipe.name = "R3"
            return recipe.objectID
        }
        let context = ManagedObjectContext(.privateQueue, parent: parent)
        try context.performAndWait { () throws in
            let request = DictionaryFetchRequest<Recipe>(propertiesToFetch: ["name", .objectID()])
            var rows = try context.fetch(request)
            #expect(context.registeredObjects.isEmpty)
            var ids = Dictionary(uniqueKeysWithValues: rows.map { ($0.value("name", as: String.self)!, $0.objectID()!) })
            #expect(ids.keys.sorted() == ["R0", "R1", "R2", "R3"])
            #expect(ids["R3"] == r3 && r3.isTemporaryID)
            for (name, id) in ids {
                let object = context.object(with: id) as! Recipe
                #expect(object.name == name)
            }
            // This context's own changes: a rename and a new recipe.
            (context.object(with: ids["R0"]!) as! Recipe).name = "R0'"
            let r4 = Recipe(context: context)
            r4.name = "R4"
            rows = try context.fetch(request)
            ids = Dictionary(uniqueKeysWithValues: rows.map { ($0.value("name", as: String.self)!, $0.objectID()!) })
            #expect(ids.keys.sorted() == ["R0'", "R1", "R2", "R3", "R4"])
            #expect(ids["R4"] == r4.objectID)
            // Under its own key, and read as the column it is.
            let keyed = try context.fetch(DictionaryFetchRequest<Recipe>(propertiesToFetch: [.objectID(as: "id")]))
            #expect(Set(keyed.compactMap { $0.objectID("id") }) == Set(ids.values))
            #expect(keyed[0].objectID() == nil && keyed[0].objectID("name") == nil)
            // Per object: not with groups or aggregates.
            for bad in [DictionaryFetchRequest<Recipe>(propertiesToFetch: [.objectID(), .count()]),
                        DictionaryFetchRequest<Recipe>(propertiesToFetch: ["servings", .objectID()], groupBy: ["servings"])] {
                do throws(StrataError) {
                    _ = try context.fetch(bad)
                    Issue.record("a grouped objectID column was accepted")
                } catch {
                    #expect(error.code == .invalidArgument && error.message.contains("per object"), "\(error)")
                }
            }
        }
    }

    /// A row per object, with a to-many relationship's count read from the
    /// record: the context registers nothing, not the recipes, not their ingredients.
    @Test func perObjectRowsCountRelationshipsWithoutObjects() throws {
        let coordinator = try makeCoordinator(TemporaryDirectory())
        try Self.seedKitchen(coordinator)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            var request = DictionaryFetchRequest<Recipe>(propertiesToFetch: ["name", "notes", .count(of: "ingredients")])
            request.sortBy = [.descending("name")]
            let rows = try context.fetch(request)
            #expect(rows.map { $0.value("name", as: String.self)! } == ["R2", "R1", "R0"])
            #expect(rows.map { $0.value("count(ingredients)", as: Int.self)! } == [3, 1, 0])
            // Read by the property as requested, with no key to guess; a
            // key the row does not have is an error naming the ones it has.
            #expect(rows.map { $0.value(.count(of: "ingredients"), as: Int.self)! } == [3, 1, 0])
            #expect(try rows.map { try $0.require(.count(of: "ingredients"), as: Int.self)! } == [3, 1, 0])
            #expect(rows[0][.count(of: "ingredients")] == .integer(3))
            #expect(try rows[2].require("notes", as: String.self) == nil)
            #expect(throws: StrataError.self) { try rows[0].require("count", as: Int.self) }
            do throws(StrataError) {
                _ = try rows[0].require("count", as: Int.self)
            } catch {
                #expect(error.code == .invalidArgument && "\(error)".contains("\"count(ingredients)\""), "\(error)")
            }
            #expect(throws: StrataError.self) { try rows[0].require("name", as: Int.self) }
            #expect(rows.map { $0["notes"]! } == [.string("n2"), .string("n1"), .null])
            #expect(context.registeredObjects.isEmpty)
            // Pending changes count: a new ingredient here, unsaved.
            let r0 = try context.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.name == "R0" }))[0]
            let ingredient = Ingredient(context: context)
            ingredient.recipe = r0
            let counts = try context.fetch(DictionaryFetchRequest<Recipe>(propertiesToFetch: ["name", .count(of: "ingredients", as: "n")]))
            #expect(Dictionary(uniqueKeysWithValues: counts.map { ($0.value("name", as: String.self)!, $0.value("n", as: Int.self)!) })
                    == ["R0": 1, "R1": 1, "R2": 3])
        }
    }

    /// Distinct values, groups by a to-one relationship (the author's ID),
    /// ordering by an aggregate, and a page of the groups.
    @Test func distinctValuesRelationshipGroupsAndPages() throws {
        let coordinator = try makeCoordinator(TemporaryDirectory())
        try Self.seedKitchen(coordinator)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            let ingredient = DictionaryFetchRequest<Ingredient>(propertiesToFetch: ["recipe"])
            var distinct = ingredient
            distinct.returnsDistinctResults = true
            #expect(try context.fetch(ingredient).count == 4)
            #expect(try context.fetch(distinct).count == 2)

            let author = try context.fetch(FetchRequest<Author>())[0].objectID
            let byAuthor = try context.fetch(DictionaryFetchRequest<Recipe>(propertiesToFetch: ["author", .count(), .max("servings")], groupBy: ["author"]))
            // Nil groups first.
            #expect(byAuthor.map { $0["author"]! } == [.null, .object(author)])
            #expect(byAuthor.map { $0.value("count", as: Int.self)! } == [1, 2])
            #expect(byAuthor.map { $0.value("max(servings)", as: Int.self)! } == [1, 3])

            var page = DictionaryFetchRequest<Ingredient>(propertiesToFetch: ["recipe", .count()], groupBy: ["recipe"])
            page.sortBy = [.descending("count")]
            page.fetchLimit = 1
            #expect(try context.fetch(page).map { $0.value("count", as: Int.self)! } == [3])
            page.fetchOffset = 1
            #expect(try context.fetch(page).map { $0.value("count", as: Int.self)! } == [1])
        }
    }

    /// Aggregates over no match, as SQL has them: one result, its count 0
    /// and its sum 0, its minimum and average nil; grouped, no result. Nil
    /// values are passed over.
    @Test func aggregatesOverNothingAndOverNils() throws {
        let coordinator = try makeCoordinator(TemporaryDirectory())
        try Self.seedKitchen(coordinator)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            let columns: [FetchedProperty] = [.count(), .sum("servings"), .sum("rating"), .min("notes"), .average("servings")]
            let none = try context.fetch(DictionaryFetchRequest<Recipe>(predicate: #Predicate { $0.servings > 10 }, propertiesToFetch: columns))
            #expect(none.count == 1)
            #expect(none[0]["count"] == .integer(0))
            #expect(none[0]["sum(servings)"] == .integer(0))
            #expect(none[0]["sum(rating)"] == .double(0))
            #expect(none[0]["min(notes)"] == .null)
            #expect(none[0]["average(servings)"] == .null)
            #expect(try context.fetch(DictionaryFetchRequest<Recipe>(predicate: #Predicate { $0.servings > 10 },
                                                                     propertiesToFetch: [.count()], groupBy: ["servings"])).isEmpty)
            let all = try context.fetch(DictionaryFetchRequest<Recipe>(propertiesToFetch: columns + [.max("notes"), .count(as: "objects")]))
            #expect(all.count == 1)
            #expect(all[0]["count"] == .integer(3))
            #expect(all[0]["sum(servings)"] == .integer(6))
            #expect(all[0]["min(notes)"] == .string("n1"))
            #expect(all[0]["max(notes)"] == .string("n2"))
            #expect(all[0]["average(servings)"] == .double(2))
        }
    }

    /// A request that breaks the rules throws a typed error naming what is
    /// wrong, and an integer sum that overflows throws instead of wrapping.
    @Test func brokenRequestsThrowTypedErrors() throws {
        let coordinator = try makeCoordinator(TemporaryDirectory())
        try Self.seedKitchen(coordinator)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let broken: [(DictionaryFetchRequest<Recipe>, String)] = [
            (DictionaryFetchRequest(propertiesToFetch: ["colour"]), "no property colour"),
            (DictionaryFetchRequest(propertiesToFetch: ["name", .count()], groupBy: ["servings"]), "neither grouped by nor aggregated"),
            (DictionaryFetchRequest(propertiesToFetch: ["name", .count()]), "neither grouped by nor aggregated"),
            (DictionaryFetchRequest(propertiesToFetch: [.sum("name")]), "integer or double"),
            (DictionaryFetchRequest(propertiesToFetch: [.max("vegetarian")]), "integer, double, string or date"),
            (DictionaryFetchRequest(propertiesToFetch: [.count(of: "author")]), "needs a to-many relationship"),
            (DictionaryFetchRequest(propertiesToFetch: [.count(of: "ingredients"), .count()]), "is per object"),
            (DictionaryFetchRequest(propertiesToFetch: ["ingredients"]), "to-many relationship"),
            (DictionaryFetchRequest(propertiesToFetch: [.count()], groupBy: ["tags"]), "cannot group by the to-many"),
            (DictionaryFetchRequest(propertiesToFetch: [.count(), .count()]), "two columns have the key count"),
            (DictionaryFetchRequest(propertiesToFetch: []), "needs properties to fetch"),
        ]
        try context.performAndWait { () throws in
            for (request, message) in broken {
                let error = #expect(throws: StrataError.self) { try context.fetch(request) }
                #expect(error?.code == .invalidArgument)
                #expect(error?.message.contains(message) == true, "\(error?.message ?? "") should say \(message)")
            }
            var unsorted = DictionaryFetchRequest<Recipe>(propertiesToFetch: ["name"])
            unsorted.sortBy = [.ascending("servings")]
            #expect(throws: StrataError.self) { try context.fetch(unsorted) }
            // Nothing was registered or changed by the refused requests.
            #expect(context.registeredObjects.isEmpty && !context.hasChanges)

            let big = Recipe(context: context)
            big.servings = .max
            let overflow = #expect(throws: StrataError.self) { try context.fetch(DictionaryFetchRequest<Recipe>(propertiesToFetch: [.sum("servings")])) }
            #expect(overflow?.message.contains("does not fit") == true)
            // The average of the same values is a double, and does not overflow.
            let average = try context.fetch(DictionaryFetchRequest<Recipe>(propertiesToFetch: [.average("servings")]))
            #expect(average[0].value("average(servings)", as: Double.self) == (Double(Int.max) + 6) / 4)
        }
    }
}

extension DictionaryFetchTests {
    /// Counts per group read from an index, with pending changes that move
    /// objects between groups: a delete, an update and an insert here, seen
    /// by this context (not without its pending changes) and by its child.
    @Test func indexedGroupCountsFollowPendingChanges() throws {
        let coordinator = try makeCoordinator(TemporaryDirectory(), model: makeModel(recipeIndexes: Self.indexes))
        _ = try seedNumberedRecipes(coordinator, count: 3)  // serving 0, 1, 2
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let child = ManagedObjectContext(.privateQueue, parent: context)
        func counts(_ context: ManagedObjectContext, pending: Bool = true) throws -> [Int: Int] {
            try context.performAndWait { () throws in
                var request = DictionaryFetchRequest<Recipe>(propertiesToFetch: ["servings", .count()], groupBy: ["servings"])
                request.includesPendingChanges = pending
                #expect(try context.explain(request).description == "SCAN Recipe USING INDEX (servings, rating) FOR GROUP BY")
                return Dictionary(uniqueKeysWithValues: try context.fetch(request).map { ($0.value("servings", as: Int.self)!, $0.value("count", as: Int.self)!) })
            }
        }
        #expect(try counts(context) == [0: 1, 1: 1, 2: 1])
        try context.performAndWait { () throws in
            context.retainsRegisteredObjects = true
            let recipes = try context.fetch(FetchRequest<Recipe>(sortBy: [SortDescriptor(\.servings)]))
            context.delete(recipes[0])
            recipes[1].servings = 2
            let new = Recipe(context: context)
            new.name = "new"
            new.servings = 2
        }
        #expect(try counts(context) == [2: 3])
        #expect(try counts(context, pending: false) == [0: 1, 1: 1, 2: 1])
        #expect(try counts(child) == [2: 3])
        try context.performAndWait { try context.save() }
        #expect(try counts(ManagedObjectContext(.privateQueue, coordinator: coordinator)) == [2: 3])
    }
}
