import Foundation
@testable import Strata
import StrataStore
import Testing

/// `close()` saves the view context and the writer; what it cannot save —
/// a background context's unsaved changes — it names.
@Suite struct CloseTests {
    @Test func closeNamesTheContextsWhoseChangesItLeavesBehind() throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/store"
        let container = try PersistentContainer(name: "Recipes", model: makeModel(), directory: path, options: testStoreOptions(),
                                                viewContext: .privateQueue)
        let view = container.viewContext
        // The view context's change: close() saves it, so it is not named.
        try view.performAndWait { () throws in
            Recipe(context: view).name = "Kept by close"
        }
        let importer = ManagedObjectContext(.privateQueue, parent: view, name: "importer")
        try importer.performAndWait { () throws in
            Recipe(context: importer).name = "Soup"
            Recipe(context: importer).name = "Bread"
        }
        let editor = ManagedObjectContext(.privateQueue, parent: importer, name: "editor")
        editor.performAndWait { Recipe(context: editor).name = "Stew" }
        let beside = ManagedObjectContext(.privateQueue, parent: container.writerContext, name: "beside")
        beside.performAndWait { _ = Recipe(context: beside) }
        // A context that held changes and ended: nothing of it is left to name.
        do {
            let ended = ManagedObjectContext(.privateQueue, parent: view, name: "ended")
            ended.performAndWait { Recipe(context: ended).name = "Gone" }
        }
        let named = container.contextsWithUnsavedChanges()
        // Parents before children; the view context is not named.
        #expect(Set(named.map(\.name)) == ["importer", "beside", "editor"])
        #expect(named.first { $0.name == "importer" }?.changed == 2)
        #expect(named.last?.name == "editor")

        // A save takes the importer off the list (its changes are the view context's now).
        try importer.performAndWait { () throws in try importer.save() }
        beside.performAndWait { beside.reset() }
        #expect(container.contextsWithUnsavedChanges().map(\.name) == ["editor"])

        try container.close()
        let reopened = try PersistentContainer(name: "Recipes", model: makeModel(), directory: path, options: testStoreOptions(),
                                               viewContext: .privateQueue)
        let names = try reopened.viewContext.performAndWait { () throws in
            Set(try reopened.viewContext.fetch(FetchRequest<Recipe>()).map(\.name))
        }
        #expect(names == ["Kept by close", "Soup", "Bread"])
        try reopened.close()
    }

    /// A container never closed names every context whose changes are not
    /// on disk — the view context and the writer too — as it ends.
    @Test func aContainerNeverClosedNamesWhatIsNotOnDisk() throws {
        let directory = TemporaryDirectory()
        let container = try PersistentContainer(name: "Recipes", model: makeModel(), directory: directory.path + "/store",
                                                options: testStoreOptions(), viewContext: .privateQueue)
        let view = container.viewContext, writer = container.writerContext
        #expect(container.contextsWithUnsavedChanges(includingViewAndWriter: true).isEmpty)
        try view.performAndWait { () throws in
            Recipe(context: view).name = "Soup"
            try view.save()                      // into the writer: not on disk
        }
        #expect(container.contextsWithUnsavedChanges(includingViewAndWriter: true).map(\.name) == [writer.name])
        view.performAndWait { Recipe(context: view).name = "Bread" }
        #expect(container.contextsWithUnsavedChanges(includingViewAndWriter: true).map(\.name) == [writer.name, view.name])
        #expect(container.contextsWithUnsavedChanges().isEmpty, "close() would save both")
        try container.saveAndWait()
        #expect(container.contextsWithUnsavedChanges(includingViewAndWriter: true).isEmpty)
    }
}
