public import Foundation

/// The value of one property of a managed object, as the object graph stores
/// it: what ``ManagedObject/changedValues()`` and
/// ``ManagedObject/committedValues(forKeys:)`` return, and what the store encodes.
///
/// Relationships hold object IDs, never objects, so a `PropertyValue` is
/// `Sendable` and may cross queues.
public enum PropertyValue: Sendable, Hashable {
    /// No value: an optional attribute that is unset, or an empty to-one relationship.
    case null
    /// A `string` attribute's value.
    case string(String)
    /// Every integer attribute (16, 32 and 64 bits) is held as 64 bits.
    case integer(Int64)
    /// A `double` attribute's value.
    case double(Double)
    /// A `bool` attribute's value.
    case bool(Bool)
    /// A `date` attribute's value.
    case date(Date)
    /// A `binaryData` attribute's bytes.
    case data(Data)
    /// A `uuid` attribute's value.
    case uuid(UUID)
    /// A to-one relationship.
    case object(ObjectID)
    /// A to-many relationship.
    case objects(Set<ObjectID>)

    /// The IDs a relationship value refers to.
    var objectIDs: [ObjectID] {
        switch self {
        case .object(let id): return [id]
        case .objects(let ids): return Array(ids)
        default: return []
        }
    }

    /// Calls `body` with each ID of `objectIDs`, without gathering them.
    @inline(__always)
    func forEachObjectID(_ body: (ObjectID) -> Void) {
        switch self {
        case .object(let id): body(id)
        case .objects(let ids): for id in ids { body(id) }
        default: break
        }
    }
}

extension PropertyValue: CustomStringConvertible {
    public var description: String {
        switch self {
        case .null: return "nil"
        case .string(let s): return String(reflecting: s)
        case .integer(let i): return String(i)
        case .double(let d): return String(d)
        case .bool(let b): return String(b)
        case .date(let d): return d.formatted(.iso8601)
        case .data(let d): return "<\(d.count) bytes>"
        case .uuid(let u): return u.uuidString
        case .object(let id): return id.description
        case .objects(let ids): return "[" + ids.map(\.description).sorted().joined(separator: ", ") + "]"
        }
    }
}

extension PropertyValue {
    /// Edits a to-many value's set where it lies; false (and nothing done)
    /// for any other value. The value is null while `edit` runs, so that
    /// `edit` holds the set's only reference — unless something else
    /// shares it (an object's committed values; a caller that matched the
    /// value and still holds what it bound, which makes every edit copy
    /// the whole set) — and changes it without a copy.
    @discardableResult
    mutating func editMembers(_ edit: (inout Set<ObjectID>) -> Void) -> Bool {
        guard case .objects(var ids) = self else { return false }
        self = .null
        edit(&ids)
        self = .objects(ids)
        return true
    }
}
