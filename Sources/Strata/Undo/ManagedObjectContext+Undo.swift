extension ManagedObjectContext {
    /// The context's undo manager: nil (the default) records nothing, so
    /// imports and servers pay nothing for undo. Set it on the context's
    /// queue; see ``ContextUndoManager``.
    public var undoManager: ContextUndoManager? {
        get { undo }
        set {
            checkQueue(function: "undoManager")
            undo?.link = nil
            newValue?.link = link
            undo = newValue
        }
    }

    /// An object's state as undo keeps it.
    static func undoState(of object: ManagedObject) -> ContextUndoManager.State {
        let exists = object.link?.unmanaged != nil && !object.flags.contains(.deleted) && !object.flags.contains(.invalidated)
        return ContextUndoManager.State(exists: exists, values: exists ? object.values : [])
    }

    /// Puts each object in the state given: inserted again (under its ID)
    /// or undeleted where it should exist and does not, deleted (an
    /// inserted object discarded) where it should not, and its values
    /// replaced — as changes of this context, announced and saved like any.
    func restore(_ states: [(ManagedObject, ContextUndoManager.State)], for manager: ContextUndoManager) {
        manager.isApplying = true
        defer { manager.isApplying = false }
        for (object, state) in states where state.exists {
            if object.link !== link {
                // Gone from the context (a discarded insert, a saved delete):
                // inserted again under its ID.
                discardedInserts.remove(object.objectID)
                registerInserted(object)
            } else if object.flags.contains(.deleted) {
                undelete(object)
            }
            if object.values != state.values {
                objectWillChange(object)
                object.replaceValues(with: state.values)
            }
        }
        // (An object found deleted at the source since has left the context:
        // there is nothing of it to delete.)
        for (object, state) in states
        where !state.exists && object.link === link && object.flags.isDisjoint(with: [.deleted, .invalidated]) {
            markDeleted(object)
            if object.flags.contains(.inserted) { object.link = nil }
        }
        scheduleProcessingIfUsedDirectly()
    }
}
