/// Undo and redo for a context — Strata's own, since Foundation on Linux
/// has no `UndoManager`. Off unless a context is given one:
///
/// ```swift
/// context.undoManager = ContextUndoManager(levelsOfUndo: 50)
/// recipe.name = "Soup"            // one block, one undo group
/// context.undoManager?.undo()     // the name is back
/// context.undoManager?.redo()     // "Soup" again
/// ```
///
/// It records every change made in its context: inserts, deletes (with
/// what their delete rules did), attribute and relationship changes with
/// their inverses, and a child's save taken in. Merges of other contexts'
/// saves and refreshes are not recorded: they are the source's changes,
/// not this context's. A group holds the changes of one block of the
/// context (`perform`, `performAndWait`), or of one main-queue turn for a
/// `.mainQueue` context used directly — the end of each is where the
/// context posts objects-did-change — unless ``beginUndoGrouping()`` and
/// ``endUndoGrouping()`` say otherwise. ``undo()`` puts each object of the
/// last group back as it was before the group (values, and whether it
/// exists); ``redo()`` as it was after.
///
/// **After a save** an undo is a new change of the context, saved like any
/// other: undoing an insert that reached the store deletes the object at
/// the next save, undoing a delete that reached it inserts the object again
/// under its ID. ``ManagedObjectContext/rollback()`` and
/// ``ManagedObjectContext/reset()`` forget every group.
///
/// Use it on its context's queue, as the context.
public final class ContextUndoManager: @unchecked Sendable {
    // `@unchecked Sendable`: every field is guarded by the queue of the
    // context that holds the manager (the context checks it on each call).

    /// How many groups ``undo()`` can go back; 0 for no limit.
    public var levelsOfUndo: Int {
        didSet { trim() }
    }
    /// Whether each block of the context closes a group (the default);
    /// off, only ``endUndoGrouping()`` does.
    public var groupsByBlock = true

    /// An object's state for undo: whether it exists in the context, and its values.
    struct State: Equatable {
        var exists: Bool
        var values: [PropertyValue]
    }

    struct Entry {
        let object: ManagedObject
        let before: State
        var after: State
    }

    private var undoStack: [[Entry]] = []
    private var redoStack: [[Entry]] = []
    /// The group being recorded.
    private var open: [Entry] = []
    /// The objects in `open`.
    private var openObjects: Set<ObjectIdentifier> = []
    private var explicitDepth = 0
    /// While an undo or redo applies a group: nothing is recorded.
    var isApplying = false

    /// A manager that keeps at most `levelsOfUndo` groups (0: no limit).
    public init(levelsOfUndo: Int = 0) {
        self.levelsOfUndo = levelsOfUndo
    }

    /// Whether there is a group to undo (the open one included).
    public var canUndo: Bool { !undoStack.isEmpty || !open.isEmpty }
    /// Whether there is a group to redo.
    public var canRedo: Bool { !redoStack.isEmpty }

    /// Opens a group that lasts until the matching ``endUndoGrouping()``,
    /// across blocks; groups nest, the outermost one counts. Closes the
    /// group a block had open.
    public func beginUndoGrouping() {
        if explicitDepth == 0 { closeGroup() }
        explicitDepth += 1
    }

    /// Closes the group ``beginUndoGrouping()`` opened.
    public func endUndoGrouping() {
        precondition(explicitDepth > 0, "Strata: endUndoGrouping() without beginUndoGrouping()")
        explicitDepth -= 1
        if explicitDepth == 0 { closeGroup() }
    }

    /// Forgets every group.
    public func removeAllActions() {
        undoStack.removeAll()
        redoStack.removeAll()
        open.removeAll()
        openObjects.removeAll()
    }

    // MARK: Recording (on the context's queue)

    /// `object` is about to change, or to be deleted: remembered as it is,
    /// once per group.
    func willChange(_ object: ManagedObject, exists: Bool) {
        record(object) { State(exists: exists, values: object.values) }
    }

    /// `object` is about to be inserted: it did not exist before.
    func willInsert(_ object: ManagedObject) {
        record(object) { State(exists: false, values: []) }
    }

    /// Remembers `object` in the open group as `before` has it, the first
    /// time it changes in the group.
    private func record(_ object: ManagedObject, before: () -> State) {
        guard !isApplying, openObjects.insert(ObjectIdentifier(object)).inserted else { return }
        let state = before()
        open.append(Entry(object: object, before: state, after: state))
    }

    /// The end of a block: closes the group unless an explicit one is open.
    func blockEnded() {
        if groupsByBlock && explicitDepth == 0 { closeGroup() }
    }

    /// Takes each object's state now as its state after the group; keeps
    /// the group if anything in it differs.
    private func closeGroup() {
        guard !open.isEmpty else { return }
        var group: [Entry] = []
        group.reserveCapacity(open.count)
        for var entry in open {
            entry.after = ManagedObjectContext.undoState(of: entry.object)
            if entry.after != entry.before { group.append(entry) }
        }
        open.removeAll()
        openObjects.removeAll()
        guard !group.isEmpty else { return }
        undoStack.append(group)
        redoStack.removeAll()
        trim()
    }

    private func trim() {
        if levelsOfUndo > 0 && undoStack.count > levelsOfUndo { undoStack.removeFirst(undoStack.count - levelsOfUndo) }
    }

    // MARK: Undo and redo

    /// The group to undo (closing the open one first), moved to the redo stack.
    func takeGroupToUndo() -> [Entry]? {
        if explicitDepth == 0 { closeGroup() }
        guard let group = undoStack.popLast() else { return nil }
        redoStack.append(group)
        return group
    }

    /// The group to redo, moved back to the undo stack.
    func takeGroupToRedo() -> [Entry]? {
        guard let group = redoStack.popLast() else { return nil }
        undoStack.append(group)
        return group
    }

    /// Undoes the last group: each of its objects as it was before it.
    public func undo() {
        guard let context = context else { return }
        context.checkQueue(function: "ContextUndoManager.undo()")
        guard let group = takeGroupToUndo() else { return }
        context.restore(group.map { ($0.object, $0.before) }, for: self)
    }

    /// Redoes the last group undone: each of its objects as it was after it.
    public func redo() {
        guard let context = context else { return }
        context.checkQueue(function: "ContextUndoManager.redo()")
        guard let group = takeGroupToRedo() else { return }
        context.restore(group.map { ($0.object, $0.after) }, for: self)
    }

    /// The context that holds the manager (its link: see ``ContextLink``).
    var link: ContextLink?
    private var context: ManagedObjectContext? { link?.context }
}
