public import Foundation

/// A position in a store's persistent history: the transaction a reader
/// has seen last. Tokens of one store are totally ordered; keep one
/// (it is `Codable`) and ask for the transactions after it
/// (``PersistentStoreCoordinator/fetchHistory(_:)``).
///
/// ```swift
/// let data = try JSONEncoder().encode(transaction.token)
/// // … next launch …
/// let token = try JSONDecoder().decode(HistoryToken.self, from: data)
/// let missed = try container.coordinator.fetchHistory(HistoryRequest(after: token))
/// ```
public struct HistoryToken: Codable, Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The key of the store's newest token in the `userInfo` of
    /// ``PersistentStoreCoordinator/storeDidChangeRemotely``.
    public static let userInfoKey = "StrataHistoryToken"

    /// The store whose history this is (``PersistentStoreCoordinator/storeIdentifier``).
    public let storeIdentifier: UUID
    /// The transaction's number: 1 for a store's first, one more for each
    /// after it.
    public let transactionNumber: UInt64

    /// The token of transaction `transactionNumber` of the store
    /// `storeIdentifier` (transactions hand out their own: ``HistoryTransaction/token``).
    public init(storeIdentifier: UUID, transactionNumber: UInt64) {
        self.storeIdentifier = storeIdentifier
        self.transactionNumber = transactionNumber
    }

    /// Order within one store. Tokens of two stores have no meaningful
    /// order (they are ordered by store, then number, so that sorting is
    /// total).
    public static func < (a: HistoryToken, b: HistoryToken) -> Bool {
        if a.storeIdentifier != b.storeIdentifier { return a.storeIdentifier.uuidString < b.storeIdentifier.uuidString }
        return a.transactionNumber < b.transactionNumber
    }

    public var description: String { "\(storeIdentifier.uuidString)#\(transactionNumber)" }
}
