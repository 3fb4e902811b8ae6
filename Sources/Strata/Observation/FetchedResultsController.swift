import Dispatch
internal import StrataStore
import Foundation

/// The objects a fetch request describes, kept up to date as the context
/// changes — Core Data's `NSFetchedResultsController`, with the difference
/// computed from the changed objects alone.
///
/// ```swift
/// // A list on screen, in the view context (on the main queue):
/// let controller = try FetchedResultsController(
///     fetchRequest: FetchRequest<Bookmark>(sortBy: [SortDescriptor(\.visits, order: .reverse)]),
///     context: container.viewContext)
/// controller.onChange = { difference in
///     tableView.apply(difference)        // deleted, inserted, moved, with positions
/// }
/// try controller.performFetch()
/// ```
///
/// After ``performFetch()``, every change that reaches the context — its
/// own edits (once per block, with its objects-did-change), a child's
/// save, a merge of another context's save or of a batch request — is
/// judged for the objects it touched: each is tested against the
/// predicate and placed by binary search among the results, never by a
/// new fetch. ``onChange`` then hears the difference on the context's
/// queue, once per change, and not at all when the results did not
/// change: an edit of a property that neither the predicate nor the sort
/// reads moves nothing (ask for those with `reportsUpdates`).
///
/// **A main-queue context pays only for what changed.** On the main
/// queue the controller gathers the changed objects' values (O(the
/// change)); the predicate, the places and the difference are computed on
/// a queue of its own, and the new results are handed back to the main
/// queue to be taken in one block. So ``objectIDs`` and ``sections`` follow
/// a change a moment after it (before ``onChange`` hears of it), and a
/// predicate that Strata cannot translate — it falls back to Foundation's
/// evaluation on objects — is evaluated on the main queue.
///
/// What the controller does not follow, as Core Data's does not: a change
/// to a related object alone (an object whose predicate reads
/// `$0.category.name` is judged again when it changes, not when its
/// category is renamed), and `reset()` of the context (call
/// ``performFetch()`` again).
///
/// Use it on its context's queue, as the objects it hands out; its
/// ``updates()`` sequence can be consumed anywhere.
public final class FetchedResultsController<Object: ManagedObject>: @unchecked Sendable {
    // `@unchecked Sendable`: `published`, `onChange` and `fetched` are
    // guarded by the context's queue (checked with `checkQueue()`); `list`
    // by `computing` (a serial queue) for a main-queue context, by the
    // context's queue otherwise; `continuations` by `lock`.

    /// The request whose results the controller holds.
    public let fetchRequest: FetchRequest<Object>
    /// The context whose view of the data the results are.
    public let context: ManagedObjectContext
    /// Whether objects that changed without moving are reported (``FetchedResultsDifference/updated``).
    public let reportsUpdates: Bool

    /// Called on the context's queue after each change to the results,
    /// once the controller's results are the new ones.
    public var onChange: ((FetchedResultsDifference) -> Void)?

    private let entity: EntityDescription
    private let order: ResultsOrder
    /// The request's predicate translated once, for judging each change
    /// (nil: there is none, or Foundation evaluates it).
    private let translatedPredicate: ValueTest?
    private let sectioned: Bool
    private var list: ResultsList
    private var published = Published()
    private var fetched = false
    /// Bumped by each ``performFetch()``: a difference computed for the
    /// list before it is dropped.
    private var generation = 0
    /// For a main-queue context: where the differences are computed.
    private let computing: DispatchQueue?
    private let lock = Lock()
    private var continuations: [UUID: AsyncStream<FetchedResultsUpdates.Event>.Continuation] = [:]

    private struct Published {
        var objectIDs: [ObjectID] = []
        var sections: [FetchedResultsSection] = []
    }

