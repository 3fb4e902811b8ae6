public import Foundation

/// One save that reached the store, as its persistent history records
/// it: written in the save's own batch, so a crash never keeps one
/// without the other (see <doc:History>).
public struct HistoryTransaction: Sendable, Hashable, Identifiable {
    /// Where this transaction lies in the store's history.
    public let token: HistoryToken
    /// When the save was made (the saving process's clock).
    public let timestamp: Date
    /// The one ``ManagedObjectContext/transactionAuthor`` that names every
    /// change of the save; nil when none does, or several do.
    public let author: String?
    /// The name of the context whose save wrote it.
    public let contextName: String?
    /// What the save did to each object, inserts first, then updates,
    /// then deletes. An object of an entity the current model no longer
    /// has is left out.
    public let changes: [HistoryChange]

    public var id: HistoryToken { token }

    /// A transaction as a store behind the seam reads it from its history
    /// (``StoreHistory``).
    @_spi(StoreImplementation)
    public init(token: HistoryToken, timestamp: Date, author: String?, contextName: String?, changes: [HistoryChange]) {
        self.token = token
        self.timestamp = timestamp
        self.author = author
        self.contextName = contextName
        self.changes = changes
    }

    /// The objects as a did-save notification lists them, to merge into a
    /// context (``ManagedObjectContext/mergeChanges(fromHistory:)``).
    public var objectChanges: ObjectChanges {
        var result = ObjectChanges()
        for change in changes {
            switch change.kind {
            case .insert: result.inserted.append(change.objectID)
            case .update: result.updated.append(change.objectID)
            case .delete: result.deleted.append(change.objectID)
            }
        }
        return result
    }

    /// The entities whose objects this transaction changed.
    public var entityNames: Set<String> { Set(changes.map(\.objectID.entity.name)) }
}

/// What one transaction did to one object.
public struct HistoryChange: Sendable, Hashable {
    /// What a transaction did to an object.
    public enum Kind: String, Sendable, Hashable, Codable {
        /// The save inserted it.
        case insert
        /// The save changed some of its properties.
        case update
        /// The save deleted it.
        case delete
    }

    /// The object changed.
    public let objectID: ObjectID
    /// What was done to it.
    public let kind: Kind
    /// For an update: the properties the save changed (by the values the
    /// saving context started from), in the entity's order; empty for
    /// inserts and deletes.
    public let updatedProperties: [String]
    /// For a delete: the values the object held in the attributes its
    /// model keeps (``AttributeDescription/preservesValueInHistoryOnDeletion``),
    /// by name; empty otherwise.
    public internal(set) var tombstone: [String: PropertyValue] = [:]

    @_spi(StoreImplementation)
    public init(objectID: ObjectID, kind: Kind, updatedProperties: [String], tombstone: [String: PropertyValue] = [:]) {
        self.objectID = objectID
        self.kind = kind
        self.updatedProperties = updatedProperties
        self.tombstone = tombstone
    }
}
