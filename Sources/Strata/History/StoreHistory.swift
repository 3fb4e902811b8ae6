/// A persistent history kept by a store behind the seam (``PersistentStore/history``):
/// what ``PersistentStoreCoordinator/fetchHistory(_:)``, the cursors,
/// ``PersistentStoreCoordinator/pruneHistory(through:)`` and
/// ``PersistentStoreCoordinator/historySummary()`` read and write there.
/// The coordinator checks tokens and filters the transactions; the store
/// numbers them in commit order, one more than the one before.
///
/// Every method may be called from any thread, several at once.
@_spi(StoreImplementation)
public protocol StoreHistory: Sendable {
    /// The transactions numbered after `number`, oldest first, at most
    /// `limit` of them, read at one state of the store. An object of an
    /// entity the model no longer has is left out of its transaction.
    func transactions(after number: UInt64, limit: Int) throws(StrataError) -> [HistoryTransaction]
    /// The newest transaction kept (nil: none), and every one up to
    /// `pruned` was removed (0: none was).
    func bounds() throws(StrataError) -> (newest: UInt64?, pruned: UInt64)
    /// The transaction the consumer `name` has read up to; nil without a cursor.
    func cursor(_ name: String) throws(StrataError) -> UInt64?
    /// Records (or, for nil, removes) the consumer `name`'s cursor, durably.
    func setCursor(_ name: String, to number: UInt64?) throws(StrataError)
    /// Removes every transaction up to `number`, never the newest; returns
    /// how many it removed.
    func prune(through number: UInt64) throws(StrataError) -> Int
    /// How much history the store keeps.
    func summary() throws(StrataError) -> HistorySummary
}

/// The history of the coordinator's store, whichever it is: what the
/// history API reads and writes (``PersistentStoreCoordinator/fetchHistoryPage(_:)``
/// and the rest).
protocol HistorySource {
    /// Calls `body` with each transaction numbered `start` or later, oldest
    /// first — nil for one that does not decode — until it returns false.
    func forEachHistoryTransaction(from start: UInt64, _ body: (UInt64, HistoryTransaction?) throws(StrataError) -> Bool) throws(StrataError)
    /// The number the next save's transaction will take, where the store
    /// knows it without a read (nil: unknown).
    var nextTransactionNumber: UInt64? { get }
    /// Whether another process writes the store (cursors and pruning are its).
    var followsAnotherWriter: Bool { get }
    func historyBounds() throws(StrataError) -> (newest: UInt64?, pruned: UInt64)
    func historyPruned() throws(StrataError) -> UInt64
    func historyCursor(_ name: String) throws(StrataError) -> UInt64?
    func setHistoryCursor(_ name: String, to number: UInt64?) throws(StrataError)
    /// Removes some of the transactions through `number`; how many, 0 when
    /// none is left to remove.
    func pruneHistoryStep(through number: UInt64) throws(StrataError) -> Int
    func historySummary() throws(StrataError) -> HistorySummary
}

extension LogObjectStore: HistorySource {}

/// A seam store's ``StoreHistory`` as a ``HistorySource``.
struct SeamHistorySource: HistorySource {
    let history: any StoreHistory
    /// Transactions read per statement, so a long history is read in bounded pieces.
    static let page = 500

    func forEachHistoryTransaction(from start: UInt64, _ body: (UInt64, HistoryTransaction?) throws(StrataError) -> Bool) throws(StrataError) {
        var after = start > 0 ? start - 1 : 0
        while true {
            let transactions = try history.transactions(after: after, limit: Self.page)
            for transaction in transactions {
                guard try body(transaction.token.transactionNumber, transaction) else { return }
            }
            guard transactions.count == Self.page, let last = transactions.last else { return }
            after = last.token.transactionNumber
        }
    }

    var nextTransactionNumber: UInt64? { nil }
    var followsAnotherWriter: Bool { false }
    func historyBounds() throws(StrataError) -> (newest: UInt64?, pruned: UInt64) { try history.bounds() }
    func historyPruned() throws(StrataError) -> UInt64 { try history.bounds().pruned }
    func historyCursor(_ name: String) throws(StrataError) -> UInt64? { try history.cursor(name) }
    func setHistoryCursor(_ name: String, to number: UInt64?) throws(StrataError) { try history.setCursor(name, to: number) }
    func pruneHistoryStep(through number: UInt64) throws(StrataError) -> Int { try history.prune(through: number) }
    func historySummary() throws(StrataError) -> HistorySummary { try history.summary() }
}
