import Foundation
import Observation
import SharedTestSupport
@testable import Strata
import StrataStore
import Testing

/// Managed objects and Swift's Observation: a read inside
/// `withObservationTracking` registers the property; a change of its value
/// in the context — however it comes — tells exactly its observers.
@Suite struct ObservationTests {
    /// Which tracked (object, property) pairs heard a change, thread-safely
    /// (onChange runs on the thread that changes the value).
    final class Heard: @unchecked Sendable {
        private let lock = NSLock()
        private var heard: Set<String> = []  // guarded by `lock`
        func add(_ name: String) { _ = lock.withLock { heard.insert(name) } }
        func take() -> Set<String> { lock.withLock { defer { heard = [] }; return heard } }
    }

    static let properties = ["name", "servings", "rating", "tags"]

    /// Tracks each property of `recipe` on its own, so each one's
    /// onChange says which it was. On the recipe's context's queue.
    static func track(_ recipe: Recipe, as label: String, into heard: Heard) {
        withObservationTracking { _ = recipe.name } onChange: { heard.add("\(label).name") }
        withObservationTracking { _ = recipe.servings } onChange: { heard.add("\(label).servings") }
        withObservationTracking { _ = recipe.rating } onChange: { heard.add("\(label).rating") }
        withObservationTracking { _ = recipe.tags } onChange: { heard.add("\(label).tags") }
    }

    /// The tracked properties' values, read with tracking off (the reads are
    /// outside any `withObservationTracking`).
    static func values(of recipe: Recipe, as label: String) -> [String: String] {
        ["\(label).name": recipe.name, "\(label).servings": "\(recipe.servings)", "\(label).rating": "\(recipe.rating)",
         "\(label).tags": recipe.tags.map(\.label).sorted().joined(separator: ",")]
    }

