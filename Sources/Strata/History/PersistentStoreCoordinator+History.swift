import Foundation
internal import StrataStore

/// Persistent history: every save that reaches the store is a
/// transaction, recorded in the save's own batch (see <doc:History>).
extension PersistentStoreCoordinator {
    /// The transactions `request` asks for, oldest first. Reads the store
    /// only: safe from any queue, and never waits for a save.
    ///
    /// ```swift
    /// let request = HistoryRequest(after: lastToken)
    /// for transaction in try container.coordinator.fetchHistory(request) {
    ///     print(transaction.author ?? "-", transaction.changes.count)
    ///     lastToken = transaction.token
    /// }
    /// ```
    ///
    /// Throws ``StrataError/Code/historyExpired`` when transactions after
    /// `request.after` were pruned (start again from nil, and rebuild what
    /// you derived from history); ``StrataError/Code/invalidArgument`` for
    /// a token of another store, or one newer than any transaction of this
    /// one (a store restored from an older copy);
    /// ``StrataError/Code/corruptRecord`` for a transaction that does not
    /// decode.
    ///
    /// A request that leaves transactions out (by author, entity or
    /// predicate) returns only those it keeps: to move a token or a cursor
    /// past the others too, use ``fetchHistoryPage(_:)``.
    public func fetchHistory(_ request: HistoryRequest = HistoryRequest()) throws(StrataError) -> [HistoryTransaction] {
        try fetchHistoryPage(request).transactions
    }

    /// ``fetchHistory(_:)``, with the token of the last transaction it
    /// looked at, kept or not: where the next request starts, so a
    /// consumer that leaves most transactions out still moves on.
    ///
    /// ```swift
    /// var request = HistoryRequest(after: try coordinator.historyCursor("sync"))
    /// request.excludedAuthors = ["sync"]
    /// let page = try coordinator.fetchHistoryPage(request)
    /// try upload(page.transactions)
    /// if let through = page.scannedThrough { try coordinator.setHistoryCursor("sync", to: through) }
    /// ```
    public func fetchHistoryPage(_ request: HistoryRequest = HistoryRequest()) throws(StrataError) -> HistoryPage {
        let store = try historySource()
        let identifier = try historyStoreIdentifier()
        var start: UInt64 = 0
        if let after = request.after {
            try check(after, of: identifier)
            if let next = store.nextTransactionNumber, !store.followsAnotherWriter, after.transactionNumber >= next {
                throw StrataError(.invalidArgument, """
                    the history token \(after) is newer than any transaction of this store (the newest is #\(next - 1)): \
                    a token kept from a copy of the store that was later restored from an older one? Fetch from the start (after: nil)
                    """)
            }
            start = after.transactionNumber + 1
        }
        var result: [HistoryTransaction] = []
        var scanned: UInt64?
        var damaged: UInt64?
        var failure: String?
        try store.forEachHistoryTransaction(from: start) { number, transaction throws(StrataError) -> Bool in
            scanned = number
            guard let transaction else {
                damaged = number
                return false
            }
            do {
                if let kept = try Self.filter(transaction, by: request) { result.append(kept) }
            } catch {
                failure = "\(error)"
                return false
            }
            return request.limit <= 0 || result.count < request.limit
        }
        if let damaged { throw StrataError(.corruptRecord, "history transaction #\(damaged) does not decode") }
        if let failure { throw StrataError(.invalidArgument, "the history request's predicate threw: \(failure)") }
        // Checked after the read: pruning only moves forward, so a mark at
        // or below the token now was there during the read too.
        if let after = request.after {
            let pruned = try store.historyPruned()
            if pruned > after.transactionNumber {
                throw StrataError(.historyExpired, """
                    the store no longer keeps the transactions after \(after): those up to #\(pruned) were pruned \
                    (see PersistentHistory); fetch from the start (after: nil) and rebuild what you derived from history
                    """)
            }
        }
        return HistoryPage(transactions: result, scannedThrough: scanned.map { HistoryToken(storeIdentifier: identifier, transactionNumber: $0) })
    }

    /// `transaction` as `request` narrows it; nil when it leaves nothing.
    private static func filter(_ transaction: HistoryTransaction, by request: HistoryRequest) throws -> HistoryTransaction? {
        if let authors = request.authors, !authors.contains(transaction.author ?? "") || transaction.author == nil { return nil }
        if let author = transaction.author, request.excludedAuthors.contains(author) { return nil }
        var kept = transaction
        if let names = request.entityNames {
            let changes = transaction.changes.filter { names.contains($0.objectID.entity.name) }
            guard !changes.isEmpty else { return nil }
            kept = HistoryTransaction(token: transaction.token, timestamp: transaction.timestamp, author: transaction.author,
                                      contextName: transaction.contextName, changes: changes)
        }
        if let predicate = request.predicate, try !predicate.evaluate(kept) { return nil }
        return kept
    }

    /// The token of the newest transaction the store holds — or, when it
    /// keeps none, of the last one it pruned (asking for what comes after
    /// it then loses nothing); nil for a store that never recorded one.
    ///
    /// ```swift
    /// let now = try container.coordinator.currentHistoryToken()
    /// ```
    public func currentHistoryToken() throws(StrataError) -> HistoryToken? {
        let (newest, pruned) = try historySource().historyBounds()
        guard let number = newest ?? (pruned > 0 ? pruned : nil) else { return nil }
        return HistoryToken(storeIdentifier: try historyStoreIdentifier(), transactionNumber: number)
    }

