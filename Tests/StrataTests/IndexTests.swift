import Foundation
import SharedTestSupport
@testable import Strata
import StrataStore
import Testing

/// Attribute indexes: declared in the model, kept in the save's own batch,
/// read by fetches whose predicate constrains their leading attributes —
/// with exactly the answers of a scan.
@Suite struct IndexTests {
    static let indexes = [IndexDescription("name"), IndexDescription("servings", "rating"), IndexDescription("created")]

    // MARK: Keys

    /// Byte order of encoded values is Swift's order of the values, and
    /// equal values encode equally (canonically equivalent strings, 0.0 and
    /// -0.0 included); null sorts first.
    @Test func encodedOrderIsSwiftsOrder() {
        var random = SeededGenerator(seed: testSeed())
        func encoded(_ value: PropertyValue) -> [UInt8] {
            var bytes: [UInt8] = []
            IndexKeyCoding.appendValue(value, to: &bytes)
            return bytes
        }
        func check(_ values: [PropertyValue]) {
            for a in values {
                #expect(encoded(.null).lexicographicallyPrecedes(encoded(a)), "null before \(a)")
                for b in values {
                    let (x, y) = (encoded(a), encoded(b))
                    #expect((x == y) == (a == b), "\(a) vs \(b): equal values must encode equally")
                    // Booleans are not ordered in predicates: equality only.
                    if case .bool = a { continue }
                    #expect(x.lexicographicallyPrecedes(y) == ValueTest.ordered(a, .less, b), "\(a) < \(b)")
                }
            }
        }
        let edges: [Int64] = [.min, .min + 1, -1_000_000, -1, 0, 1, 255, 256, 1_000_000, .max - 1, .max]
        check(edges.map { .integer($0) } + (0..<40).map { _ in .integer(Int64.random(in: -1000...1000, using: &random)) })
        let doubles: [Double] = [-.infinity, -.greatestFiniteMagnitude, -1.5, -.leastNonzeroMagnitude, -0.0, 0.0,
                                 .leastNonzeroMagnitude, 1, 1.5, .greatestFiniteMagnitude, .infinity]
        check(doubles.map { .double($0) } + (0..<40).map { _ in .double(Double.random(in: -1e6...1e6, using: &random)) })
        check(doubles.map { .date(Date(timeIntervalSinceReferenceDate: $0)) })
        let strings = ["", "a", "a\u{0}", "a\u{0}b", "ab", "abc", "b", "Z", "é", "e\u{301}", "K", "\u{212A}", "Ré", "Re\u{301}x",
                       "日本", "日本語", "\u{1F600}", "a\u{FF}", "\u{10FFFF}"]
        check(strings.map { .string($0) })
        // Longer than a word of eight bytes, which ASCII is read by: a zero
        // byte, or a scalar that composition changes, in or after one.
        let long = ["abcdefg\u{0}", "abcdefgh", "abcdefgh\u{0}", "abcdefgh\u{0}ijklmnop", "abcdefghijklmnop", "abcdefghijklmnop\u{0}q",
                    "abcdefghé", "abcdefghe\u{301}", "abcdefghijklmnopé", "abcdefghijklmnope\u{301}", "abcdefghijklmnop\u{212A}", "abcdefghijklmnopK"]
        check(long.map { .string($0) })
        check([.bool(false), .bool(true)])
    }

    /// Entries follow inserts, updates of indexed attributes and deletes,
    /// in the save's own batch: afterwards the index holds exactly one
    /// entry per object and index, for its present values.
    @Test func entriesFollowEverySave() throws {
        let model = makeModel(recipeIndexes: Self.indexes)
        let coordinator = try makeCoordinator(TemporaryDirectory(), model: model)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        var random = SeededGenerator(seed: testSeed())
        try context.performAndWait { () throws in
            var recipes: [Recipe] = []
            for round in 0..<6 {
                for i in 0..<40 {
                    let recipe = Recipe(context: context)
                    recipe.name = "R\(Int.random(in: 0..<15, using: &random))"
                    recipe.servings = round * 40 + i
                    recipes.append(recipe)
                }
                for recipe in recipes.shuffled(using: &random).prefix(15) where !recipe.isDeleted {
                    recipe.name = "U\(Int.random(in: 0..<5, using: &random))"
                    if Bool.random(using: &random) { recipe.rating = Double(Int.random(in: -3...3, using: &random)) }
                }
                for recipe in recipes.shuffled(using: &random).prefix(5) where !recipe.isDeleted { context.delete(recipe) }
                try context.save()
                recipes.removeAll { $0.isDeleted || $0.managedObjectContext == nil }
            }
            let entity = try #require(model.entity(named: "Recipe"))
            let stored = try context.fetch(FetchRequest<Recipe>())
            let store = try coordinator.currentStore().records
            for number in Self.indexes.indices {
                var entries: [[UInt8]] = []
                try store.forEach(prefix: IndexKeyCoding.prefix(of: entity, index: number)) { key, _ in entries.append(Array(key)) }
                let expected = stored.map { IndexKeyCoding.key($0.values, of: entity, index: number, primaryKey: $0.primaryKey) }
                #expect(Set(entries) == Set(expected), "index \(Self.indexes[number])")
                #expect(entries.count == stored.count)
            }
        }
    }

