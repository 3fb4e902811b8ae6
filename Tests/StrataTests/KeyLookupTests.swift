import Foundation
import SharedTestSupport
@testable import Strata
import StrataStore
import Testing

/// Lookups by one attribute's value: `first(in:where:equals:)` and
/// `findOrCreate(where:equals:in:)` (MagicalRecord's by-attribute finders),
/// and the plan every such lookup gets without weighing each index.
@Suite struct KeyLookupTests {
    static func model() -> ManagedObjectModel {
        makeModel(recipeIndexes: [IndexDescription("servings"), IndexDescription("notes", "servings"), IndexDescription("created")],
                  recipeUniqueness: [["name"]])
    }

    /// A key looked up again before any write a read can see goes to the
    /// object the index named first, without walking the index again
    /// (``LookupMemo``) — held here or not; a delete here, a rename in the
    /// store and a new store version are each seen as the walk sees them.
    ///
    ///     child (this test)                         other context
    ///     20 names × 5 rounds: 20 walks
    ///     delete "stored 5": not found, by walk
    ///                                              renames "stored 3";
    ///                                              deletes "stored 18", saves,
    ///                                              inserts a new "stored 18", saves
    ///     a name whose entries changed: one walk again;
    ///     one no write touched: none (a new version, same entries);
    ///     answers as the #Predicate lookup's
    @Test func aKeyLookedUpAgainBeforeAWriteIsNotWalkedAgain() throws {
        let coordinator = try makeCoordinator(TemporaryDirectory(), model: Self.model())
        _ = try seedNumberedRecipes(coordinator, count: 20, name: { "stored \($0)" })
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "writer")
        let child = ManagedObjectContext(.privateQueue, parent: writer, name: "child")
        var held: [Recipe] = []
        var notHeld: [ObjectID] = []
        try child.performAndWait {
            for round in 0..<5 {
                for i in 0..<20 {
                    let found = try #require(try Recipe.first(in: child, where: \.name, equals: "stored \(i)"))
                    if round > 0 {
                        #expect(found.objectID == (i < 18 ? held[i].objectID : notHeld[i - 18]), "round \(round), stored \(i)")
                    } else if i < 18 {
                        held.append(found)
                    } else {
                        notHeld.append(found.objectID)
                    }
                }
            }
            #expect(child.keyLookups.walks == 20, "\(child.keyLookups.walks) walks for 100 lookups of 20 names")
            // Deleted here: the walk skips it, and so does the memo.
            child.delete(held[5])
            #expect(try Recipe.first(in: child, where: \.name, equals: "stored 5") == nil)
        }
        // Elsewhere: one renamed, one (not held by the child) replaced by a
        // new object under its name.
        let other = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "other")
        try other.performAndWait {
            try #require(try Recipe.first(in: other, where: \.name, equals: "stored 3")).name = "renamed elsewhere"
            other.delete(try #require(try Recipe.first(in: other, where: \.name, equals: "stored 18")))
            try other.save()
            Recipe(context: other).name = "stored 18"
            try other.save()
        }
        try child.performAndWait {
            // The walks of the key-path lookup alone, by name.
            let expectedWalks = ["stored 0": 0, "stored 3": 1, "renamed elsewhere": 1, "stored 5": 1, "stored 18": 1, "stored 19": 0]
            for name in ["stored 0", "stored 3", "renamed elsewhere", "stored 5", "stored 18", "stored 19"] {
                let walks = child.keyLookups.walks
                let byKey = try Recipe.first(in: child, where: \.name, equals: name)
                #expect(child.keyLookups.walks - walks == expectedWalks[name], "\(name): \(child.keyLookups.walks - walks) walks")
                let byPredicate = try Recipe.first(in: child, where: #Predicate { $0.name == name })
                #expect(byKey?.objectID == byPredicate?.objectID, "\(name): \(String(describing: byKey?.objectID)) by key path")
            }
            #expect(try Recipe.first(in: child, where: \.name, equals: "stored 18")?.objectID != notHeld[0])
        }
    }

    /// An import saves batch after batch and meets the same related records
    /// in each: a key looked up at an earlier version of the store is not
    /// walked again when no save since touched its index entries (a new
    /// version from writes elsewhere in the store), and is when one did — a
    /// rename away from it, a delete, a new object under it — whether or
    /// not the context holds the object. Each answer is checked against a
    /// fetch, which plans and walks the index itself.
    ///
    ///     importer (this test)                      other context
    ///     20 names: 20 walks
    ///     3 batches: each name looked up,
    ///       an ingredient added to it, saved:
    ///       no walk
    ///                                              servings of "stored 7" (another index);
    ///                                              renames "stored 3" (not held here)
    ///                                              and "stored 4" (held); deletes "stored 5";
    ///                                              inserts "stored 20"; saves
    ///     "stored 3", "stored 4", "stored 5": a walk each; the other 17: none
    @Test func aKeyNoSaveTouchedIsNotWalkedAgainAtANewVersion() throws {
        let coordinator = try makeCoordinator(TemporaryDirectory(), model: Self.model())
        _ = try seedNumberedRecipes(coordinator, count: 20, name: { "stored \($0)" })
        let names = (0..<20).map { "stored \($0)" }
        let importer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "importer")
        func checkAgainstAFetch(_ name: String, _ found: Recipe?) throws {
            let fetched = try importer.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.name == name })).map(\.objectID)
            #expect(found.map { fetched.contains($0.objectID) } ?? fetched.isEmpty, "\(name): \(String(describing: found?.objectID)), a fetch: \(fetched)")
        }
        // Even names held by the importer, odd ones let go (only their IDs kept).
        var held: [Recipe] = []
        try importer.performAndWait {
            for (i, name) in names.enumerated() {
                let found = try #require(try Recipe.first(in: importer, where: \.name, equals: name))
                if i % 2 == 0 { held.append(found) }
            }
            #expect(importer.keyLookups.walks == 20)
            for batch in 0..<3 {
                let walks = importer.keyLookups.walks
                for name in names {
                    let recipe = try #require(try Recipe.first(in: importer, where: \.name, equals: name))
                    let ingredient = Ingredient(context: importer)
                    ingredient.name = "batch \(batch)"
                    ingredient.recipe = recipe
                }
                #expect(importer.keyLookups.walks == walks, "batch \(batch): \(importer.keyLookups.walks - walks) walks")
                try importer.save()
            }
        }
        let other = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "other")
        try other.performAndWait {
            try #require(try Recipe.first(in: other, where: \.name, equals: "stored 7")).servings = 700
            try #require(try Recipe.first(in: other, where: \.name, equals: "stored 3")).name = "renamed 3"
            try #require(try Recipe.first(in: other, where: \.name, equals: "stored 4")).name = "renamed 4"
            other.delete(try #require(try Recipe.first(in: other, where: \.name, equals: "stored 5")))
            Recipe(context: other).name = "stored 20"
            try other.save()
        }
        try importer.performAndWait {
            for name in names {
                let walks = importer.keyLookups.walks
                let found = try Recipe.first(in: importer, where: \.name, equals: name)
                let expected = ["stored 3", "stored 4", "stored 5"].contains(name) ? 1 : 0
                #expect(importer.keyLookups.walks - walks == expected, "\(name): \(importer.keyLookups.walks - walks) walks")
                try checkAgainstAFetch(name, found)
            }
            #expect(try Recipe.first(in: importer, where: \.name, equals: "stored 3") == nil)
            #expect(try Recipe.first(in: importer, where: \.name, equals: "stored 5") == nil)
            #expect(try Recipe.first(in: importer, where: \.name, equals: "stored 7")?.servings == 700)
            for name in ["renamed 3", "stored 20"] {
                let found = try Recipe.first(in: importer, where: \.name, equals: name)
                #expect(found != nil, "\(name) not found")
                try checkAgainstAFetch(name, found)
            }
        }
        _ = held
    }

    /// A key looked up again and again — a category — keeps its memo entry
    /// while thousands of keys looked up once each — the records of an
    /// import — pass through: it is walked once, they once each.
    @Test func aKeyLookedUpOftenOutlastsKeysLookedUpOnce() throws {
        let coordinator = try makeCoordinator(model: Self.model())
        let count = 3 * LookupMemo.capacity
        _ = try seedNumberedRecipes(coordinator, count: count, name: { "stored \($0)" })
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            #expect(try Recipe.first(in: context, where: \.name, equals: "stored 0") != nil)
            for i in 1..<count {
                #expect(try Recipe.first(in: context, where: \.name, equals: "stored \(i)") != nil)
                if i % 100 == 0 { #expect(try Recipe.first(in: context, where: \.name, equals: "stored 0") != nil) }
            }
            #expect(context.keyLookups.walks == count, "\(context.keyLookups.walks) walks for \(count) keys")
        }
    }

    /// What the `#Predicate` lookup finds, the key-path lookup finds, for
    /// every kind of object a child of a writer sees: stored, stored and
    /// changed here or in the parent, inserted here or in the parent,
    /// deleted here or in the parent, and names nobody has — each judging
    /// none of the 500 inserts pending: at most the object with the name
    /// and the objects held here that the parent changed (three), which
    /// may hold values older than the parent's.
    @Test func aKeyPathLookupFindsWhatThePredicateFinds() throws {
        let coordinator = try makeCoordinator(TemporaryDirectory(), model: Self.model())
        _ = try seedNumberedRecipes(coordinator, count: 50, name: { "stored \($0)" })
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "writer")
        try writer.performAndWait {
            let inParent = Recipe(context: writer)
            inParent.name = "parent insert"
            try #require(try Recipe.first(in: writer, where: \.name, equals: "stored 1")).name = "renamed in parent"
            writer.delete(try #require(try Recipe.first(in: writer, where: \.name, equals: "stored 2")))
            try writer.save()  // to the store: the child sees the store
            let pending = Recipe(context: writer)
            pending.name = "parent pending"
            try #require(try Recipe.first(in: writer, where: \.name, equals: "stored 3")).name = "renamed pending in parent"
            writer.delete(try #require(try Recipe.first(in: writer, where: \.name, equals: "stored 4")))
        }
        let child = ManagedObjectContext(.privateQueue, parent: writer, name: "child")
        try child.performAndWait {
            for i in 0..<500 {
                let recipe = Recipe(context: child)
                recipe.name = "child \(i)"
            }
            try #require(try Recipe.first(in: child, where: \.name, equals: "stored 5")).name = "renamed in child"
            child.delete(try #require(try Recipe.first(in: child, where: \.name, equals: "stored 6")))
            let names = ["stored 0", "stored 1", "renamed in parent", "stored 2", "parent insert", "parent pending", "stored 3",
                         "renamed pending in parent", "stored 4", "child 0", "child 499", "stored 5", "renamed in child",
                         "stored 6", "stored 49", "nobody"]
            var found = 0
            for name in names {
                let before = child.judgedObjects
                let byKey = try Recipe.first(in: child, where: \.name, equals: name)
                let judged = child.judgedObjects - before
                let byPredicate = try Recipe.first(in: child, where: #Predicate { $0.name == name })
                #expect(byKey?.objectID == byPredicate?.objectID, "\(name): \(String(describing: byKey?.name)) by key path")
                #expect(byKey.map { $0.name == name } ?? true)
                #expect(judged <= 4, "\(name): judged \(judged)")
                if byKey != nil { found += 1 }
            }
            // Found: stored 0, renamed in parent, parent insert, parent pending,
            // renamed pending in parent, child 0, child 499, renamed in child, stored 49.
            #expect(found == 9)
        }
    }

    /// A lookup that creates sets the key before `configure` runs; the next
    /// lookup finds the new object (pending), and after the save the stored
    /// one, in a fresh context too.
    @Test func findOrCreateByKeyPathSetsTheKey() throws {
        let coordinator = try makeCoordinator(model: Self.model())
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            var seen: String?
            let made = try Recipe.findOrCreate(where: \.name, equals: "Soup", in: context) { recipe in
                seen = recipe.name
                recipe.servings = 4
            }
            #expect(seen == "Soup" && made.isInserted)
            let again = try Recipe.findOrCreate(where: \.name, equals: "Soup", in: context) { _ in Issue.record("configured a found object") }
            #expect(again === made)
            try context.save()
        }
        let fresh = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try fresh.performAndWait {
            let found = try Recipe.findOrCreate(where: \.name, equals: "Soup", in: fresh)
            #expect(!found.isInserted && found.servings == 4)
            // Other kinds of attribute, optional ones with nil among them.
            #expect(try Recipe.first(in: fresh, where: \.servings, equals: 4)?.objectID == found.objectID)
            #expect(try Recipe.first(in: fresh, where: \.notes, equals: nil)?.objectID == found.objectID)
            #expect(try Recipe.first(in: fresh, where: \.notes, equals: "none") == nil)
        }
    }

    /// A key path that reads no single stored attribute is a typed error
    /// that says what to use instead, and nothing is created.
    @Test func aKeyPathThatReadsNoAttributeIsATypedError() throws {
        let coordinator = try makeCoordinator(model: Self.model())
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        context.performAndWait {
            do {
                _ = try Recipe.findOrCreate(where: \.heading, equals: "Soup (4)", in: context)
                Issue.record("a computed key path was accepted")
            } catch let error as StrataError {
                #expect(error.code == .invalidArgument && error.message.contains("#Predicate"), "\(error)")
            } catch {
                Issue.record("untyped error \(error)")
            }
            #expect(context.insertedObjects.isEmpty)
        }
    }

    /// Off the context's queue, the lookup throws (as the other finders do).
    @Test func aKeyPathLookupOffTheQueueThrows() throws {
        let coordinator = try makeCoordinator(model: Self.model())
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        #expect(throws: StrataError.self) { _ = try Recipe.first(in: context, where: \.name, equals: "Soup") }
    }

    /// A fetch of faults through an index, and a lookup by key, read a
    /// stored record only for the row cache, so they read none it holds
    /// already or has no room for: the fault reads its row when it is used
    /// (from the cache, or the store). Counted in records read one by one.
    @Test(arguments: [32 << 20, 0]) func faultsAreFetchedWithoutRecordsTheRowCacheWouldNotTake(budget: Int) throws {
        let directory = TemporaryDirectory()
        let coordinator = PersistentStoreCoordinator(model: Self.model(), rowCacheBudget: budget)
        try coordinator.addPersistentStore(.log, directory: directory.path + "/store", options: testStoreOptions())
        let names = (0..<200).map { "stored \($0)" }
        _ = try seedNumberedRecipes(coordinator, count: 200, name: { names[$0] })
        let wanted = Array(names.prefix(100))
        func read(_ body: (ManagedObjectContext) throws -> Void) throws -> Int {
            let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
            let before = coordinator.recordsRead.load()
            try context.performAndWait { () throws in try body(context) }
            return coordinator.recordsRead.load() - before
        }
        // With room, the first fetch reads each record once, for the cache.
        let first = try read { context in
            let found = try context.fetch(FetchRequest<Recipe>(predicate: #Predicate { wanted.contains($0.name) }))
            #expect(found.count == 100 && found.allSatisfy(\.isFault))
        }
        #expect(first == (budget > 0 ? 100 : 0))
        // The rows are cached (or there is no room): none is read again, and
        // each fault filled reads its row from the cache or, with no room, the store.
        let again = try read { context in
            let found = try context.fetch(FetchRequest<Recipe>(predicate: #Predicate { wanted.contains($0.name) }))
            #expect(found.count == 100 && found.allSatisfy(\.isFault))
            #expect(Set(found.map(\.name)) == Set(wanted))
        }
        #expect(again == (budget > 0 ? 0 : 100))
        let lookedUp = try read { context in
            let soup = try #require(try Recipe.first(in: context, where: \.name, equals: "stored 7"))
            #expect(soup.isFault && soup.servings == 7)
            let other = try #require(try Recipe.first(in: context, where: \.name, equals: "stored 150"))
            #expect(other.servings == 150)
        }
        // "stored 7" is cached (with room); "stored 150" is read once, at the
        // lookup with room (for the cache), when filled without.
        #expect(lookedUp == (budget > 0 ? 1 : 2))
        guard budget == 0 else { return }
        // With no room, a context holding some of them as faults reads those
        // (a held fault is judged by its record), and no other.
        let held = try read { context in
            let found = try context.fetch(FetchRequest<Recipe>(predicate: #Predicate { wanted.contains($0.name) }))
            #expect(found.count == 100)
            for recipe in found.prefix(10) { #expect(recipe.name.hasPrefix("stored")) }
            let again = try context.fetch(FetchRequest<Recipe>(predicate: #Predicate { wanted.contains($0.name) }))
            #expect(Set(again.map(\.objectID)) == Set(found.map(\.objectID)))
        }
        #expect(held == 10 + 90)
    }

    /// A row cache that fetches filled to its budget is offered no row it
    /// would refuse: a fetch of faults then reads no record for it. (It was
    /// offered every row while any byte was left, and refused each: every
    /// fetch read and decoded each record it met.) Rows of one size, so
    /// that a cache which cannot take one more cannot take any.
    @Test func aRowCacheFilledByFetchesIsOfferedNothingMore() throws {
        let directory = TemporaryDirectory()
        let coordinator = PersistentStoreCoordinator(model: Self.model(), rowCacheBudget: 16 << 10)
        try coordinator.addPersistentStore(.log, directory: directory.path + "/store", options: testStoreOptions())
        let names = (0..<400).map { "stored \(1_000 + $0)" }
        _ = try seedNumberedRecipes(coordinator, count: 400, name: { names[$0] })
        func readingAll() throws -> Int {
            let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
            let before = coordinator.recordsRead.load()
            let found = try context.performAndWait { () throws in try context.fetch(FetchRequest<Recipe>(predicate: #Predicate { names.contains($0.name) })) }
            #expect(found.count == 400)
            return coordinator.recordsRead.load() - before
        }
        // The first fetch reads rows for the cache until it has no room for one more.
        let first = try readingAll()
        #expect(first > 0 && first < 400, "the first fetch read \(first) records")
        // Then no fetch reads a record for it.
        #expect(try readingAll() == 0)
        #expect(try readingAll() == 0)
    }

    /// A lookup by one indexed attribute's value (the point lookup every
    /// `first(in:where:equals:)` and find-or-create makes) answers what a
    /// scan of every object answers, through random changes: inserts,
    /// edits (of a key, of an attribute no index holds, of a to-many and
    /// its inverse) and deletes here; inserts deleted again before a save; saves
    /// (refused ones rolled back); another context inserting, renaming and
    /// deleting stored objects (so objects held here hold values older
    /// than the store's, contract C10, and stored ones are not held);
    /// faults; refreshes.
    /// Checked after each step for every name (a unique index) and every
    /// serving count (a plain one), in a context on the coordinator and in
    /// a child of a writer.
    @Test(arguments: [false, true]) func aPointLookupAnswersWhatAFetchAnswers(childOfWriter: Bool) throws {
        let seed = testSeed()
        var random = SeededGenerator(seed: seed)
        let coordinator = try makeCoordinator(TemporaryDirectory(), model: Self.model())
        let names = (0..<10).map { "name \($0)" }
        _ = try seedNumberedRecipes(coordinator, count: 6, name: { names[$0] })
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "writer")
        let context = childOfWriter
            ? ManagedObjectContext(.privateQueue, parent: writer, name: "child")
            : ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "context")
        let other = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "other")
        var lookups = 0
        for step in 0..<300 {
            let action = Int.random(in: 0..<10, using: &random)
            let name = names.randomElement(using: &random)!
            let servings = Int.random(in: 0..<4, using: &random)
            let pick = Int.random(in: 0..<1_000, using: &random)
            if action == 9 {
                // Another context changes the store under the one looked in.
                try other.performAndWait { () throws in
                    let stored = try other.fetch(FetchRequest<Recipe>())
                    guard !stored.isEmpty else { return }
                    if pick % 2 == 0 || stored.isEmpty {
                        let made = Recipe(context: other)
                        made.name = name
                        made.servings = servings
                    } else {
                        let target = stored[pick % stored.count]
                        if pick % 3 == 0 { other.delete(target) } else { target.name = name; target.servings = servings }
                    }
                    do { try other.save() } catch { other.rollback() }
                }
                continue
            }
            try context.performAndWait { () throws in
                func order(_ recipe: Recipe) -> UInt64 { recipe.objectID.primaryKey }
                let held: [Recipe] = context.registeredObjects.compactMap { $0 as? Recipe }.filter { !$0.isDeleted }
                    .sorted { (a: Recipe, b: Recipe) in order(a) < order(b) }
                switch action {
                case 0, 1:
                    let recipe = Recipe(context: context)
                    recipe.name = name
                    recipe.servings = servings
                case 2, 3:
                    // A key, or a property no lookup keys by (an attribute
                    // with no index, a to-many and its inverse): an object
                    // changed here already is keyed again only when a key moves.
                    if !held.isEmpty {
                        let recipe = held[pick % held.count]
                        switch pick % 4 {
                        case 0: recipe.name = name
                        case 1: recipe.servings = servings
                        case 2: recipe.rating = Double(pick)
                        default:
                            let tag = Tag(context: context)
                            tag.label = name
                            recipe.tags.insert(tag)
                        }
                    }
                case 4:
                    if !held.isEmpty { context.delete(held[pick % held.count]) }
                case 5:
                    let discarded = Recipe(context: context)
                    discarded.name = name
                    context.delete(discarded)
                case 6:
                    do {
                        try context.save()
                        if childOfWriter { try writer.performAndWait { () throws(StrataError) in try writer.save() } }
                    } catch {
                        context.rollback()
                        writer.performAndWait { writer.rollback() }
                    }
                case 7:
                    // Faults: objects fetched and not yet used.
                    _ = try context.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.servings == servings }))
                default:
                    if held.isEmpty || pick % 4 == 0 { context.refreshAllObjects() } else { context.refresh(held[pick % held.count], mergeChanges: pick % 2 == 0) }
                }
                // Looked up first (objects stored since the last step are not
                // held here yet), then judged against a scan of every object.
                let byName = try names.map { try Recipe.first(in: context, where: \.name, equals: $0) }
                let byServings = try (0..<4).map { try Recipe.first(in: context, where: \.servings, equals: $0) }
                let everything = try context.fetch(FetchRequest<Recipe>()).filter { !$0.isDeleted }
                for (name, first) in zip(names, byName) {
                    let all = everything.filter { $0.name == name }
                    #expect((first == nil) == all.isEmpty && (first.map { found in all.contains { $0 === found } } ?? true),
                            "seed \(seed), step \(step): \(name): \(String(describing: first?.objectID)) among \(all.map(\.objectID))")
                    lookups += 1
                }
                for (servings, first) in zip(0..<4, byServings) {
                    let all = everything.filter { $0.servings == servings }
                    #expect((first == nil) == all.isEmpty && (first.map { found in all.contains { $0 === found } } ?? true),
                            "seed \(seed), step \(step): servings \(servings): \(String(describing: first?.objectID)) among \(all.map(\.objectID))")
                    lookups += 1
                }
            }
        }
        #expect(lookups > 2_000)
    }

    /// The plan of a lookup by one attribute's value, made without weighing
    /// every index, is the plan the general planner makes of it — for each
    /// kind of value, a leading attribute of a unique, a plain and a
    /// composite index, constants on either side — and there is none where
    /// the general planner needs more (a null, or a value a stored null
    /// reads as, a property no index leads).
    @Test func thePointPlanIsTheGeneralPlan() throws {
        let model = Self.model()
        let entity = try #require(model.entity(named: "Recipe"))
        func property(_ name: String) -> Int { entity.properties.firstIndex { $0.name == name }! }
        let cases: [(String, PropertyValue, PropertyValue)] = [
            ("name", .string(""), .string("Soup")), ("name", .string(""), .string("naïve \u{0}")),
            ("servings", .integer(0), .integer(4)), ("servings", .integer(0), .integer(-7)),
            ("notes", .null, .string("x")), ("created", .date(Date(timeIntervalSinceReferenceDate: 0)), .date(Date(timeIntervalSinceReferenceDate: 9))),
        ]
        for (name, null, constant) in cases {
            for test in [ValueTest.compare(.property(index: property(name), null: null), .equal, .constant(constant)),
                         .compare(.constant(constant), .equal, .property(index: property(name), null: null))] {
                let point = try #require(QueryPlanner.pointPlan(test, entity: entity), "\(name) = \(constant)")
                let general = QueryPlanner.generalPlan(test, entity: entity)
                #expect(point.description == general.description)
                #expect(point.indexNumber == general.indexNumber && point.ranges == general.ranges && point.isExact == general.isExact)
                #expect(point.leading?.property == general.leading?.property && point.leading?.encodings == general.leading?.encodings)
                #expect(QueryPlanner.plan(test, entity: entity).description == general.description)
            }
        }
        for test in [ValueTest.compare(.property(index: property("notes"), null: .null), .equal, .constant(.null)),
                     .compare(.property(index: property("name"), null: .string("")), .equal, .constant(.string(""))),
                     .compare(.property(index: property("rating"), null: .double(0)), .equal, .constant(.double(2))),
                     .compare(.property(index: property("servings"), null: .integer(0)), .notEqual, .constant(.integer(2))),
                     .compare(.property(index: property("servings"), null: .integer(0)), .equal, .constant(.string("2")))] {
            #expect(QueryPlanner.pointPlan(test, entity: entity) == nil, "\(test)")
        }
    }
}

extension Recipe {
    /// Reads two attributes: no key path lookup can use it.
    var heading: String {
        get { "\(name) (\(servings))" }
        set { name = newValue }
    }
}
