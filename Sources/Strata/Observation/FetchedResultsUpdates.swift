internal import StrataStore

/// A ``FetchedResultsController``'s results and each change to them, as an
/// `AsyncSequence` (``FetchedResultsController/updates()``): the results
/// first, then one ``FetchedResultsUpdate`` per change, in order.
///
/// What waits for a slow consumer is each change's difference and
/// sections, not the whole list of IDs it leads to: the iterator keeps the
/// last list it handed out and applies the next difference to it when that
/// is asked for. A consumer that falls behind a bulk import holds memory in
/// proportion to what changed, not to the results times the changes.
///
/// Its elements come once: iterators made from one value share where they
/// are (as an `AsyncStream`'s do), and one task at a time reads them.
public struct FetchedResultsUpdates: AsyncSequence, Sendable {
    public typealias Element = FetchedResultsUpdate
    public typealias Failure = Never

    /// What the controller sends: new results (the first element, and after
    /// each ``FetchedResultsController/performFetch()``), or a change.
    enum Event: Sendable {
        case results(objectIDs: [ObjectID], sections: [FetchedResultsSection])
        case change(FetchedResultsDifference, sections: [FetchedResultsSection])
    }

    let events: AsyncStream<Event>
    /// The IDs of the last update handed out, shared by every iterator of
    /// this sequence: a second one (a `for await` after a first `next()`)
    /// goes on from where the first stopped, as the stream does.
    let handedOut = HandedOut()

    init(events: AsyncStream<Event>) {
        self.events = events
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(events: events.makeAsyncIterator(), handedOut: handedOut)
    }

    /// Hands out the updates in order, each change applied to the results
    /// before it.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var events: AsyncStream<Event>.Iterator
        let handedOut: HandedOut

        public mutating func next() async -> FetchedResultsUpdate? {
            switch await events.next() {
            case nil:
                return nil
            case .results(let objectIDs, let sections)?:
                handedOut.objectIDs = objectIDs
                return FetchedResultsUpdate(objectIDs: objectIDs, sections: sections, difference: FetchedResultsDifference())
            case .change(let difference, let sections)?:
                guard let next = handedOut.objectIDs.applying(difference.objectIDs) else {
                    preconditionFailure("Strata: a fetched-results controller's difference does not apply to the results before it")
                }
                handedOut.objectIDs = next
                return FetchedResultsUpdate(objectIDs: next, sections: sections, difference: difference)
            }
        }
    }

    /// The list the sequence's iterators last handed out.
    ///
    /// `@unchecked Sendable`: `list` is guarded by `lock` (the stream lets
    /// one task at a time read, but tasks may take turns).
    final class HandedOut: @unchecked Sendable {
        private let lock = Lock()
        private var list: [ObjectID] = []  // guarded by `lock`

        var objectIDs: [ObjectID] {
            get { lock.withLock { list } }
            set { lock.withLock { list = newValue } }
        }
    }
}
