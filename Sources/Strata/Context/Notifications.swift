public import Foundation

/// The IDs of the objects a change touched: the `Sendable` payload of every
/// Strata notification, under ``userInfoKey`` (contract C19).
///
/// ```swift
/// NotificationCenter.default.addObserver(
///     forName: ManagedObjectContext.didSave, object: importContext, queue: nil
/// ) { note in
///     guard let changes = ObjectChanges(note) else { return }
///     main.perform { main.mergeChanges(fromContextDidSave: changes) }
/// }
/// ```
public struct ObjectChanges: Sendable, Hashable {
    /// The key the payload is under in a Strata notification's `userInfo`.
    public static let userInfoKey = "StrataObjectChanges"

    /// The objects inserted.
    public var inserted: [ObjectID] = []
    /// The objects whose values changed.
    public var updated: [ObjectID] = []
    /// The objects deleted.
    public var deleted: [ObjectID] = []
    /// Objects whose values a merge or refresh replaced (objects-did-change only).
    public var refreshed: [ObjectID] = []
    /// Objects a merge found deleted elsewhere (objects-did-change only).
    public var invalidated: [ObjectID] = []
    /// For did-save: the destination's values and version of each updated
    /// object, aligned with `updated`, so a merge needs no round trip to the
    /// destination's queue (the main queue never waits on the writer's).
    var updatedSnapshots: [Snapshot]?
    /// The context whose save this describes (did-save only).
    var sourceSerial: UInt64 = 0
    /// Objects inserted and deleted again before a save, which the lists
    /// leave out (objects-did-change only): a fetched-results controller
    /// may hold one from an earlier notification, and must let go of it.
    var discarded: [ObjectID] = []

    /// Changes to these objects, with none refreshed or invalidated: for instance to tell a context
    /// about changes made elsewhere with
    /// ``ManagedObjectContext/mergeChanges(fromContextDidSave:)-(ObjectChanges)``, which refreshes
    /// the updated objects it holds and lets go of the deleted ones.
    public init(inserted: [ObjectID] = [], updated: [ObjectID] = [], deleted: [ObjectID] = []) {
        self.inserted = inserted
        self.updated = updated
        self.deleted = deleted
    }

    /// The payload of a Strata notification; nil for any other notification.
    public init?(_ notification: Notification) {
        guard let changes = notification.userInfo?[Self.userInfoKey] as? ObjectChanges else { return nil }
        self = changes
    }

    public var isEmpty: Bool {
        inserted.isEmpty && updated.isEmpty && deleted.isEmpty && refreshed.isEmpty && invalidated.isEmpty
    }

    public static func == (a: ObjectChanges, b: ObjectChanges) -> Bool {
        a.inserted == b.inserted && a.updated == b.updated && a.deleted == b.deleted
            && a.refreshed == b.refreshed && a.invalidated == b.invalidated
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(inserted); hasher.combine(updated); hasher.combine(deleted)
    }
}

extension ManagedObjectContext {
    /// Posted (object: the context) on the context's queue at the start of a
    /// save that has changes.
    public static let willSave = Notification.Name("StrataManagedObjectContextWillSave")
    /// Posted (object: the context) on the context's queue after a successful
    /// save, with the saved IDs in ``ObjectChanges``.
    public static let didSave = Notification.Name("StrataManagedObjectContextDidSave")
    /// Posted (object: the context) on the context's queue once per block
    /// that changed objects (contract C8).
    public static let objectsDidChange = Notification.Name("StrataManagedObjectContextObjectsDidChange")
}
