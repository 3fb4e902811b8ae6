public import Foundation

/// An object as stored, decoded with the model kept in the store (no
/// application classes needed): what `strata-dump get` and `entity` print.
///
/// ```swift
/// let object = try inspector.object(inspector.objectID(parsing: "Recipe/p42"))
/// print(object?.description ?? "not found")
/// // Recipe/p42 (version 3)
/// //   name = "Soup"
/// //   ingredients = [Ingredient/p1, Ingredient/p2]
/// ```
public struct InspectedObject: Codable, Sendable, Hashable, CustomStringConvertible {
    /// `Entity/pN`, as ``ObjectID/description`` writes it.
    public var id: String
    /// The name of the object's entity.
    public var entity: String
    /// The object's primary key within its entity: the N of `Entity/pN`.
    public var primaryKey: UInt64
    /// The store's version of the object (how many saves wrote it).
    public var version: UInt64
    /// Every property, in the entity's declaration order.
    public var properties: [InspectedProperty]

    /// The ID line, then `name = value` per property.
    public var description: String {
        "\(id) (version \(version))" + properties.map { "\n  \($0.name) = \($0.value)" }.joined()
    }
}

/// One property of an ``InspectedObject``.
public struct InspectedProperty: Codable, Sendable, Hashable {
    /// What kind of property this is.
    public enum Kind: String, Codable, Sendable, Hashable {
        /// An attribute (`attribute`), a to-one relationship (`toOne`, `"to-one"` in JSON) or a
        /// to-many relationship (`toMany`, `"to-many"` in JSON).
        case attribute, toOne = "to-one", toMany = "to-many"
    }
    /// The property's name in the stored model.
    public var name: String
    /// Whether it is an attribute, a to-one or a to-many relationship.
    public var kind: Kind
    /// The attribute's type (`string`, `integer64`, `date`, …) or the
    /// relationship's destination entity.
    public var type: String
    /// The value the object holds.
    public var value: InspectedValue

    /// A property named `name` of kind `kind` holding `value`; `type` is the attribute type's name
    /// (`string`, `integer64`, …) or, for a relationship, the destination entity's.
    public init(name: String, kind: Kind, type: String, value: InspectedValue) {
        self.name = name
        self.kind = kind
        self.type = type
        self.value = value
    }

    private enum CodingKeys: String, CodingKey { case name, kind, type, value }

    /// Reads `value` according to `kind` and `type` (JSON alone cannot tell a
    /// date from a string).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        kind = try container.decode(Kind.self, forKey: .kind)
        type = try container.decode(String.self, forKey: .type)
        if try container.decodeNil(forKey: .value) {
            value = .null
            return
        }
        switch (kind, type) {
        case (.toOne, _): value = .object(try container.decode(String.self, forKey: .value))
        case (.toMany, _): value = .objects(try container.decode([String].self, forKey: .value))
        case (_, "string"): value = .string(try container.decode(String.self, forKey: .value))
        case (_, "integer16"), (_, "integer32"), (_, "integer64"): value = .integer(try container.decode(Int64.self, forKey: .value))
        case (_, "double"): value = .double(try container.decode(Double.self, forKey: .value))
        case (_, "bool"): value = .bool(try container.decode(Bool.self, forKey: .value))
        case (_, "date"): value = .date(try container.decode(String.self, forKey: .value))
        case (_, "binaryData"):
            let text = try container.decode(String.self, forKey: .value)
            guard let data = Data(base64Encoded: text) else {
                throw DecodingError.dataCorruptedError(forKey: .value, in: container, debugDescription: "not base64")
            }
            value = .data(data)
        case (_, "uuid"): value = .uuid(try container.decode(String.self, forKey: .value))
        default:
            throw DecodingError.dataCorruptedError(forKey: .type, in: container, debugDescription: "unknown attribute type \(type)")
        }
    }
}

/// A stored value, readable: as text (``description``) and as plain JSON
/// (strings, numbers, booleans, null; dates as ISO 8601, data as base64,
/// relationships as `Entity/pN` strings).
public enum InspectedValue: Encodable, Sendable, Hashable, CustomStringConvertible {
    /// No value: an optional attribute that is unset, or an empty to-one relationship (`null` in
    /// JSON).
    case null
    /// A `string` attribute's value.
    case string(String)
    /// An integer attribute's value, whatever its width.
    case integer(Int64)
    /// A `double` attribute's value.
    case double(Double)
    /// A `bool` attribute's value.
    case bool(Bool)
    /// ISO 8601, with fractional seconds.
    case date(String)
    /// A `binaryData` attribute's bytes (base64 in JSON).
    case data(Data)
    /// The UUID's string.
    case uuid(String)
    /// A to-one relationship's target: `Entity/pN`.
    case object(String)
    /// A to-many relationship's targets, by primary key.
    case objects([String])

