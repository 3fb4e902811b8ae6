internal import StrataStore

/// Group commit for the writer: many threads that each need "everything
/// I handed to the writer is on disk" share one writer save, and so one
/// fsync, instead of queueing a save each.
///
/// Without it, each caller queues `writer.save()` on the writer's queue,
/// and every save in the line writes the one change handed over while the
/// save before it was syncing: as many fsyncs as callers, with all but one
/// caller waiting in the line (a convoy; 4 threads writing one object each
/// wrote 1.00 batch per object).
///
/// Here a caller joins the *next* save — the first to begin after the
/// caller's change reached the writer, so it is sure to carry it. One of
/// the callers waiting for that save runs it (the leader); the others wait
/// for its result, and callers that arrive while it runs join the one
/// after. Each caller returns once the save it joined is on disk, or
/// throws that save's error (its changes then stay in the writer, as after
/// any failed save, and go with the next one): an acknowledged save means
/// what it meant before.
///
/// `@unchecked Sendable`: `next`, `leading`, `callers` and every
/// `Group`'s `result` are guarded by `condition`.
final class WriterSaveGroups: @unchecked Sendable {
    /// One writer save and the callers waiting for it.
    private final class Group {
        var result: Result<Void, StrataError>?
    }

    private let writer: ManagedObjectContext
    private let condition = ConditionLock()
    /// The save that has not begun: a caller arriving now joins it.
    private var next = Group()
    /// A leader runs a save, or is on its way to: no one else starts one.
    private var leading = false
    /// Callers inside ``saveDurably()``, leader or not.
    private var callers = 0

    init(writer: ManagedObjectContext) {
        self.writer = writer
    }

    /// Returns once everything the writer held when this was called is on
    /// disk. On the writer's own queue it saves at once (waiting there for a
    /// leader whose save needs that queue would never end).
    func saveDurably() throws(StrataError) {
        if writer.isCurrent { return try writer.save() }
        condition.lock()
        callers += 1
        let group = next
        while group.result == nil {
            if leading {
                condition.wait()
                continue
            }
            leading = true
            condition.unlock()
            let (ran, result) = runSave()
            condition.lock()
            ran.result = result
            leading = false
            condition.broadcast()
        }
        callers -= 1
        condition.unlock()
        try group.result!.get()
    }

    /// How many callers are inside ``saveDurably()`` (tests: all of them
    /// have joined a save).
    var callersForTesting: Int { condition.withLock { callers } }

    /// The leader's save, on the writer's queue: the group that was next
    /// when it began (what was handed over before then is in it), and how
    /// it went.
    private func runSave() -> (Group, Result<Void, StrataError>) {
        writer.performAndWait { () -> (Group, Result<Void, StrataError>) in
            let group = condition.withLock {
                let began = next
                next = Group()
                return began
            }
            do throws(StrataError) {
                try writer.save()
                return (group, .success(()))
            } catch {
                return (group, .failure(error))
            }
        }
    }
}
