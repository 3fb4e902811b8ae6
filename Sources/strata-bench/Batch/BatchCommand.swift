import ArgumentParser
import Foundation
import Strata
import StrataStore

/// `strata-bench batch`: batch requests beside the object-graph path and
/// SQLite, on the catalogue's products (skewed SKUs, a uniqueness
/// constraint on them), each batch of 10,000 one durable write on every
/// side, medians of three rounds:
/// - insert of 1,000,000 products from values (`BatchInsertRequest`), by
///   name and filled through the class's properties (`init(count:fill:)`),
///   beside the same products inserted in a private context on the
///   coordinator and saved every batch, and SQLite's prepared `INSERT`;
/// - the same rows again, unchanged (an upsert that writes nothing), and
///   a later feed of them (70% with a new price and stock, 30% new; by
///   name and filled), each beside SQLite's `INSERT … ON CONFLICT DO UPDATE`;
/// - the insert and the later feed again where each product also has a
///   unique barcode (two uniqueness constraints: an upsert must read the
///   stored objects it meets to check the second), beside SQLite's table
///   with both columns `UNIQUE`;
/// - an update of one attribute of every product (`BatchUpdateRequest`)
///   beside SQLite's `UPDATE`;
/// - a delete of every invoice (a quarter of the objects) with its three
///   lines by the cascade rule (`BatchDeleteRequest`) beside SQLite's
///   `DELETE` with `ON DELETE CASCADE`.
struct BatchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "batch",
        abstract: "Batch insert, update and delete of 1,000,000 objects beside the object-graph path and SQLite."
    )

    @Option(help: "Objects inserted, updated and deleted.") var objects = 1_000_000
    @Option(help: "Objects per batch (each one durable write).") var batch = 10_000
    @Option(help: "Rounds (the figures are their medians).") var rounds = 3
    @Option(help: "Keep the stores in this directory (default: a temporary one, removed after).") var store: String?
    @Flag(help: "Run only the first BatchInsertRequest of each round, of rows and filled, and print their times (e.g. under a profiler).") var insertOnly = false

    func run() throws {
        let work = try WorkDirectory(store, scenario: "batch")
        defer { work.cleanUp() }
        let model = try makeCatalogueModel()
        progress("batch: making \(objects) records ...")
        let data = CatalogueData(categoryCount: 10)
        var random = SplitMix64(seed: 3)
        var order = Array(0..<objects)
        order.shuffle(using: &random)
        let records = order.map { data.record($0) }
        func rows(_ records: [CatalogueRecord]) -> [[String: PropertyValue]] {
            records.map { ["sku": .string($0.sku), "title": .string($0.title), "price": .double($0.price), "stock": .integer(Int64($0.stock))] }
        }
        // A later feed: 70% of the products with a new price and stock, 30% new ones, shuffled.
        var mixedNumbers = ImportCommand.sample(objects * 7 / 10, of: objects, seed: 5).map { ($0, 1) }
            + (objects..<(objects + objects * 3 / 10)).map { ($0, 0) }
        mixedNumbers.shuffle(using: &random)
        let mixed = mixedNumbers.map { data.record($0.0, revision: $0.1) }
        let mixedRows = rows(mixed)
        // With a barcode each: a GTIN-13 of the product's own, the same in every feed.
        func barcoded(_ records: [CatalogueRecord], _ numbers: [Int]) -> [BarcodedRecord] {
            zip(records, numbers).map { BarcodedRecord(record: $0, barcode: String(4_000_000_000_000 + $1)) }
        }
        let barcodedRecords = barcoded(records, order), barcodedMixed = barcoded(mixed, mixedNumbers.map(\.0))
        func barcodedRows(_ records: [BarcodedRecord]) -> [[String: PropertyValue]] {
            zip(rows(records.map(\.record)), records).map { row, record in row.merging(["barcode": .string(record.barcode)]) { $1 } }
        }
        let afterFeed = objects + objects * 3 / 10  // the products once the feed is in
        var times: [String: [Double]] = [:]
        /// Runs `body`, adding its time to those of `key`.
        func timed<T>(_ key: String, _ body: () throws -> T) rethrows -> T {
            let start = DispatchTime.now().uptimeNanoseconds
            let result = try body()
            times[key, default: []].append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
            return result
        }
        /// `records` as a request that fills each object through its properties.
        func filledRequest(_ records: [CatalogueRecord]) -> BatchInsertRequest<CatalogueProduct> {
            var request = BatchInsertRequest<CatalogueProduct>(count: records.count) { i, product in
                let record = records[i]
                product.sku = record.sku
                product.title = record.title
                product.price = record.price
                product.stock = record.stock
            }
            request.batchSize = batch
            return request
        }
        var reinsertLogged: UInt64 = 0
        var reinsertWritten = 0
        for round in 0..<rounds {
            // Strata: batch insert, the same rows again, a batch update.
            progress("batch: round \(round + 1) of \(rounds), batch requests ...")
            let path = work.path + "/batch-\(round)"
            let container = try PersistentContainer(name: "Catalogue", model: model, directory: path, viewContext: .privateQueue)
            var insert = BatchInsertRequest<CatalogueProduct>(objects: rows(records))
            insert.batchSize = batch
            let inserted = try timed("insert") { try container.coordinator.execute(insert) }
            guard inserted.insertedCount == objects else { throw CatalogueFailure("the batch insert inserted \(inserted.insertedCount) of \(objects)") }
            if insertOnly {
                try container.close()
                let fillPath = work.path + "/fill-only-\(round)"
                let filling = try PersistentContainer(name: "Catalogue", model: model, directory: fillPath, viewContext: .privateQueue)
                let filled = try timed("fill") { try filling.coordinator.execute(filledRequest(records)) }
                guard filled.insertedCount == objects else { throw CatalogueFailure("the filled batch insert inserted \(filled.insertedCount) of \(objects)") }
                try filling.close()
                for done in [path, fillPath] { try? FileManager.default.removeItem(atPath: done) }
                print("round \(round + 1): BatchInsertRequest of \(thousands(Double(objects))) in \(fixed(times["insert"]!.last!, 2)) s, filled in \(fixed(times["fill"]!.last!, 2)) s")
                continue
            }
            // The log's bytes are the re-insert's own writes; the process's
            // also count the background flush the first insert left behind.
            let logged = container.coordinator.storeStatistics?.logBytesWritten ?? 0
            let written = ProcessFigures.bytesWritten()
            let again = try timed("reinsert") { try container.coordinator.execute(insert) }
            reinsertLogged = (container.coordinator.storeStatistics?.logBytesWritten ?? 0) - logged
            reinsertWritten = ProcessFigures.bytesWritten() - written
            guard again.objectIDs.isEmpty else { throw CatalogueFailure("the unchanged rows changed \(again.objectIDs.count) objects") }
            var mixedInsert = BatchInsertRequest<CatalogueProduct>(objects: mixedRows)
            mixedInsert.batchSize = batch
            let merged = try timed("mixed") { try container.coordinator.execute(mixedInsert) }
            guard merged.insertedCount == objects * 3 / 10, merged.updatedCount == objects * 7 / 10 else {
                throw CatalogueFailure("the mixed feed inserted \(merged.insertedCount) and updated \(merged.updatedCount)")
            }
            var update = BatchUpdateRequest<CatalogueProduct>(set: ["stock": .integer(-1)])
            update.batchSize = batch
            let updated = try timed("update") { try container.coordinator.execute(update) }
            guard updated.updatedCount == afterFeed else { throw CatalogueFailure("the batch update changed \(updated.updatedCount) of \(afterFeed)") }
            try container.close()
            try? FileManager.default.removeItem(atPath: path)

            // Strata: the same insert, each object filled through its properties.
            let fillPath = work.path + "/fill-\(round)"
            let filling = try PersistentContainer(name: "Catalogue", model: model, directory: fillPath, viewContext: .privateQueue)
            let filled = try timed("fill") { try filling.coordinator.execute(filledRequest(records)) }
            guard filled.insertedCount == objects else { throw CatalogueFailure("the filled batch insert inserted \(filled.insertedCount) of \(objects)") }
            // The later feed too, filled: an upsert of existing and new products.
            let filledFeed = try timed("fill mixed") { try filling.coordinator.execute(filledRequest(mixed)) }
            guard filledFeed.insertedCount == objects * 3 / 10, filledFeed.updatedCount == objects * 7 / 10 else {
                throw CatalogueFailure("the filled feed inserted \(filledFeed.insertedCount) and updated \(filledFeed.updatedCount)")
            }
            try filling.close()
            try? FileManager.default.removeItem(atPath: fillPath)

            // Strata: the insert and the later feed under two uniqueness constraints.
            let barcodedPath = work.path + "/barcoded-\(round)"
            let barcodedContainer = try PersistentContainer(name: "Barcoded", model: try makeBarcodedModel(), directory: barcodedPath, viewContext: .privateQueue)
            var barcodedInsert = BatchInsertRequest<BarcodedProduct>(objects: barcodedRows(barcodedRecords))
            barcodedInsert.batchSize = batch
            let barcodedInserted = try timed("two constraints") { try barcodedContainer.coordinator.execute(barcodedInsert) }
            guard barcodedInserted.insertedCount == objects else {
                throw CatalogueFailure("the batch insert under two constraints inserted \(barcodedInserted.insertedCount) of \(objects)")
            }
            var barcodedFeed = BatchInsertRequest<BarcodedProduct>(objects: barcodedRows(barcodedMixed))
            barcodedFeed.batchSize = batch
            let barcodedMerged = try timed("two constraints mixed") { try barcodedContainer.coordinator.execute(barcodedFeed) }
            guard barcodedMerged.insertedCount == objects * 3 / 10, barcodedMerged.updatedCount == objects * 7 / 10 else {
                throw CatalogueFailure("the feed under two constraints inserted \(barcodedMerged.insertedCount) and updated \(barcodedMerged.updatedCount)")
            }
            try barcodedContainer.close()
            try? FileManager.default.removeItem(atPath: barcodedPath)

            // Strata: the object-graph path.
            progress("batch: round \(round + 1) of \(rounds), the object graph ...")
            let graphPath = work.path + "/graph-\(round)"
            let graph = try PersistentContainer(name: "Catalogue", model: model, directory: graphPath, viewContext: .privateQueue)
            let context = ManagedObjectContext(.privateQueue, coordinator: graph.coordinator, name: "import")
            times["graph", default: []].append(try seconds {
                try context.performAndWait { () throws in
                    for start in stride(from: 0, to: records.count, by: batch) {
                        for record in records[start..<min(start + batch, records.count)] {
                            let product = CatalogueProduct(context: context)
                            product.sku = record.sku
                            product.title = record.title
                            product.price = record.price
                            product.stock = record.stock
                        }
                        try context.save()
                        context.reset()
                    }
                }
            })
            try graph.close()
            try? FileManager.default.removeItem(atPath: graphPath)

            // SQLite.
            progress("batch: round \(round + 1) of \(rounds), SQLite ...")
            let sqlitePath = work.path + "/sqlite-\(round).db"
            let sqlite = try SQLiteBatch(path: sqlitePath)
            times["sqlite insert", default: []].append(try seconds { try sqlite.insert(records, batch: batch, upsert: false) })
            times["sqlite reinsert", default: []].append(try seconds { try sqlite.insert(records, batch: batch, upsert: true) })
            times["sqlite mixed", default: []].append(try seconds { try sqlite.insert(mixed, batch: batch, upsert: true) })
            times["sqlite update", default: []].append(try seconds { _ = try sqlite.run("UPDATE product SET stock = -1") })
            guard try sqlite.count("product") == afterFeed else { throw CatalogueFailure("SQLite holds another number of products") }
            times["sqlite two constraints", default: []].append(try seconds { try sqlite.insert(barcodedRecords, batch: batch, upsert: false) })
            times["sqlite two constraints mixed", default: []].append(try seconds { try sqlite.insert(barcodedMixed, batch: batch, upsert: true) })
            guard try sqlite.count("barcoded") == afterFeed else { throw CatalogueFailure("SQLite holds another number of barcoded products") }

            // Delete with a cascade: invoices of three lines each.
            progress("batch: round \(round + 1) of \(rounds), deletes ...")
            let invoices = objects / 4
            let deletePath = work.path + "/delete-\(round)"
            let invoiceContainer = try PersistentContainer(name: "Invoices", model: try makeInvoiceModel(), directory: deletePath, viewContext: .privateQueue)
            try Self.fillInvoices(invoices, linesEach: 3, batch: batch / 4, coordinator: invoiceContainer.coordinator)
            var delete = BatchDeleteRequest<BenchInvoice>()
            delete.batchSize = batch / 4
            let deleted = try timed("delete") { try invoiceContainer.coordinator.execute(delete) }
            guard deleted.deletedCount == invoices * 4 else { throw CatalogueFailure("the batch delete deleted \(deleted.deletedCount) of \(invoices * 4)") }
            try invoiceContainer.close()
            try? FileManager.default.removeItem(atPath: deletePath)
            try sqlite.insertInvoices(invoices, linesEach: 3, batch: batch / 4)
            times["sqlite delete", default: []].append(try seconds { _ = try sqlite.run("DELETE FROM invoice") })
            guard try sqlite.count("line") == 0 else { throw CatalogueFailure("SQLite's cascade left lines") }
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: sqlitePath + suffix) }
        }
        if insertOnly { return }

        func median(_ key: String) -> Double { times[key]!.sorted()[times[key]!.count / 2] }
        var out = "strata-bench batch — \(thousands(Double(objects))) catalogue products (skewed SKUs, unique), batches of \(thousands(Double(batch))), each one durable write; "
        out += "medians of \(rounds); \(ProcessInfo.processInfo.activeProcessorCount) cores; " + ISO8601DateFormatter().string(from: Date()) + "\n\n"
        var table = Table(["\(thousands(Double(objects))) objects", "seconds", "objects/s", "vs SQLite"])
        func add(_ label: String, _ key: String, _ sqliteKey: String, count: Int) {
            table.add(label, fixed(median(key), 2), thousands(Double(count) / median(key)), fixed(median(sqliteKey) / median(key), 2) + "×")
        }
        add("Strata: BatchInsertRequest", "insert", "sqlite insert", count: objects)
        add("Strata: BatchInsertRequest(count:fill:), each object filled through its properties", "fill", "sqlite insert", count: objects)
        add("Strata: object graph, a private context on the coordinator, save per batch", "graph", "sqlite insert", count: objects)
        add("SQLite: prepared INSERT, a transaction per batch", "sqlite insert", "sqlite insert", count: objects)
        add("Strata: BatchInsertRequest of the same rows again (upsert, unchanged)", "reinsert", "sqlite reinsert", count: objects)
        add("SQLite: INSERT … ON CONFLICT(sku) DO UPDATE of the same rows", "sqlite reinsert", "sqlite reinsert", count: objects)
        add("Strata: BatchInsertRequest of a later feed (70% changed, 30% new)", "mixed", "sqlite mixed", count: objects)
        add("Strata: BatchInsertRequest(count:fill:) of that feed", "fill mixed", "sqlite mixed", count: objects)
        add("SQLite: INSERT … ON CONFLICT(sku) DO UPDATE of that feed", "sqlite mixed", "sqlite mixed", count: objects)
        add("Strata: BatchInsertRequest, a unique barcode besides the SKU (two constraints)", "two constraints", "sqlite two constraints", count: objects)
        add("SQLite: prepared INSERT, sku and barcode UNIQUE", "sqlite two constraints", "sqlite two constraints", count: objects)
        add("Strata: BatchInsertRequest of the later feed, two constraints", "two constraints mixed", "sqlite two constraints mixed", count: objects)
        add("SQLite: INSERT … ON CONFLICT(sku) DO UPDATE of that feed, barcode UNIQUE", "sqlite two constraints mixed", "sqlite two constraints mixed", count: objects)
        add("Strata: BatchUpdateRequest of one attribute of every product", "update", "sqlite update", count: afterFeed)
        add("SQLite: UPDATE product SET stock = -1", "sqlite update", "sqlite update", count: afterFeed)
        add("Strata: BatchDeleteRequest of every invoice, its 3 lines by cascade", "delete", "sqlite delete", count: objects)
        add("SQLite: DELETE FROM invoice, lines ON DELETE CASCADE", "sqlite delete", "sqlite delete", count: objects)
        out += table.render()
        out += "\nbatch insert: \(fixed(median("sqlite insert") / median("insert"), 2))× SQLite's rate, \(fixed(median("graph") / median("insert"), 2))× the object graph's\n"
        out += "batch insert, filled: \(fixed(median("sqlite insert") / median("fill"), 2))× SQLite's rate, \(fixed(median("graph") / median("fill"), 2))× the object graph's\n"
        // Each round's own pair: on a shared machine the rounds can differ
        // by more than the two paths do, and the medians hide it.
        func eachRound(_ key: String) -> String {
            zip(times[key]!, times["graph"]!).map { "\(fixed($1 / $0, 2))× (\(fixed($0, 2)) s / \(fixed($1, 2)) s)" }.joined(separator: ", ")
        }
        out += "the rounds, over the object graph's: batch insert \(eachRound("insert")); filled \(eachRound("fill"))\n"
        out += "the unchanged re-insert logged \(thousands(Double(reinsertLogged))) bytes (the process wrote \(thousands(Double(reinsertWritten))) meanwhile, background flushes included)\n"
        out += "(\"vs SQLite\": SQLite's time over this row's, the same work; SQLite's UPDATE and DELETE are one statement in one transaction)\n"
        print(out)
    }

    /// `invoices` invoices of `linesEach` lines through a private context
    /// on the coordinator, saved every `batch` invoices.
    static func fillInvoices(_ invoices: Int, linesEach: Int, batch: Int, coordinator: PersistentStoreCoordinator) throws {
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator, name: "invoices")
        try context.performAndWait { () throws in
            for start in stride(from: 0, to: invoices, by: batch) {
                for n in start..<min(start + batch, invoices) {
                    let invoice = BenchInvoice(context: context)
                    invoice.number = n
                    invoice.total = Double(n % 1_000)
                    for l in 0..<linesEach {
                        let line = BenchInvoiceLine(context: context)
                        line.amount = Double(l)
                        line.invoice = invoice
                    }
                }
                try context.save()
                context.reset()
            }
        }
    }
}

