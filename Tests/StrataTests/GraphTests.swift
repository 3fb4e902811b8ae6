import Foundation
import Strata
import StrataStore
import Testing

// The object graph: relationships and their inverses, delete rules,
// validation, attribute round trips, change tracking, object state, and the
// coordinator's store checks.

// MARK: Models of this file

/// Every attribute type, required and optional.
fileprivate final class GTAllTypes: ManagedObject {
    @Attribute("s") var s: String
    @Attribute("i16") var i16: Int16
    @Attribute("i32") var i32: Int32
    @Attribute("i64") var i64: Int64
    @Attribute("d") var d: Double
    @Attribute("b") var b: Bool
    @Attribute("date") var date: Date
    @Attribute("data") var data: Data
    @Attribute("uuid") var uuid: UUID
    @Attribute("os") var os: String?
    @Attribute("oi16") var oi16: Int16?
    @Attribute("oi32") var oi32: Int32?
    @Attribute("oi64") var oi64: Int64?
    @Attribute("od") var od: Double?
    @Attribute("ob") var ob: Bool?
    @Attribute("odate") var odate: Date?
    @Attribute("odata") var odata: Data?
    @Attribute("ouuid") var ouuid: UUID?
}

fileprivate func makeAllTypesModel() -> ManagedObjectModel {
    try! ManagedObjectModel(entities: [
        EntityDescription(name: "AllTypes", managedObjectClass: GTAllTypes.self, properties: [
            .attribute("s", .string), .attribute("i16", .integer16), .attribute("i32", .integer32),
            .attribute("i64", .integer64), .attribute("d", .double), .attribute("b", .bool),
            .attribute("date", .date), .attribute("data", .binaryData), .attribute("uuid", .uuid),
            .attribute("os", .string, optional: true), .attribute("oi16", .integer16, optional: true),
            .attribute("oi32", .integer32, optional: true), .attribute("oi64", .integer64, optional: true),
            .attribute("od", .double, optional: true), .attribute("ob", .bool, optional: true),
            .attribute("odate", .date, optional: true), .attribute("odata", .binaryData, optional: true),
            .attribute("ouuid", .uuid, optional: true),
        ]),
    ])
}

/// Owners and pets: `pets` has delete rule noAction; `keeper` is a required
/// to-one without an inverse.
fileprivate final class GTOwner: ManagedObject {
    @Attribute("name") var name: String
    @Relationship("pets") var pets: Set<GTPet>
}

fileprivate final class GTPet: ManagedObject {
    @Attribute("name") var name: String
    @Relationship("owner") var owner: GTOwner?
    @Relationship("keeper") var keeper: GTOwner?
}

fileprivate func makePetModel() -> ManagedObjectModel {
    try! ManagedObjectModel(entities: [
        EntityDescription(name: "Owner", managedObjectClass: GTOwner.self, properties: [
            .attribute("name", .string),
            .toMany("pets", "Pet", inverse: "owner", deleteRule: .noAction),
        ]),
        EntityDescription(name: "Pet", managedObjectClass: GTPet.self, properties: [
            .attribute("name", .string),
            .toOne("owner", "Owner", inverse: "pets"),
            .toOne("keeper", "Owner", inverse: nil, optional: false),
        ]),
    ])
}

/// The fixture model with one more attribute on Recipe (for model mismatch).
fileprivate func makeModelWithRetypedAttribute() -> ManagedObjectModel {
    let base = makeModel()
    let entities = base.entities.map { entity in
        var properties = entity.properties
        if entity.name == "Recipe" { properties[properties.firstIndex { $0.name == "servings" }!] = .attribute("servings", .string, optional: true) }
        // Recipe declares servings an Int: a model that retypes it names
        // no classes (the model checks each class against its entity).
        return EntityDescription(name: entity.name, properties: properties)
    }
    return try! ManagedObjectModel(entities: entities)
}

/// The fixture model with only optionality and delete rules changed: the
/// stored bytes do not depend on them.
fileprivate func makeModelWithOtherRules() -> ManagedObjectModel {
    let base = makeModel()
    let entities = base.entities.map { entity in
        let properties = entity.properties.map { property -> PropertyDescription in
            switch property {
            case .attribute(var a): a.isOptional = true; return .attribute(a)
            case .relationship(var r): r.deleteRule = .nullify; return .relationship(r)
            }
        }
        // Every attribute optional: the fixture classes (non-optional
        // properties) no longer fit, so the model names no classes.
        return EntityDescription(name: entity.name, properties: properties)
    }
    return try! ManagedObjectModel(entities: entities)
}

/// Runs `body` on a fresh private context attached to `coordinator`.
@discardableResult
fileprivate func gtWithFreshContext<T>(_ coordinator: PersistentStoreCoordinator, _ body: (ManagedObjectContext) throws -> T) throws -> T {
    let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
    return try context.performAndWait { try body(context) }
}

fileprivate func gtOne<T: ManagedObject>(_ type: T.Type, _ context: ManagedObjectContext, _ predicate: Predicate<T>? = nil) throws -> T {
    let found = try context.fetch(FetchRequest<T>(predicate: predicate))
    try #require(found.count == 1, "expected one \(T.self), found \(found.count)")
    return found[0]
}

/// A validation failure as a comparable string (ValidationFailure has no public initializer).
fileprivate func gtFailure(_ id: ObjectID, _ property: String, _ reason: ValidationFailure.Reason) -> String {
    "\(id.entity.name)/\(id.uriRepresentation().lastPathComponent.dropFirst())|\(property)|\(reason.rawValue)"
}

fileprivate func gtFailures(_ error: StrataError?) -> [String] {
    (error?.validationFailures ?? []).map { gtFailure($0.objectID, $0.property, $0.reason) }
}