    /// `value` as it reads: dates in ISO 8601, objects as `Entity/pN`
    /// (a to-many's by primary key).
    init(_ value: PropertyValue) {
        switch value {
        case .null: self = .null
        case .string(let s): self = .string(s)
        case .integer(let i): self = .integer(i)
        case .double(let d): self = .double(d)
        case .bool(let b): self = .bool(b)
        case .date(let d): self = .date(d.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
        case .data(let d): self = .data(d)
        case .uuid(let u): self = .uuid(u.uuidString)
        case .object(let target): self = .object(target.description)
        case .objects(let targets): self = .objects(targets.sorted { $0.primaryKey < $1.primaryKey }.map(\.description))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .string(let s), .date(let s), .uuid(let s), .object(let s): try container.encode(s)
        case .integer(let i): try container.encode(i)
        case .double(let d): try container.encode(d)
        case .bool(let b): try container.encode(b)
        case .data(let d): try container.encode(d.base64EncodedString())
        case .objects(let ids): try container.encode(ids)
        }
    }

    /// `nil`, `"quoted"` strings, numbers, `true`/`false`, dates and UUIDs
    /// bare, `<N bytes: hex…>`, `Entity/pN`, `[Entity/p1, Entity/p2]`.
    public var description: String {
        switch self {
        case .null: return "nil"
        case .string(let s): return String(reflecting: s)
        case .integer(let i): return String(i)
        case .double(let d): return String(d)
        case .bool(let b): return String(b)
        case .date(let s), .uuid(let s), .object(let s): return s
        case .data(let d):
            let hex = d.prefix(16).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
            return "<\(d.count) bytes" + (d.isEmpty ? "" : ": " + hex + (d.count > 16 ? "…" : "")) + ">"
        case .objects(let ids): return "[" + ids.joined(separator: ", ") + "]"
        }
    }
}

/// How many objects of one entity the store holds.
public struct EntityCount: Codable, Sendable, Hashable {
    /// The entity's name.
    public var entity: String
    /// How many objects of the entity the store holds.
    public var objects: Int
    /// The next primary key the store will hand out for the entity (from the
    /// store's key counters; nil when it has none).
    public var nextPrimaryKey: UInt64?
    /// The entity's indexes, in model order, with their entry counts (one
    /// per object in a sound store).
    public var indexes: [IndexCount] = []
}

/// One index of an entity and how many entries it holds.
public struct IndexCount: Codable, Sendable, Hashable {
    /// The index's attributes, most significant first.
    public var attributes: [String]
    /// How many entries the store holds for the index.
    public var entries: Int
}

/// The object layer's part of `strata-dump info`.
public struct ObjectStoreSummary: Codable, Sendable, Hashable {
    /// The model's version hash, as stored and as recomputed from the stored schema (they are equal).
    public var modelHash: String
    /// The store's identity, made when it was created.
    public var storeIdentifier: String?
    /// Every entity of the stored model, in model order, with its object count.
    public var entities: [EntityCount]
    /// The models the store's records were written under, oldest first
    /// (one for a store never migrated).
    public var schemaGenerations: [SchemaGenerationSummary] = []
    /// How many records an older generation wrote: read upgraded until rewritten.
    public var recordsAwaitingUpgrade = 0
    /// Per live file (segment or log) holding object records, how many
    /// each schema generation wrote: which files compaction has yet to
    /// bring up to date.
    public var recordsPerFile: [FileGenerationCount] = []
    /// How many object records no reader looks at — a removed entity's,
    /// those a custom stage rewrote under a new number, or those of a stage
    /// a crash cut short — deleted at the next read-write open.
    public var recordsAwaitingRemoval = 0
    /// How many index entries no reader looks at — a replaced index's, or
    /// those of a build a crash cut short — deleted at the next read-write open.
    public var indexEntriesAwaitingRemoval = 0
    /// The store's persistent history: transactions, bytes, cursors.
    public var history: HistorySummary?
}

/// The object records one file holds, per schema generation.
public struct FileGenerationCount: Codable, Sendable, Hashable {
    /// `000004.seg`, `000007.wal`.
    public var file: String
    /// Per generation, oldest first.
    public var records: [Int]
}

/// One model a store's records were written under.
public struct SchemaGenerationSummary: Codable, Sendable, Hashable {
    /// The generation's number, the one its records carry: its position in
    /// ``ObjectStoreSummary/schemaGenerations``, 0 for the oldest.
    public var generation: Int
    /// That model's version hash (as ``ManagedObjectModel/versionHash`` gives it); `?` when its
    /// stored schema does not decode.
    public var modelHash: String
    /// The entities' names, in that model's order.
    public var entities: [String]
    /// Per entity: its ``EntityDescription/versionHash`` (what changed between two generations).
    public var entityHashes: [String] = []
    /// How many live records this generation wrote.
    public var records = 0
}

/// A record that fails the object layer's checks.
public struct RecordProblem: Codable, Sendable, Hashable, CustomStringConvertible {
    /// The record's key, rendered (`Entity/pN`, `m:name`, or escaped bytes).
    public var key: String
    /// What is wrong with the record.
    public var message: String
    public var description: String { "record \(key): \(message)" }
}
