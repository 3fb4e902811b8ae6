import Foundation
import SharedTestSupport
@testable import Strata
import Testing

extension Recipe {
    /// Computed from one attribute: not the stored value, so not translated.
    var servingsPlusOne: Int { servings + 1 }
    /// Computed from two attributes: not translated.
    var title: String { name + (notes ?? "") }
}

/// A fetch translates what it can of a `#Predicate` into a test on stored
/// values (``ValueTest``); the translation must agree with Foundation's
/// own evaluation on every object, and leave alone what it does not understand.
@Suite struct CompiledPredicateTests {
    static let day = Date(timeIntervalSinceReferenceDate: 86_400)
    static let someUUID = UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16))

    /// (predicate, whether it is translated)
    static func predicates() -> [(Predicate<Recipe>, Bool)] {
        let day = Self.day
        let uuid = Self.someUUID
        let name = "R3"
        let names = ["Ré", "RK", "R1"]
        let none: [Int] = []
        let ratings = [2.5, 0]
        // Captured optionals: a constant's conformance is looked up by its
        // type (`String?`), with a value and without.
        let someNote: String? = "n1"
        let noNote: String? = nil
        return [
            (#Predicate { $0.servings > 3 }, true),
            (#Predicate { $0.servings <= 3 }, true),
            (#Predicate { 3 < $0.servings }, true),
            (#Predicate { $0.name == name }, true),
            (#Predicate { $0.name != "R3" }, true),
            (#Predicate { $0.name < "R5" }, true),
            // Canonically equivalent strings are equal in Swift whatever
            // their bytes: é precomposed and decomposed, K and the Kelvin sign.
            (#Predicate { $0.name == "Ré" }, true),
            (#Predicate { $0.name == "RK" }, true),
            (#Predicate { $0.name != "Re\u{301}" }, true),
            (#Predicate { $0.name >= "Ré" }, true),
            (#Predicate { "R3" > $0.name }, true),
            (#Predicate { $0.rating < $0.rating || $0.servings == $0.servings }, true),
            (#Predicate { $0.vegetarian && $0.servings < 5 }, true),
            (#Predicate { $0.vegetarian == false || $0.rating >= 2.5 }, true),
            (#Predicate { !($0.servings >= 4) }, true),
            (#Predicate { $0.notes != nil && $0.servings > 0 }, true),
            (#Predicate { $0.notes == nil }, true),
            (#Predicate { $0.notes == "n1" }, true),
            (#Predicate { $0.notes == someNote }, true),
            (#Predicate { $0.notes == noNote }, true),
            (#Predicate { $0.notes != noNote }, true),
            (#Predicate { $0.rating == 3.0 }, true),
            (#Predicate { $0.rating > 1.0 || $0.rating <= 0.5 }, true),
            (#Predicate { $0.uuid == nil || $0.created <= day }, true),
            (#Predicate { $0.created > day }, true),
            (#Predicate { $0.uuid == uuid }, true),
            (#Predicate { $0.photo == nil }, true),
            (#Predicate { _ in true }, true),
            (#Predicate { _ in false }, true),
            (#Predicate { $0.name.starts(with: "R1") }, true),
            (#Predicate { $0.name.starts(with: "R") && $0.servings > 2 }, true),
            (#Predicate { $0.name.starts(with: "Re") }, true),
            (#Predicate { $0.name.starts(with: "Ré") }, true),
            (#Predicate { $0.name.starts(with: "R3") }, true),
            (#Predicate { $0.name.starts(with: "q") }, true),
            (#Predicate { $0.name.starts(with: "a\r") }, true),
            (#Predicate { $0.name.starts(with: "a\r\n") }, true),
            (#Predicate { $0.name.starts(with: "") }, true),
            (#Predicate { [1, 3, 5].contains($0.servings) }, true),
            (#Predicate { names.contains($0.name) }, true),
            (#Predicate { none.contains($0.servings) }, true),
            (#Predicate { ratings.contains($0.rating) }, true),
            (#Predicate { $0.servings == 1 || $0.servings == 4 || 7 == $0.servings }, true),
            (#Predicate { $0.name.starts(with: name) || $0.notes == nil }, true),
            (#Predicate { $0.ingredients.count > 0 }, false),
            (#Predicate { $0.author?.name == "x" }, true),  // judged by a fetch (below), once resolved
            (#Predicate { $0.servings % 2 == 0 }, false),
            (#Predicate { $0.servingsPlusOne > 3 }, false),
            (#Predicate { $0.title == "R3n1" }, false),
        ]
    }

    /// The table a translation looks expression types' conformances up in
    /// answers as a cast does, while threads add types to it and read it
    /// at once (it grows from 16 slots to 64 here; from 16 types on, a type
    /// waits among the recent ones until the next snapshot takes it in).
    @Test func conformanceTableAnswersAsACastDoesFromManyThreads() {
        let table = ConformanceTable<any AttributeValueConvertible.Type> { $0 as? any AttributeValueConvertible.Type }
        let types: [Any.Type] = [
            String.self, Int.self, Int64.self, Double.self, Bool.self, Date.self, UUID.self, Data.self, String?.self, Int?.self,
            [String].self, Set<Int>.self, Int8.self, UInt.self, Float.self, Character.self, Recipe.self, Recipe?.self,
            [Int: String].self, (Int, Int).self, Substring.self, URL.self, Decimal.self, String??.self, Void.self,
        ]
        let failures = NSLock()
        nonisolated(unsafe) var wrong: [String] = []
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            var random = SeededGenerator(seed: UInt64(thread) + 1)
            for _ in 0..<40 {
                for type in types.shuffled(using: &random) {
                    let answer = table.conformance(of: type)
                    let expected = type as? any AttributeValueConvertible.Type
                    if answer.map(ObjectIdentifier.init) != expected.map(ObjectIdentifier.init) {
                        failures.withLock { wrong.append("\(type): \(String(describing: answer)), a cast says \(String(describing: expected))") }
                    }
                }
            }
        }
        #expect(wrong.isEmpty, "\(wrong.prefix(5))")
    }

    /// A translation made once for an expression type (the common shapes:
    /// comparisons of attributes, constants and nil, `&&`, `||`, `!`, Bool
    /// conditions) gives what the general, node-by-node translation gives,
    /// for every predicate above; the other shapes have none and are walked.
    @Test func translationsMadeForATypeAgreeWithTheGeneralOne() throws {
        let entity = try #require(makeModel().entity(named: "Recipe"))
        var madeForTheType = 0
        for (index, (predicate, _)) in Self.predicates().enumerated() {
            let general = ValueTest.compileWalking(predicate, entity: entity)
            // Twice: made at the first, kept for the second.
            for _ in 0..<2 {
                let compiled = ValueTest.compile(predicate, entity: entity)
                #expect(String(describing: compiled) == String(describing: general), "predicate \(index)")
            }
            if ValueTest.hasTypeTranslation(predicate) { madeForTheType += 1 }
        }
        // Every comparison, `&&`, `||`, `!` and condition above: the first 28.
        #expect(madeForTheType >= 28)
        // One expression type, other constants and another operator: read
        // anew at each call, not kept from the first.
        for (bound, servings) in [(3, 4), (5, 4), (4, 4)] {
            let above = #Predicate<Recipe> { $0.servings > bound }
            let atMost = #Predicate<Recipe> { $0.servings <= bound }
            var values = entity.initialValues
            values[entity.propertyIndex["servings"]!] = .integer(Int64(servings))
            #expect(ValueTest.hasTypeTranslation(above) && ValueTest.hasTypeTranslation(atMost))
            #expect(try #require(ValueTest.compile(above, entity: entity)).evaluate(values) == (servings > bound))
            #expect(try #require(ValueTest.compile(atMost, entity: entity)).evaluate(values) == (servings <= bound))
        }
        // Each predicate's own attribute, its key path read at each call.
        let name = #Predicate<Recipe> { $0.name == "a" }, notes = #Predicate<Recipe> { $0.notes == nil }
        #expect(String(describing: ValueTest.compile(name, entity: entity)).contains("index: \(entity.propertyIndex["name"]!)"))
        #expect(String(describing: ValueTest.compile(notes, entity: entity)).contains("index: \(entity.propertyIndex["notes"]!)"))
    }

    @Test func translationsAgreeWithFoundationOnRandomObjects() throws {
        let seed = testSeed()
        var random = SeededGenerator(seed: seed)
        let model = makeModel()
        let entity = try #require(model.entity(named: "Recipe"))
        var objects: [[PropertyValue]] = []
        for _ in 0..<400 {
            var values = entity.initialValues
            func set(_ key: String, _ value: PropertyValue) { values[entity.propertyIndex[key]!] = value }
            // Null now and then, even where Swift shows a non-optional value.
            func maybeNull(_ value: PropertyValue) -> PropertyValue { Int.random(in: 0..<8, using: &random) == 0 ? .null : value }
            let names = ["R\(Int.random(in: 0..<8, using: &random))", "Ré", "Re\u{301}", "RK", "R\u{212A}", "R", "R3\u{301}", "Rz",
                         "q\u{301}", "q", "a\r\nb", "a\r", "a\rb", ""]
            set("name", maybeNull(.string(names[Int.random(in: 0..<names.count, using: &random)])))
            set("servings", maybeNull(.integer(Int64.random(in: -3...10, using: &random))))
            let rating = Int.random(in: 0..<12, using: &random) == 0 ? Double.nan : Double(Int.random(in: 0...8, using: &random)) / 2
            set("rating", maybeNull(.double(rating)))
            set("notes", Bool.random(using: &random) ? .null : .string("n\(Int.random(in: 0..<3, using: &random))"))
            set("vegetarian", maybeNull(.bool(Bool.random(using: &random))))
            set("created", maybeNull(.date(Date(timeIntervalSinceReferenceDate: Double(Int.random(in: 0...3, using: &random)) * 43_200))))
            set("uuid", Bool.random(using: &random) ? .uuid(Self.someUUID) : .null)
            set("photo", Bool.random(using: &random) ? .data(Data([1])) : .null)
            objects.append(values)
        }
        for (i, (predicate, translatable)) in Self.predicates().enumerated() {
            let test = ValueTest.compile(predicate, entity: entity)
            #expect((test != nil) == translatable, "predicate #\(i)")
            // A test through a relationship is resolved by a fetch: see
            // `relationshipTestsAnswerAsFoundationDoes`.
            guard let test, !Self.followsRelationship(test) else { continue }
            let compiled = CompiledTest(test)
            var fields = RecordCoding.FieldOffsets(count: compiled.propertiesRead)
            for values in objects {
                let object = Recipe(entity: entity, insertInto: nil)
                object.values = values
                let expected = try predicate.evaluate(object)
                #expect(test.evaluate(values) == expected, "seed \(seed): predicate #\(i) on \(values)")
                // And judged on the encoded record, as a scan does.
                var record: [UInt8] = []
                RecordCoding.encode(values, version: 1, into: &record)
                let id = ObjectID(entity: entity, primaryKey: 1, isTemporary: false)
                let onBytes = try record.withBytes { (raw) throws(StrataError) in try BorrowedRecord(id: id, bytes: raw).passes(compiled, fields: &fields) }
                #expect(onBytes == expected, "seed \(seed): predicate #\(i) on the encoded \(values)")
            }
        }
    }

    static func followsRelationship(_ test: ValueTest) -> Bool {
        switch test {
        case .related, .relatedIn: true
        case .and(let a, let b), .or(let a, let b): followsRelationship(a) || followsRelationship(b)
        case .not(let a): followsRelationship(a)
        case .constant, .compare, .startsWith, .isIn: false
        }
    }

    /// Tests through a to-one relationship (`$0.author?.name == name`) are
    /// translated into the set of targets that pass, fetched in the same
    /// context: their answers are Foundation's, with nil targets, pending
    /// renames here and in a parent, and `!=`; the context registers no
    /// recipe or author it did not hold to answer.
    @Test func relationshipTestsAnswerAsFoundationDoes() throws {
        let coordinator = try makeCoordinator(model: makeModel(authorUniqueness: [["name"]]))
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try writer.performAndWait { () throws in
            let authors = ["Ada", "Bo", "Cy"].map { name in
                let author = Author(context: writer)
                author.name = name
                return author
            }
            for i in 0..<30 {
                let r = Recipe(context: writer)
                r.name = "R\(i)"
                r.author = i % 4 == 3 ? nil : authors[i % 4]
            }
            try writer.save()
            writer.reset()
        }
        let child = ManagedObjectContext(.privateQueue, parent: writer)
        func check(_ context: ManagedObjectContext, _ label: String) throws {
            try context.performAndWait { () throws in
                for name in ["Ada", "Bo", "Cy", "Dee"] {
                    let pairs: [(Predicate<Recipe>, Predicate<Recipe>)] = [
                        (#Predicate { $0.author?.name == name }, #Predicate { $0.author?.name == name || $0.servings % 2 == 7 }),
                        (#Predicate { $0.author?.name != name }, #Predicate { $0.author?.name != name || $0.servings % 2 == 7 }),
                        (#Predicate { name == $0.author?.name && $0.servings >= 0 }, #Predicate { name == $0.author?.name && $0.servings % 1 == 0 }),
                    ]
                    for (i, (translated, foundation)) in pairs.enumerated() {
                        let found = Set(try context.fetch(FetchRequest(predicate: translated)).map(\.objectID))
                        let expected = Set(try context.fetch(FetchRequest(predicate: foundation)).map(\.objectID))
                        #expect(found == expected, "\(label): \(name), pair \(i)")
                        if label == "stored" && name != "Dee" { #expect(!found.isEmpty, "\(name), pair \(i)") }
                    }
                }
            }
        }
        try check(writer, "stored")
        // Counting registers nothing: the targets are read as IDs.
        try writer.performAndWait { () throws in
            writer.reset()
            #expect(try writer.count(for: FetchRequest<Recipe>(predicate: #Predicate { $0.author?.name == "Ada" })) == 8)
            #expect(writer.registeredObjects.isEmpty)
        }
        // A pending rename in the writer, seen by its child; another in the child.
        try writer.performAndWait { () throws in
            writer.retainsRegisteredObjects = true
            try writer.fetch(FetchRequest<Author>(predicate: #Predicate { $0.name == "Bo" }))[0].name = "Dee"
        }
        try check(child, "renamed in the parent")
        try child.performAndWait { () throws in
            child.retainsRegisteredObjects = true
            try child.fetch(FetchRequest<Author>(predicate: #Predicate { $0.name == "Ada" }))[0].name = "Bo"
            #expect(try child.count(for: FetchRequest<Recipe>(predicate: #Predicate { $0.author?.name == "Bo" })) == 8)
        }
        try check(child, "renamed in the child")
    }

    /// The same answers through a fetch, translated or not, on a store.
    @Test func fetchesAnswerTheSameWhetherTranslatedOrNot() throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait { () throws in
            for i in 0..<20 {
                let r = Recipe(context: context)
                r.name = "R\(i % 7)"
                r.servings = i % 5
                r.notes = i % 3 == 0 ? "n\(i % 2)" : nil
            }
            try context.save()
            context.reset()
            // Translated, and its untranslatable twin (a computed property of
            // the same attribute), must find the same objects.
            let translated = try context.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.servings + 0 >= 0 && $0.servings > 2 }))
            let direct = try context.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.servings > 2 }))
            let computed = try context.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.servingsPlusOne > 3 }))
            #expect(Set(direct.map(\.objectID)) == Set(computed.map(\.objectID)))
            #expect(Set(direct.map(\.objectID)) == Set(translated.map(\.objectID)))
            #expect(direct.count == 8)
        }
    }

    /// A prefix judged from the bytes answers as Swift's `starts(with:)`,
    /// Character by Character, on the strings where bytes mislead: CR LF
    /// (one Character), combining marks, characters equal to ASCII ones
    /// (the Kelvin sign is K), composed and decomposed forms.
    @Test func aPrefixJudgedFromBytesAnswersAsSwiftDoes() {
        let strings = ["", "a", "ab", "abc", "a\r", "a\r\n", "a\r\nb", "e\u{301}", "e\u{301}x", "\u{E9}", "\u{212A}elvin", "Kelvin",
                       "K", "ab\u{301}", "ab c", "日本", "a日", "R10", "R", "\u{1F1EB}\u{1F1F7}", "x\u{200D}"]
        var judgedFromBytes = 0
        for string in strings {
            for prefix in strings + ["\r", "a\r", "ab", "Kel", "e", "\u{E9}", "R1"] {
                #expect(ValueTest.starts(.string(string), with: prefix) == string.starts(with: prefix), "\(string.debugDescription) starts with \(prefix.debugDescription)")
                if ValueTest.asciiStarts(string, with: prefix) != nil { judgedFromBytes += 1 }
            }
        }
        #expect(judgedFromBytes > 200)  // the bytes decide most of them
    }
}