    // MARK: Cursors

    /// Where the consumer `name` has read history up to; nil when it has
    /// no cursor.
    public func historyCursor(_ name: String) throws(StrataError) -> HistoryToken? {
        try Self.checkCursorName(name)
        guard let number = try historySource().historyCursor(name) else { return nil }
        return HistoryToken(storeIdentifier: try historyStoreIdentifier(), transactionNumber: number)
    }

    /// Records that the consumer `name` has read history up to `token`, in
    /// the store (durably, as a save is). Pruning keeps every transaction
    /// after the slowest cursor, within the history's limits
    /// (``PersistentHistory``).
    ///
    /// ```swift
    /// let transactions = try coordinator.fetchHistory(HistoryRequest(after: coordinator.historyCursor("search-index")))
    /// try index(transactions)
    /// if let last = transactions.last { try coordinator.setHistoryCursor("search-index", to: last.token) }
    /// ```
    public func setHistoryCursor(_ name: String, to token: HistoryToken) throws(StrataError) {
        try Self.checkCursorName(name)
        try saveLock.withLock { () throws(StrataError) in
            let store = try writableHistoryStore()
            try check(token, of: try historyStoreIdentifier())
            try store.setHistoryCursor(name, to: token.transactionNumber)
        }
    }

    /// Removes the consumer `name`'s cursor: pruning no longer waits for it.
    public func removeHistoryCursor(_ name: String) throws(StrataError) {
        try Self.checkCursorName(name)
        try saveLock.withLock { () throws(StrataError) in
            try writableHistoryStore().setHistoryCursor(name, to: nil)
        }
    }

    /// Removes every transaction up to and including `token`'s now (the
    /// newest transaction stays, to number the next), whatever the
    /// cursors and limits say — Core Data's `deleteHistory(before:)`.
    /// Asking for transactions after a removed one then throws
    /// ``StrataError/Code/historyExpired``. Returns how many were removed.
    @discardableResult
    public func pruneHistory(through token: HistoryToken) throws(StrataError) -> Int {
        try check(token, of: try historyStoreIdentifier())
        var removed = 0
        while true {
            let step = try saveLock.withLock { () throws(StrataError) -> Int in
                try writableHistoryStore().pruneHistoryStep(through: token.transactionNumber)
            }
            removed += step
            if step == 0 { return removed }
        }
    }

    /// How much history the store keeps, for ``ObjectStoreInspector`` and
    /// `strata-dump info`.
    public func historySummary() throws(StrataError) -> HistorySummary {
        try historySource().historySummary()
    }

    // MARK: Helpers

    private func historyStoreIdentifier() throws(StrataError) -> UUID {
        guard let identifier = storeIdentifier else { throw StrataError(.noPersistentStore, "the coordinator has no store") }
        return identifier
    }

    private func check(_ token: HistoryToken, of identifier: UUID) throws(StrataError) {
        guard token.storeIdentifier == identifier else {
            throw StrataError(.invalidArgument, "the history token \(token) is of another store (this one is \(identifier.uuidString))")
        }
    }

    /// The history of the coordinator's store: the log store's, or one a
    /// store behind the seam keeps (``PersistentStore/history``).
    private func historySource() throws(StrataError) -> any HistorySource {
        switch currentBackend {
        case .log(let store)?:
            return store
        case .external(let store)?:
            guard let history = store.store.history else {
                throw StrataError(.invalidArgument, "the coordinator's store keeps no persistent history that Strata's history API reads")
            }
            return SeamHistorySource(history: history)
        case nil:
            throw StrataError(.noPersistentStore, "the coordinator has no open store")
        }
    }

    private func writableHistoryStore() throws(StrataError) -> any HistorySource {
        let store = try historySource()
        if store.followsAnotherWriter {
            throw StrataError(.invalidArgument, "history cursors and pruning write to the store, which this process opened read-only: set them in the process that writes it")
        }
        return store
    }

    private static func checkCursorName(_ name: String) throws(StrataError) {
        guard !name.isEmpty, !name.utf8.contains(0), name.utf8.count <= 200 else {
            throw StrataError(.invalidArgument, "a history cursor's name is 1 to 200 bytes of UTF-8 without NUL; '\(name)' is not")
        }
    }
}

/// Transactions of a store's history (``PersistentStoreCoordinator/fetchHistoryPage(_:)``).
public struct HistoryPage: Sendable {
    /// The transactions the request kept, oldest first.
    public var transactions: [HistoryTransaction]
    /// The last transaction looked at, kept or left out; nil when there
    /// was none after the request's token. The next page starts after it.
    public var scannedThrough: HistoryToken?
}

/// How much persistent history a store keeps
/// (``PersistentStoreCoordinator/historySummary()``).
public struct HistorySummary: Sendable, Hashable, Codable {
    /// Whether this coordinator records transactions.
    public var isEnabled = false
    /// How many transactions are kept.
    public var transactions = 0
    /// Bytes of the transactions' keys and records.
    public var bytes = 0
    /// The oldest and newest transaction numbers kept (0 when none).
    public var oldest: UInt64 = 0
    /// (See ``oldest``.)
    public var newest: UInt64 = 0
    /// Every transaction up to this one was pruned (0: none was).
    public var pruned: UInt64 = 0
    /// Each named cursor and the transaction it has read up to.
    public var cursors: [String: UInt64] = [:]

    /// An empty summary: no history.
    public init() {}
}
