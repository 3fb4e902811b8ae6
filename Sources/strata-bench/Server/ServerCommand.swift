import ArgumentParser
import CSQLite
import CStrataSystem
import Foundation
import Strata

/// `strata-bench server`: what a server built on Strata holds and writes
/// over a long run, in-process. A store of catalogue products
/// (``CatalogueData``) behind the ready-made container with a private view
/// context (as the README advises for servers); several tasks at once make
/// a fresh background context per request — a GET by SKU, or a PUT that
/// changes a product and saves it to disk before answering — and the
/// process's resident memory is read after the first 100,000 requests and
/// at the end. Then durable one-object writes from many tasks at once,
/// beside SQLite's one transaction per write with the same durability.
struct ServerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "server",
        abstract: "A request loop (a context per request, GET/PUT mix) for memory over a long run; durable one-object writes from many tasks, beside SQLite."
    )

    @Option(help: "Products in the store.") var products = 100_000
    @Option(help: "Requests in the loop.") var requests = 1_000_000
    @Option(help: "Tasks running requests at once.") var tasks = 4
    @Option(help: "Percent of requests that are PUTs (a durable save each).") var putPercent = 5
    @Option(help: "Durable one-object writes in the write test.") var writes = 20_000
    @Option(help: "Tasks writing at once in the write test.") var writers = 32
    @Option(help: "Keep the stores in this directory (default: a temporary one, removed after).") var store: String?
    @Flag(name: .customLong("no-sqlite"), help: "Skip the SQLite baseline.") var noSQLite = false

    func run() throws {
        let work = try WorkDirectory(store, scenario: "server")
        defer { work.cleanUp() }
        let data = CatalogueData()
        let model = try makeCatalogueModel()
        let path = work.path + "/store"
        progress("server: \(products) products ...")
        do {
            let container = try PersistentContainer(name: "Server", model: model, directory: path, viewContext: .privateQueue)
            let importer = CatalogueImporter(style: .dictionary, container: container)
            try importer.run((0..<products).map { data.record($0) }, batchSize: 10_000)
            try container.close()
        }
        let skus = (0..<products).map { data.record($0).sku }
        let cache = try Self.rowCacheProbe(model: model, path: path)
        let container = try PersistentContainer(name: "Server", model: model, directory: path, viewContext: .privateQueue)
        let loop = try Self.requestLoop(container, skus: skus, requests: requests, tasks: max(1, tasks), putPercent: putPercent)
        progress("server: durable writes from \(writers) tasks ...")
        let before = container.coordinator.storeStatistics
        let strataWrites = try Self.durableWrites(container, count: writes, writers: max(1, writers))
        let after = container.coordinator.storeStatistics
        let syncs = (after?.logSyncs ?? 0) - (before?.logSyncs ?? 0)
        let batches = (after?.batchesWritten ?? 0) - (before?.batchesWritten ?? 0)
        progress("server: durable writes from \(writers) awaiting tasks ...")
        let awaitedWrites = try Self.awaitedWrites(container, count: writes, writers: max(1, writers))
        try container.close()
        var sqliteWrites: Double?
        if !noSQLite {
            sqliteWrites = try Self.sqliteDurableWrites(path: work.path + "/writes.sqlite", count: writes, writers: max(1, writers))
        }
        var out = "strata-bench server — \(products) products, \(requests) requests from \(tasks) tasks "
        out += "(\(100 - putPercent)% GET by SKU, \(putPercent)% PUT saved to disk), a fresh background context per request; "
        out += ISO8601DateFormatter().string(from: Date()) + "\n\n"
        var table = Table(["", "figure"])
        table.add("requests/s", thousands(loop.requestsPerSecond))
        table.add("PUTs retried after a merge conflict", thousands(Double(loop.retried)))
        table.add("RSS after the first 100,000 requests", fixed(loop.residentAfterFirst, 1) + " MiB")
        table.add("RSS after all \(requests)", fixed(loop.residentAtEnd, 1) + " MiB")
        table.add("growth after the first 100,000", fixed((loop.residentAtEnd / loop.residentAfterFirst - 1) * 100, 1) + "%")
        let memtableGrowth = loop.memtableAtEnd - loop.memtableAfterFirst
        table.add("  of it the store's memtable (the PUTs since, not yet in a segment)", fixed(memtableGrowth, 1) + " MiB")
        // The memtable is the store's write buffer, bounded by its log size
        // limit (64 MiB by default) and emptied by each flush: the rest is
        // what requests leave behind.
        table.add("growth after the first 100,000, the memtable aside",
                  fixed(((loop.residentAtEnd - memtableGrowth) / loop.residentAfterFirst - 1) * 100, 1) + "%")
        // The caches fill toward their budgets as the requests read more
        // of the products: bounded too, and not left behind by requests.
        let cachesGrowth = loop.cachesAtEnd - loop.cachesAfterFirst
        table.add("  of it the row and block caches filling toward their budgets", fixed(cachesGrowth, 1) + " MiB")
        table.add("growth after the first 100,000, the memtable and caches aside",
                  fixed(((loop.residentAtEnd - memtableGrowth - cachesGrowth) / loop.residentAfterFirst - 1) * 100, 1) + "%")
        // The in-memory index holds a key per live record: each PUT's save
        // adds its history transaction's, kept up to the history's limits
        // (100,000 transactions or a week by default), then pruned.
        let indexGrowth = loop.indexAtEnd.mebibytes - loop.indexAfterFirst.mebibytes
        table.add("  of it the store's index (keys \(thousands(Double(loop.indexAfterFirst.keys))) → \(thousands(Double(loop.indexAtEnd.keys))): history kept)",
                  fixed(indexGrowth, 1) + " MiB")
        table.add("growth after the first 100,000, the memtable, caches and index aside",
                  fixed(((loop.residentAtEnd - memtableGrowth - cachesGrowth - indexGrowth) / loop.residentAfterFirst - 1) * 100, 1) + "%")
        table.add("row cache after a fetch of every product: entries", thousands(Double(cache.entries)))
        table.add("row cache: bytes it counts", fixed(Double(cache.counted) / 1_048_576, 1) + " MiB")
        table.add("row cache: heap it holds (mallinfo2)", cache.heap < 0 ? "-" : fixed(Double(cache.heap) / 1_048_576, 1) + " MiB")
        table.add("durable one-object writes/s, \(writers) tasks (Strata)", thousands(strataWrites))
        table.add("log batches, syncs per write (Strata)",
                  fixed(Double(batches) / Double(max(1, writes)), 2) + ", " + fixed(Double(syncs) / Double(max(1, writes)), 2))
        table.add("durable one-object writes/s, \(writers) tasks awaiting container.write (Strata)", thousands(awaitedWrites))
        if let sqliteWrites {
            table.add("durable one-object writes/s, \(writers) tasks (SQLite)", thousands(sqliteWrites))
            table.add("Strata / SQLite", fixed(strataWrites / sqliteWrites, 2) + "x")
        }
        out += table.render()
        print(out)
    }

    /// What the row cache holds after a fetch of every product as faults:
    /// its entries, the bytes its budget counts, and the heap they really
    /// take (the block cache warmed by a scan first, so the difference is
    /// the row cache's).
    static func rowCacheProbe(model: ManagedObjectModel, path: String) throws -> (entries: Int, counted: Int, heap: Int) {
        let container = try PersistentContainer(name: "Server", model: model, directory: path, viewContext: .privateQueue,
                                                rowCacheBudget: 1 << 30)
        let context = container.newBackgroundContext(childOfWriter: true)
        try context.performAndWait { () throws(StrataError) in
            _ = try context.count(for: FetchRequest<CatalogueProduct>(predicate: #Predicate { $0.stock >= 0 }))
        }
        let before = strata_heap_bytes_in_use()
        let fetched = try context.performAndWait { () throws(StrataError) in try context.fetch(FetchRequest<CatalogueProduct>()).count }
        let after = strata_heap_bytes_in_use()
        let statistics = container.coordinator.rowCacheStatistics
        try container.close()
        guard statistics.entries == fetched else { throw CatalogueFailure("row cache: \(statistics.entries) entries for \(fetched) fetched") }
        return (statistics.entries, statistics.bytes, before < 0 ? -1 : Int(after - before))
    }

    struct LoopFigures {
        var requestsPerSecond: Double
        var residentAfterFirst: Double
        var residentAtEnd: Double
        /// The store's memtables (the PUTs not yet written out to a
        /// segment, bounded by the log's size limit), in MiB.
        var memtableAfterFirst: Double
        var memtableAtEnd: Double
        /// The row cache's and the block cache's bytes (each bounded by its
        /// budget, filling toward it as requests read more products), in MiB.
        var cachesAfterFirst: Double
        var cachesAtEnd: Double
        /// The store's in-memory index: its live keys and its heap bytes, in MiB.
        var indexAfterFirst: (keys: Int, mebibytes: Double)
        var indexAtEnd: (keys: Int, mebibytes: Double)
        /// PUTs retried after a merge conflict (another request changed the product first).
        var retried: Int
    }

    /// `requests` requests from `tasks` threads, each in a fresh background
    /// context (a child of the writer): a GET fetches a product by SKU and
    /// reads it; a PUT changes its stock in a block save
    /// (`container.saveAndWait { … }`: on disk before the request ends).
    static func requestLoop(_ container: PersistentContainer, skus: [String], requests: Int, tasks: Int, putPercent: Int) throws -> LoopFigures {
        let firstMark = min(100_000, requests)
        let residentAfterFirst = LockedBox(0.0)
        let memtableAfterFirst = LockedBox(0.0)
        let cachesAfterFirst = LockedBox(0.0)
        let indexAfterFirst = LockedBox((keys: 0, mebibytes: 0.0))
        let retried = LockedBox(0)
        @Sendable func memtable() -> Double { Double(container.coordinator.storeStatistics?.memtableBytes ?? 0) / 1_048_576 }
        @Sendable func index() -> (keys: Int, mebibytes: Double) {
            let statistics = container.coordinator.storeStatistics
            return (statistics?.keys ?? 0, Double(statistics?.indexBytes ?? 0) / 1_048_576)
        }
        @Sendable func caches() -> Double {
            Double(container.coordinator.rowCacheStatistics.bytes + (container.coordinator.storeStatistics?.cacheBytes ?? 0)) / 1_048_576
        }
        let elapsed = try onThreads(tasks, items: requests) { task in
            var random = SplitMix64(seed: UInt64(task) + 99)
            return { n in
                if n == firstMark {
                    residentAfterFirst.set(ProcessFigures.memory().resident)
                    memtableAfterFirst.set(memtable())
                    cachesAfterFirst.set(caches())
                    indexAfterFirst.set(index())
                }
                let sku = skus[Int(random.next() % UInt64(skus.count))]
                let isPut = Int(random.next() % 100) < putPercent
                if isPut {
                    // A write: saved through to disk before the request ends;
                    // when another request changed the product since this one
                    // read it, read it again and retry, as a server would.
                    for attempt in 1... {
                        do {
                            try container.saveAndWait { context in
                                guard let product = try CatalogueProduct.first(in: context, where: #Predicate { $0.sku == sku }) else {
                                    throw CatalogueFailure("\(sku) not found")
                                }
                                product.stock += 1
                            }
                            return
                        } catch let error as StrataError where error.code == .mergeConflict && attempt < 10 {
                            retried.update { $0 += 1 }
                        }
                    }
                }
                let context = container.newBackgroundContext(childOfWriter: true)
                try context.performAndWait { () throws in
                    guard let product = try CatalogueProduct.first(in: context, where: #Predicate { $0.sku == sku }) else {
                        throw CatalogueFailure("\(sku) not found")
                    }
                    _ = product.title
                }
            }
        }
        return LoopFigures(requestsPerSecond: Double(requests) / elapsed, residentAfterFirst: residentAfterFirst.get(),
                           residentAtEnd: ProcessFigures.memory().resident, memtableAfterFirst: memtableAfterFirst.get(), memtableAtEnd: memtable(),
                           cachesAfterFirst: cachesAfterFirst.get(), cachesAtEnd: caches(),
                           indexAfterFirst: indexAfterFirst.get(), indexAtEnd: index(), retried: retried.get())
    }

    /// Writes per second: `writers` threads each insert one product per
    /// request in a block save (`container.saveAndWait { … }`: a fresh
    /// child of the writer, on disk before the request ends), `count`
    /// writes in all.
    static func durableWrites(_ container: PersistentContainer, count: Int, writers: Int) throws -> Double {
        let elapsed = try onThreads(writers, items: count) { _ in
            { n in
                try container.saveAndWait { context in insertWrittenProduct(sku: "written \(n)", in: context) }
            }
        }
        return Double(count) / elapsed
    }

    /// Writes per second: `writers` tasks each insert one product per
    /// request with `try await container.write { … }` (suspended while the
    /// save is made durable: no thread waits), `count` writes in all.
    static func awaitedWrites(_ container: PersistentContainer, count: Int, writers: Int) throws -> Double {
        let next = LockedBox(0)
        let outcome = LockedBox<Result<Double, any Error>?>(nil)
        let finished = DispatchSemaphore(value: 0)
        Task.detached {
            let started = DispatchTime.now().uptimeNanoseconds
            do {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<writers {
                        group.addTask {
                            while true {
                                let n = next.update { $0 += 1; return $0 }
                                if n > count { return }
                                try await container.write { context in insertWrittenProduct(sku: "awaited \(n)", in: context) }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                outcome.set(.success(Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9))
            } catch {
                outcome.set(.failure(error))
            }
            finished.signal()
        }
        finished.wait()
        return Double(count) / (try outcome.get()!.get())
    }

    /// The one product a write request inserts (as SQLite's insert below).
    private static func insertWrittenProduct(sku: String, in context: ManagedObjectContext) {
        let product = CatalogueProduct(context: context)
        product.sku = sku
        product.title = "a product written by a request"
        product.price = 9.99
        product.stock = 0
    }

    /// SQLite's rate for the same: a connection per thread, one
    /// transaction per insert (WAL, `synchronous=FULL`).
    static func sqliteDurableWrites(path: String, count: Int, writers: Int) throws -> Double {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        _ = try SQLiteCatalogue(path: path)  // the schema
        let elapsed = try onThreads(writers, items: count) { _ in
            let connection = try InsertConnection(path: path)
            return { n in try connection.insert(sku: "written \(n)") }
        }
        return Double(count) / elapsed
    }

    /// One SQLite connection of the write test, with its insert prepared.
    private final class InsertConnection {
        private var db: OpaquePointer?
        private var statement: OpaquePointer?

        init(path: String) throws {
            guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK else { throw CatalogueFailure("SQLite: open \(path)") }
            sqlite3_busy_timeout(db, 60_000)
            sqlite3_exec(db, "PRAGMA synchronous=FULL", nil, nil, nil)
            let sql = "INSERT INTO product (sku, title, price, stock) VALUES (?, 'a product written by a request', 9.99, 0)"
            guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else { throw failure() }
        }

        deinit {
            sqlite3_finalize(statement)
            sqlite3_close(db)
        }

        func insert(sku: String) throws {
            sqlite3_bind_text(statement, 1, sku, -1, unsafeBitCast(-1, to: sqlite3_destructor_type.self))
            let rc = sqlite3_step(statement)
            sqlite3_reset(statement)
            guard rc == SQLITE_DONE else { throw failure() }
        }

        private func failure() -> CatalogueFailure { CatalogueFailure("SQLite: " + String(cString: sqlite3_errmsg(db))) }
    }

    /// Runs items 1…`items` on `threads` threads of their own, each taking
    /// the next number: `worker(thread)` is made on each thread and called
    /// with each number it takes. The first error stops every thread and is
    /// thrown. Returns the seconds it took.
    static func onThreads(
        _ threads: Int, items: Int, _ worker: @escaping @Sendable (Int) throws -> (Int) throws -> Void
    ) throws -> Double {
        let next = LockedBox(0)
        let failure = LockedBox<(any Error)?>(nil)
        let group = DispatchGroup()
        let elapsed = seconds {
            for thread in 0..<threads {
                group.enter()
                Thread {
                    defer { group.leave() }
                    do {
                        let work = try worker(thread)
                        while true {
                            let n = next.update { $0 += 1; return $0 }
                            if n > items || failure.get() != nil { return }
                            try work(n)
                        }
                    } catch {
                        failure.set(error)
                    }
                }.start()
            }
            group.wait()
        }
        if let error = failure.get() { throw error }
        return elapsed
    }
}