    /// `strata-dump verify` checks indexes against the objects: a missing
    /// entry and a stale one are both reported.
    @Test func verifyFindsEntriesOutOfStep() throws {
        let directory = TemporaryDirectory()
        let model = makeModel(recipeIndexes: Self.indexes)
        let coordinator = try makeCoordinator(directory, model: model)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let ids = try context.performAndWait { () throws in
            let recipes = (0..<5).map { i -> Recipe in
                let recipe = Recipe(context: context)
                recipe.name = "R\(i)"
                return recipe
            }
            try context.save()
            return recipes.map(\.objectID)
        }
        let entity = try #require(model.entity(named: "Recipe"))
        let inspector = try ObjectStoreInspector(contents: Self.contents(of: directory, closing: coordinator))
        #expect(try inspector.verifyRecords().problems.isEmpty)
        // strata-dump info lists each index with its entries.
        let recipes = try #require(inspector.summary().entities.first { $0.entity == "Recipe" })
        #expect(recipes.indexes == Self.indexes.map { IndexCount(attributes: $0.attributeNames, entries: 5) })

        // Damage: one object's name entry replaced by one for another name.
        let reopened = try makeCoordinator(directory, model: model)
        let damaged = try reopened.currentStore().records
        var values = entity.initialValues
        values[entity.propertyIndex["name"]!] = .string("R0")
        var batch = WriteBatch()
        batch.delete(IndexKeyCoding.key(values, of: entity, index: 0, primaryKey: ids[0].primaryKey))
        values[entity.propertyIndex["name"]!] = .string("stale")
        batch.put(IndexKeyCoding.key(values, of: entity, index: 0, primaryKey: ids[0].primaryKey), [])
        try damaged.write(batch)
        let problems = try ObjectStoreInspector(contents: Self.contents(of: directory, closing: reopened)).verifyRecords().problems
        #expect(problems.count == 2, "\(problems)")
        #expect(problems.contains { $0.message.contains("has no entry in index (name)") })
        #expect(problems.contains { $0.message.contains("that its stored values do not make") })
    }

    static func contents(of directory: TemporaryDirectory, closing coordinator: PersistentStoreCoordinator) throws -> StoreContents {
        try coordinator.close()
        return try StoreInspector(directory: directory.path + "/store").contents()
    }

    // MARK: Model

    @Test func indexesAreCheckedAndPartOfTheModel() throws {
        func model(_ indexes: [IndexDescription]) throws(StrataError) -> ManagedObjectModel {
            try ManagedObjectModel(entities: [
                EntityDescription(name: "Item", properties: [.attribute("a", .string), .attribute("b", .integer64), .toOne("o", "Item", inverse: nil)],
                                  indexes: indexes),
            ])
        }
        for bad in [[IndexDescription("missing")], [IndexDescription("o")], [IndexDescription("a", "a")], [IndexDescription()],
                    [IndexDescription("a"), IndexDescription("a")]] {
            #expect(throws: StrataError.self, "\(bad)") { try model(bad) }
        }
        let plain = try model([])
        let indexed = try model([IndexDescription("a"), IndexDescription("b", "a")])
        #expect(plain.versionHash != indexed.versionHash)
        #expect(plain.schema.first == 1, "a model without indexes keeps the first schema format")
        let decoded = try ModelSchema.decode(indexed.schema)
        #expect(decoded.versionHash == indexed.versionHash)
        #expect(decoded.entity(named: "Item")?.indexes == [IndexDescription("a"), IndexDescription("b", "a")])
    }

    // MARK: Plans

