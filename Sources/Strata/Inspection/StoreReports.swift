public import StrataStore

/// The reports `strata-dump` prints, each one call: the engine's view of a
/// store (`StoreInspector`) joined with the object layer's
/// (``ObjectStoreInspector``) where the store is an object store.
///
/// ```swift
/// let info = try StoreReports.info(directory: "/var/lib/app/recipes")
/// print(info.store.records.liveRecords, info.objects?.modelHash ?? "no model")
/// let check = try StoreReports.verify(directory: "/var/lib/app/recipes")
/// if !check.isClean { check.problems.forEach { print($0) } }
/// ```
///
/// Each throws `StoreError` when the directory cannot be inspected at all
/// (missing, not a store, a damaged manifest); whatever else goes wrong is
/// reported inside the result.
public enum StoreReports {
    /// `strata-dump info`.
    public struct Info: Codable, Sendable {
        /// The engine's view of the store: its files, manifest and record counts.
        public var store: StoreSummary
        /// Nil when the store holds no Strata model (see ``objectLayerNote``).
        public var objects: ObjectStoreSummary?
        /// Why ``objects`` is nil.
        public var objectLayerNote: String?
    }

    /// `strata-dump verify`.
    public struct Verification: Codable, Sendable {
        /// The engine's checks: every checksum of every file.
        public var store: VerificationReport
        /// Live records whose decoding was checked by the object layer.
        public var recordsChecked: Int
        /// Records that do not decode, or refer to missing objects.
        public var recordProblems: [RecordProblem]
        /// Why records were not checked as objects, when they were not.
        public var objectLayerNote: String?
        /// No failed check anywhere.
        public var isClean: Bool { store.isClean && recordProblems.isEmpty }
        /// Every failed check, one line each: `path at offset N: message` or `record Entity/pN: message`.
        public var problems: [String] { store.problems.map(\.description) + recordProblems.map(\.description) }
    }

    /// Files, manifest, record counts, model hash, store identity, objects per entity.
    public static func info(directory: String) throws(StoreError) -> Info {
        let inspector = try StoreInspector(directory: directory)
        let contents = try inspector.contents()
        let objects: ObjectStoreInspector?
        var note: String?
        do throws(StrataError) { objects = try ObjectStoreInspector(contents: contents) } catch {
            objects = nil
            note = error.message
        }
        let summary = try inspector.summary(describingKeys: objects?.describeKey ?? StoreInspector.describeKey)
        return Info(store: summary, objects: objects?.summary(), objectLayerNote: note)
    }

    /// Every segment, with keys shown as `Entity/pN` and `m:name` when the store is an object store.
    public static func segments(directory: String) throws(StoreError) -> [SegmentReport] {
        let inspector = try StoreInspector(directory: directory)
        let objects = try? ObjectStoreInspector(contents: inspector.contents())
        return try inspector.segments(describingKeys: objects?.describeKey ?? StoreInspector.describeKey)
    }

    /// Every checksum (StrataStore's `StoreInspector.verify()`), then every record decoded
    /// under the stored model (``ObjectStoreInspector/verifyRecords()``).
    public static func verify(directory: String) throws(StoreError) -> Verification {
        let inspector = try StoreInspector(directory: directory)
        let report = inspector.verify()
        var result = Verification(store: report, recordsChecked: 0, recordProblems: [], objectLayerNote: nil)
        do throws(StrataError) {
            let contents: StoreContents
            do throws(StoreError) { contents = try inspector.contents() } catch { throw StrataError.storage(error) }
            let checked = try ObjectStoreInspector(contents: contents).verifyRecords()
            result.recordsChecked = checked.records
            result.recordProblems = checked.problems
        } catch {
            if error.code == .modelMismatch {
                result.objectLayerNote = error.message
            } else if report.isClean {
                // A failure the file checks did not see (a damaged model record, say).
                result.recordProblems.append(RecordProblem(key: "m:model", message: error.message))
            } else {
                result.objectLayerNote = "records were not decoded as objects: \(error.message)"
            }
        }
        return result
    }
}
