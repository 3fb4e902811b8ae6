/// A ``FetchedResultsController``'s results and each change to them, as an
/// `AsyncSequence` (``FetchedResultsController/updates()``): the results
/// first, then one ``FetchedResultsUpdate`` per change, in order.
///
/// What waits for a slow consumer is each change's difference and
/// sections, not the whole list of IDs it leads to: the iterator keeps the
/// last list it handed out and applies the next difference to it when that
/// is asked for. A consumer that falls behind a bulk import holds memory in
/// proportion to what changed, not to the results times the changes.
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

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(events: events.makeAsyncIterator())
    }

    /// Hands out the updates in order, each change applied to the results
    /// before it.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var events: AsyncStream<Event>.Iterator
        /// The IDs of the last update handed out.
        var objectIDs: [ObjectID] = []

        public mutating func next() async -> FetchedResultsUpdate? {
            switch await events.next() {
            case nil:
                return nil
            case .results(let objectIDs, let sections)?:
                self.objectIDs = objectIDs
                return FetchedResultsUpdate(objectIDs: objectIDs, sections: sections, difference: FetchedResultsDifference())
            case .change(let difference, let sections)?:
                guard let next = objectIDs.applying(difference.objectIDs) else {
                    preconditionFailure("Strata: a fetched-results controller's difference does not apply to the results before it")
                }
                objectIDs = next
                return FetchedResultsUpdate(objectIDs: next, sections: sections, difference: difference)
            }
        }
    }
}