    @Test func explainNamesTheIndexAndItsBounds() throws {
        let coordinator = try makeCoordinator(model: makeModel(recipeIndexes: Self.indexes))
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let name = "Soup"
        // Exact: the ranges express the whole predicate, so a count reads no record.
        var cases: [(FetchRequest<Recipe>, String, exact: Bool)] = [
            (FetchRequest(predicate: #Predicate { $0.name == name }), "SEARCH Recipe USING INDEX (name) (name = ?)", true),
            (FetchRequest(predicate: #Predicate { $0.servings == 4 && $0.rating > 2 }),
             "SEARCH Recipe USING INDEX (servings, rating) (servings = ? AND rating > ?)", true),
            (FetchRequest(predicate: #Predicate { $0.servings >= 2 && $0.servings < 9 }),
             "SEARCH Recipe USING INDEX (servings, rating) (servings >= ? AND servings < ?)", true),
            (FetchRequest(predicate: #Predicate { $0.name == name && $0.vegetarian }), "SEARCH Recipe USING INDEX (name) (name = ?)", false),
            (FetchRequest(predicate: #Predicate { $0.servings == 4 && $0.servings == 4 }),
             "SEARCH Recipe USING INDEX (servings, rating) (servings = ?)", false),
            (FetchRequest(predicate: #Predicate { $0.rating > 2 }), "SCAN Recipe", false),
            (FetchRequest(predicate: #Predicate { $0.name == name || $0.servings == 1 }), "SCAN Recipe", false),
            (FetchRequest(predicate: #Predicate { $0.name != name }), "SCAN Recipe", false),
            (FetchRequest(), "SCAN Recipe", false),
        ]
        // Membership, `||` of one attribute's equalities, and ASCII prefixes.
        func add(_ predicate: Predicate<Recipe>, _ expected: String, exact: Bool) {
            cases.append((FetchRequest(predicate: predicate), expected, exact))
        }
        add(#Predicate { $0.name.starts(with: "S") }, "SEARCH Recipe USING INDEX (name) (name STARTS WITH ?)", exact: false)
        add(#Predicate { $0.name.starts(with: "Ré") }, "SCAN Recipe", exact: false)
        add(#Predicate { $0.name.starts(with: "") }, "SCAN Recipe", exact: false)
        add(#Predicate { ["Soup", "Stew"].contains($0.name) }, "SEARCH Recipe USING INDEX (name) (name IN (2 values))", exact: true)
        let (one, three, two) = (1, 3, 2.0)
        add(#Predicate { $0.servings == one || $0.servings == three || $0.servings == one },
            "SEARCH Recipe USING INDEX (servings, rating) (servings IN (3 values))", exact: true)
        add(#Predicate { ($0.servings == one || $0.servings == three) && $0.rating >= two },
            "SEARCH Recipe USING INDEX (servings, rating) (servings IN (2 values) AND rating >= ?)", exact: true)
        add(#Predicate { $0.servings == one || $0.rating == two }, "SCAN Recipe", exact: false)
        for (request, expected, exact) in cases {
            let plan = try context.explain(request)
            #expect(plan.description == expected)
            #expect(plan.isExact == exact, "\(expected)")
        }
    }

    /// A sort the index cannot give is done in memory, over every match, and
    /// a predicate that does not translate is evaluated by Foundation on
    /// every object: `explain` says both, where a user reads a plan.
    @Test func explainSaysWhatIsSortedInMemoryAndWhatFoundationEvaluates() throws {
        let coordinator = try makeCoordinator(model: makeModel(recipeIndexes: Self.indexes))
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        func request(_ predicate: Predicate<Recipe>? = nil, _ order: [SortDescriptor<Recipe>], limit: Int = 0) -> FetchRequest<Recipe> {
            var request = FetchRequest<Recipe>(predicate: predicate, sortBy: order)
            request.fetchLimit = limit
            return request
        }
        let cases: [(FetchRequest<Recipe>, String)] = [
            (request(nil, [SortDescriptor(\.servings, order: .reverse)], limit: 20),
             "SCAN Recipe USING INDEX (servings, rating) ORDER BY servings DESC"),
            (request(#Predicate { $0.name.starts(with: "S") }, [SortDescriptor(\.name)], limit: 20),
             "SEARCH Recipe USING INDEX (name) (name STARTS WITH ?) ORDER BY name"),
            (request(#Predicate { $0.servings == 4 }, [SortDescriptor(\.rating, order: .reverse)], limit: 5),
             "SEARCH Recipe USING INDEX (servings, rating) (servings = ?) ORDER BY rating DESC"),
            // Without a limit every match is read anyway: sorted in memory.
            (request(nil, [SortDescriptor(\.servings)]), "SCAN Recipe, THEN SORT IN MEMORY BY servings"),
            (request(nil, [SortDescriptor(\.rating), SortDescriptor(\.name, order: .reverse)], limit: 20),
             "SCAN Recipe, THEN SORT IN MEMORY BY rating, name DESC"),
            // A comparator that is not Swift's `<` orders otherwise than the index.
            (request(nil, [SortDescriptor(\.name, comparator: .lexical)], limit: 20), "SCAN Recipe, THEN SORT IN MEMORY BY name"),
            (request(#Predicate { $0.name.contains("ou") }, []),
             "SCAN Recipe (the predicate is evaluated by Foundation on each object)"),
            (request(#Predicate { $0.name.contains("ou") }, [SortDescriptor(\.created)], limit: 3),
             "SCAN Recipe (the predicate is evaluated by Foundation on each object), THEN SORT IN MEMORY BY created"),
        ]
        for (request, expected) in cases {
            let plan = try context.explain(request).description
            #expect(plan == expected)
        }
    }

    /// The differential test: every indexed fetch, in every context of a
    /// stack with pending changes at each level, finds exactly what the
    /// same predicate finds by a scan (made unplannable with `|| false`),
    /// pending changes included or not, across saves.
    @Test func indexedFetchesAnswerAsScansDo() async throws {
        let seed = testSeed()
        var random = SeededGenerator(seed: seed)
        let stack = try ThreeLevelStack(model: makeModel(recipeIndexes: Self.indexes))
        let (writer, middle, child) = (stack.writer, stack.middle, stack.child)
        let contexts = stack.contexts
        let day = 86_400.0
        // Kept short, and yielding between steps: the suite's main-queue
        // tests share this machine's two cooperative threads with it.
        // Under ThreadSanitizer (ten times slower) fewer steps, for the same reason.
        let steps = ProcessInfo.processInfo.environment["STRATA_SANITIZED"] == nil ? 40 : 12
        for step in 0..<steps {
            await Task.yield()
            try stack.randomStep(&random, inserts: 6, insert: { context, random in
                let recipe = Recipe(context: context)
                recipe.name = ["Soup", "Stew", "Salad", "Ré", "Re\u{301}", ""][Int.random(in: 0..<6, using: &random)]
                recipe.servings = Int.random(in: 0..<6, using: &random)
                recipe.rating = Double(Int.random(in: 0..<4, using: &random))
                // Days for the range tests, seconds within them for the ordered ones.
                recipe.created = Date(timeIntervalSinceReferenceDate: Double(Int.random(in: 0..<4, using: &random)) * day
                                          + Double(Int.random(in: 0..<10_000, using: &random)))
                return recipe
            }, change: { recipe, random in
                recipe.servings = Int.random(in: 0..<6, using: &random)
                if Bool.random(using: &random) { recipe.name = ["Soup", "Pie"][Int.random(in: 0..<2, using: &random)] }
            })
            // Compared after every other step (and the last).
            guard step % 2 == 1 || step == steps - 1 else { continue }
            // Compare, in every context.
            let name = ["Soup", "Ré", "", "Pie"][step % 4]
            let servings = step % 6
            let threshold = Double(step % 4)
            let dayLimit = Date(timeIntervalSinceReferenceDate: Double(step % 4) * day)
            let pairs: [(Predicate<Recipe>, Predicate<Recipe>)] = [
                (#Predicate { $0.name == name }, #Predicate { $0.name == name || false }),
                (#Predicate { $0.servings == servings && $0.rating >= threshold },
                 #Predicate { ($0.servings == servings && $0.rating >= threshold) || false }),
                (#Predicate { $0.servings > servings }, #Predicate { $0.servings > servings || false }),
                (#Predicate { $0.servings <= servings && $0.name != name }, #Predicate { ($0.servings <= servings && $0.name != name) || false }),
                (#Predicate { $0.created < dayLimit }, #Predicate { $0.created < dayLimit || false }),
                (#Predicate { [name, "Stew"].contains($0.name) }, #Predicate { [name, "Stew"].contains($0.name) || false }),
                (#Predicate { $0.name.starts(with: "S") }, #Predicate { $0.name.starts(with: "S") || false }),
                (#Predicate { $0.name.starts(with: "R") }, #Predicate { $0.name.starts(with: "R") || false }),
                (#Predicate { ($0.servings == servings || $0.servings == 5) && $0.rating >= threshold },
                 #Predicate { (($0.servings == servings || $0.servings == 5) && $0.rating >= threshold) || false }),
            ]
            // A fresh context as well: it holds nothing, so the ordered reads
            // below take what the index streams (the others hold objects
            // the store's log lists as written since, which are judged aside).
            let fresh = ManagedObjectContext(.privateQueue, parent: [writer, middle, child][step % 3], name: "fresh")
            for context in contexts + [fresh] {
                try context.performAndWait { () throws in
                    for (i, (indexed, scanned)) in pairs.enumerated() where context !== fresh {
                        #expect(try context.explain(FetchRequest(predicate: indexed)).index != nil, "pair \(i) uses an index")
                        #expect(try context.explain(FetchRequest(predicate: scanned)).index == nil)
                        for pending in [true, false] {
                            var a = FetchRequest<Recipe>(predicate: indexed)
                            var b = FetchRequest<Recipe>(predicate: scanned)
                            a.includesPendingChanges = pending
                            b.includesPendingChanges = pending
                            let found = Set(try context.fetch(a).map(\.objectID))
                            let expected = Set(try context.fetch(b).map(\.objectID))
                            #expect(found == expected, "seed \(seed), step \(step), \(context.name), pair \(i), pending \(pending)")
                            #expect(try context.count(for: a) == expected.count)
                        }
                    }
                    // Sorted by an indexed attribute with a limit, either
                    // way: the index read in order (or from its end) and
                    // left early gives the values a sort of every match
                    // gives (ties in any order). Names sort as Swift's `<`
                    // does: "Ré" and "Re" + U+0301 are one value.
                    let firsts: [(Predicate<Recipe>?, SortDescriptor<Recipe>, Int, Int, SortKey)] = [
                        (nil, SortDescriptor(\.created), 3, 0, .created),
                        (#Predicate { $0.servings > servings }, SortDescriptor(\.created), 4, 1, .created),
                        (#Predicate { $0.servings >= servings && $0.name != name }, SortDescriptor(\.servings), 5, 0, .servings),
                        (#Predicate { $0.servings == servings }, SortDescriptor(\.servings), 2, 2, .servings),
                        (nil, SortDescriptor(\.created, order: .reverse), 3, 0, .created),
                        (#Predicate { $0.servings > servings }, SortDescriptor(\.created, order: .reverse), 4, 1, .created),
                        (#Predicate { $0.servings == servings }, SortDescriptor(\.servings, order: .reverse), 3, 0, .servings),
                        (#Predicate { $0.servings == servings }, SortDescriptor(\.rating, order: .reverse), 3, 0, .rating),
                        (#Predicate { $0.servings >= servings }, SortDescriptor(\.servings, order: .reverse), 3, 1, .servings),
                        (nil, SortDescriptor(\.name), 4, 0, .name),
                        (nil, SortDescriptor(\.name, order: .reverse), 3, 1, .name),
                        (#Predicate { $0.name.starts(with: "S") }, SortDescriptor(\.name), 2, 0, .name),
                        (#Predicate { $0.name.starts(with: "R") }, SortDescriptor(\.name, order: .reverse), 2, 0, .name),
                        (#Predicate { $0.name > name }, SortDescriptor(\.name), 3, 1, .name),
                    ]
                    for (i, (predicate, order, limit, offset, sortKey)) in firsts.enumerated() {
                        var a = FetchRequest<Recipe>(predicate: predicate, sortBy: [order])
                        a.fetchLimit = limit
                        a.fetchOffset = offset
                        let descending = order.order == .reverse
                        let plan = try context.explain(a).description
                        #expect(plan.hasSuffix("ORDER BY \(sortKey)" + (descending ? " DESC" : "")), "\(plan)")
                        if context === fresh { context.reset() }
                        let found = try context.fetch(a)
                        let all = try context.fetch(FetchRequest<Recipe>(predicate: predicate, sortBy: [order]))
                        let expected = Array(all.dropFirst(offset).prefix(limit))
                        let key = sortKey.value
                        #expect(found.map(key) == expected.map(key), "seed \(seed), step \(step), \(context.name), first \(i)")
                        // Ties with the page's last value may differ, and after an
                        // offset ties with its first; everything between may not.
                        if let first = expected.first.map(key), let last = expected.last.map(key) {
                            let within: (Recipe) -> Bool = { object in
                                let value = key(object)
                                let (low, high) = descending ? (last, first) : (first, last)
                                return value < high && value > low || (offset == 0 && value == first && value != last)
                            }
                            #expect(Set(found.filter(within).map(\.objectID)) == Set(expected.filter(within).map(\.objectID)),
                                    "seed \(seed), step \(step), \(context.name), first \(i)")
                        }
                        #expect(try context.fetchObjectIDs(a).count == expected.count)
                    }
                }
            }
        }
    }

    /// The attribute an ordered read in ``indexedFetchesAnswerAsScansDo()`` sorts by.
    enum SortKey: String, CustomStringConvertible {
        case created, servings, rating, name
        var description: String { rawValue }

        /// The value sorted by, compared as the sort compares it.
        var value: (Recipe) -> SortValue {
            switch self {
            case .created: { .number($0.created.timeIntervalSinceReferenceDate) }
            case .servings: { .number(Double($0.servings)) }
            case .rating: { .number($0.rating) }
            case .name: { .text($0.name) }
            }
        }
    }

    enum SortValue: Comparable { case number(Double), text(String) }

    /// A child holds an object loaded before its source changed it (line
    /// 10): a scan judges the held values, so the index path must too,
    /// though the index no longer selects it — whether the change reached
    /// the store or was dropped unsaved by the parent the child loaded it
    /// from. (The index path judges only the held objects that may be
    /// stale, found from the store's change log and the levels above.)
    @Test func heldObjectsOlderThanTheSourceAnswerAsAScanDoes() throws {
        let coordinator = try makeCoordinator(TemporaryDirectory(), model: makeModel(recipeIndexes: Self.indexes))
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let child = ManagedObjectContext(.privateQueue, parent: writer)
        let id = try writer.performAndWait { () throws in
            let recipe = Recipe(context: writer)
            recipe.name = "a"
            try writer.save()
            return recipe.objectID
        }
        func names(_ name: String) throws -> (indexed: [ObjectID], scanned: [ObjectID]) {
            try child.performAndWait { () throws in
                let indexed = try child.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.name == name })).map(\.objectID)
                let scanned = try child.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.name == name || false })).map(\.objectID)
                return (indexed, scanned)
            }
        }
        try child.performAndWait { () throws in
            // Held across the checks below (registered objects nobody
            // references are let go of when the block ends).
            child.retainsRegisteredObjects = true
            let held = try child.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.name == "a" }))
            #expect(held.map(\.objectID) == [id])
            #expect(held[0].name == "a")  // filled: the child's snapshot
        }
        // Changed in the store: the index holds "b" now.
        try writer.performAndWait { () throws in
            (writer.object(with: id) as! Recipe).name = "b"
            try writer.save()
        }
        var found = try names("a")
        #expect(found.scanned == [id])
        #expect(found.indexed == found.scanned)
        // Loaded from the parent's unsaved change, which the parent then drops.
        child.performAndWait { child.reset() }
        writer.performAndWait { (writer.object(with: id) as! Recipe).name = "c" }
        try child.performAndWait { () throws in
            #expect(try child.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.name == "c" })).map(\.name) == ["c"])
        }
        writer.performAndWait { writer.rollback() }
        found = try names("c")
        #expect(found.scanned == [id])
        #expect(found.indexed == found.scanned)
        // Loaded from the parent's unsaved insert, which reaches the store
        // with other values: an insert, not an update, changed it. (A new
        // child: this one's registry predates the rollback's unknown change,
        // which makes it judge every object it holds.)
        let late = ManagedObjectContext(.privateQueue, parent: writer)
        late.performAndWait { late.retainsRegisteredObjects = true }
        let newID = try writer.performAndWait { () throws in
            let recipe = Recipe(context: writer)
            recipe.name = "d"
            try writer.obtainPermanentIDs(for: [recipe])
            return recipe.objectID
        }
        try late.performAndWait { () throws in
            #expect(try late.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.name == "d" })).map(\.name) == ["d"])
        }
        try writer.performAndWait { () throws in
            (writer.object(with: newID) as! Recipe).name = "e"
            try writer.save()
        }
        found = try late.performAndWait { () throws in
            (try late.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.name == "d" })).map(\.objectID),
             try late.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.name == "d" || false })).map(\.objectID))
        }
        #expect(found.scanned == [newID])
        #expect(found.indexed == found.scanned)
    }

    /// The top `limit` recipes named "R…", by servings, highest first: a
    /// page read in the order of the (servings, rating) index, its
    /// predicate judged on each row (a prefix is not exact).
    static func topRs(_ limit: Int) -> FetchRequest<Recipe> {
        var request = FetchRequest<Recipe>(predicate: #Predicate { $0.name.starts(with: "R") }, sortBy: [SortDescriptor(\.servings, order: .reverse)])
        request.fetchLimit = limit
        return request
    }

    /// A page read in index order takes the rows the row cache holds
    /// instead of reading their records: a second page of the same objects,
    /// in a fresh context, reads none.
    @Test func aPageInIndexOrderReadsNoRecordTheRowCacheHolds() throws {
        let coordinator = try makeCoordinator(TemporaryDirectory(), model: makeModel(recipeIndexes: Self.indexes))
        _ = try seedNumberedRecipes(coordinator, count: 100)
        func page() throws -> (names: [String], recordsRead: Int) {
            let reader = ManagedObjectContext(.privateQueue, coordinator: coordinator)
            return try reader.performAndWait { () throws in
                let before = coordinator.recordsRead.load()
                let names = try reader.fetch(Self.topRs(5)).map(\.name)
                return (names, coordinator.recordsRead.load() - before)
            }
        }
        let first = try page()
        #expect(first.names == ["R99", "R98", "R97", "R96", "R95"])
        #expect(first.recordsRead == 5)  // each read once, and offered to the cache
        let second = try page()
        #expect(second.names == first.names)
        #expect(second.recordsRead == 0)
    }

    /// A save writes the store, then hands its rows to the row cache: a
    /// page read in between sees the save in the index and the rows from
    /// before it in the cache. Taken together they would answer as neither
    /// state does (R10 renamed into the page and raised to its top is
    /// judged by its old name, R99 lowered out of it by its new place).
    ///
    ///     writer                                  reader (in the hook, on the writer's thread)
    ///     R10: X10 → R10, 10 → 200
    ///     R99: 99 → 1; save(): store written ──┐
    ///       (afterStoreWriteForTesting)        │  top 3 "R…" by servings: the index says
    ///                                          │  R10, R98, R97…; the cache R10 is "X10"
    ///     the cache takes the rows ◀───────────┘
    ///
    /// The page is read from the records then, and its faults are filled
    /// from the store while the cache is behind it: the save's state whole.
    @Test func aPageReadWhileASavesRowsAreOnTheirWayToTheCacheIsOneState() throws {
        let coordinator = try makeCoordinator(TemporaryDirectory(), model: makeModel(recipeIndexes: Self.indexes))
        let ids = try seedNumberedRecipes(coordinator, count: 100, name: { $0 == 10 ? "X10" : "R\($0)" })
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        @Sendable func topThree() throws -> [String] {
            let reader = ManagedObjectContext(.privateQueue, coordinator: coordinator)
            return try reader.performAndWait { () throws in try reader.fetch(Self.topRs(3)).map(\.name) }
        }
        // The cache holds every row the page will meet, before and after.
        #expect(try topThree() == ["R99", "R98", "R97"])
        let warm = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try warm.performAndWait { () throws in
            #expect(try (warm.existingObject(with: ids[10]) as! Recipe).name == "X10")
            #expect(try (warm.existingObject(with: ids[96]) as! Recipe).name == "R96")
        }
        let seen = LockedStrings()
        let failure = LockedError()
        let first = LockedFlag()
        coordinator.afterStoreWriteForTesting = {
            guard first.setOnce() else { return }
            do { seen.set(try topThree()) } catch { failure.set(error) }
        }
        try writer.performAndWait { () throws in
            let raised = writer.object(with: ids[10]) as! Recipe
            raised.name = "R10"
            raised.servings = 200
            (writer.object(with: ids[99]) as! Recipe).servings = 1
            try writer.save()
        }
        coordinator.afterStoreWriteForTesting = nil
        #expect(failure.error == nil, "\(String(describing: failure.error))")
        #expect(seen.value == ["R10", "R98", "R97"], "the page mixed the save's index entries with the rows from before it")
        #expect(try topThree() == ["R10", "R98", "R97"])
    }
}
