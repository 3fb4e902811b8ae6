import ArgumentParser
import Foundation
import Strata

/// `strata-bench pages`: the pages a list screen or an HTTP listing asks
/// for — the top 20 by a counter, 20 names from a prefix on, 20 after the
/// last one shown — over real strings (``SourceLineCorpus``), each
/// answered from a fresh background context, beside SQLite with the same
/// indexes. Every page is checked against SQLite's. Each is asked for
/// again at every run (its rows cached after the first), but one: a page
/// after another text at each run, which no run has viewed before — in a
/// process that has just opened the store, also the first reads of the
/// index's parts it reaches.
struct PagesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pages",
        abstract: "Pages of 20 in index order (top by a counter, from a prefix, after a key) over real strings, beside SQLite."
    )

    @Option(help: "Lines of source stored.") var objects = 1_000_000
    @Option(help: "Runs of each page; the table shows medians.") var repeats = 101
    @Option(help: "Where the package mirrors are (owner/name.git); default $STRATA_MIRRORS or /opt/swift-packages.") var mirrors: String?
    @Option(help: "Keep the stores in this directory (default: a temporary one, removed after).") var store: String?
    @Option(help: "Write every figure to this JSON file.") var json: String?
    @Option(help: "Ask only for the pages whose name contains this text (e.g. \"not viewed\"), e.g. under a profiler.") var only: String?

    static let pageSize = 20

    /// One page asked for, both ways.
    struct Page {
        let name: String
        let request: FetchRequest<SourceLine>
        let sql: String
        let arguments: [String]
        /// For a page asked for after another text at each run (a list
        /// paged through, each page a first view: rows no cache holds
        /// yet): the text of run `i`. Nil: the same page every run.
        var after: ((Int) -> String)? = nil
    }

    struct PageFigures: Codable, Sendable {
        var page: String
        var strataMs: Double
        var sqliteMs: Double
        var plan: String
        var sqlitePlan: String
        var rows: Int
    }

    struct Report: Codable, Sendable {
        var date: String
        var objects: Int
        var cores: Int
        var repeats: Int
        var importSeconds: Double
        var sqliteImportSeconds: Double
        var pages: [PageFigures] = []
    }

    /// The page of `pageSize` after `text`, in text order.
    static func next(after text: String) -> FetchRequest<SourceLine> {
        var request = FetchRequest<SourceLine>(predicate: #Predicate { $0.text > text }, sortBy: [SortDescriptor(\.text)])
        request.fetchLimit = pageSize
        return request
    }

    /// `sortedTexts`: the stored lines' texts, in order.
    static func pages(sortedTexts: [String]) -> [Page] {
        let limit = pageSize
        // A text from the middle of the order: the next and previous pages around it.
        let after = sortedTexts[sortedTexts.count / 2]
        func request(_ predicate: Predicate<SourceLine>?, _ order: SortDescriptor<SourceLine>) -> FetchRequest<SourceLine> {
            var request = FetchRequest<SourceLine>(predicate: predicate, sortBy: [order])
            request.fetchLimit = limit
            return request
        }
        let columns = "SELECT text, uses, repository FROM line"
        var pages = [Page(name: "top \(limit) by uses (descending)", request: request(nil, SortDescriptor(\.uses, order: .reverse)),
                          sql: "\(columns) ORDER BY uses DESC LIMIT \(limit)", arguments: [])]
        for prefix in ["", "n", "func ", "zz"] {
            let name = "\(limit) from prefix \"\(prefix)\" by text"
            let request = request(#Predicate { $0.text.starts(with: prefix) }, SortDescriptor(\.text))
            if prefix.isEmpty {
                pages.append(Page(name: name, request: request, sql: "\(columns) ORDER BY text LIMIT \(limit)", arguments: []))
            } else {
                // The prefix as a range: [prefix, prefix with its last byte raised).
                var upper = Array(prefix.utf8)
                upper[upper.count - 1] += 1
                pages.append(Page(name: name, request: request, sql: "\(columns) WHERE text >= ? AND text < ? ORDER BY text LIMIT \(limit)",
                                  arguments: [prefix, String(decoding: upper, as: UTF8.self)]))
            }
        }
        pages.append(Page(name: "\(limit) after a text (next page)", request: request(#Predicate { $0.text > after }, SortDescriptor(\.text)),
                          sql: "\(columns) WHERE text > ? ORDER BY text LIMIT \(limit)", arguments: [after]))
        // Texts far apart from one run to the next (a stride prime to any
        // corpus size here), so no page shares rows with the one before.
        pages.append(Page(name: "\(limit) after another text each run (not viewed before)", request: next(after: after),
                          sql: "\(columns) WHERE text > ? ORDER BY text LIMIT \(limit)", arguments: [after],
                          after: { run in sortedTexts[(run &* 7_919 &+ 104_729) % sortedTexts.count] }))
        pages.append(Page(name: "\(limit) before a text (previous page)",
                          request: request(#Predicate { $0.text < after }, SortDescriptor(\.text, order: .reverse)),
                          sql: "\(columns) WHERE text < ? ORDER BY text DESC LIMIT \(limit)", arguments: [after]))
        return pages
    }

    func run() throws {
        let work = try WorkDirectory(store, scenario: "pages")
        defer { work.cleanUp() }
        let root = mirrors ?? ProcessInfo.processInfo.environment["STRATA_MIRRORS"] ?? "/opt/swift-packages"
        progress("pages: reading \(objects) lines of Swift from the mirrors under \(root) ...")
        let corpus = try SourceLineCorpus.load(count: objects, root: root)
        let model = try makeSourceLineModel()
        progress("pages: importing them ...")
        let path = work.path + "/store"
        let importSeconds = try seconds { try Self.importLines(corpus, model: model, path: path, saveEvery: 20_000) }
        progress("pages: the same lines into SQLite ...")
        var sqlite: SQLitePages!
        let sqliteImport = try seconds { sqlite = try SQLitePages.build(corpus, path: work.path + "/pages.sqlite", saveEvery: 20_000) }
        var report = Report(date: ISO8601DateFormatter().string(from: Date()), objects: objects, cores: ProcessInfo.processInfo.activeProcessorCount,
                            repeats: max(1, repeats), importSeconds: importSeconds, sqliteImportSeconds: sqliteImport)
        let container = try PersistentContainer(name: "Pages", model: model, directory: path)
        defer { try? container.close() }
        for page in Self.pages(sortedTexts: corpus.lines.map(\.text).sorted()) where only.map(page.name.contains) ?? true {
            progress("pages: \(page.name) ...")
            let query = try sqlite.query(page.sql)
            let expected = try query.run(page.arguments)
            var strataTimes: [Double] = []
            var sqliteTimes: [Double] = []
            let byText = page.request.sortDescriptors[0].keyPath == \SourceLine.text
            for run in 0..<report.repeats {
                let text = page.after?(run)
                let request = text.map(Self.next(after:)) ?? page.request
                let context = container.newBackgroundContext(childOfWriter: true)
                var found: [(text: String, uses: Int)] = []
                strataTimes.append(try seconds {
                    found = try context.performAndWait { try context.fetch(request).map { ($0.text, $0.uses) } }
                } * 1000)
                // Each side's first view of a page that changes every run.
                var answer = expected
                sqliteTimes.append(try seconds { answer = try query.run(text.map { [$0] } ?? page.arguments) } * 1000)
                // Lines tied on their count may come in another order: the counts may not.
                guard found.map(\.uses) == answer.map(\.uses), !byText || found.map(\.text) == answer.map(\.text) else {
                    throw ValidationError("\(page.name): Strata answered \(found.prefix(3)), SQLite \(answer.prefix(3))")
                }
            }
            let context = container.newBackgroundContext(childOfWriter: true)
            let plan = try context.performAndWait { try context.explain(page.request).description }
            report.pages.append(PageFigures(page: page.name, strataMs: median(strataTimes), sqliteMs: median(sqliteTimes),
                                            plan: plan, sqlitePlan: try sqlite.plan(page.sql), rows: expected.count))
        }
        print(Self.render(report))
        if let json { try writeJSON(report, to: json) }
    }

    /// `corpus` into a new store, through a context on the coordinator, one save per `saveEvery` lines.
    static func importLines(_ corpus: SourceLineCorpus, model: ManagedObjectModel, path: String, saveEvery: Int) throws {
        let coordinator = PersistentStoreCoordinator(model: model)
        try coordinator.addPersistentStore(.log, directory: path)
        defer { try? coordinator.close() }
        let context = ManagedObjectContext(.privateQueue, coordinator: coordinator)
        var offset = 0
        while offset < corpus.lines.count {
            let batch = corpus.lines[offset..<min(offset + saveEvery, corpus.lines.count)]
            try context.performAndWait { () throws in
                for line in batch {
                    let object = SourceLine(context: context)
                    object.text = line.text
                    object.uses = line.uses
                    object.repository = line.repository
                }
                try context.save()
                context.reset()
            }
            offset += batch.count
        }
    }

    static func render(_ report: Report) -> String {
        var table = Table("Pages of \(pageSize) among \(thousands(Double(report.objects))) lines of Swift, medians of \(report.repeats), a fresh background context each",
                          "Strata ms", "SQLite ms", "SQLite / Strata", "Strata's plan", "SQLite's plan")
        for page in report.pages {
            table.add(page.page, fixed(page.strataMs, 3), fixed(page.sqliteMs, 3), fixed(page.sqliteMs / page.strataMs, 2) + "x", page.plan, page.sqlitePlan)
        }
        return "\(report.date), \(report.cores) cores; imported in \(fixed(report.importSeconds, 1)) s (SQLite \(fixed(report.sqliteImportSeconds, 1)) s)\n\n"
            + table.render()
    }
}
