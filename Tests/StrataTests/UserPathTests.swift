import Foundation
import SharedTestSupport
@testable import Strata
import StrataStore
import Testing

/// The paths an app's import walks, pinned by what they cost rather than
/// how long they take: a lookup judges what may match, not what is
/// pending; an `IN` of thousands of keys reads the index; data that did
/// not change writes nothing.
@Suite struct UserPathTests {
    static func uniqueNameModel() -> ManagedObjectModel {
        makeModel(recipeIndexes: [IndexDescription("servings")], recipeUniqueness: [["name"]])
    }

    /// How many objects `body`'s fetches in `context` judged.
    static func judged(in context: ManagedObjectContext, _ body: () throws -> Void) rethrows -> Int {
        let before = context.judgedObjects
        try body()
        return context.judgedObjects - before
    }

    // MARK: Lookups with changes pending

    /// Find-or-create in a loop: each lookup by a unique key judges at most
    /// the one object with that key, whether 10 or 2,000 new objects are
    /// pending in the context, whether the key is stored or pending, and
    /// after pending objects change their keys (found by the new key, not
    /// the old). Without the pending-key index every lookup judged every
    /// pending insert.
    @Test func aLookupJudgesWhatMayMatchNotWhatIsPending() throws {
        let coordinator = try makeCoordinator(model: Self.uniqueNameModel())
        _ = try seedNumberedRecipes(coordinator, count: 100, name: { "stored \($0)" })
        for pending in [10, 2_000] {
            let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
            try context.performAndWait {
                var made: [Recipe] = []
                for i in 0..<pending {
                    let name = "new \(i)"
                    let judged = try Self.judged(in: context) {
                        let found = try Recipe.findOrCreate(where: #Predicate { $0.name == name }, in: context) { $0.name = name }
                        made.append(found)
                    }
                    #expect(judged <= 1, "lookup \(i) of \(pending) judged \(judged)")
                }
                #expect(made.count == pending && context.insertedObjects.count == pending)
                // Stored and pending keys, each found once, judging one object.
                for name in ["stored 7", "new 3", "new \(pending - 1)"] {
                    var found: [Recipe] = []
                    let judged = try Self.judged(in: context) { found = try Recipe.all(in: context, where: #Predicate { $0.name == name }) }
                    #expect(found.count == 1 && found.first?.name == name)
                    #expect(judged <= 1, "\(name): judged \(judged) with \(pending) pending")
                }
                // Renamed after the lookups: found by its new name only.
                made[3].name = "renamed"
                let renamed = "renamed", old = "new 3"
                #expect(try Recipe.all(in: context, where: #Predicate { $0.name == renamed }).map(\.objectID) == [made[3].objectID])
                #expect(try Recipe.all(in: context, where: #Predicate { $0.name == old }).isEmpty)
                // A stored object changed here: found by its new values, not by its stored ones.
                let stored = try #require(try Recipe.first(in: context, where: #Predicate { $0.name == "stored 8" }))
                stored.name = "changed"
                let changed = "changed", storedName = "stored 8"
                #expect(try Recipe.all(in: context, where: #Predicate { $0.name == changed }).map(\.objectID) == [stored.objectID])
                #expect(try Recipe.all(in: context, where: #Predicate { $0.name == storedName }).isEmpty)
                // Deleted: found no more.
                context.delete(made[4])
                let deleted = "new 4"
                #expect(try Recipe.all(in: context, where: #Predicate { $0.name == deleted }).isEmpty)
                // Changed here and found by its key, then deleted from the
                // store by another context: found no more, by a lookup with
                // a limit (which a change here fills without reading the
                // store) or without.
                let doomedName = "stored \(pending % 97)"
                let doomed = try #require(try Recipe.first(in: context, where: #Predicate { $0.name == doomedName }))
                doomed.rating = 7
                #expect(try Recipe.first(in: context, where: #Predicate { $0.name == doomedName })?.objectID == doomed.objectID)
                let other = ManagedObjectContext(.privateQueue, coordinator: coordinator)
                try other.performAndWait {
                    other.delete(try #require(try Recipe.first(in: other, where: #Predicate { $0.name == doomedName })))
                    try other.save()
                }
                #expect(try Recipe.first(in: context, where: #Predicate { $0.name == doomedName }) == nil)
                #expect(try Recipe.all(in: context, where: #Predicate { $0.name == doomedName }).isEmpty)
            }
        }
    }

    /// A lookup in a child whose parent holds 2,000 unsaved inserts and
    /// some updates (a writer that took in an import and has not saved it)
    /// judges at most the objects with the key, not the parent's changes:
    /// the parent's published copy is looked up by key. It still sees the
    /// parent's inserts, updates (by their new values) and deletions.
    @Test func aLookupInAChildJudgesWhatMayMatchAboveIt() throws {
        let coordinator = try makeCoordinator(model: Self.uniqueNameModel())
        _ = try seedNumberedRecipes(coordinator, count: 100, name: { "stored \($0)" })
        let parent = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let child = ManagedObjectContext(.privateQueue, parent: parent)
        try parent.performAndWait {
            for i in 0..<2_000 { Recipe(context: parent).name = "pending \(i)" }
            let renamed = try #require(try Recipe.first(in: parent, where: #Predicate { $0.name == "stored 5" }))
            renamed.name = "renamed above"
            let deleted = try #require(try Recipe.first(in: parent, where: #Predicate { $0.name == "stored 6" }))
            parent.delete(deleted)
        }
        try child.performAndWait {
            for (name, expected) in [("pending 7", 1), ("pending 1999", 1), ("stored 9", 1), ("renamed above", 1),
                                     ("stored 5", 0), ("stored 6", 0), ("absent", 0)] {
                var found: [Recipe] = []
                let judged = try Self.judged(in: child) { found = try Recipe.all(in: child, where: #Predicate { $0.name == name }) }
                #expect(found.count == expected, "\(name)")
                #expect(judged <= 1, "\(name): judged \(judged) with 2,000 pending in the parent")
            }
            let names = (0..<1_500).map { "pending \($0 * 2)" }
            var count = 0
            let judged = try Self.judged(in: child) { count = try child.count(for: FetchRequest<Recipe>(predicate: #Predicate { names.contains($0.name) })) }
            #expect(count == 1_000)
            #expect(judged <= 1_010, "judged \(judged)")
        }
    }

    /// One long block that saves batch after batch (an import's
    /// `performAndWait`): each lookup still judges at most one object, as
    /// the store's changes are sorted once each, not at every fetch; and
    /// an object registered here that another context changed in the store
    /// is judged by its own values (contract C10): found by its
    /// old name, not by the new one.
    @Test func aLongBlockOfSavesKeepsLookupsCheap() throws {
        let coordinator = try makeCoordinator(model: Self.uniqueNameModel())
        _ = try seedNumberedRecipes(coordinator, count: 10, name: { "stored \($0)" })
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let importer = ManagedObjectContext(.privateQueue, parent: writer)
        let other = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try importer.performAndWait {
            let held = try #require(try Recipe.first(in: importer, where: #Predicate { $0.name == "stored 1" }))
            #expect(held.name == "stored 1")  // filled now, before the store changes
            try other.performAndWait {
                let theirs = try #require(try Recipe.first(in: other, where: #Predicate { $0.name == "stored 1" }))
                theirs.name = "renamed elsewhere"
                try other.save()
            }
            for batch in 0..<20 {
                for i in 0..<100 {
                    let name = "b\(batch) r\(i)"
                    // Half the keys stored by the first batch.
                    let key = i % 2 == 0 && batch > 0 ? "b0 r\(i)" : name
                    let judged = try Self.judged(in: importer) {
                        _ = try Recipe.findOrCreate(where: #Predicate { $0.name == key }, in: importer) { $0.name = key }
                    }
                    #expect(judged <= 2, "batch \(batch), lookup \(i): judged \(judged)")
                }
                try importer.save()
                try writer.performAndWait { try writer.save() }
            }
            let oldName = "stored 1", newName = "renamed elsewhere"
            #expect(try Recipe.all(in: importer, where: #Predicate { $0.name == oldName }).map(\.objectID) == [held.objectID])
            #expect(try Recipe.all(in: importer, where: #Predicate { $0.name == newName }).isEmpty)
        }
        let count = try other.performAndWait { try Recipe.count(in: other) }
        #expect(count == 10 + 100 + 19 * 50)
    }

    /// A store on disk whose coordinator caches no row (every read is a
    /// record read), a writer on it and an importer below the writer.
    static func uncachedWriterAndImporter() throws
        -> (TemporaryDirectory, PersistentStoreCoordinator, writer: ManagedObjectContext, importer: ManagedObjectContext) {
        let directory = TemporaryDirectory()
        let coordinator = PersistentStoreCoordinator(model: uniqueNameModel(), rowCacheBudget: 0)
        try coordinator.addPersistentStore(.log, directory: directory.path + "/store", options: testStoreOptions())
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        return (directory, coordinator, writer, ManagedObjectContext(.privateQueue, parent: writer))
    }

    /// An import through a child of the writer that links every batch to
    /// the same tags (a to-many that grows with the store): once the
    /// writer has saved a batch, the importer's next lookup reads none of
    /// the tags back from the store to learn whether they went stale — the
    /// store holds what the writer showed it, which the save recorded — so
    /// a batch no longer costs a read (and a decode of its growing
    /// relationship) per tag. The row cache is off: every read is counted.
    @Test func anImportReadsNoneOfWhatItSavedBack() throws {
        let (directory, coordinator, writer, importer) = try Self.uncachedWriterAndImporter()
        defer { withExtendedLifetime(directory) {} }
        try importer.performAndWait {
            let tags = (0..<20).map { i in
                let tag = Tag(context: importer)
                tag.label = "tag \(i)"
                return tag
            }
            for batch in 0..<4 {
                for i in 0..<25 {
                    let recipe = try Recipe.findOrCreate(where: \.name, equals: "b\(batch) r\(i)", in: importer) { $0.name = "b\(batch) r\(i)" }
                    recipe.tags = Set(tags)
                }
                try importer.save()
                try writer.performAndWait { try writer.save() }
                let before = coordinator.recordsRead.load()
                #expect(try Recipe.first(in: importer, where: \.name, equals: "nobody") == nil)
                // Not even the tags the first batch inserted: the save
                // recorded what the writer showed for inserts too.
                #expect(coordinator.recordsRead.load() - before == 0, "batch \(batch): the lookup read what the importer saved")
            }
            #expect(tags.allSatisfy { $0.recipes.count == 100 })
        }
        let stored = try writer.performAndWait { try Tag.all(in: writer).map(\.recipes.count) }
        #expect(stored == Array(repeating: 100, count: 20))
    }

    /// An import that keeps its objects in a dictionary and never fetches
    /// saves batch after batch, more changes than the store's change log
    /// keeps (100 IDs here): its saves sort the changes while the log
    /// still lists them — the store holds what the writer showed it, so
    /// nothing is read — and its first fetch after the import reads nothing
    /// to check what it holds, and judges only what may match. Before, the
    /// log had dropped what the importer had not sorted, and every fetch
    /// judged all it held.
    @Test func anImportThatNeverFetchesKeepsUpWithTheLog() throws {
        let (directory, coordinator, writer, importer) = try Self.uncachedWriterAndImporter()
        defer { withExtendedLifetime(directory) {} }
        coordinator.changeLog.limitForTesting = 100
        var made: [String: Recipe] = [:]
        try importer.performAndWait { () throws in
            for batch in 0..<10 {
                for i in 0..<30 {
                    let recipe = Recipe(context: importer)
                    recipe.name = "b\(batch) r\(i)"
                    made[recipe.name] = recipe
                }
                // Half the batch before, changed again.
                if batch > 0 { for i in 0..<15 { made["b\(batch - 1) r\(i)"]!.servings = batch } }
                try importer.save()
                try writer.performAndWait { try writer.save() }
            }
            let before = coordinator.recordsRead.load()
            var found: [Recipe] = []
            let judged = try Self.judged(in: importer) { found = try Recipe.all(in: importer, where: #Predicate { $0.name == "b3 r20" }) }
            #expect(found.count == 1 && found.first === made["b3 r20"])
            #expect(judged <= 2, "judged \(judged) of the 300 held")
            #expect(coordinator.recordsRead.load() - before <= 1, "read \(coordinator.recordsRead.load() - before) records")
        }
    }

    /// The writer takes a child's view of an object it let go of from what
    /// the store recorded — unless the store has moved on since: another
    /// context's change in between is never written over unseen; the
    /// child's save, or the writer's, reports the conflict.
    @Test func aStateTheWriterLetGoOfIsCheckedAgainstTheStore() throws {
        let (directory, coordinator, writer, importer) = try Self.uncachedWriterAndImporter()
        defer { withExtendedLifetime(directory) {} }
        let other = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try importer.performAndWait {
            let tag = Tag(context: importer)
            tag.label = "first"
            try importer.save()
            try writer.performAndWait { try writer.save() }
            let id = tag.objectID
            try other.performAndWait {
                let theirs = try #require(try other.existingObject(with: id) as? Tag)
                theirs.label = "theirs"
                try other.save()
            }
            tag.label = "mine"
            var conflicted = false
            do {
                try importer.save()
                try writer.performAndWait { try writer.save() }
            } catch let error as StrataError {
                #expect(error.code == .mergeConflict, "\(error)")
                conflicted = true
            }
            #expect(conflicted, "a change made in the store in between was written over")
        }
        let label = try other.performAndWait { () throws in
            other.reset()
            return try #require(try Tag.all(in: other).first).label
        }
        #expect(label == "theirs")
    }

    /// Nor does the writer take a child's view of an object it deleted and
    /// has not saved yet: the child's change meets the delete, under either
    /// version the child may hold (the writer's own, or the store's).
    @Test(arguments: [false, true]) func aChildsChangeOfAnObjectTheWriterDeletedMeetsTheDelete(heldFromTheStore: Bool) throws {
        let (directory, coordinator, writer, importer) = try Self.uncachedWriterAndImporter()
        defer { withExtendedLifetime(directory) {} }
        let id = try importer.performAndWait { () throws in
            let tag = Tag(context: importer)
            tag.label = "first"
            try importer.save()
            return tag.objectID
        }
        try writer.performAndWait { try writer.save() }
        // A fresh child reads the tag from the store (a store version); the
        // importer holds the version the writer showed it.
        let child = heldFromTheStore ? ManagedObjectContext(.privateQueue, parent: writer) : importer
        try child.performAndWait { () throws in
            let tag = try #require(try child.existingObject(with: id) as? Tag)
            #expect(tag.label == "first")
            try writer.performAndWait { () throws in writer.delete(try writer.existingObject(with: id)) }
            tag.label = "mine"
            do {
                try child.save()
                Issue.record("the change of an object the writer deleted was taken")
            } catch let error as StrataError {
                #expect(error.code == .mergeConflict && error.conflicts.first?.deletedAtDestination == true, "\(error)")
            }
        }
        try writer.performAndWait { try writer.save() }
        let reader = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        #expect(try reader.performAndWait { try Tag.all(in: reader).count } == 0)
    }

    // MARK: A context that lost track of the store's changes

    /// A context that cannot tell which of the objects it holds the store
    /// changed since it loaded them — its parent dropped unsaved changes it
    /// may have read (a rollback), or more changes came than the log keeps —
    /// checks what it holds against its source once, at its next indexed
    /// fetch, and then judges what may match again. Before, every later
    /// fetch judged every object it held, for as long as it held any (a
    /// view context holding a list, after one rollback). What it holds is
    /// still judged by its own values (contract C10): the object it loaded
    /// from the dropped change keeps that change's value. The row cache is
    /// off: the check reads the records of what is held, once.
    @Test(arguments: [false, true]) func aContextThatLostTrackChecksWhatItHoldsOnce(byOverflow: Bool) throws {
        let (directory, coordinator, parent, child) = try Self.uncachedWriterAndImporter()
        defer { withExtendedLifetime(directory) {} }
        if byOverflow { coordinator.changeLog.limitForTesting = 50 }
        _ = try seedNumberedRecipes(coordinator, count: 300, name: { "stored \($0)" })
        let other = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        // The parent renames one object and does not save; the child loads
        // every object, the renamed one with its new name.
        try parent.performAndWait {
            try #require(try Recipe.first(in: parent, where: \.name, equals: "stored 5")).name = "renamed above"
        }
        let held = try child.performAndWait { try Recipe.all(in: child).sorted { $0.servings < $1.servings } }
        child.performAndWait { #expect(held.count == 300 && held[5].name == "renamed above" && held[7].name == "stored 7") }
        if byOverflow {
            // More changes than the log keeps (50 IDs here), then one of an
            // object held here: the log no longer reaches back to the child's loads.
            try other.performAndWait {
                for i in 0..<60 { Recipe(context: other).name = "new \(i)" }
                try other.save()
                try #require(try Recipe.first(in: other, where: \.name, equals: "stored 7")).name = "renamed elsewhere"
                try other.save()
            }
        } else {
            parent.performAndWait { parent.rollback() }
        }
        try child.performAndWait { () throws in
            // Each object judged by the values held here, not the source's.
            let ownName = byOverflow ? "stored 7" : "renamed above", sourceName = byOverflow ? "renamed elsewhere" : "stored 5"
            let ownHolder = byOverflow ? held[7] : held[5]
            let beforeCheck = coordinator.recordsRead.load()
            #expect(try Recipe.all(in: child, where: #Predicate { $0.name == ownName }).map(\.objectID) == [ownHolder.objectID])
            #expect(try Recipe.all(in: child, where: #Predicate { $0.name == sourceName }).isEmpty)
            // The check read what is held (once each, at the first fetch).
            #expect(coordinator.recordsRead.load() - beforeCheck >= 300)
            // After the one check, a fetch judges the match and the objects
            // whose values here differ from the source's, not all 300 held,
            // and reads none of them again.
            for i in [1, 100, 299] {
                let name = "stored \(i)"
                var found: [Recipe] = []
                let beforeLookup = coordinator.recordsRead.load()
                let judged = try Self.judged(in: child) { found = try Recipe.all(in: child, where: #Predicate { $0.name == name }) }
                #expect(found.count == 1 && found.first === held[i])
                #expect(judged <= 4, "\(name): judged \(judged) of the 300 held")
                #expect(coordinator.recordsRead.load() - beforeLookup <= 4, "\(name): read \(coordinator.recordsRead.load() - beforeLookup) records")
            }
        }
    }

    /// A rollback that drops changes a child may have read concerns that
    /// child's branch only: a context elsewhere under the same writer
    /// checks none of what it holds (reads no record for it) at its next
    /// fetch.
    @Test func aRollbackConcernsTheBranchBelowIt() throws {
        let (directory, coordinator, writer, importer) = try Self.uncachedWriterAndImporter()
        defer { withExtendedLifetime(directory) {} }
        _ = try seedNumberedRecipes(coordinator, count: 200, name: { "stored \($0)" })
        let branch = ManagedObjectContext(.privateQueue, parent: writer)
        let below = ManagedObjectContext(.privateQueue, parent: branch)
        let heldElsewhere = try importer.performAndWait { () throws in try Recipe.all(in: importer) }
        importer.performAndWait { #expect(heldElsewhere.count == 200 && heldElsewhere.allSatisfy { !$0.name.isEmpty }) }
        try branch.performAndWait {
            try #require(try Recipe.first(in: branch, where: \.name, equals: "stored 3")).name = "changed in the branch"
        }
        let loaded = try below.performAndWait { () throws in try #require(try Recipe.first(in: below, where: \.name, equals: "changed in the branch")) }
        below.performAndWait { #expect(loaded.name == "changed in the branch") }
        branch.performAndWait { branch.rollback() }
        try importer.performAndWait { () throws in
            let before = coordinator.recordsRead.load()
            #expect(try Recipe.first(in: importer, where: \.name, equals: "nobody") == nil)
            #expect(try Recipe.all(in: importer, where: #Predicate { $0.name == "stored 150" }).map(\.servings) == [150])
            #expect(coordinator.recordsRead.load() - before <= 2, "read \(coordinator.recordsRead.load() - before) records for two lookups")
        }
        // The branch below still meets the rollback: it holds the dropped value, the source does not.
        try below.performAndWait { () throws in
            #expect(try Recipe.all(in: below, where: #Predicate { $0.name == "stored 3" }).isEmpty)
            #expect(try Recipe.all(in: below, where: #Predicate { $0.name == "changed in the branch" }) == [loaded])
        }
        withExtendedLifetime(heldElsewhere) {}
    }

    /// A fetch with a limit and no sort order stops reading once it has
    /// offset + limit matches — through an index or a scan, for a fetch,
    /// a count or IDs — where it read every match before (MagicalRecord's
    /// `MR_findFirstByAttribute` on a common value).
    @Test func aLimitWithoutAnOrderStopsAtItsPage() throws {
        let coordinator = try makeCoordinator(model: Self.uniqueNameModel())
        _ = try seedNumberedRecipes(coordinator, count: 2_000)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            // Through the index on servings (not exact: each candidate is judged), and by a scan.
            let common = #Predicate<Recipe> { $0.servings >= 1_000 && $0.rating >= 0 }
            let scanned = #Predicate<Recipe> { $0.rating >= 0 }
            for predicate in [common, scanned] {
                var found: Recipe?
                let judged = try Self.judged(in: context) { found = try Recipe.first(in: context, where: predicate) }
                #expect(found != nil && judged == 1, "judged \(judged)")
                var request = FetchRequest<Recipe>(predicate: predicate)
                request.fetchOffset = 2
                request.fetchLimit = 3
                var page: [Recipe] = []
                let judgedPage = try Self.judged(in: context) { page = try context.fetch(request) }
                #expect(page.count == 3 && judgedPage == 5, "judged \(judgedPage)")
                var count = 0
                let judgedCount = try Self.judged(in: context) { count = try context.count(for: request) }
                #expect(count == 3 && judgedCount == 5, "judged \(judgedCount)")
                #expect(try context.fetchObjectIDs(request).count == 3)
            }
            // Changes here still count: the first match is one as this context sees it.
            for recipe in try Recipe.all(in: context, where: #Predicate { $0.servings >= 1_000 && $0.servings < 1_990 }) {
                recipe.servings = 0
            }
            let found = try #require(try Recipe.first(in: context, where: common))
            #expect(found.servings >= 1_990)
            #expect(try Recipe.all(in: context, where: common).count == 10)
        }
    }

    // MARK: IN

    /// An `IN` of 5,000 keys reads the index — one seek a key — and judges
    /// nothing it reads (the plan is exact); it finds pending objects by
    /// key too. (Over 1,024 values it used to scan every record, and test
    /// each against a chain of 5,000 equalities; the in-memory store tested
    /// every key against every range.)
    @Test func anInOfThousandsOfKeysReadsTheIndex() throws {
        let coordinator = try makeCoordinator(model: Self.uniqueNameModel())
        _ = try seedNumberedRecipes(coordinator, count: 20_000)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let pending = Recipe(context: context)
            pending.name = "pending"
            var names = (0..<5_000).map { "R\($0 * 4)" } + ["pending", "absent"]
            names.shuffle()
            let keys = names
            let request = FetchRequest<Recipe>(predicate: #Predicate { keys.contains($0.name) })
            #expect(try context.explain(request).description == "SEARCH Recipe USING INDEX UNIQUE (name) (name IN (5002 values))")
            var found: [Recipe] = []
            let judged = try Self.judged(in: context) { found = try context.fetch(request) }
            #expect(Set(found.map(\.name)) == Set(names).subtracting(["absent"]))
            #expect(judged <= 1, "judged \(judged)")
            // Not exact with a further condition: each candidate is judged, and only those.
            let more = FetchRequest<Recipe>(predicate: #Predicate { keys.contains($0.name) && $0.servings < 8_000 })
            let judgedMore = try Self.judged(in: context) { found = try context.fetch(more) }
            #expect(found.count == 2_001)
            #expect(judgedMore <= 5_001, "judged \(judgedMore)")
        }
    }

    /// `[…].contains($0.x)` is a set lookup with Swift's answers: canonically
    /// equivalent strings are equal, a NaN is in no list, a nil in a list
    /// matches an optional attribute's nil.
    @Test func inAnswersAsContainsDoes() throws {
        let coordinator = try makeCoordinator(model: makeModel(recipeIndexes: [IndexDescription("name"), IndexDescription("rating")]))
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            for (name, rating, notes) in [("Caf\u{E9}", 1.0, "a"), ("Soup", Double.nan, nil), ("Stew", 0.0, "b")] as [(String, Double, String?)] {
                let r = Recipe(context: context)
                r.name = name
                r.rating = rating
                r.notes = notes
            }
            try context.save()
            for pendingToo in [false, true] {
                if pendingToo {
                    let r = Recipe(context: context)
                    r.name = "Cafe\u{301}"
                    r.rating = -0.0
                }
                let names = ["Cafe\u{301}"], ratings = [Double.nan, 0.0], notes: [String?] = [nil, "a"]
                let byName = try Recipe.all(in: context, where: #Predicate { names.contains($0.name) })
                #expect(byName.count == (pendingToo ? 2 : 1) && byName.allSatisfy { $0.name == "Caf\u{E9}" })
                let byRating = try Recipe.all(in: context, where: #Predicate { ratings.contains($0.rating) })
                #expect(Set(byRating.map(\.name)) == (pendingToo ? ["Stew", "Cafe\u{301}"] : ["Stew"]))
                let byNotes = try Recipe.all(in: context, where: #Predicate { notes.contains($0.notes) })
                #expect(byNotes.count == (pendingToo ? 3 : 2) && byNotes.contains { $0.name == "Soup" })
            }
        }
    }

    // MARK: Writing nothing when nothing changed

    /// Setting a property to the value it holds is no change; setting it
    /// away and back is an update until the save, which then writes
    /// nothing (no store batch) and leaves the context clean.
    @Test func aValueSetBackWritesNothing() throws {
        let coordinator = try makeCoordinator(model: Self.uniqueNameModel())
        _ = try seedNumberedRecipes(coordinator, count: 3)
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let recipe = try #require(try Recipe.first(in: context, where: #Predicate { $0.name == "R1" }))
            recipe.name = "R1"
            recipe.servings = 1
            #expect(!context.hasChanges)
            recipe.servings = 5
            recipe.servings = 1
            #expect(context.hasChanges && context.updatedObjects.count == 1)
            let batches = coordinator.changeLog.current
            try context.save()
            #expect(coordinator.changeLog.current == batches, "a save of nothing wrote a batch")
            #expect(!context.hasChanges)
            // A real change still saves.
            recipe.servings = 9
            try context.save()
            #expect(coordinator.changeLog.current == batches + 1)
        }
    }

    /// A re-import of unchanged records through an upsert (new objects, a
    /// uniqueness constraint, an object-trump policy), with to-many
    /// relationships to objects that are upserted too: the new objects
    /// merge into the stored ones, which end as they were, so the save
    /// writes no batch. Before, the merge's union with targets merged away
    /// a moment later left every object looking changed.
    @Test func anUnchangedUpsertWritesNothing() throws {
        let directory = TemporaryDirectory()
        let model = makeModel(recipeUniqueness: [["name"]], authorUniqueness: [["name"]])
        let coordinator = try makeCoordinator(directory, model: model)
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        func importRecords(_ context: ManagedObjectContext) throws {
            context.mergePolicy = .mergeByPropertyObjectTrump
            var authors: [String: Author] = [:]
            for i in 0..<50 {
                let recipe = Recipe(context: context)
                recipe.name = "R\(i)"
                recipe.servings = i
                let name = "A\(i % 5)"
                let author = authors[name] ?? Author(context: context)
                author.name = name
                authors[name] = author
                recipe.author = author
            }
        }
        try writer.performAndWait {
            try importRecords(writer)
            try writer.save()
        }
        for parent in [true, false] {
            // Store batches, not change-log entries: a context with children
            // that drops unchanged updates notes them in the log for its
            // children to check, and writes nothing.
            let batches = try #require(coordinator.storeStatistics).batchesWritten
            if parent {
                // Through a child, as an app's background import does.
                let child = ManagedObjectContext(.privateQueue, parent: writer)
                try child.performAndWait {
                    try importRecords(child)
                    try child.save()
                }
            } else {
                try writer.performAndWait { try importRecords(writer) }
            }
            try writer.performAndWait {
                try writer.save()
                #expect(!writer.hasChanges)
            }
            #expect(coordinator.storeStatistics?.batchesWritten == batches, "the unchanged re-import wrote a batch")
        }
        try writer.performAndWait {
            #expect(try Recipe.count(in: writer) == 50 && Author.count(in: writer) == 5)
            let authored = try Author.all(in: writer).map { $0.recipes.count }
            #expect(authored == [10, 10, 10, 10, 10])
        }
    }
}

/// A server makes a context per request: one that ends leaves nothing
/// behind in its parent or in the coordinator, read-only or not, and the
/// first save after many reads finds nothing to clean up.
@Suite struct RequestContextTests {
    @Test func contextsThatEndLeaveNothingBehind() throws {
        let coordinator = try makeCoordinator(model: makeModel(recipeUniqueness: [["name"]]))
        _ = try seedNumberedRecipes(coordinator, count: 10)
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "writer")
        let attachedBefore = coordinator.rootContextCount
        for i in 0..<2_000 {
            // A read-only request, a writing one, and one attached to the coordinator.
            let reader = ManagedObjectContext(.privateQueue, parent: writer)
            let count = try reader.performAndWait { try Recipe.count(in: reader) }
            #expect(count >= 10)
            if i % 10 == 0 {
                let saver = ManagedObjectContext(.privateQueue, parent: writer)
                try saver.performAndWait {
                    Recipe(context: saver).name = "request \(i)"
                    try saver.save()
                }
                let attached = ManagedObjectContext(.privateQueue, coordinator: coordinator)
                attached.performAndWait { _ = attached.hasChanges }
            }
        }
        #expect(writer.childCount == 0)
        #expect(coordinator.rootContextCount == attachedBefore)
        // A live child is still there, and merges still reach it.
        let live = ManagedObjectContext(.privateQueue, parent: writer)
        live.automaticallyMergesChangesFromParent = true
        #expect(writer.childCount == 1 && writer.mergingChildren(excluding: nil).count == 1)
        try writer.performAndWait { try writer.save() }
        let saved = try writer.performAndWait { try Recipe.count(in: writer) }
        #expect(saved == 10 + 200)
    }

    // MARK: Memory

    /// A block that fetched more objects than ``FreedObjects/threshold``
    /// and let go of them hands the heap's free pages back to the system,
    /// off the context's queue (glibc otherwise keeps them in the worker
    /// thread's arena, resident).
    @Test func lettingGoOfManyObjectsHandsFreePagesBack() throws {
        let coordinator = try makeCoordinator()
        let count = FreedObjects.threshold + 1_000
        _ = try seedNumberedRecipes(coordinator, count: count)
        FreedObjects.settleForTesting()
        let before = FreedObjects.releasesForTesting
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        #expect(try context.performAndWait { try context.fetch(FetchRequest<Recipe>()).count } == count)
        #expect(context.performAndWait { context.registeredObjects.count } == 0)
        let deadline = Date().addingTimeInterval(10)
        while FreedObjects.releasesForTesting == before && Date() < deadline { usleep(1_000) }
        #expect(FreedObjects.releasesForTesting > before, "the objects were let go of; free pages were not handed back")
    }
}
