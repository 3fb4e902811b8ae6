import Foundation
import SharedTestSupport
import Strata
import StrataStore
import Testing

/// The read path against a naive model: a chain writer → middle → child
/// takes random inserts, updates, deletes, saves (each level into the
/// next, the writer to disk), resets and store reopens; after each step a
/// random fetch (predicate, sort, limit, offset, `includesPendingChanges`)
/// in a random level must return exactly what the model computes by
/// overlaying each level's pending changes on the store, by hand.
///
/// Every context uses ``MergePolicy/mergeByPropertyObjectTrump`` (a save's
/// own values win, property by property) and refreshes its objects before
/// fetching, so the model need not follow which snapshot each level holds
/// (contract C10 has tests of its own): it follows one property, servings.
@Suite struct ReadPathModelTests {
    /// 1,500 steps (300 under ThreadSanitizer, ten times slower); STRATA_READ_MODEL_OPERATIONS sets another number.
    static let operations = Int(ProcessInfo.processInfo.environment["STRATA_READ_MODEL_OPERATIONS"] ?? "")
        ?? (ProcessInfo.processInfo.environment["STRATA_SANITIZED"] == nil ? 1_500 : 300)

    /// One level's unsaved changes, as the model keeps them.
    struct Pending {
        var inserted: [ObjectID: (name: String, servings: Int)] = [:]
        var updated: [ObjectID: Int] = [:]
        var deleted: Set<ObjectID> = []
    }

    struct Model {
        var stored: [ObjectID: (name: String, servings: Int)] = [:]
        var pending = [Pending(), Pending(), Pending()]

        /// What `level` sees: the store, then each level's changes down to it.
        func view(_ level: Int) -> [ObjectID: (name: String, servings: Int)] {
            var rows = stored
            guard level >= 0 else { return rows }
            for l in 0...level {
                let p = pending[l]
                for id in p.deleted { rows[id] = nil }
                for (id, servings) in p.updated where rows[id] != nil { rows[id]!.servings = servings }
                for (id, row) in p.inserted { rows[id] = row }
            }
            return rows
        }

        /// `refreshAllObjects()` in `level`: a change to an object that no
        /// longer exists below is gone with the object.
        mutating func refresh(_ level: Int) {
            let below = view(level - 1)
            pending[level].updated = pending[level].updated.filter { below[$0.key] != nil }
            pending[level].deleted = pending[level].deleted.filter { below[$0] != nil }
        }

        /// `level`'s save one level down (into the store for the writer).
        mutating func save(_ level: Int) {
            let p = pending[level]
            pending[level] = Pending()
            if level == 0 {
                for id in p.deleted { stored[id] = nil }
                for (id, servings) in p.updated where stored[id] != nil { stored[id]!.servings = servings }
                for (id, row) in p.inserted { stored[id] = row }
                return
            }
            let below = view(level - 1)
            var q = pending[level - 1]
            for id in p.deleted where below[id] != nil {
                if q.inserted[id] != nil { q.inserted[id] = nil } else { q.updated[id] = nil; q.deleted.insert(id) }
            }
            // An update of an object deleted below is dropped.
            for (id, servings) in p.updated where below[id] != nil {
                if q.inserted[id] != nil { q.inserted[id]!.servings = servings } else { q.updated[id] = servings }
            }
            for (id, row) in p.inserted { q.inserted[id] = row }
            pending[level - 1] = q
        }
    }

    @Test func fetchesMatchANaiveModelAcrossSavesResetsAndReopens() throws {
        let seed = testSeed()
        var random = SeededGenerator(seed: seed)
        let directory = TemporaryDirectory()
        let model = makeModel()
        var coordinator = try makeCoordinator(directory, model: model)
        func makeChain() -> [ManagedObjectContext] {
            let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "writer")
            let middle = ManagedObjectContext(.privateQueue, parent: writer, name: "middle")
            let child = ManagedObjectContext(.privateQueue, parent: middle, name: "child")
            for context in [writer, middle, child] { context.mergePolicy = .mergeByPropertyObjectTrump }
            // Exercised, not relied on: every fetch refreshes first.
            child.automaticallyMergesChangesFromParent = true
            return [writer, middle, child]
        }
        var chain = makeChain()
        var expected = Model()
        var nextName = 0
        // Every value written is new, so a write always changes the object
        // and a save's value always differs from the one it started from.
        var nextServings = 0
        var fetches = 0
        // What happened, for a failure's message.
        var history: [String] = []
        func pick(_ rows: [ObjectID: (name: String, servings: Int)]) -> ObjectID {
            rows.sorted { $0.value.name < $1.value.name }.randomElement(using: &random)!.key
        }

