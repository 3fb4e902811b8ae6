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
        /// The position of each attribute set, ascending.
        private let indices: [Int]
        /// Their new fields (tag and payload), one after another in that
        /// order: a patch is three arrays however many attributes it sets
        /// (an upsert makes one per stored object it meets).
        private let bytes: [UInt8]
        /// Where each field ends in `bytes` (one starts where the one before it ends).
        private let ends: [Int]

        /// A patch setting each attribute to its value; `updates` name each at most once.
        init(_ updates: [(index: Int, value: PropertyValue)]) {
            var indices: [Int] = []
            var bytes: [UInt8] = []
            var ends: [Int] = []
            indices.reserveCapacity(updates.count)
            ends.reserveCapacity(updates.count)
            bytes.reserveCapacity(updates.count * 16)
            func append(_ update: (index: Int, value: PropertyValue)) {
                indices.append(update.index)
                RecordCoding.appendValue(update.value, into: &bytes)
                ends.append(bytes.count)
            }
            // Mostly in order already (an upsert's rows give the attributes
            // in the entity's order): sorted only when they are not.
            if updates.indices.dropFirst().allSatisfy({ updates[$0 - 1].index < updates[$0].index }) {
                for update in updates { append(update) }
            } else {
                for update in updates.sorted(by: { $0.index < $1.index }) { append(update) }
            }
            self.indices = indices
            self.bytes = bytes
            self.ends = ends
        }

        /// How many attributes it sets.
        var count: Int { indices.count }

        /// The new field of the `i`-th attribute set, lent for the call.
        @inline(__always)
        func withField<R>(_ i: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
            bytes.withUnsafeBytes { raw in body(UnsafeRawBufferPointer(rebasing: raw[(i == 0 ? 0 : ends[i - 1])..<ends[i]])) }
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
                  indices.last.map({ $0 < count }) ?? true
            else { return false }
            site.version = version
            site.count = count
            site.body = reader.offset
            if site.spans.count != indices.count { site.spans = Array(repeating: 0..<0, count: indices.count) }
            // Every property, not only those up to the last one set: a
            // record whose layout is broken past it is refused, not copied
            // on under a new version.
            var next = 0
            for i in 0..<count {
                let start = reader.offset
                guard let rawTag = reader.readInteger(UInt8.self), let tag = Tag(rawValue: rawTag),
                      RecordCoding.tag(tag, fits: i, of: entity), RecordCoding.skipValue(tag, &reader)
                else { return false }
                if next < indices.count, indices[next] == i {
                    site.spans[next] = start..<reader.offset
                    next += 1
                }
            }
            return reader.isAtEnd
        }

        /// The attributes whose stored field (in `raw`, at `site`) differs
        /// from the patch's: empty when the patch would change nothing.
        func changedProperties(in raw: UnsafeRawBufferPointer, at site: Site) -> PropertyIndexSet {
            var changed = PropertyIndexSet()
            for i in indices.indices {
                let span = site.spans[i]
                let differs = withField(i) { field in
                    field.count != span.count || (span.count > 0 && memcmp(field.baseAddress!, raw.baseAddress! + span.lowerBound, span.count) != 0)
                }
                if differs { changed.insert(indices[i]) }
            }
            return changed
        }

        /// Puts `raw` (at `site`) patched into `batch`: the next version
        /// of `id`'s record, written under schema generation `generation`.
        func put(_ raw: UnsafeRawBufferPointer, at site: Site, of id: ObjectID, generation: UInt64, into batch: inout WriteBatch) {
            batch.put(KeyBytes(id), PatchedRecordBytes(
                header: HeaderBytes(version: site.version + 1, generation: generation, count: site.count),
                record: raw, body: site.body, patch: self, spans: site.spans))
        }
    }

    /// A stored record with a new header and a patch's fields in place of its own.
    private struct PatchedRecordBytes: ByteWriting {
        let header: HeaderBytes
        let record: UnsafeRawBufferPointer
        /// Where the record's first property starts.
        let body: Int
        let patch: RecordPatch
        /// Where each field of `patch` lies in `record`.
        let spans: [Range<Int>]

        var byteCount: Int {
            var size = header.byteCount + record.count - body
            for i in 0..<patch.count { size += patch.withField(i) { $0.count } - spans[i].count }
            return size
        }

        func write(to writer: inout ByteWriter) {
            header.write(to: &writer)
            var copied = body
            for i in 0..<patch.count {
                writer.writeBytes(UnsafeRawBufferPointer(rebasing: record[copied..<spans[i].lowerBound]))
                patch.withField(i) { writer.writeBytes($0) }
                copied = spans[i].upperBound
            }
            writer.writeBytes(UnsafeRawBufferPointer(rebasing: record[copied...]))
        }
    }
}
