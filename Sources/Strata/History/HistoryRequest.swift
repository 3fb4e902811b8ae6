public import Foundation

/// Which transactions of a store's persistent history to fetch
/// (``PersistentStoreCoordinator/fetchHistory(_:)``): those after a token,
/// narrowed by author, entity or a predicate, oldest first.
///
/// ```swift
/// // What other authors changed in recipes since the token the app kept.
/// var request = HistoryRequest(after: lastToken)
/// request.excludedAuthors = ["app"]
/// request.entityNames = ["Recipe"]
/// let transactions = try container.coordinator.fetchHistory(request)
/// ```
public struct HistoryRequest: Sendable {
    /// Transactions after this one; nil: from the oldest the store keeps.
    public var after: HistoryToken?
    /// Only transactions by one of these authors (nil: any author).
    public var authors: Set<String>?
    /// No transaction by one of these authors (an app leaves out its own).
    public var excludedAuthors: Set<String> = []
    /// Only changes to objects of these entities, and only transactions
    /// with at least one such change (nil: every entity).
    public var entityNames: Set<String>?
    /// Only transactions this predicate accepts, judged after the filters
    /// above.
    public var predicate: Predicate<HistoryTransaction>?
    /// At most this many transactions (0: no limit). Fetch a long history
    /// in pages: each page's last token is the next page's `after`.
    public var limit: Int = 0

    /// The transactions after `after` (nil: from the oldest kept), at
    /// most `limit` of them (0: all); narrow further through the properties.
    public init(after: HistoryToken? = nil, limit: Int = 0) {
        self.after = after
        self.limit = limit
    }
}

/// How long a store keeps its persistent history, and whether it keeps
/// one at all. History is pruned as saves go on, in bounded steps inside
/// their batches: a transaction goes once every named cursor has passed
/// it (``PersistentStoreCoordinator/setHistoryCursor(_:to:)``), and, cursors
/// or not, once it is older than ``maximumAge`` or ``maximumTransactions``
/// newer ones exist. Asking for the transactions
/// after a pruned one throws ``StrataError/Code/historyExpired``.
///
/// ```swift
/// let container = try PersistentContainer(name: "Notes", model: model, directory: path,
///                                         history: PersistentHistory(maximumAge: 3 * 86_400))
/// ```
public struct PersistentHistory: Sendable, Hashable {
    /// Whether saves record their transactions. A store opened for writing
    /// with history off keeps none afterwards: turned on again, it starts
    /// anew, and tokens from before throw ``StrataError/Code/historyExpired``.
    public var isEnabled: Bool
    /// Seconds a transaction is kept at most (nil: no age limit).
    public var maximumAge: TimeInterval?
    /// Transactions kept at most (nil: no count limit). At least the newest
    /// one is always kept.
    public var maximumTransactions: Int?

    /// History on, kept for at most `maximumAge` seconds (a week by default)
    /// and `maximumTransactions` transactions (100,000 by default).
    public init(maximumAge: TimeInterval? = 7 * 86_400, maximumTransactions: Int? = 100_000) {
        self.isEnabled = true
        self.maximumAge = maximumAge
        self.maximumTransactions = maximumTransactions
    }

    /// History on, with the default limits.
    public static let `default` = PersistentHistory()
    /// No history: saves write none, and the store's is removed when it is
    /// opened for writing.
    public static let off: PersistentHistory = {
        var history = PersistentHistory(maximumAge: nil, maximumTransactions: nil)
        history.isEnabled = false
        return history
    }()
}