fileprivate func gtSaveError(_ context: ManagedObjectContext) -> StrataError? {
    do {
        try context.save()
        return nil
    } catch {
        return error
    }
}

@Suite struct GraphTests {
    // MARK: Relationships and inverses

    /// To-one ↔ to-many: setting either side updates the other.
    @Test func toOneAndToManyInverses() throws {
        let coordinator = try makeCoordinator()
        try gtWithFreshContext(coordinator) { (context) throws in
            let soup = Recipe(context: context); soup.name = "Soup"
            let salt = Ingredient(context: context); salt.name = "Salt"
            let leek = Ingredient(context: context); leek.name = "Leek"
            salt.recipe = soup
            #expect(soup.ingredients == [salt])
            soup.add(leek, to: "ingredients")
            #expect(leek.recipe === soup)
            #expect(soup.ingredients == [salt, leek])
            soup.remove(salt, from: "ingredients")
            #expect(salt.recipe == nil)
            #expect(soup.ingredients == [leek])
            leek.recipe = nil
            #expect(soup.ingredients.isEmpty)
            soup.ingredients = [salt, leek]
            #expect(salt.recipe === soup && leek.recipe === soup)
            soup.ingredients = [leek]
            #expect(salt.recipe == nil && leek.recipe === soup)
            // By name, too.
            salt.setValue(soup, forKey: "recipe")
            #expect((soup.value(forKey: "ingredients") as? Set<ManagedObject>)?.count == 2)
            let author = Author(context: context); author.name = "Ann"
            soup.author = author
            #expect(author.recipes == [soup])
            try context.save()
        }
        // And saved that way.
        try gtWithFreshContext(coordinator) { (context) throws in
            let soup = try gtOne(Recipe.self, context)
            #expect(Set(soup.ingredients.map(\.name)) == ["Salt", "Leek"])
            #expect(soup.author?.name == "Ann")
            #expect(soup.author?.recipes == [soup])
        }
    }

