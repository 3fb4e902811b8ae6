@_spi(Coding) internal import StrataStore

/// Rewrites a record of an older schema generation as the current model
/// would have written it, byte for byte, without decoding its values: each
/// property's bytes are copied from where the old record holds them,
/// relationships get their targets' new entity positions, and properties the
/// old entity lacked get their initial value. About a copy of the record:
/// what lets a migrated store read its old records at close to the speed of
/// new ones.
struct RecordUpgrade: Sendable {
    /// The entity in the generation's model.
    let oldEntity: EntityDescription
    /// The entity in the current model.
    let entity: EntityDescription
    let sources: [SchemaMapping.PropertySource]
    /// Per entity position in the generation's model: its current position.
    let newPosition: [UInt16?]
    /// The current generation, written in the new header.
    let generation: UInt64

    /// The error for a record this upgrade cannot read.
    var malformed: StrataError {
        StrataError(.corruptRecord, "a record of \(oldEntity.name) does not decode under the schema it was written with")
    }

    /// Writes the upgrade of `raw` into `out` (replacing its contents);
    /// false when `raw` is not a well-formed record of ``oldEntity``.
    /// `offsets` is scratch space, reused from record to record.
    func upgrade(_ raw: UnsafeRawBufferPointer, into out: inout [UInt8], offsets: inout [Int]) -> Bool {
        var reader = ByteReader(raw)
        guard RecordCoding.readGeneration(&reader) != nil, let version = reader.readVarint(),
              let count = reader.readLength(limit: 1 << 16), count == oldEntity.properties.count
        else { return false }
        offsets.removeAll(keepingCapacity: true)
        for i in 0..<count {
            offsets.append(reader.offset)
            guard let rawTag = reader.readInteger(UInt8.self), let tag = RecordCoding.Tag(rawValue: rawTag),
                  RecordCoding.tag(tag, fits: i, of: oldEntity), RecordCoding.skipValue(tag, &reader)
            else { return false }
        }
        offsets.append(reader.offset)
        guard reader.isAtEnd else { return false }

        out.removeAll(keepingCapacity: true)
        RecordCoding.appendHeader(version: version, generation: generation, count: sources.count, into: &out)
        for source in sources {
            guard let i = source.old else {
                RecordCoding.appendValue(source.initial, into: &out)
                continue
            }
            var field = ByteReader(raw, offset: offsets[i] + 1)
            switch RecordCoding.Tag(rawValue: raw[offsets[i]])! {  // checked above
            case .null:
                if let fill = source.fill {
                    RecordCoding.appendValue(fill, into: &out)
                } else if source.wrapsInSet {
                    out.append(RecordCoding.Tag.objects.rawValue)
                    out.appendVarint(0)
                } else {
                    out.append(RecordCoding.Tag.null.rawValue)
                }
            case .object:
                if source.wrapsInSet {
                    out.append(RecordCoding.Tag.objects.rawValue)
                    out.appendVarint(1)
                } else {
                    out.append(RecordCoding.Tag.object.rawValue)
                }
                guard copyTarget(&field, into: &out) else { return false }
            case .objects:
                out.append(RecordCoding.Tag.objects.rawValue)
                guard let n = field.readLength(limit: field.remaining / 2) else { return false }
                out.appendVarint(UInt64(n))
                for _ in 0..<n { guard copyTarget(&field, into: &out) else { return false } }
            default:
                out.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[offsets[i]..<offsets[i + 1]]))
            }
        }
        return true
    }

    /// Copies one relationship target (entity position, primary key),
    /// giving it the entity's current position.
    private func copyTarget(_ reader: inout ByteReader, into out: inout [UInt8]) -> Bool {
        guard let position = reader.readVarint(), position < UInt64(newPosition.count),
              let now = newPosition[Int(position)], let primaryKey = reader.readVarint()
        else { return false }
        out.appendVarint(UInt64(now))
        out.appendVarint(primaryKey)
        return true
    }
}