    @Test func aWriteTellsTheObserversOfThatPropertyAndOfItsInverse() throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let heard = Heard()
        try context.performAndWait { () throws in
            context.tracksObservation = true
            let recipe = Recipe(context: context)
            recipe.name = "Soup"
            let tag = Tag(context: context)
            tag.label = "hot"
            try context.save()
            Self.track(recipe, as: "r", into: heard)
            withObservationTracking { _ = tag.recipes } onChange: { heard.add("tag.recipes") }
            recipe.servings = 4
            #expect(heard.take() == ["r.servings"])
            Self.track(recipe, as: "r", into: heard)
            recipe.servings = 4  // the same value: no change
            #expect(heard.take().isEmpty)
            tag.recipes = [recipe]  // the inverse, recipe.tags, changes too
            #expect(heard.take() == ["tag.recipes", "r.tags"])
            // A membership edit in place, on either side.
            let other = Tag(context: context)
            other.label = "cold"
            Self.track(recipe, as: "r", into: heard)
            withObservationTracking { _ = other.recipes } onChange: { heard.add("other.recipes") }
            recipe.add(other, to: "tags")
            #expect(heard.take() == ["r.tags", "other.recipes"])
            Self.track(recipe, as: "r", into: heard)
            withObservationTracking { _ = tag.recipes } onChange: { heard.add("tag.recipes") }
            tag.remove(recipe, from: "recipes")
            #expect(heard.take() == ["tag.recipes", "r.tags"])
            #expect(Set(recipe.tags.map(\.label)) == ["cold"])
        }
    }

    @Test func aContextThatDoesNotTrackTellsNoOne() throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let heard = Heard()
        context.performAndWait {
            #expect(!context.tracksObservation, "a private context does not track by default")
            let recipe = Recipe(context: context)
            Self.track(recipe, as: "r", into: heard)
            recipe.name = "Soup"
            #expect(heard.take().isEmpty)
            #expect(recipe.observation == nil, "nothing was made for Observation")
        }
        let main = ManagedObjectContext(.mainQueue, coordinator: coordinator)
        #expect(main.performAndWait { main.tracksObservation }, "a main-queue context tracks by default")
    }

    /// Random changes that reach a tracking context in every way — its own
    /// writes, a merge of another context's save, a child's save, a
    /// rollback, a refresh — and after each, the observers that heard are
    /// exactly those of the properties whose values changed.
    @Test(arguments: 0..<16) func observersHearExactlyTheChangedProperties(seed: Int) throws {
        var random = SeededGenerator(seed: UInt64(seed) &* 0x9E37_79B9_7F4A_7C15 &+ 3)
        let coordinator = try makeCoordinator(TemporaryDirectory())
        let observed = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "observed")
        let other = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "other")
        let heard = Heard()
        // Each side's saves may meet the other's: the saver's values win.
        for context in [observed, other] { context.performAndWait { context.mergePolicy = .mergeByPropertyObjectTrump } }
        let ids = try other.performAndWait { () throws -> [ObjectID] in
            let tags = (0..<3).map { i -> Tag in
                let tag = Tag(context: other)
                tag.label = "t\(i)"
                return tag
            }
            let recipes = (0..<6).map { i -> Recipe in
                let recipe = Recipe(context: other)
                recipe.name = "R\(i)"
                recipe.servings = i
                recipe.tags = [tags[i % 3]]
                return recipe
            }
            try other.save()
            return recipes.map(\.objectID) + tags.map(\.objectID)
        }
        let recipeIDs = Array(ids.prefix(6)), tagIDs = Array(ids.suffix(3))
        let recipes = try observed.performAndWait { () throws -> [Recipe] in
            observed.tracksObservation = true
            return try recipeIDs.map { try observed.existingObject(with: $0) as! Recipe }
        }
        let steps = ProcessInfo.processInfo.environment["STRATA_SANITIZED"] == nil ? 30 : 12
        for step in 0..<steps {
            let operation = Int(random.next() % 5)
            var local = SeededGenerator(seed: random.next())
            var before: [String: String] = [:]
            observed.performAndWait {
                for (i, recipe) in recipes.enumerated() {
                    before.merge(Self.values(of: recipe, as: "r\(i)")) { a, _ in a }
                    Self.track(recipe, as: "r\(i)", into: heard)
                }
            }
            _ = heard.take()
            func change(_ recipe: Recipe, in context: ManagedObjectContext, _ random: inout SeededGenerator) throws {
                switch random.next() % 4 {
                case 0: recipe.name = "R\(random.next() % 8)"
                case 1: recipe.servings = Int(random.next() % 6)
                case 2: recipe.rating = Double(random.next() % 3)
                default: recipe.tags = [try context.existingObject(with: tagIDs[Int(random.next() % 3)]) as! Tag]
                }
            }
            let what: String
            switch operation {
            case 0:
                what = "own writes"
                try observed.performAndWait { () throws in
                    for _ in 0..<3 { try change(recipes[Int(local.next() % 6)], in: observed, &local) }
                    try observed.save()
                }
            case 1:
                what = "a merge"
                let changes = try other.performAndWait { () throws -> ObjectChanges in
                    let recorder = NotificationRecorder(ManagedObjectContext.didSave, from: other)
                    for _ in 0..<3 { try change(try other.existingObject(with: recipeIDs[Int(local.next() % 6)]) as! Recipe, in: other, &local) }
                    try other.save()
                    return recorder.all.last ?? ObjectChanges()
                }
                observed.performAndWait { observed.mergeChanges(fromContextDidSave: changes) }
            case 2:
                what = "a child's save"
                let child = ManagedObjectContext(.privateQueue, parent: observed, name: "child")
                try child.performAndWait { () throws in
                    for _ in 0..<3 { try change(try child.existingObject(with: recipeIDs[Int(local.next() % 6)]) as! Recipe, in: child, &local) }
                    try child.save()
                }
                try observed.performAndWait { try observed.save() }
            case 3:
                what = "a rollback"
                try observed.performAndWait { () throws in
                    for _ in 0..<3 { try change(recipes[Int(local.next() % 6)], in: observed, &local) }
                }
                _ = heard.take()
                observed.performAndWait {
                    before = [:]
                    for (i, recipe) in recipes.enumerated() {
                        before.merge(Self.values(of: recipe, as: "r\(i)")) { a, _ in a }
                        Self.track(recipe, as: "r\(i)", into: heard)
                    }
                    observed.rollback()
                }
            default:
                what = "another context's save, then a refresh"
                try other.performAndWait { () throws in
                    for _ in 0..<2 { try change(try other.existingObject(with: recipeIDs[Int(local.next() % 6)]) as! Recipe, in: other, &local) }
                    try other.save()
                }
                observed.performAndWait { for recipe in recipes { observed.refresh(recipe, mergeChanges: false) } }
            }
            var after: [String: String] = [:]
            observed.performAndWait {
                for (i, recipe) in recipes.enumerated() { after.merge(Self.values(of: recipe, as: "r\(i)")) { a, _ in a } }
            }
            let changed = Set(after.keys.filter { before[$0] != after[$0] })
            #expect(heard.take() == changed, "seed \(seed) step \(step): \(what)")
        }
    }
}