        for step in 0..<Self.operations {
            let level = Int.random(in: 0...2, using: &random)
            let context = chain[level]
            let visible = expected.view(level)
            let roll = Int.random(in: 0..<100, using: &random)
            switch roll {
            case 0..<25:
                let name = String(format: "n%05d", nextName)
                nextName += 1
                let servings = nextServings
                nextServings += 1
                let id = context.performAndWait { () -> ObjectID in
                    let r = Recipe(context: context); r.name = name; r.servings = servings
                    return r.objectID
                }
                expected.pending[level].inserted[id] = (name, servings)
                history.append("\(step): level \(level) inserts \(name) = \(servings)")
            case 25..<45 where !visible.isEmpty:
                let id = pick(visible)
                let servings = nextServings
                nextServings += 1
                try context.performAndWait { () throws(StrataError) in
                    (try context.existingObject(with: id) as! Recipe).servings = servings
                }
                if expected.pending[level].inserted[id] != nil {
                    expected.pending[level].inserted[id]!.servings = servings
                } else {
                    expected.pending[level].updated[id] = servings
                }
                history.append("\(step): level \(level) sets \(visible[id]!.name) = \(servings)")
            case 45..<55 where !visible.isEmpty:
                let id = pick(visible)
                try context.performAndWait { () throws(StrataError) in context.delete(try context.existingObject(with: id)) }
                if expected.pending[level].inserted[id] != nil {
                    expected.pending[level].inserted[id] = nil
                } else {
                    expected.pending[level].updated[id] = nil
                    expected.pending[level].deleted.insert(id)
                }
                history.append("\(step): level \(level) deletes \(visible[id]!.name)")
            case 55..<80:
                try context.performAndWait { () throws(StrataError) in
                    context.refreshAllObjects()
                    try context.save()
                }
                expected.refresh(level)
                expected.save(level)
                history.append("\(step): level \(level) saves")
            case 80..<84:
                context.performAndWait { context.reset() }
                expected.pending[level] = Pending()
                history.append("\(step): level \(level) resets")
            case 84..<86:
                // Reopen: everything saved down to disk first.
                for l in [2, 1, 0] {
                    let c = chain[l]
                    try c.performAndWait { () throws(StrataError) in c.refreshAllObjects(); try c.save() }
                    expected.refresh(l)
                    expected.save(l)
                }
                chain = []
                try coordinator.close()
                coordinator = try makeCoordinator(directory, model: model)
                chain = makeChain()
                history.append("\(step): reopen")
            default:
                break
            }

            // A random fetch in a random level.
            let fetchLevel = Int.random(in: 0...2, using: &random)
            let fetcher = chain[fetchLevel]
            let threshold = Int.random(in: 0...nextServings, using: &random)
            let includesPending = Int.random(in: 0..<4, using: &random) != 0
            let offset = Int.random(in: 0..<3, using: &random) == 0 ? Int.random(in: 0..<4, using: &random) : 0
            let limit = Int.random(in: 0..<3, using: &random) == 0 ? Int.random(in: 1..<6, using: &random) : 0
            var request = FetchRequest<Recipe>(predicate: #Predicate { $0.servings >= threshold }, sortBy: [SortDescriptor(\.name)])
            request.includesPendingChanges = includesPending
            request.returnsObjectsAsFaults = Bool.random(using: &random)
            request.fetchBatchSize = Int.random(in: 1...4, using: &random)
            request.fetchOffset = offset
            request.fetchLimit = limit

            expected.refresh(fetchLevel)  // the fetch below refreshes first
            let source = includesPending ? expected.view(fetchLevel) : expected.view(fetchLevel - 1)
            var names = source.values.filter { $0.servings >= threshold }.map(\.name).sorted()
            let unpaged = names.count
            names.removeFirst(min(offset, names.count))
            if limit > 0 && names.count > limit { names.removeLast(names.count - limit) }

            let (got, counted, ids, batched) = try fetcher.performAndWait { () throws(StrataError) in
                fetcher.refreshAllObjects()
                var unsorted = request
                unsorted.sortDescriptors = []
                unsorted.fetchOffset = 0
                unsorted.fetchLimit = 0
                return (try fetcher.fetch(request).map(\.name), try fetcher.count(for: request),
                        try fetcher.fetchObjectIDs(unsorted).count, try fetcher.fetchResults(request).map(\.name))
            }
            fetches += 1
            #expect(batched == names, "seed \(seed), step \(step): fetchResults")
            #expect(got == names, "seed \(seed), step \(step): fetch in level \(fetchLevel) (servings ≥ \(threshold), pending \(includesPending), offset \(offset), limit \(limit))")
            #expect(counted == names.count, "seed \(seed), step \(step): count")
            #expect(ids == unpaged, "seed \(seed), step \(step): IDs")
            if got != names {
                let odd = Set(got).symmetricDifference(names)
                let story = history.filter { line in
                    odd.contains { name in line.hasSuffix(" \(name)") || line.contains(" \(name) ") }
                        || line.hasSuffix("saves") || line.hasSuffix("resets") || line.hasSuffix("reopen")
                }
                let told = story.joined(separator: "\n")
                Issue.record("seed \(seed): \(odd.sorted()) differ; what happened:\n\(told)")
                return
            }
        }
        #expect(fetches == Self.operations)
    }
}
