@_spi(Coding) internal import StrataStore

extension ModelSchema {
    /// Rebuilds a model from the bytes ``encode(_:)`` wrote — without the
    /// application's classes: every entity is represented by `ManagedObject`
    /// itself. Enough to decode records (the schema holds every name, kind,
    /// type, optionality, inverse and delete rule, and the indexes; from
    /// format 4, renaming identifiers, hash modifiers and default values).
    ///
    /// Throws ``StrataError/Code/corruptRecord`` when the bytes are malformed,
    /// and ``StrataError/Code/invalidModel`` when they describe an inconsistent model.
    package static func decode(_ bytes: [UInt8]) throws(StrataError) -> ManagedObjectModel {
        if let format = bytes.first, format > 4 {
            throw StrataError(.unsupportedFormat, "the store's model schema is in format \(format), written by a newer Strata; this build reads formats 1 to 4")
        }
        let entities: [EntityDescription]? = bytes.withUnsafeBytes { raw in
            var reader = ByteReader(raw)
            func string() -> String? {
                guard let length = reader.readLength(limit: reader.remaining), let bytes = reader.readBytes(length) else { return nil }
                return String(validating: bytes, as: UTF8.self)
            }
            func flag() -> Bool? {
                switch reader.readInteger(UInt8.self) {
                case 0?: return false
                case 1?: return true
                default: return nil
                }
            }
            guard let format = reader.readInteger(UInt8.self), (1...4).contains(format),
                  let count = reader.readLength(limit: Int(UInt16.max)) else { return nil }
            var entities: [EntityDescription] = []
            for _ in 0..<count {
                guard let name = string() else { return nil }
                var renamedFrom: String?, modifier: String?
                if format >= 4 {
                    guard let renaming = string(), let hashModifier = string() else { return nil }
                    renamedFrom = renaming.isEmpty ? nil : renaming
                    modifier = hashModifier.isEmpty ? nil : hashModifier
                }
                guard let propertyCount = reader.readLength(limit: reader.remaining) else { return nil }
                var properties: [PropertyDescription] = []
                for _ in 0..<propertyCount {
                    guard let kind = reader.readInteger(UInt8.self) else { return nil }
                    switch kind {
                    case 0:
                        guard let name = string(), let rawType = reader.readInteger(UInt8.self),
                              let type = AttributeType(rawValue: rawType), let optional = flag()
                        else { return nil }
                        var renamedFrom: String?, defaultValue = PropertyValue.null
                        if format >= 4 {
                            guard let renaming = string(), let rawTag = reader.readInteger(UInt8.self),
                                  let tag = RecordCoding.Tag(rawValue: rawTag),
                                  let value = RecordCoding.readValue(tag, &reader, destination: nil)
                            else { return nil }
                            renamedFrom = renaming.isEmpty ? nil : renaming
                            defaultValue = value
                        }
                        properties.append(.attribute(name, type, optional: optional, defaultValue: defaultValue, renamedFrom: renamedFrom))
                    case 1, 2:
                        guard let name = string(), let destination = string(), let inverse = string(), let optional = flag(),
                              let rawRule = reader.readInteger(UInt8.self), let rule = DeleteRule(rawValue: rawRule)
                        else { return nil }
                        var renamedFrom: String?
                        if format >= 4 {
                            guard let renaming = string() else { return nil }
                            renamedFrom = renaming.isEmpty ? nil : renaming
                        }
                        properties.append(.relationship(RelationshipDescription(
                            name: name, destination: destination, inverse: inverse.isEmpty ? nil : inverse,
                            toMany: kind == 2, isOptional: optional, deleteRule: rule, renamingIdentifier: renamedFrom)))
                    default:
                        return nil
                    }
                }
                var indexes: [IndexDescription] = []
                if format >= 2 {
                    guard let indexCount = reader.readLength(limit: 255) else { return nil }
                    for _ in 0..<indexCount {
                        guard let nameCount = reader.readLength(limit: reader.remaining) else { return nil }
                        var names: [String] = []
                        for _ in 0..<nameCount {
                            guard let name = string() else { return nil }
                            names.append(name)
                        }
                        var unique = false
                        if format >= 3 {
                            guard let flag = flag() else { return nil }
                            unique = flag
                        }
                        indexes.append(IndexDescription(names, isUnique: unique))
                    }
                }
                entities.append(EntityDescription(
                    name: name, properties: properties, indexes: indexes, renamedFrom: renamedFrom, versionHashModifier: modifier))
            }
            return reader.isAtEnd ? entities : nil
        }
        guard let entities else {
            throw StrataError(.corruptRecord, "the store's model schema is malformed")
        }
        return try ManagedObjectModel(entities: entities)
    }
}

extension ModelSchema {
    private static let cacheLock = Lock()
    nonisolated(unsafe) private static var decoded: [[UInt8]: ManagedObjectModel] = [:]  // guarded by `cacheLock`

    /// ``decode(_:)``, once per distinct schema in the process: models are
    /// immortal (``ManagedObjectModel``), and a store's older schemas are
    /// decoded at every open.
    static func decodeCached(_ bytes: [UInt8]) throws(StrataError) -> ManagedObjectModel {
        if let model = cacheLock.withLock({ decoded[bytes] }) { return model }
        let model = try decode(bytes)
        return cacheLock.withLock {
            if let raced = decoded[bytes] { return raced }
            decoded[bytes] = model
            return model
        }
    }
}
