internal import StrataStore

/// Group commit for the writer: many callers that each need "everything
/// I handed to the writer is on disk" share one writer save, and so one
/// fsync, instead of queueing a save each.
///
/// Without it, each caller queues `writer.save()` on the writer's queue,
/// and every save in the line writes the one change handed over while the
/// save before it was syncing: as many fsyncs as callers, with all but one
/// caller waiting in the line (a convoy).
///
/// Here a caller joins the *next* save — the first to begin after the
/// caller's change reached the writer, so it is sure to carry it. One
/// leader runs that save: a blocked caller (``saveDurably()``), or for
/// callers that suspend (``saveDurablyAsync()``) a block on the writer's
/// queue, so that no thread of Swift's cooperative pool waits. The others
/// wait for its result, and callers that arrive while it runs join the one
/// after. Each caller returns once the save it joined is on disk, or
/// throws that save's error (its changes then stay in the writer, as after
/// any failed save, and go with the next one): an acknowledged save means
/// what it meant before.
///
/// `@unchecked Sendable`: `next`, `leading`, `callers` and every
/// `Group`'s fields are guarded by `condition`.
final class WriterSaveGroups: @unchecked Sendable {
    /// One writer save and the callers waiting for it.
    private final class Group {
        var result: Result<Void, StrataError>?
        /// Callers that suspended, resumed with the result.
        var suspended: [CheckedContinuation<Result<Void, StrataError>, Never>] = []
    }

    private let writer: ManagedObjectContext
    private let condition = ConditionLock()
    /// The save that has not begun: a caller arriving now joins it.
    private var next = Group()
    /// A leader runs a save, or is on its way to: no one else starts one.
    private var leading = false
    /// Callers inside ``saveDurably()`` or ``saveDurablyAsync()``, leader or not.
    private var callers = 0

    init(writer: ManagedObjectContext) {
        self.writer = writer
    }

    /// Returns once everything the writer held when this was called is on
    /// disk; blocks the calling thread meanwhile. On the writer's own queue
    /// it saves at once (waiting there for a leader whose save needs that
    /// queue would never end).
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
            let (ran, result) = writer.performAndWait { saveNextGroup() }
            finish(ran, with: result)
            condition.lock()
        }
        callers -= 1
        condition.unlock()
        try group.result!.get()
    }

    /// ``saveDurably()`` for async callers: suspends instead of blocking,
    /// and the save runs on the writer's queue.
    func saveDurablyAsync() async throws(StrataError) {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, StrataError>, Never>) in
            let leads = condition.withLock {
                callers += 1
                next.suspended.append(continuation)
                guard !leading else { return false }
                leading = true
                return true
            }
            if leads { leadOnWritersQueue() }
        }
        condition.withLock { callers -= 1 }
        try result.get()
    }

    /// Runs the next group's save in a block on the writer's queue.
    private func leadOnWritersQueue() {
        writer.perform {
            let (ran, result) = self.saveNextGroup()
            self.finish(ran, with: result)
        }
    }

    /// The leader's save, on the writer's queue: the group that was next
    /// when it began (what was handed over before then is in it), and how
    /// it went.
    private func saveNextGroup() -> (Group, Result<Void, StrataError>) {
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

    /// Hands `group` its result: wakes its blocked callers, resumes its
    /// suspended ones, and leads again on the writer's queue when the next
    /// group holds suspended callers (no blocked one may be there to lead).
    private func finish(_ group: Group, with result: Result<Void, StrataError>) {
        let (suspended, leadsAgain) = condition.withLock {
            group.result = result
            let suspended = group.suspended
            group.suspended = []
            leading = !next.suspended.isEmpty
            condition.broadcast()
            return (suspended, leading)
        }
        for continuation in suspended { continuation.resume(returning: result) }
        if leadsAgain { leadOnWritersQueue() }
    }

    /// How many callers are inside ``saveDurably()`` or
    /// ``saveDurablyAsync()`` (tests: all of them have joined a save).
    var callersForTesting: Int { condition.withLock { callers } }
}
