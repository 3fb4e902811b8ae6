import Foundation
@_spi(Coding) internal import StrataStore

/// Records rewritten where they lie: a batch request sets a few attributes
/// of many stored objects (a batch update; an upsert meeting stored
/// objects), and decoding each whole record into values to encode it again
/// costs far more than the bytes that change. A patch copies the stored
/// record's bytes with a new version in its header and each attribute it
/// sets in its new encoding.
extension RecordCoding {
    /// Attributes set to values, applied to one stored record at a time.
    struct RecordPatch {
        /// Each attribute set: its position and its new field (tag and
        /// payload), ascending by position.
        let fields: [(index: Int, bytes: [UInt8])]
        /// The positions of `fields`.
        private let allIndices: [Int]

        /// A patch setting each attribute to its value; `updates` name each at most once.
        init(_ updates: [(index: Int, value: PropertyValue)]) {
            fields = updates.sorted { $0.index < $1.index }.map { update in
                var bytes: [UInt8] = []
                RecordCoding.appendValue(update.value, into: &bytes)
                return (update.index, bytes)
            }
            allIndices = fields.map(\.index)
        }

        /// Where a patch's fields lie in one stored record, and its header:
        /// found by ``locate(in:entity:site:)``, reused from record to record.
        struct Site {
            fileprivate var spans: [Range<Int>] = []
            fileprivate var version: UInt64 = 0
            fileprivate var count = 0
            /// Where the record's first property starts.
            fileprivate var body = 0
        }

        /// Reads the header of `raw`, a current-generation record of
        /// `entity`, and walks its properties, checking each tag and length
        /// as a decode would (not the values: a string's UTF-8, an
        /// integer's range, a relationship's target), into `site`; false
        /// when the record is malformed.
        func locate(in raw: UnsafeRawBufferPointer, entity: EntityDescription, site: inout Site) -> Bool {
            var reader = ByteReader(raw)
            guard RecordCoding.readGeneration(&reader) != nil, let version = reader.readVarint(),
                  let count = reader.readLength(limit: 1 << 16), count == entity.properties.count,
                  fields.last.map({ $0.index < count }) ?? true
            else { return false }
            site.version = version
            site.count = count
            site.body = reader.offset
            if site.spans.count != fields.count { site.spans = Array(repeating: 0..<0, count: fields.count) }
            // Every property, not only those up to the last one set: a
            // record whose layout is broken past it is refused, not copied
            // on under a new version.
            var next = 0
            for i in 0..<count {
                let start = reader.offset
                guard let rawTag = reader.readInteger(UInt8.self), let tag = Tag(rawValue: rawTag),
                      RecordCoding.tag(tag, fits: i, of: entity), RecordCoding.skipValue(tag, &reader)
                else { return false }
                if next < fields.count, fields[next].index == i {
                    site.spans[next] = start..<reader.offset
                    next += 1
                }
            }
            return reader.isAtEnd
        }

        /// The positions of the attributes whose stored field (in `raw`, at
        /// `site`) differs from the patch's, ascending: empty when the patch
        /// would change nothing.
        func changedProperties(in raw: UnsafeRawBufferPointer, at site: Site) -> [Int] {
            func differs(_ field: (index: Int, bytes: [UInt8]), _ span: Range<Int>) -> Bool {
                field.bytes.count != span.count
                    || field.bytes.withUnsafeBytes { memcmp($0.baseAddress!, raw.baseAddress! + span.lowerBound, span.count) } != 0
            }
            var changed = 0
            for (field, span) in zip(fields, site.spans) where differs(field, span) { changed += 1 }
            // Mostly all or none: the list of all is shared, not made again.
            if changed == fields.count { return allIndices }
            if changed == 0 { return [] }
            return zip(fields, site.spans).filter { differs($0, $1) }.map(\.0.index)
        }

        /// Puts `raw` (at `site`) patched into `batch`: the next version
        /// of `id`'s record, written under schema generation `generation`.
        func put(_ raw: UnsafeRawBufferPointer, at site: Site, of id: ObjectID, generation: UInt64, into batch: inout WriteBatch) {
            batch.put(KeyBytes(id), PatchedRecordBytes(
                header: HeaderBytes(version: site.version + 1, generation: generation, count: site.count),
                record: raw, body: site.body, fields: fields, spans: site.spans))
        }
    }

    /// A stored record with a new header and a patch's fields in place of its own.
    private struct PatchedRecordBytes: ByteWriting {
        let header: HeaderBytes
        let record: UnsafeRawBufferPointer
        /// Where the record's first property starts.
        let body: Int
        let fields: [(index: Int, bytes: [UInt8])]
        /// Where each of `fields` lies in `record`.
        let spans: [Range<Int>]

        var byteCount: Int {
            var size = header.byteCount + record.count - body
            for (field, span) in zip(fields, spans) { size += field.bytes.count - span.count }
            return size
        }

        func write(to writer: inout ByteWriter) {
            header.write(to: &writer)
            var copied = body
            for (field, span) in zip(fields, spans) {
                writer.writeBytes(UnsafeRawBufferPointer(rebasing: record[copied..<span.lowerBound]))
                field.bytes.withUnsafeBytes { writer.writeBytes($0) }
                copied = span.upperBound
            }
            writer.writeBytes(UnsafeRawBufferPointer(rebasing: record[copied...]))
        }
    }
}

/// An object whose stored record a batch request patched
/// (``RecordCoding/RecordPatch``), for ``ChangeSet/patched``.
struct PatchedRecord: Sendable {
    let id: ObjectID
    /// The positions of the properties whose values it changed, ascending.
    let changedProperties: [Int]
}
