import Foundation
import Strata
import Testing

/// Objects held across `reset()`, `refresh`, and the release of saved objects.
@Suite struct ContextLifecycleTests {
    /// A fault held across `reset()` stays readable (defaults) and reads as
    /// deleted; a loaded object keeps its values; neither belongs to the context.
    @Test func objectsHeldAcrossResetStayReadable() throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let soup = Recipe(context: context)
            soup.name = "Soup"
            try context.save()
            let id = soup.objectID
            let other = ManagedObjectContext(.privateQueue, coordinator: coordinator)
            try other.performAndWait {
                let fault = other.object(with: id) as! Recipe
                let loaded = try other.existingObject(with: id) as! Recipe
                #expect(fault === loaded)
                let neverLoaded = other.object(with: coordinator.managedObjectID(forURIRepresentation: URL(string: "x-strata:/Recipe/p999999")!)!)
                other.reset()
                #expect(loaded.name == "Soup")
                #expect(loaded.isDeleted)
                #expect(loaded.managedObjectContext == nil)
                #expect((neverLoaded as! Recipe).name == "")
                #expect(neverLoaded.isDeleted)
                #expect(other.registeredObjects.isEmpty)
            }
        }
    }

    /// An object that outlives its context (objects hold their context
    /// unretained, through a link the context clears when it goes) sees no
    /// context, and can still be read and written without one.
    @Test func objectOutlivingItsContextSeesNone() throws {
        let coordinator = try makeCoordinator()
        weak var gone: ManagedObjectContext?
        let soup: Recipe = try {
            let context = ManagedObjectContext(.confinement, coordinator: coordinator)
            gone = context
            let soup = Recipe(context: context)
            soup.name = "Soup"
            try context.save()
            soup.name = "Broth"  // unsaved, and registered: the context holds it
            #expect(soup.managedObjectContext === context)
            return soup
        }()
        #expect(gone == nil, "the context should be gone")
        #expect(soup.managedObjectContext == nil)
        #expect(soup.name == "Broth")
        soup.name = "Stock"
        #expect(soup.name == "Stock")
        #expect(soup.value(forKey: "name") as? String == "Stock")
    }

    /// `refresh(_:mergeChanges: false)` of an object changed in the same
    /// block lists it once (not twice) in that block's notification.
    @Test func refreshedPendingObjectIsListedOnce() throws {
        let coordinator = try makeCoordinator()
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        let id = try context.performAndWait { () throws -> ObjectID in
            let soup = Recipe(context: context)
            soup.name = "Soup"
            try context.save()
            return soup.objectID
        }
        let recorder = NotificationRecorder(ManagedObjectContext.objectsDidChange, from: context)
        context.performAndWait {
            let soup = context.object(with: id) as! Recipe
            soup.name = "Broth"
            context.refresh(soup, mergeChanges: false)
            soup.name = "Stock"
        }
        let updated = recorder.all.flatMap(\.updated)
        #expect(updated == [id])
    }

    /// With `retainsRegisteredObjects` a context keeps what it saved.
    @Test func retainingContextKeepsSavedObjects() throws {
        let coordinator = try makeCoordinator()
        let keeping = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        keeping.performAndWait { keeping.retainsRegisteredObjects = true }
        let releasing = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        for context in [keeping, releasing] {
            try context.performAndWait {
                for i in 0..<10 {
                    let recipe = Recipe(context: context)
                    recipe.name = "Recipe \(i)"
                }
                try context.save()
            }
        }
        #expect(keeping.performAndWait { keeping.registeredObjects.count } == 10)
        #expect(releasing.performAndWait { releasing.registeredObjects.count } == 0)
    }
}
