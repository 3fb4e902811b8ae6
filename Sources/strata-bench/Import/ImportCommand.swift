import ArgumentParser
import Foundation
import Strata

/// `strata-bench import`: the import an app writes, in each of the styles
/// apps use, on data shaped like a real catalogue (``CatalogueData``),
/// beside SQLite doing the same with prepared statements — the paths where
/// a lookup meets new and stored keys mixed, in batches.
///
/// Per style, on a store of its own: the first import (every record new),
/// a mixed import (each batch 30% new records, 70% changed stored ones),
/// and the mixed import again unchanged (what it writes, how the store
/// grows). Then an update pass by key, and one `IN` fetch of many keys
/// beside as many single lookups.
struct ImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "An app's catalogue import in six styles (dictionary, upsert, IN fetch, find-or-create by #Predicate and by key path, SQLite): first import, mixed re-import, unchanged re-import, update pass, IN fetch."
    )

    @Option(help: "Products in the first import.") var records = 70_000
    @Option(help: "Records per batch (each batch is saved to disk).") var batch = 2_000
    @Option(help: "Categories.") var categories = 2_000
    @Option(help: "Keys in the update pass and in the IN fetch.") var keys = 10_000
    @Option(help: "Styles to run, comma-separated (default: all).") var styles: String?
    @Option(help: "Keep the stores in this directory (default: a temporary one, removed after).") var store: String?
    @Option(help: "Write every figure to this JSON file.") var json: String?
    @Flag(name: .customLong("no-sqlite"), help: "Skip the SQLite baseline.") var noSQLite = false

    struct StyleRun: Codable, Sendable {
        var style: String
        var firstSeconds: Double
        var mixedSeconds: Double
        var unchangedSeconds: Double
        var firstBytesWritten: Int
        var unchangedBytesWritten: Int
        var storeBytesAfterMixed: Int
        var storeBytesAfterUnchanged: Int
        var residentMiB: Double
    }

    struct Report: Codable, Sendable {
        var date: String
        var records: Int
        var batch: Int
        var categories: Int
        var keys: Int
        var runs: [StyleRun] = []
        var updatePassSeconds: Double?
        var sqliteUpdatePassSeconds: Double?
        var inFetchMs: Double?
        var singleLookupsMs: Double?
        var sqliteInFetchMs: Double?
        var sqliteSingleLookupsMs: Double?
        /// The sku → object ID map of every product: a dictionary fetch of
        /// `sku` and the object's ID, a fetch of the objects, SQLite.
        var idMapRowsMs: Double?
        var idMapObjectsMs: Double?
        var sqliteIDMapMs: Double?
        var idMapCount: Int?
        var peakResidentMiB: Double = 0
    }

    func run() throws {
        let work = try WorkDirectory(store, scenario: "import")
        defer { work.cleanUp() }
        let chosen = try styles.map { list in
            try list.split(separator: ",").map { name in
                guard let style = CatalogueImportStyle(rawValue: String(name)) else {
                    throw ValidationError("unknown style \(name); one of \(CatalogueImportStyle.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                return style
            }
        } ?? CatalogueImportStyle.allCases
        let data = CatalogueData(categoryCount: categories)
        let (first, mixed) = Self.feeds(data, records: records)
        let keyCount = min(keys, records)
        let updateKeys = Self.sample(keyCount, of: records, seed: 3).map { data.record($0).sku }
        var report = Report(date: ISO8601DateFormatter().string(from: Date()), records: records, batch: batch, categories: categories, keys: keyCount)
        let model = try makeCatalogueModel()
        var contents: [String: [Int]]?
        for style in chosen {
            progress("import: \(style.rawValue) ...")
            let path = work.path + "/\(style.rawValue)"
            let container = try PersistentContainer(name: "Catalogue", model: model, directory: path, viewContext: .privateQueue)
            let importer = CatalogueImporter(style: style, container: container)
            var run = StyleRun(style: style.rawValue, firstSeconds: 0, mixedSeconds: 0, unchangedSeconds: 0, firstBytesWritten: 0,
                               unchangedBytesWritten: 0, storeBytesAfterMixed: 0, storeBytesAfterUnchanged: 0, residentMiB: 0)
            var written = ProcessFigures.bytesWritten()
            run.firstSeconds = try seconds { try importer.run(first, batchSize: batch) }
            run.firstBytesWritten = ProcessFigures.bytesWritten() - written
            run.mixedSeconds = try seconds { try importer.run(mixed, batchSize: batch) }
            // The compaction the imports before left due runs now, not
            // during the unchanged re-import, whose writes are measured.
            try container.coordinator.compactStore()
            run.storeBytesAfterMixed = ProcessFigures.size(of: path)
            written = ProcessFigures.bytesWritten()
            run.unchangedSeconds = try seconds { try importer.run(mixed, batchSize: batch) }
            run.unchangedBytesWritten = ProcessFigures.bytesWritten() - written
            run.storeBytesAfterUnchanged = ProcessFigures.size(of: path)
            // Every style must leave the same catalogue.
            let found = try importer.contents()
            guard found.products.count == records + records * 3 / 10, found.categories <= categories else {
                throw CatalogueFailure("\(style.rawValue): \(found.products.count) products, \(found.categories) categories")
            }
            if let contents, contents != found.products { throw CatalogueFailure("\(style.rawValue) left another catalogue than the style before") }
            contents = found.products
            if style == .inFetch || (style == chosen.last && report.updatePassSeconds == nil) {
                report.updatePassSeconds = try seconds { try importer.updateStock(updateKeys, batchSize: batch) }
                (report.inFetchMs, report.singleLookupsMs) = try Self.lookups(updateKeys, in: container)
                (report.idMapRowsMs, report.idMapObjectsMs, report.idMapCount) = try Self.idMaps(in: container)
            }
            run.residentMiB = ProcessFigures.memory().resident
            try container.close()
            report.runs.append(run)
            try? FileManager.default.removeItem(atPath: path)
        }
        if !noSQLite {
            progress("import: SQLite ...")
            let path = work.path + "/catalogue.sqlite"
            let sqlite = try SQLiteCatalogue(path: path)
            var run = StyleRun(style: "SQLite", firstSeconds: 0, mixedSeconds: 0, unchangedSeconds: 0, firstBytesWritten: 0,
                               unchangedBytesWritten: 0, storeBytesAfterMixed: 0, storeBytesAfterUnchanged: 0, residentMiB: 0)
            func files() -> Int { ["", "-wal"].reduce(0) { $0 + ((try? FileManager.default.attributesOfItem(atPath: path + $1)[.size] as? Int) ?? 0) } }
            var written = ProcessFigures.bytesWritten()
            run.firstSeconds = try seconds { try sqlite.run(first, batchSize: batch) }
            run.firstBytesWritten = ProcessFigures.bytesWritten() - written
            run.mixedSeconds = try seconds { try sqlite.run(mixed, batchSize: batch) }
            run.storeBytesAfterMixed = files()
            written = ProcessFigures.bytesWritten()
            run.unchangedSeconds = try seconds { try sqlite.run(mixed, batchSize: batch) }
            run.unchangedBytesWritten = ProcessFigures.bytesWritten() - written
            run.storeBytesAfterUnchanged = files()
            let counts = try sqlite.counts()
            guard counts.products == records + records * 3 / 10 else { throw CatalogueFailure("SQLite: \(counts.products) products") }
            report.sqliteUpdatePassSeconds = try seconds { try sqlite.updateStock(updateKeys, batchSize: batch) }
            var rows = 0
            report.sqliteInFetchMs = try seconds { rows = try sqlite.fetchIn(updateKeys) } * 1000
            guard rows == updateKeys.count else { throw CatalogueFailure("SQLite IN: \(rows) rows") }
            report.sqliteSingleLookupsMs = try seconds {
                for sku in updateKeys where !sqlite.lookUp(sku) { throw CatalogueFailure("SQLite: \(sku) not found") }
            } * 1000
            var map: [String: Int64] = [:]
            report.sqliteIDMapMs = try seconds { map = try sqlite.idMap() } * 1000
            guard map.count == counts.products else { throw CatalogueFailure("SQLite id map: \(map.count) of \(counts.products)") }
            run.residentMiB = ProcessFigures.memory().resident
            report.runs.append(run)
        }
        report.peakResidentMiB = ProcessFigures.memory().peak
        print(Self.render(report))
        if let json { try writeJSON(report, to: json) }
    }

    /// The first import (records 0..<n, in a shuffled order) and the mixed
    /// one: 30% new records (n..<n + 0.3n) among 70% stored ones changed
    /// (a revision of a sample of 0.7n), shuffled together.
    static func feeds(_ data: CatalogueData, records n: Int) -> (first: [CatalogueRecord], mixed: [CatalogueRecord]) {
        var random = SplitMix64(seed: 11)
        var order = Array(0..<n)
        order.shuffle(using: &random)
        let first = order.map { data.record($0) }
        var mixed = sample(n * 7 / 10, of: n, seed: 5).map { data.record($0, revision: 1) } + (n..<(n + n * 3 / 10)).map { data.record($0) }
        mixed.shuffle(using: &random)
        return (first, mixed)
    }

    /// `count` distinct numbers of 0..<n.
    static func sample(_ count: Int, of n: Int, seed: UInt64) -> [Int] {
        var random = SplitMix64(seed: seed)
        var all = Array(0..<n)
        all.shuffle(using: &random)
        return Array(all.prefix(count))
    }

    /// Milliseconds for one `IN` fetch of `skus` and for one lookup per key,
    /// each in a fresh background context: the median of five runs of each.
    static func lookups(_ skus: [String], in container: PersistentContainer) throws -> (Double, Double) {
        try inFetchAgainstSingleLookups(in: container, childOfWriter: true, expected: skus.count) { context in
            try context.fetch(FetchRequest<CatalogueProduct>(predicate: #Predicate { skus.contains($0.sku) })).count
        } singleLookups: { context in
            for sku in skus where try CatalogueProduct.first(in: context, where: #Predicate { $0.sku == sku }) == nil {
                throw CatalogueFailure("lookup: \(sku) not found")
            }
        }
    }

    /// Milliseconds to build the sku → object ID map of every product, each
    /// in a fresh background context: from a dictionary fetch of the sku and
    /// the object's ID (no object registered), and from a fetch of the
    /// objects; and how many products it holds.
    static func idMaps(in container: PersistentContainer) throws -> (Double, Double, Int) {
        var fromRows: [String: ObjectID] = [:]
        let rowsContext = container.newBackgroundContext(childOfWriter: true)
        let rowsMs = try rowsContext.performAndWait { () throws in
            try seconds {
                for row in try rowsContext.fetch(DictionaryFetchRequest<CatalogueProduct>(propertiesToFetch: ["sku", .objectID()])) {
                    fromRows[row.value("sku", as: String.self)!] = row.objectID()!
                }
            } * 1000
        }
        var fromObjects: [String: ObjectID] = [:]
        let objectsContext = container.newBackgroundContext(childOfWriter: true)
        let objectsMs = try objectsContext.performAndWait { () throws in
            try seconds {
                for product in try objectsContext.fetch(FetchRequest<CatalogueProduct>()) { fromObjects[product.sku] = product.objectID }
            } * 1000
        }
        guard fromRows == fromObjects else { throw CatalogueFailure("the id map from rows differs from the one from objects") }
        return (rowsMs, objectsMs, fromRows.count)
    }

    static func render(_ report: Report) -> String {
        var out = "strata-bench import — \(report.records) products (\(report.records * 3 / 10) more in the mixed import), \(report.categories) categories, "
        out += "batches of \(report.batch), each saved to disk; \(report.date)\n\n"
        var table = Table(["style", "first import s", "mixed import s", "unchanged re-import s", "written: first", "written: unchanged",
                                   "store growth: unchanged", "RSS MiB"])
        func mib(_ bytes: Int) -> String { fixed(Double(bytes) / 1_048_576, 2) + " MiB" }
        for run in report.runs {
            table.add(run.style, fixed(run.firstSeconds, 2), fixed(run.mixedSeconds, 2), fixed(run.unchangedSeconds, 2),
                      mib(run.firstBytesWritten), mib(run.unchangedBytesWritten),
                      mib(run.storeBytesAfterUnchanged - run.storeBytesAfterMixed), fixed(run.residentMiB, 0))
        }
        out += table.render() + "\n"
        out += "(Strata's store is compacted before the unchanged re-import: the figures are what that import writes.)\n"
        if let dictionary = report.runs.first(where: { $0.style == "dictionary" }) {
            for run in report.runs where run.style != "dictionary" {
                out += "\(run.style): first import \(fixed(run.firstSeconds / dictionary.firstSeconds, 2))x the dictionary's, "
                out += "mixed \(fixed(run.mixedSeconds / dictionary.mixedSeconds, 2))x\n"
            }
        }
        if let sqlite = report.runs.first(where: { $0.style == "SQLite" }) {
            for run in report.runs where run.style != "SQLite" {
                out += "\(run.style): first import \(fixed(run.firstSeconds / sqlite.firstSeconds, 2))x SQLite's upsert, "
                out += "mixed \(fixed(run.mixedSeconds / sqlite.mixedSeconds, 2))x\n"
            }
        }
        out += "\nupdate pass (\(report.keys) keys, an IN fetch per batch): \(report.updatePassSeconds.map { fixed($0, 2) } ?? "-") s; "
        out += "SQLite UPDATE … WHERE sku = ? per key: \(report.sqliteUpdatePassSeconds.map { fixed($0, 2) } ?? "-") s\n"
        out += "IN fetch of \(report.keys) keys: \(report.inFetchMs.map { fixed($0, 1) } ?? "-") ms; \(report.keys) single lookups: "
        out += "\(report.singleLookupsMs.map { fixed($0, 1) } ?? "-") ms (a tenth: \(report.singleLookupsMs.map { fixed($0 / 10, 1) } ?? "-") ms); "
        out += "SQLite IN \(report.sqliteInFetchMs.map { fixed($0, 1) } ?? "-") ms, single lookups \(report.sqliteSingleLookupsMs.map { fixed($0, 1) } ?? "-") ms\n"
        if let count = report.idMapCount {
            out += "sku → ID map of \(count) products: dictionary fetch [sku, objectID] \(report.idMapRowsMs.map { fixed($0, 1) } ?? "-") ms; "
            out += "fetch of the objects \(report.idMapObjectsMs.map { fixed($0, 1) } ?? "-") ms; "
            out += "SQLite SELECT id, sku \(report.sqliteIDMapMs.map { fixed($0, 1) } ?? "-") ms\n"
        }
        out += "peak RSS \(fixed(report.peakResidentMiB, 0)) MiB\n"
        return out
    }
}