    /// Moving an ingredient to another recipe removes it from the first,
    /// whichever side is set; the move survives a save and a reopen.
    @Test func movingAnIngredientBetweenRecipes() throws {
        let directory = TemporaryDirectory()
        let model = makeModel()
        do {
            let coordinator = try makeCoordinator(directory, model: model)
            try gtWithFreshContext(coordinator) { (context) throws in
                let soup = Recipe(context: context); soup.name = "Soup"
                let stew = Recipe(context: context); stew.name = "Stew"
                let pie = Recipe(context: context); pie.name = "Pie"
                let salt = Ingredient(context: context); salt.name = "Salt"
                salt.recipe = soup
                try context.save()
                // By the to-one side.
                salt.recipe = stew
                #expect(soup.ingredients.isEmpty)
                #expect(stew.ingredients == [salt])
                // By add(_:to:) on the to-many side.
                pie.add(salt, to: "ingredients")
                #expect(salt.recipe === pie)
                #expect(stew.ingredients.isEmpty)
                // By assigning the whole set.
                soup.ingredients = [salt]
                #expect(salt.recipe === soup)
                #expect(pie.ingredients.isEmpty && stew.ingredients.isEmpty)
                salt.recipe = stew
                try context.save()
            }
            // In a fresh context, on objects loaded from the store (faults).
            try gtWithFreshContext(coordinator) { (context) throws in
                let salt = try gtOne(Ingredient.self, context)
                #expect(salt.recipe?.name == "Stew")
                let pie = try gtOne(Recipe.self, context, #Predicate { $0.name == "Pie" })
                salt.recipe = pie
                #expect(pie.ingredients == [salt])
                try context.save()
            }
            try coordinator.close()
        }
        let coordinator = try makeCoordinator(directory, model: model)
        try gtWithFreshContext(coordinator) { (context) throws in
            let recipes = try context.fetch(FetchRequest<Recipe>(sortBy: [SortDescriptor(\.name)]))
            #expect(recipes.map { $0.ingredients.map(\.name) } == [["Salt"], [], []])  // Pie, Soup, Stew
            #expect(try gtOne(Ingredient.self, context).recipe?.name == "Pie")
        }
    }

    /// Many-to-many: both sides stay in step.
    @Test func manyToManyInverses() throws {
        let coordinator = try makeCoordinator()
        try gtWithFreshContext(coordinator) { (context) throws in
            let soup = Recipe(context: context); soup.name = "Soup"
            let stew = Recipe(context: context); stew.name = "Stew"
            let quick = Tag(context: context); quick.label = "quick"
            let warm = Tag(context: context); warm.label = "warm"
            soup.tags = [quick, warm]
            #expect(quick.recipes == [soup] && warm.recipes == [soup])
            warm.add(stew, to: "recipes")
            #expect(stew.tags == [warm])
            #expect(warm.recipes == [soup, stew])
            soup.tags = [quick]
            #expect(warm.recipes == [stew])
            quick.recipes = [soup, stew]
            #expect(stew.tags == [warm, quick])
            try context.save()
        }
        try gtWithFreshContext(coordinator) { (context) throws in
            let stew = try gtOne(Recipe.self, context, #Predicate { $0.name == "Stew" })
            #expect(Set(stew.tags.map(\.label)) == ["quick", "warm"])
            let warm = try gtOne(Tag.self, context, #Predicate { $0.label == "warm" })
            #expect(warm.recipes.map(\.name) == ["Stew"])
            let quick = try gtOne(Tag.self, context, #Predicate { $0.label == "quick" })
            #expect(Set(quick.recipes.map(\.name)) == ["Soup", "Stew"])
        }
    }

    /// One-to-one: taking a card for another recipe takes it from the first
    /// ("stealing"), from either side.
    @Test func oneToOneStealing() throws {
        let coordinator = try makeCoordinator()
        try gtWithFreshContext(coordinator) { (context) throws in
            let soup = Recipe(context: context); soup.name = "Soup"
            let stew = Recipe(context: context); stew.name = "Stew"
            let card1 = Card(context: context); card1.text = "one"
            let card2 = Card(context: context); card2.text = "two"
            soup.card = card1
            #expect(card1.recipe === soup)
            stew.card = card1  // steal from the recipe side
            #expect(card1.recipe === stew)
            #expect(soup.card == nil)
            card2.recipe = stew  // from the card side: stew lets go of card1
            #expect(stew.card === card2)
            #expect(card1.recipe == nil)
            card1.recipe = soup
            try context.save()
        }
        try gtWithFreshContext(coordinator) { (context) throws in
            let soup = try gtOne(Recipe.self, context, #Predicate { $0.name == "Soup" })
            let stew = try gtOne(Recipe.self, context, #Predicate { $0.name == "Stew" })
            #expect(soup.card?.text == "one" && stew.card?.text == "two")
            // Steal across saved objects.
            soup.card = stew.card
            #expect(stew.card == nil)
            try context.save()
        }
        try gtWithFreshContext(coordinator) { (context) throws in
            let cards = try context.fetch(FetchRequest<Card>(sortBy: [SortDescriptor(\.text)]))
            #expect(cards.map { $0.recipe?.name } == [nil, "Soup"])  // one, two
        }
    }

    // MARK: Delete rules

    /// nullify (tags, author, card's recipe), cascade (ingredients, card)
    /// and deny (author) across saves.
    @Test func deleteRulesAcrossSaves() throws {
        let coordinator = try makeCoordinator()
        try buildKitchen(coordinator)
        try checkDeleteRules(coordinator, reopen: nil)
    }

    /// The same delete rules on a store reopened from disk, where every
    /// object starts as a fault; checked again after another reopen.
    @Test func deleteRulesAfterReopeningFromDisk() throws {
        let directory = TemporaryDirectory()
        let model = makeModel()
        do {
            let coordinator = try makeCoordinator(directory, model: model)
            try buildKitchen(coordinator)
            try coordinator.close()
        }
        let coordinator = try makeCoordinator(directory, model: model)
        try checkDeleteRules(coordinator) { current in
            try current.close()
            return try makeCoordinator(directory, model: model)
        }
    }

    /// Soup (salt, leek, card, tags quick+warm, author Ann), Stew (tag warm, author Ann).
    private func buildKitchen(_ coordinator: PersistentStoreCoordinator) throws {
        try gtWithFreshContext(coordinator) { (context) throws in
            let ann = Author(context: context); ann.name = "Ann"
            let soup = Recipe(context: context); soup.name = "Soup"
            let stew = Recipe(context: context); stew.name = "Stew"
            for name in ["Salt", "Leek"] { let g = Ingredient(context: context); g.name = name; g.recipe = soup }
            let card = Card(context: context); card.text = "soup card"; card.recipe = soup
            let quick = Tag(context: context); quick.label = "quick"
            let warm = Tag(context: context); warm.label = "warm"
            soup.tags = [quick, warm]
            stew.tags = [warm]
            soup.author = ann
            stew.author = ann
            try context.save()
        }
    }

    private func checkDeleteRules(
        _ first: PersistentStoreCoordinator, reopen: ((PersistentStoreCoordinator) throws -> PersistentStoreCoordinator)?
    ) throws {
        var coordinator = first
        // deny: Ann still has recipes.
        try gtWithFreshContext(coordinator) { (context) throws in
            let ann = try gtOne(Author.self, context)
            context.delete(ann)
            let error = try #require(gtSaveError(context))
            #expect(error.code == .validationFailed)
            #expect(error.validationFailures.map(\.reason) == [.deleteDenied])
            #expect(error.validationFailures.first?.objectID == ann.objectID)
            #expect(error.validationFailures.first?.property == "recipes")
            #expect(context.hasChanges)
            // The recipes let go of the author (nullify on their side) in memory only.
            context.rollback()
        }
        try gtWithFreshContext(coordinator) { (context) throws in
            #expect(try context.count(for: FetchRequest<Author>()) == 1)
            #expect(try gtOne(Author.self, context).recipes.count == 2)
        }
        // cascade + nullify: deleting Soup deletes its ingredients and card,
        // and takes it out of its tags and its author.
        try gtWithFreshContext(coordinator) { (context) throws in
            let soup = try gtOne(Recipe.self, context, #Predicate { $0.name == "Soup" })
            let ingredients = soup.ingredients
            let card = try #require(soup.card)
            context.delete(soup)
            #expect(ingredients.count == 2 && ingredients.allSatisfy(\.isDeleted))
            #expect(card.isDeleted)
            let tags = try context.fetch(FetchRequest<Tag>())
            #expect(tags.allSatisfy { !$0.recipes.contains(soup) })
            #expect(try gtOne(Author.self, context).recipes.map(\.name) == ["Stew"])
            try context.save()
        }
        if let reopen { coordinator = try reopen(coordinator) }
        try gtWithFreshContext(coordinator) { (context) throws in
            #expect(try context.fetch(FetchRequest<Recipe>()).map(\.name) == ["Stew"])
            #expect(try context.count(for: FetchRequest<Ingredient>()) == 0)
            #expect(try context.count(for: FetchRequest<Card>()) == 0)
            let tags = try context.fetch(FetchRequest<Tag>(sortBy: [SortDescriptor(\.label)]))
            #expect(tags.map(\.label) == ["quick", "warm"])  // nullify keeps the tags
            #expect(tags.map { $0.recipes.map(\.name) } == [[], ["Stew"]])
            #expect(try gtOne(Author.self, context).recipes.map(\.name) == ["Stew"])
        }
        // nullify from the to-many side: deleting a tag leaves Stew without it.
        try gtWithFreshContext(coordinator) { (context) throws in
            context.delete(try gtOne(Tag.self, context, #Predicate { $0.label == "warm" }))
            try context.save()
        }
        // deny lifted: Ann's last recipe deleted in the same save.
        try gtWithFreshContext(coordinator) { (context) throws in
            let ann = try gtOne(Author.self, context)
            for recipe in ann.recipes { context.delete(recipe) }
            context.delete(ann)
            try context.save()
        }
        if let reopen { coordinator = try reopen(coordinator) }
        try gtWithFreshContext(coordinator) { (context) throws in
            #expect(try context.count(for: FetchRequest<Recipe>()) == 0)
            #expect(try context.count(for: FetchRequest<Author>()) == 0)
            #expect(try context.fetch(FetchRequest<Tag>()).map(\.label) == ["quick"])
        }
    }

    /// noAction: deleting an owner leaves its pets pointing at it, and the
    /// save fails (targetDeleted) until the pets are fixed.
    @Test func noActionDeleteRule() throws {
        let coordinator = try makeCoordinator(model: makePetModel())
        let petID = try gtWithFreshContext(coordinator) { (context) throws in
            let keeper = GTOwner(context: context); keeper.name = "Keeper"
            let owner = GTOwner(context: context); owner.name = "Olga"
            let pet = GTPet(context: context); pet.name = "Rex"; pet.owner = owner; pet.keeper = keeper
            try context.save()
            return pet.objectID
        }
        try gtWithFreshContext(coordinator) { (context) throws in
            let olga = try gtOne(GTOwner.self, context, #Predicate { $0.name == "Olga" })
            let rex = try #require(context.object(with: petID) as? GTPet)
            #expect(rex.owner === olga)
            context.delete(olga)
            #expect(rex.owner === olga)  // no action: the pet still points at her
            let error = try #require(gtSaveError(context))
            #expect(error.code == .validationFailed)
            #expect(error.validationFailures.contains { $0.reason == .targetDeleted && $0.objectID == petID && $0.property == "owner" })
            rex.owner = nil
            try context.save()
        }
        try gtWithFreshContext(coordinator) { (context) throws in
            #expect(try context.fetch(FetchRequest<GTOwner>()).map(\.name) == ["Keeper"])
            #expect(try #require(context.object(with: petID) as? GTPet).owner == nil)
        }
    }

    /// noAction, with the pets never loaded into the deleting context: the
    /// dangling reference must still be caught (never stored).
    @Test func noActionDeleteRuleWithUnloadedTargets() throws {
        let coordinator = try makeCoordinator(model: makePetModel())
        let petID = try gtWithFreshContext(coordinator) { (context) throws in
            let keeper = GTOwner(context: context); keeper.name = "Keeper"
            let owner = GTOwner(context: context); owner.name = "Olga"
            let pet = GTPet(context: context); pet.name = "Rex"; pet.owner = owner; pet.keeper = keeper
            try context.save()
            return pet.objectID
        }
        let stored = try gtWithFreshContext(coordinator) { (context) throws in
            context.delete(try gtOne(GTOwner.self, context, #Predicate { $0.name == "Olga" }))
            return gtSaveError(context)
        }
        let error = try #require(stored, "a delete leaving a dangling noAction reference was saved")
        #expect(error.validationFailures.contains { $0.reason == .targetDeleted && $0.objectID == petID })
    }

    /// deny through a parent: a child moves the author's recipes to another
    /// author and deletes the first; the parent's save must accept it (the
    /// parent's copy of the deleted author must not count its old recipes).
    @Test func denyLiftedInChildSavesThroughParent() throws {
        let coordinator = try makeCoordinator()
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let (annID, bobID) = try writer.performAndWait {
            let ann = Author(context: writer); ann.name = "Ann"
            let bob = Author(context: writer); bob.name = "Bob"
            let soup = Recipe(context: writer); soup.name = "Soup"; soup.author = ann
            try writer.save()
            return (ann.objectID, bob.objectID)
        }
        let child = ManagedObjectContext(.privateQueue, parent: writer)
        try child.performAndWait {
            let ann = try #require(try child.existingObject(with: annID) as? Author)
            let bob = try #require(try child.existingObject(with: bobID) as? Author)
            for recipe in ann.recipes { recipe.author = bob }
            #expect(ann.recipes.isEmpty)
            child.delete(ann)
            try child.save()
        }
        try writer.performAndWait { try writer.save() }
        try gtWithFreshContext(coordinator) { (context) throws in
            #expect(try context.fetch(FetchRequest<Author>()).map(\.name) == ["Bob"])
            #expect(try gtOne(Author.self, context).recipes.map(\.name) == ["Soup"])
        }
    }

    /// noAction through a parent: the child fixes the pets and deletes the
    /// owner; the parent's save must accept it.
    @Test func noActionFixedInChildSavesThroughParent() throws {
        let coordinator = try makeCoordinator(model: makePetModel())
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let ownerID = try writer.performAndWait {
            let keeper = GTOwner(context: writer); keeper.name = "Keeper"
            let owner = GTOwner(context: writer); owner.name = "Olga"
            let pet = GTPet(context: writer); pet.name = "Rex"; pet.owner = owner; pet.keeper = keeper
            try writer.save()
            return owner.objectID
        }
        let child = ManagedObjectContext(.privateQueue, parent: writer)
        try child.performAndWait {
            let olga = try #require(try child.existingObject(with: ownerID) as? GTOwner)
            for pet in olga.pets { pet.owner = nil }
            child.delete(olga)
            try child.save()
        }
        try writer.performAndWait { try writer.save() }
        try gtWithFreshContext(coordinator) { (context) throws in
            #expect(try context.fetch(FetchRequest<GTOwner>()).map(\.name) == ["Keeper"])
            #expect(try gtOne(GTPet.self, context).owner == nil)
        }
    }

    // MARK: Validation

    /// A required attribute without a value fails the save.
    @Test func requiredAttributeMissing() throws {
        let coordinator = try makeCoordinator()
        try gtWithFreshContext(coordinator) { (context) throws in
            let soup = Recipe(context: context)
            let error = try #require(gtSaveError(context))
            #expect(error.code == .validationFailed)
            #expect(gtFailures(error) == [gtFailure(soup.objectID, "name", .missingValue)])
            soup.name = "Soup"
            try context.save()
            // Clearing it on a saved object fails too.
            soup.setValue(nil, forKey: "name")
            #expect(gtSaveError(context)?.validationFailures.map(\.property) == ["name"])
        }
    }

    /// A required to-one relationship without an object fails the save.
    @Test func requiredRelationshipMissing() throws {
        let coordinator = try makeCoordinator(model: makePetModel())
        try gtWithFreshContext(coordinator) { (context) throws in
            let pet = GTPet(context: context); pet.name = "Rex"
            let error = try #require(gtSaveError(context))
            #expect(gtFailures(error) == [gtFailure(pet.objectID, "keeper", .missingValue)])
            let keeper = GTOwner(context: context); keeper.name = "K"
            pet.keeper = keeper
            try context.save()
        }
    }

    /// A relationship set to an object deleted in the same context fails.
    @Test func targetDeleted() throws {
        let coordinator = try makeCoordinator()
        let tagID = try gtWithFreshContext(coordinator) { (context) throws in
            let tag = Tag(context: context); tag.label = "old"
            let soup = Recipe(context: context); soup.name = "Soup"
            try context.save()
            _ = soup
            return tag.objectID
        }
        try gtWithFreshContext(coordinator) { (context) throws in
            let tag = try #require(try context.existingObject(with: tagID) as? Tag)
            let soup = try gtOne(Recipe.self, context)
            context.delete(tag)
            soup.tags = [tag]
            let error = try #require(gtSaveError(context))
            #expect(gtFailures(error).contains(gtFailure(soup.objectID, "tags", .targetDeleted)))
        }
    }

    /// A parent does not validate again what a child validated and saved
    /// into it (the saving path of an import), but it does when it changed
    /// the object since, and always against its own deletions.
    @Test func whatAChildValidatedIsCheckedAgainAfterParentChanges() throws {
        let coordinator = try makeCoordinator(model: makePetModel())
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "writer")
        let child = ManagedObjectContext(.privateQueue, parent: writer, name: "child")
        let olgaID = try writer.performAndWait {
            let olga = GTOwner(context: writer); olga.name = "Olga"
            try writer.save()
            return olga.objectID
        }
        let rexID = try child.performAndWait {
            let olga = try #require(try child.existingObject(with: olgaID) as? GTOwner)
            let keeper = GTOwner(context: child); keeper.name = "Keeper"
            let rex = GTPet(context: child); rex.name = "Rex"; rex.owner = olga; rex.keeper = keeper
            try child.save()
            return rex.objectID
        }
        try writer.performAndWait {
            // noAction: deleting Olga here leaves Rex (as the child saved him,
            // untouched here) pointing at her; the parent's save must see it.
            let olga = try #require(try writer.existingObject(with: olgaID) as? GTOwner)
            let rex = try #require(try writer.existingObject(with: rexID) as? GTPet)
            writer.delete(olga)
            let error = try #require(gtSaveError(writer), "a dangling reference in a child's insert was saved")
            #expect(error.validationFailures.contains { $0.reason == .targetDeleted && $0.objectID == rexID && $0.property == "owner" })
            rex.owner = nil
            try writer.save()
        }
        let fidoID = try child.performAndWait {
            let keeper = try gtOne(GTOwner.self, child, #Predicate { $0.name == "Keeper" })
            let fido = GTPet(context: child); fido.name = "Fido"; fido.keeper = keeper
            try child.save()
            return fido.objectID
        }
        try writer.performAndWait {
            // Changed here after the child validated it: validated again.
            let fido = try #require(try writer.existingObject(with: fidoID) as? GTPet)
            fido.setValue(nil, forKey: "name")
            let error = try #require(gtSaveError(writer), "a required value cleared in the parent was saved")
            #expect(gtFailures(error) == [gtFailure(fidoID, "name", .missingValue)])
            fido.name = "Fido"
            try writer.save()
        }
    }

    /// Every failure of a save is listed in one validationFailed error, and a
    /// failed save changes nothing anywhere: the context keeps its changes,
    /// the parent and the store are as they were.
    @Test func allFailuresInOneErrorAndNothingChanges() throws {
        let directory = TemporaryDirectory()
        let coordinator = try makeCoordinator(directory)
        let writer = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let authorID = try writer.performAndWait {
            let ann = Author(context: writer); ann.name = "Ann"
            let soup = Recipe(context: writer); soup.name = "Soup"; soup.author = ann
            try writer.save()
            return ann.objectID
        }
        let batchesBefore = coordinator.storeStatistics?.batchesWritten
        let child = ManagedObjectContext(.privateQueue, parent: writer)
        try child.performAndWait {
            let nameless1 = Recipe(context: child)
            let nameless2 = Recipe(context: child)
            let bare = Ingredient(context: child); bare.recipe = nameless1
            let fine = Tag(context: child); fine.label = "fine"
            let ann = try #require(try child.existingObject(with: authorID) as? Author)
            ann.name = "Ann B"
            child.delete(ann)
            let error = try #require(gtSaveError(child))
            #expect(error.code == .validationFailed)
            let expected: Set<String> = [
                gtFailure(nameless1.objectID, "name", .missingValue),
                gtFailure(nameless2.objectID, "name", .missingValue),
                gtFailure(bare.objectID, "name", .missingValue),
                gtFailure(authorID, "recipes", .deleteDenied),
            ]
            #expect(Set(gtFailures(error)) == expected)
            #expect(error.validationFailures.count == 4)
            // The child still holds every change.
            #expect(child.hasChanges)
            #expect(child.insertedObjects == [nameless1, nameless2, bare, fine])
            #expect(child.deletedObjects == [ann])
            #expect(nameless1.isInserted && ann.isDeleted && fine.isInserted)
            #expect(fine.objectID.isTemporaryID)
        }
        // The parent received nothing.
        writer.performAndWait {
            #expect(!writer.hasChanges)
            #expect((writer.registeredObject(for: authorID) as? Author)?.name == "Ann")
            #expect(writer.registeredObject(for: authorID)?.isDeleted == false)
        }
        // Fixed, the child's save goes through; a failing writer save leaves the store alone.
        try child.performAndWait {
            child.rollback()
            let r = Recipe(context: child); r.name = "Pie"
            try child.save()
        }
        #expect(coordinator.storeStatistics?.batchesWritten == batchesBefore)
        try writer.performAndWait {
            _ = Tag(context: writer)  // invalid: no label
            let error = try #require(gtSaveError(writer))
            #expect(error.validationFailures.map(\.property) == ["label"])
            #expect(writer.insertedObjects.count == 2)
        }
        #expect(coordinator.storeStatistics?.batchesWritten == batchesBefore)
        try gtWithFreshContext(coordinator) { (context) throws in
            #expect(try context.fetch(FetchRequest<Recipe>()).map(\.name) == ["Soup"])
            #expect(try context.count(for: FetchRequest<Tag>()) == 0)
        }
    }

    // MARK: Attribute round trips

    /// Every attribute type survives a save, a close and a reopen, with the
    /// integer limits, special doubles, empty strings and data, and nil optionals.
    @Test func everyAttributeTypeRoundTripsThroughDisk() throws {
        let directory = TemporaryDirectory()
        let model = makeAllTypesModel()
        let date1 = Date(timeIntervalSinceReferenceDate: 123_456_789.123_456)
        let date2 = Date(timeIntervalSinceReferenceDate: -987_654_321.5)
        let uuid1 = UUID()
        let uuid2 = try #require(UUID(uuidString: "00000000-0000-0000-0000-000000000001"))
        let blob = Data((0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        do {
            let coordinator = try makeCoordinator(directory, model: model)
            try gtWithFreshContext(coordinator) { (context) throws in
                let high = GTAllTypes(context: context)
                high.s = "héllo, 世界 🍲"
                high.i16 = .max; high.i32 = .max; high.i64 = .max
                high.d = .greatestFiniteMagnitude; high.b = true
                high.date = date1; high.data = blob; high.uuid = uuid1
                high.os = ""; high.oi16 = 0; high.oi32 = 0; high.oi64 = 0; high.od = -0.0; high.ob = false
                high.odate = date2; high.odata = Data(); high.ouuid = uuid2
                let low = GTAllTypes(context: context)
                low.s = ""
                low.i16 = .min; low.i32 = .min; low.i64 = .min
                low.d = -.infinity; low.b = false
                low.date = .distantPast; low.data = Data([0]); low.uuid = uuid2
                // optionals left nil
                try context.save()
            }
            try coordinator.close()
        }
        let coordinator = try makeCoordinator(directory, model: model)
        try gtWithFreshContext(coordinator) { (context) throws in
            let high = try gtOne(GTAllTypes.self, context, #Predicate { $0.b == true })
            let low = try gtOne(GTAllTypes.self, context, #Predicate { $0.b == false })
            #expect(high.s == "héllo, 世界 🍲")
            #expect(high.i16 == .max && high.i32 == .max && high.i64 == .max)
            #expect(high.d == .greatestFiniteMagnitude)
            #expect(high.date == date1 && high.data == blob && high.uuid == uuid1)
            #expect(high.os == "" && high.oi16 == 0 && high.oi32 == 0 && high.oi64 == 0 && high.ob == false)
            #expect(high.od == 0 && high.od?.sign == .minus)
            #expect(high.odate == date2 && high.odata == Data() && high.ouuid == uuid2)
            #expect(low.s == "")
            #expect(low.i16 == .min && low.i32 == .min && low.i64 == .min)
            #expect(low.d == -.infinity && low.date == .distantPast && low.data == Data([0]) && low.uuid == uuid2)
            #expect(low.os == nil && low.oi16 == nil && low.oi32 == nil && low.oi64 == nil && low.od == nil)
            #expect(low.ob == nil && low.odate == nil && low.odata == nil && low.ouuid == nil)
            #expect(low.propertyValue(forKey: "odata") == .null)
            #expect(high.propertyValue(forKey: "odata") == .data(Data()))
            #expect(low.value(forKey: "oi32") == nil)
            #expect(high.value(forKey: "i16") as? Int == Int(Int16.max))
            // Setting an optional back to nil also round-trips.
            high.odate = nil
            try context.save()
        }
        try gtWithFreshContext(coordinator) { (context) throws in
            let high = try gtOne(GTAllTypes.self, context, #Predicate { $0.b == true })
            #expect(high.odate == nil)
        }
    }

    /// The fixture's attribute types (Date, Data, UUID, Double, Bool, Int32,
    /// nil optionals) round-trip through disk.
    @Test func fixtureAttributesRoundTripThroughDisk() throws {
        let directory = TemporaryDirectory()
        let model = makeModel()
        let created = Date(timeIntervalSince1970: 1_700_000_000.25)
        let uuid = UUID()
        do {
            let coordinator = try makeCoordinator(directory, model: model)
            try gtWithFreshContext(coordinator) { (context) throws in
                let soup = Recipe(context: context)
                soup.name = "Soup"; soup.servings = -3; soup.rating = 4.75; soup.notes = "hot"
                soup.vegetarian = true; soup.created = created; soup.photo = Data([1, 2, 3]); soup.uuid = uuid
                let bare = Recipe(context: context); bare.name = "Bare"
                let g = Ingredient(context: context); g.name = "Salt"; g.grams = .min; g.recipe = soup
                try context.save()
            }
            try coordinator.close()
        }
        let coordinator = try makeCoordinator(directory, model: model)
        try gtWithFreshContext(coordinator) { (context) throws in
            let soup = try gtOne(Recipe.self, context, #Predicate { $0.name == "Soup" })
            #expect(soup.servings == -3 && soup.rating == 4.75 && soup.notes == "hot" && soup.vegetarian)
            #expect(soup.created == created && soup.photo == Data([1, 2, 3]) && soup.uuid == uuid)
            #expect(soup.ingredients.first?.grams == .min)
            let bare = try gtOne(Recipe.self, context, #Predicate { $0.name == "Bare" })
            #expect(bare.notes == nil && bare.photo == nil && bare.uuid == nil)
            #expect(bare.servings == 1 && bare.created == Date(timeIntervalSinceReferenceDate: 0))  // defaults
        }
    }

    /// Values that do not fit their attribute are refused.
    @Test func outOfRangeValuesAreRefused() throws {
        let coordinator = try makeCoordinator(model: makeAllTypesModel())
        try gtWithFreshContext(coordinator) { (context) throws in
            let object = GTAllTypes(context: context)
            for (key, value) in [("i16", PropertyValue.integer(Int64(Int16.max) + 1)), ("i16", .integer(Int64(Int16.min) - 1)),
                                 ("i32", .integer(Int64(Int32.max) + 1)), ("i32", .integer(Int64(Int32.min) - 1)),
                                 ("s", .integer(1)), ("uuid", .string("x")), ("nope", .null)] {
                let error = #expect(throws: StrataError.self, "\(key) = \(value)") { try object.setPropertyValue(value, forKey: key) }
                #expect(error?.code == .invalidArgument)
            }
            try object.setPropertyValue(.integer(Int64(Int16.min)), forKey: "i16")
            #expect(object.i16 == .min)
        }
    }

    // MARK: changedValues and committedValues

    @Test func changedAndCommittedValues() throws {
        let coordinator = try makeCoordinator()
        try gtWithFreshContext(coordinator) { (context) throws in
            let soup = Recipe(context: context)
            soup.name = "Soup"
            soup.servings = 2
            let inserted = soup.changedValues()
            #expect(inserted["name"] == .string("Soup"))
            #expect(inserted["servings"] == .integer(2))
            #expect(inserted["notes"] == nil)  // nothing set
            #expect(soup.committedValues(forKeys: nil).isEmpty)  // never saved
            try context.save()
            #expect(soup.changedValues().isEmpty)
            #expect(soup.committedValues(forKeys: ["name"]) == ["name": .string("Soup")])

            soup.name = "Broth"
            soup.notes = "thin"
            #expect(soup.changedValues() == ["name": .string("Broth"), "notes": .string("thin")])
            #expect(soup.committedValues(forKeys: ["name", "notes"]) == ["name": .string("Soup"), "notes": .null])
            #expect(soup.committedValues(forKeys: nil).count == soup.entity.properties.count)

            let salt = Ingredient(context: context); salt.name = "Salt"
            salt.recipe = soup
            #expect(soup.changedValues()["ingredients"] == .objects([salt.objectID]))
            try context.save()
            #expect(soup.changedValues().isEmpty)
            #expect(soup.committedValues(forKeys: ["name"]) == ["name": .string("Broth")])
            #expect(soup.committedValues(forKeys: ["ingredients"]) == ["ingredients": .objects([salt.objectID])])
            // A value set back to what was saved is no longer a change.
            soup.servings = 5
            soup.servings = 2
            #expect(soup.changedValues().isEmpty)
        }
    }

    // MARK: Object state

    @Test func objectStateFlagsThroughItsLife() throws {
        let coordinator = try makeCoordinator()
        let id = try gtWithFreshContext(coordinator) { (context) throws in
            let soup = Recipe(context: context); soup.name = "Soup"
            #expect(soup.isInserted && !soup.isUpdated && !soup.isDeleted && !soup.isFault && soup.hasChanges)
            #expect(soup.managedObjectContext === context)
            try context.save()
            #expect(!soup.isInserted && !soup.isUpdated && !soup.isDeleted && !soup.hasChanges)
            soup.servings = 3
            #expect(soup.isUpdated && soup.hasChanges && !soup.isInserted)
            #expect(context.updatedObjects == [soup])
            try context.save()
            #expect(!soup.isUpdated)
            context.delete(soup)
            #expect(soup.isDeleted && !soup.isUpdated && soup.hasChanges)
            #expect(context.deletedObjects == [soup])
            try context.save()
            #expect(soup.managedObjectContext == nil)
            #expect(context.registeredObject(for: soup.objectID) == nil)

            // Inserted then deleted before a save: simply gone.
            let draft = Recipe(context: context); draft.name = "Draft"
            context.delete(draft)
            #expect(draft.isDeleted)
            #expect(!context.hasChanges)
            #expect(context.insertedObjects.isEmpty)

            let kept = Recipe(context: context); kept.name = "Kept"
            try context.save()
            return kept.objectID
        }
        try gtWithFreshContext(coordinator) { (context) throws in
            let kept = context.object(with: id)
            #expect(kept.isFault && !kept.isInserted && !kept.isUpdated && !kept.isDeleted)
            #expect((kept as? Recipe)?.name == "Kept")
            #expect(!kept.isFault)
            context.refresh(kept, mergeChanges: false)
            #expect(kept.isFault)
            // Deleting a fault loads it and marks it deleted.
            context.delete(kept)
            #expect(kept.isDeleted && !kept.isFault)
            // insert() undoes a delete before the save.
            context.insert(kept)
            #expect(!kept.isDeleted && !context.hasChanges)
        }
    }

    // MARK: The coordinator's store checks

    /// Reopening a store with a model whose change cannot be inferred (an
    /// attribute's type) fails with modelMismatch listing it; the original
    /// model still opens it.
    @Test func modelMismatchOnReopen() throws {
        let directory = TemporaryDirectory()
        do {
            let coordinator = try makeCoordinator(directory)
            try gtWithFreshContext(coordinator) { (context) throws in
                let r = Recipe(context: context); r.name = "Soup"
                try context.save()
            }
            try coordinator.close()
        }
        let other = PersistentStoreCoordinator(model: makeModelWithRetypedAttribute())
        let error = #expect(throws: StrataError.self) {
            try other.addPersistentStore(.log, directory: directory.path + "/store", options: testStoreOptions())
        }
        #expect(error?.code == .modelMismatch)
        #expect(error?.message.contains(other.model.versionHash) == true)
        #expect(error?.modelDifferences.filter { !$0.isInferable }.map(\.description) == [
            "Recipe.servings: type changed from integer64 to string — not inferable: an attribute's type cannot be inferred; add a new attribute and copy the values in a custom stage",
        ])
        // The failed open left no store attached: its contexts cannot save.
        let stray = ManagedObjectContext(.privateQueue, coordinator: other)
        stray.performAndWait {
            let r = ManagedObject(entity: other.model.entity(named: "Recipe")!, insertInto: stray)
            r.setValue("x", forKey: "name")
            #expect(gtSaveError(stray)?.code == .noPersistentStore)
        }
        // Nor did it damage the store: the original model reads it.
        let coordinator = try makeCoordinator(directory)
        try gtWithFreshContext(coordinator) { (context) throws in
            #expect(try context.fetch(FetchRequest<Recipe>()).map(\.name) == ["Soup"])
        }
    }

    /// Changing only optionality or delete rules changes no stored byte: the
    /// store still opens.
    @Test func modelWithOtherRulesStillOpens() throws {
        let directory = TemporaryDirectory()
        do {
            let coordinator = try makeCoordinator(directory)
            try gtWithFreshContext(coordinator) { (context) throws in
                let r = Recipe(context: context); r.name = "Soup"
                try context.save()
            }
            try coordinator.close()
        }
        let coordinator = try makeCoordinator(directory, model: makeModelWithOtherRules())
        try gtWithFreshContext(coordinator) { (context) throws in
            #expect(try context.count(for: FetchRequest<ManagedObject>(entityName: "Recipe")) == 1)
        }
    }

    /// A coordinator holds one store: a second addPersistentStore throws
    /// storeAlreadyAdded and the first store keeps working.
    @Test func secondStoreIsRefused() throws {
        let directory = TemporaryDirectory()
        let coordinator = try makeCoordinator()
        let error = #expect(throws: StrataError.self) { try coordinator.addPersistentStore(.inMemory) }
        #expect(error?.code == .storeAlreadyAdded)
        let second = #expect(throws: StrataError.self) {
            try coordinator.addPersistentStore(.log, directory: directory.path + "/other", options: testStoreOptions())
        }
        #expect(second?.code == .storeAlreadyAdded)
        try gtWithFreshContext(coordinator) { (context) throws in
            let r = Recipe(context: context); r.name = "Soup"
            try context.save()
            #expect(try context.count(for: FetchRequest<Recipe>()) == 1)
        }
        // The refused log store was not even created on disk.
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/other"))
    }

    /// A StrataStore that holds records but no Strata model is not an object
    /// store: opening it fails, and leaves its records alone.
    @Test func foreignStrataStoreIsRefused() throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/foreign"
        do {
            let store = try StrataStore(directory: path, options: testStoreOptions())
            var batch = WriteBatch()
            batch.put(Array("user/1".utf8), Array("Alice".utf8))
            _ = try store.write(batch)
            try store.close()
        }
        let coordinator = PersistentStoreCoordinator(model: makeModel())
        let error = #expect(throws: StrataError.self) {
            try coordinator.addPersistentStore(.log, directory: path, options: testStoreOptions())
        }
        #expect(error?.code == .modelMismatch)
        let store = try StrataStore(directory: path, options: testStoreOptions())
        #expect(try store.get(Array("user/1".utf8)) == Array("Alice".utf8))
        try store.close()
    }

    /// An empty StrataStore directory becomes an object store.
    @Test func emptyStrataStoreIsAdopted() throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/empty"
        try StrataStore(directory: path, options: testStoreOptions()).close()
        let coordinator = PersistentStoreCoordinator(model: makeModel())
        try coordinator.addPersistentStore(.log, directory: path, options: testStoreOptions())
        #expect(coordinator.storeIdentifier != nil)
        try coordinator.close()
    }

    /// Primary keys handed out before a close are never reused after the
    /// reopen: new objects never overwrite old ones.
    @Test func newObjectsAfterReopenDoNotOverwrite() throws {
        let directory = TemporaryDirectory()
        let model = makeModel()
        var identifier: UUID?
        for round in 0..<3 {
            let coordinator = try makeCoordinator(directory, model: model)
            if round == 0 { identifier = coordinator.storeIdentifier } else { #expect(coordinator.storeIdentifier == identifier) }
            try gtWithFreshContext(coordinator) { (context) throws in
                for i in 0..<5 { let r = Recipe(context: context); r.name = "\(round)-\(i)" }
                try context.save()
                #expect(try context.count(for: FetchRequest<Recipe>()) == 5 * (round + 1))
            }
            try coordinator.close()
        }
        let coordinator = try makeCoordinator(directory, model: model)
        try gtWithFreshContext(coordinator) { (context) throws in
            #expect(Set(try context.fetch(FetchRequest<Recipe>()).map(\.name)).count == 15)
        }
    }
}