    /// A controller for `fetchRequest`'s results in `context`. Sections,
    /// when `sectionBy` names an attribute, group the results by its
    /// value: the request's first sort descriptor must sort by it.
    ///
    /// Throws ``StrataError/Code/invalidArgument`` for a request it cannot
    /// follow: no sort descriptor, one that reads no stored attribute, an
    /// offset, or `includesPendingChanges` off.
    public init(
        fetchRequest: FetchRequest<Object>, context: ManagedObjectContext,
        sectionBy sectionKeyPath: PartialKeyPath<Object>? = nil, reportsUpdates: Bool = false
    ) throws(StrataError) {
        guard !fetchRequest.sortDescriptors.isEmpty else {
            throw StrataError(.invalidArgument, "a FetchedResultsController needs a sort order: give its request sort descriptors")
        }
        guard fetchRequest.fetchOffset == 0, fetchRequest.includesPendingChanges else {
            throw StrataError(.invalidArgument, """
                a FetchedResultsController follows a request from its first result with the context's changes: \
                leave fetchOffset at 0 and includesPendingChanges on
                """)
        }
        let entity = try fetchRequest.entity(in: context.model)
        guard let order = ResultsOrder(sorting: fetchRequest.sortDescriptors, entity: entity) else {
            throw StrataError(.invalidArgument, """
                a FetchedResultsController sorts by stored attributes of \(entity.name); \
                a sort descriptor of its request reads something else
                """)
        }
        if let sectionKeyPath {
            guard let read = PropertyProbe.property(read: sectionKeyPath, entity: entity), read.index == order.propertyIndexes[0] else {
                throw StrataError(.invalidArgument, """
                    a FetchedResultsController's sections group by the attribute its first sort descriptor sorts by: \
                    sort by \(sectionKeyPath) first
                    """)
            }
        }
        self.fetchRequest = fetchRequest
        self.context = context
        self.reportsUpdates = reportsUpdates
        self.entity = entity
        self.order = order
        translatedPredicate = fetchRequest.predicate.flatMap { ValueTest.compile($0, entity: entity) }
        sectioned = sectionKeyPath != nil
        list = ResultsList(limit: fetchRequest.fetchLimit, sectioned: sectioned, reportsUpdates: reportsUpdates)
        computing = context.concurrencyType == .mainQueue
            ? DispatchQueue(label: "strata.fetched-results.\(entity.name)", qos: .userInitiated) : nil
    }

    deinit {
        lock.withLock { for continuation in continuations.values { continuation.finish() } }
    }

    // MARK: Results (on the context's queue)

    /// Fetches the results and starts following the context's changes.
    /// Call it on the context's queue; again after the context's `reset()`.
    public func performFetch() throws(StrataError) {
        context.checkQueue(function: "FetchedResultsController.performFetch()")
        var request = fetchRequest
        request.fetchLimit = 0
        let matches = try context.matches(of: request, keepingRows: true)
        var keyed: [(ObjectID, [PropertyValue])] = []
        keyed.reserveCapacity(matches.count)
        for match in matches { keyed.append((match.objectID, order.key(of: try match.values()))) }
        var fresh = ResultsList(limit: fetchRequest.fetchLimit, sectioned: sectioned, reportsUpdates: reportsUpdates)
        generation += 1
        if let computing {
            // Sorted where the order is used (a difference may be under way
            // there); differences computed for the old list are dropped
            // when they arrive.
            computing.sync {
                fresh.fill(keyed, order: order)
                list = fresh
            }
        } else {
            fresh.fill(keyed, order: order)
            list = fresh
        }
        let update = FetchedResultsUpdate(
            objectIDs: fresh.publishedIDs, sections: fresh.sections, difference: FetchedResultsDifference())
        published = Published(objectIDs: update.objectIDs, sections: update.sections)
        if !fetched {
            fetched = true
            context.addChangeObserver(self)
        }
        yield(.results(objectIDs: update.objectIDs, sections: update.sections))
    }

    /// The results' IDs, in order.
    public var objectIDs: [ObjectID] {
        context.checkQueue(function: "FetchedResultsController.objectIDs")
        return published.objectIDs
    }

    /// The results as objects of the context, filled a batch at a time as they are used.
    public var fetchedObjects: FetchedResults<Object> {
        context.checkQueue(function: "FetchedResultsController.fetchedObjects")
        return FetchedResults(objectIDs: published.objectIDs, context: context,
                              batchSize: fetchRequest.fetchBatchSize > 0 ? fetchRequest.fetchBatchSize : 20)
    }

    /// The sections: one covering every result when the controller has none.
    public var sections: [FetchedResultsSection] {
        context.checkQueue(function: "FetchedResultsController.sections")
        return published.sections
    }

    /// The object at `position`.
    public func object(at position: FetchedResultsDifference.Position) -> Object {
        let section = sections[position.section]
        precondition(position.item >= 0 && position.item < section.numberOfObjects, "no object at \(position)")
        return fetchedObjects[section.range.lowerBound + position.item]
    }

    // MARK: As a sequence