/// A product with a unique barcode besides its unique SKU, for `batch`'s
/// rows under two uniqueness constraints.
final class BarcodedProduct: ManagedObject {
    @Attribute("sku") var sku: String
    @Attribute("barcode") var barcode: String
    @Attribute("title") var title: String
    @Attribute("price") var price: Double
    @Attribute("stock") var stock: Int
}

/// A catalogue record with its product's barcode.
struct BarcodedRecord {
    var record: CatalogueRecord
    var barcode: String
}

func makeBarcodedModel() throws -> ManagedObjectModel {
    try ManagedObjectModel(entities: [
        EntityDescription(name: "BarcodedProduct", managedObjectClass: BarcodedProduct.self, properties: [
            .attribute("sku", .string),
            .attribute("barcode", .string),
            .attribute("title", .string),
            .attribute("price", .double),
            .attribute("stock", .integer64),
        ], uniquenessConstraints: [["sku"], ["barcode"]]),
    ])
}

/// An invoice of `batch`'s delete: its lines go with it (cascade).
final class BenchInvoice: ManagedObject {
    @Attribute("number") var number: Int
    @Attribute("total") var total: Double
    @Relationship("lines") var lines: Set<BenchInvoiceLine>
}

/// A line of a ``BenchInvoice``.
final class BenchInvoiceLine: ManagedObject {
    @Attribute("amount") var amount: Double
    @Relationship("invoice") var invoice: BenchInvoice?
}

func makeInvoiceModel() throws -> ManagedObjectModel {
    try ManagedObjectModel(entities: [
        EntityDescription(name: "Invoice", managedObjectClass: BenchInvoice.self, properties: [
            .attribute("number", .integer64),
            .attribute("total", .double),
            .toMany("lines", "Line", inverse: "invoice", deleteRule: .cascade),
        ]),
        EntityDescription(name: "Line", managedObjectClass: BenchInvoiceLine.self, properties: [
            .attribute("amount", .double),
            .toOne("invoice", "Invoice", inverse: "lines"),
        ]),
    ])
}
