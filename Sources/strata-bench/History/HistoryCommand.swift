import ArgumentParser
import Foundation
import Strata
import StrataStore

/// `strata-bench history`: what persistent history costs and what reading
/// it costs. The catalogue import of `strata-bench import` (the
/// dictionary style: batches of 2,000 records through a background child of
/// the writer, each made durable), into stores with history on and off,
/// alternated, five rounds: the first import and the mixed re-import (30%
/// new records, 70% changed), their times (medians), history's cost (the
/// median of the rounds' ratios of two imports back to back: on this VM a
/// single pair lands several percent either way), and the bytes the
/// history holds per transaction and per object changed. Then a store of
/// 100,000 one-object saves (a counter per save, as a settings screen or a
/// server makes them), with history on and off, and the time to fetch the
/// transactions after a token: the newest 100, the newest half, and those
/// of one author among the newest half.
struct HistoryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "Persistent history's cost: an import with history on vs off, bytes per transaction, and fetching the transactions after a token among 100,000."
    )

    @Option(help: "Products in the first import.") var records = 70_000
    @Option(help: "Records per batch (each batch is saved to disk).") var batch = 2_000
    @Option(help: "One-object saves in the history that is read back.") var saves = 100_000
    @Option(help: "Rounds of the import, each with history on and off back to back.") var rounds = 5
    @Option(help: "Keep the stores in this directory (default: a temporary one, removed after).") var store: String?

    func validate() throws {
        guard rounds > 0 else { throw ValidationError("--rounds must be at least 1") }
    }

    func run() throws {
        let work = try WorkDirectory(store, scenario: "history")
        defer { work.cleanUp() }
        let model = try makeCatalogueModel()
        let data = CatalogueData(categoryCount: 2_000)
        let (first, mixed) = ImportCommand.feeds(data, records: records)

        // 1. The import, history on and off, alternated.
        var firstSeconds: [Bool: [Double]] = [true: [], false: []]
        var mixedSeconds: [Bool: [Double]] = [true: [], false: []]
        var summary = HistorySummary()
        var objectsChanged = 0
        for round in 0..<rounds {
            for on in round % 2 == 0 ? [true, false] : [false, true] {
                progress("history: import, history \(on ? "on" : "off"), round \(round + 1) ...")
                let path = work.path + "/import-\(round)-\(on)"
                let container = try PersistentContainer(name: "Catalogue", model: model, directory: path, viewContext: .privateQueue,
                                                        history: on ? .default : .off)
                let importer = CatalogueImporter(style: .dictionary, container: container)
                firstSeconds[on]!.append(try seconds { try importer.run(first, batchSize: batch) })
                mixedSeconds[on]!.append(try seconds { try importer.run(mixed, batchSize: batch) })
                if on && round == 0 {
                    summary = try container.coordinator.historySummary()
                    objectsChanged = try container.coordinator.fetchHistory().reduce(0) { $0 + $1.changes.count }
                }
                try container.close()
                try? FileManager.default.removeItem(atPath: path)
            }
        }

        // 2. One-object saves, history on and off; then reading it back.
        var savesPerSecond: [Bool: [Double]] = [true: [], false: []]
        var bytesPerSave: [Bool: Double] = [:]
        var reads: [(String, Int, Double)] = []
        for (round, on) in [false, true, true, false].enumerated() {
            progress("history: \(saves) one-object saves, history \(on ? "on" : "off"), run \(round + 1) of 4 ...")
            let path = work.path + "/saves-\(round)"
            var options = StoreOptions()
            options.syncMode = .none  // the per-save cost of history, not of fsync
            let container = try PersistentContainer(name: "Counters", model: model, directory: path, options: options, viewContext: .privateQueue,
                                                    history: on ? PersistentHistory(maximumAge: nil, maximumTransactions: nil) : .off)
            let writer = container.writerContext
            let written = ProcessFigures.bytesWritten()
            let elapsed = try writer.performAndWait { () throws -> Double in
                let product = CatalogueProduct(context: writer)
                product.sku = "counter"
                product.title = "A counter"
                product.price = 1
                product.stock = -1
                try writer.save()
                return try seconds {
                    for i in 0..<saves {
                        writer.transactionAuthor = i % 10 == 0 ? "sync" : "app"
                        product.stock = i
                        try writer.save()
                    }
                }
            }
            savesPerSecond[on]!.append(Double(saves) / elapsed)
            bytesPerSave[on] = Double(ProcessFigures.bytesWritten() - written) / Double(saves)
            if on && reads.isEmpty {
                let coordinator = container.coordinator
                let newest = try coordinator.currentHistoryToken()!
                func token(_ back: Int) -> HistoryToken {
                    HistoryToken(storeIdentifier: newest.storeIdentifier, transactionNumber: newest.transactionNumber - UInt64(back))
                }
                func measure(_ label: String, _ request: HistoryRequest) throws {
                    var found = 0
                    var times: [Double] = []
                    for _ in 0..<5 { times.append(try seconds { found = try coordinator.fetchHistory(request).count }) }
                    reads.append((label, found, times.sorted()[2]))
                }
                try measure("the newest 100", HistoryRequest(after: token(100)))
                try measure("the newest half", HistoryRequest(after: token(saves / 2)))
                var byAuthor = HistoryRequest(after: token(saves / 2))
                byAuthor.authors = ["sync"]
                try measure("the newest half, one author's (1 in 10)", byAuthor)
                if summary.transactions == 0 { summary = try coordinator.historySummary() }
            }
            try container.close()
            try? FileManager.default.removeItem(atPath: path)
        }

        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        var out = "strata-bench history — the catalogue import of `import` (\(records) products, then \(mixed.count) mixed; batches of \(batch), each durable), "
        out += "\(ProcessInfo.processInfo.activeProcessorCount) cores; " + ISO8601DateFormatter().string(from: Date()) + "\n\n"
        var table = Table(["import (dictionary style), \(rounds) rounds", "history off s", "history on s", "on / off"])
        var eachRound = ""
        for (label, runs) in [("first import", firstSeconds), ("mixed re-import", mixedSeconds)] {
            let ratios = zip(runs[true]!, runs[false]!).map { $0 / $1 }
            table.add(label, fixed(median(runs[false]!), 2), fixed(median(runs[true]!), 2), fixed(median(ratios), 3) + "×")
            eachRound += "\(label), on / off in each round: " + ratios.map { fixed($0, 3) + "×" }.joined(separator: ", ") + "\n"
        }
        out += table.render() + "\n" + eachRound
        out += "(times: medians of the rounds; on / off: the median of the rounds' ratios, each of two imports back to back)\n"
        let transactions = max(summary.transactions, 1)
        out += "\nhistory after both imports: \(summary.transactions) transactions, \(thousands(Double(summary.bytes))) bytes: "
        out += "\(thousands(Double(summary.bytes) / Double(transactions))) bytes per transaction, "
        out += "\(fixed(Double(summary.bytes) / Double(max(objectsChanged, 1)), 1)) per object changed\n\n"
        var perSave = Table(["\(saves) one-object saves (no fsync), two runs each: off, on, on, off", "saves/s", "bytes written per save"])
        let meanRate = savesPerSecond.mapValues { $0.reduce(0, +) / Double(max($0.count, 1)) }
        perSave.add("history off", thousands(meanRate[false] ?? 0), fixed(bytesPerSave[false] ?? 0, 0))
        perSave.add("history on", thousands(meanRate[true] ?? 0), fixed(bytesPerSave[true] ?? 0, 0))
        out += perSave.render() + "\n"
        if let on = meanRate[true], let off = meanRate[false] { out += "history on: \(fixed(on / off * 100, 1))% of the rate with it off\n" }
        out += "\n"
        var fetches = Table(["fetchHistory(after:) among \(saves) transactions, medians of 5", "transactions", "ms", "µs per transaction"])
        for (label, count, time) in reads {
            fetches.add(label, thousands(Double(count)), fixed(time * 1e3, 2), fixed(time * 1e6 / Double(max(count, 1)), 2))
        }
        out += fetches.render()
        print(out)
    }
}
