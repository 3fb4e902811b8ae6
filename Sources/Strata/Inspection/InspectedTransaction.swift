import Foundation

/// One transaction of a store's persistent history as `strata-dump
/// history` shows it: objects named `Entity/pN`.
public struct InspectedTransaction: Codable, Sendable, Hashable {
    /// An updated object and the properties the save changed.
    public struct Update: Codable, Sendable, Hashable {
        /// The object, as `Entity/pN`.
        public var object: String
        /// The names of the properties changed.
        public var properties: [String]
    }

    /// The transaction's number in the store's history.
    public var number: UInt64
    /// ISO 8601, in UTC, to the microsecond.
    public var timestamp: String
    /// The transaction's author (``HistoryTransaction/author``).
    public var author: String?
    /// The name of the context whose save wrote it.
    public var contextName: String?
    /// The objects inserted, as `Entity/pN`.
    public var inserted: [String]
    /// The objects updated, with the properties changed.
    public var updated: [Update]
    /// The objects deleted, as `Entity/pN`.
    public var deleted: [String]
    /// The values deletes kept (``HistoryChange/tombstone``), by object
    /// (`Entity/pN`) and attribute, as text (a string as it is, other
    /// values as ``InspectedValue`` writes them); only deletes that kept
    /// some, nil when none did.
    public var tombstones: [String: [String: String]]?

    init(_ transaction: HistoryTransaction) {
        number = transaction.token.transactionNumber
        let format = Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: .gmt)
        timestamp = transaction.timestamp.formatted(format)
        author = transaction.author
        contextName = transaction.contextName
        inserted = transaction.changes.filter { $0.kind == .insert }.map(\.objectID.description)
        updated = transaction.changes.filter { $0.kind == .update }.map { Update(object: $0.objectID.description, properties: $0.updatedProperties) }
        deleted = transaction.changes.filter { $0.kind == .delete }.map(\.objectID.description)
        var kept: [String: [String: String]] = [:]
        for change in transaction.changes where !change.tombstone.isEmpty {
            kept[change.objectID.description] = change.tombstone.mapValues {
                if case .string(let text) = $0 { text } else { InspectedValue($0).description }
            }
        }
        tombstones = kept.isEmpty ? nil : kept
    }
}