    /// The results, then each change to them, as an `AsyncSequence` that
    /// any task can consume: the current results first (empty before
    /// ``performFetch()``), then one element per change, in order. Ask for
    /// it from any thread: it starts on the context's queue (at once when
    /// called there). It ends when the controller does. A consumer slower
    /// than the changes gets every one of them (none is dropped); what
    /// waits for it is each change's difference, not the list it leads to
    /// (see ``FetchedResultsUpdates``). After ``performFetch()`` the next
    /// element holds the new results with an empty difference.
    ///
    /// ```swift
    /// for await update in controller.updates() {
    ///     send(update.objectIDs, update.difference)   // a server-sent-events feed
    /// }
    /// ```
    public func updates() -> FetchedResultsUpdates {
        let (stream, continuation) = AsyncStream.makeStream(of: FetchedResultsUpdates.Event.self)
        let key = UUID()
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            _ = self.lock.withLock { self.continuations.removeValue(forKey: key) }
        }
        // On the context's queue, where results are taken in: the current
        // results first, then every change taken in after them, none before.
        let start: @Sendable () -> Void = { [self] in
            // Registered and given the results in one hold of the lock: no
            // change can come between them, whatever queue sends it.
            lock.withLock {
                continuations[key] = continuation
                continuation.yield(.results(objectIDs: published.objectIDs, sections: published.sections))
            }
        }
        if context.isCurrent {
            start()
        } else {
            precondition(context.concurrencyType != .confinement,
                         "Strata: call updates() of a .confinement context's controller on the context's thread")
            context.perform(start)
        }
        return FetchedResultsUpdates(events: stream)
    }

    private func yield(_ event: FetchedResultsUpdates.Event) {
        let continuations = lock.withLock { Array(self.continuations.values) }
        for continuation in continuations { continuation.yield(event) }
    }

    // MARK: Following the context

    /// Judges the changed objects of the controller's entity on the
    /// context's queue (what needs the context: their values, and a
    /// predicate Foundation evaluates), then computes and applies the
    /// difference — for a main-queue context off the main queue.
    fileprivate func follow(_ changes: ObservedChanges) {
        // (An object named twice is judged twice on the same values; the list takes it once.)
        var known: [ObjectID: KnownValues] = [:]
        for (id, values) in changes.known where id.entity === entity { known[id] = values }
        var candidates: [(ObjectID, [PropertyValue]?)] = []
        func consider(_ id: ObjectID) {
            do {
                candidates.append((id, try context.valuesInView(of: id, known: known[id])))
            } catch {
                FileHandleStandardError.write("Strata: a FetchedResultsController could not read \(id) in \(context.name): \(error)\n")
            }
        }
        for id in changes.ids where id.entity === entity { consider(id) }
        for id in known.keys { consider(id) }
        guard !candidates.isEmpty else { return }

        let test: ValueTest?
        var judgedHere: [Bool]?
        let candidatesJudged = candidates
        do {
            var evaluation = try PredicateEvaluation(fetchRequest.predicate, entity: entity, context: context, test: translatedPredicate)
            if fetchRequest.predicate == nil || evaluation.compiled != nil {
                test = evaluation.compiled?.test
            } else {
                // Foundation's evaluation needs the objects: judged here.
                test = nil
                var results: [Bool] = []
                results.reserveCapacity(candidates.count)
                for (id, values) in candidates {
                    guard let values else { results.append(false); continue }
                    results.append(try evaluation.matches(id, values: values))
                }
                judgedHere = results
            }
        } catch {
            FileHandleStandardError.write("Strata: a FetchedResultsController could not judge changes in \(context.name): \(error)\n")
            return
        }
        let order = order
        let foundationJudged = judgedHere
        let compute: @Sendable () -> FetchedResultsUpdate? = { [self] in
            var judged: [JudgedObject] = []
            judged.reserveCapacity(candidatesJudged.count)
            for (i, (id, values)) in candidatesJudged.enumerated() {
                var key: [PropertyValue]?
                if let values, foundationJudged?[i] ?? (test?.evaluate(values) ?? true) { key = order.key(of: values) }
                judged.append(JudgedObject(id: id, key: key))
            }
            guard let difference = list.apply(judged, order: order) else { return nil }
            return FetchedResultsUpdate(objectIDs: list.publishedIDs, sections: list.sections, difference: difference)
        }
        let generation = generation
        if let computing {
            let context = context
            computing.async {
                guard let result = compute() else { return }
                context.perform { self.take(result, generation: generation) }
            }
        } else if let result = compute() {
            take(result, generation: generation)
        }
    }

    /// Takes a computed change in, on the context's queue, and tells the owner.
    private func take(_ result: FetchedResultsUpdate, generation: Int) {
        guard generation == self.generation else { return }
        published = Published(objectIDs: result.objectIDs, sections: result.sections)
        // The sequence hears first: `onChange` may cause the next change
        // (a save, a new fetch), which must reach it after this one.
        yield(.change(result.difference, sections: result.sections))
        onChange?(result.difference)
    }
}

extension FetchedResultsController: ContextChangeObserver {
    func contextDidChange(_ changes: ObservedChanges) { follow(changes) }
}
