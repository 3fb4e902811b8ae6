import ArgumentParser
import Dispatch
import Foundation

/// `strata-bench stall` (the default): how long the main queue stalls while
/// recipe-like objects are imported and saved to disk, through each stack
/// layout, side by side with the same import into SQLite.
struct StallCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stall",
        abstract: "Main-queue stalls during an import, per stack layout, beside SQLite (the default)."
    )

    @Option(help: "Objects imported per layout (recipes plus their ingredients).") var objects = 200_000
    @Option(help: "Objects per save.") var saveEvery = 2_000
    @Option(help: "Ingredients per recipe.") var ingredients = 3
    @Option(help: "Keep the stores in this directory (default: a temporary one, removed after).") var store: String?
    @Option(help: "Write every figure to this JSON file.") var json: String?
    @Option(help: "Draw the main-queue stall over time, one line per layout, into this SVG file.") var plot: String?
    @Flag(name: .customLong("no-sqlite"), help: "Skip the SQLite baseline.") var noSQLite = false

    func run() throws {
        let work = try WorkDirectory(store, scenario: "stall")
        defer { work.cleanUp() }
        let root = work.path
        let (objects, saveEvery, ingredients, noSQLite) = (objects, saveEvery, ingredients, noSQLite)
        let report = try MainThreadDriver.run { () throws -> StallReport in
            var report = StallReport(date: ISO8601DateFormatter().string(from: Date()), objects: objects, saveEvery: saveEvery,
                                     ingredientsPerRecipe: ingredients, cores: ProcessInfo.processInfo.activeProcessorCount)
            for layout in ImportLayout.stallLayouts + [.privateContext] {
                progress("stall: importing \(objects) objects through \(layout.rawValue) ...")
                report.runs.append(try runImport(layout: layout, objects: objects, saveEvery: saveEvery,
                                                 ingredients: ingredients, directory: root + "/" + layout.rawValue))
            }
            if !noSQLite {
                progress("stall: the same import into SQLite ...")
                let (seconds, bytes) = try SQLiteImport.run(objects: objects, saveEvery: saveEvery, ingredients: ingredients, path: root + "/sqlite.db")
                report.sqlite = SQLiteRun(seconds: seconds, objectsPerSecond: Double(objects) / seconds, bytesOnDisk: bytes)
            }
            return report
        }.get()
        print(report.render())
        if let json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try encoder.encode(report).write(to: URL(fileURLWithPath: json))
        }
        if let plot {
            try StallPlot.svg(report).write(toFile: plot, atomically: true, encoding: .utf8)
        }
    }
}

struct SQLiteRun: Codable, Sendable {
    var seconds: Double
    var objectsPerSecond: Double
    var bytesOnDisk: UInt64
}

/// Everything one `stall` run measured (the `--json` document).
struct StallReport: Codable, Sendable {
    var date: String
    var objects: Int
    var saveEvery: Int
    var ingredientsPerRecipe: Int
    var cores: Int
    var runs: [ImportRun] = []
    var sqlite: SQLiteRun?

    func run(_ layout: ImportLayout) -> ImportRun? { runs.first { $0.layout == layout.rawValue } }

    func render() -> String {
        var table = Table("Layout", "import s", "objects/s", "p50 ms", "p99 ms", "p99.9 ms", "max ms", ">8.3ms", ">16.7ms", "MB written", "fsyncs")
        for layout in ImportLayout.stallLayouts {
            guard let r = run(layout) else { continue }
            table.add(layout.title, fixed(r.seconds, 2), thousands(r.objectsPerSecond), fixed(r.stall.p50, 2), fixed(r.stall.p99, 2),
                      fixed(r.stall.p999, 2), fixed(r.stall.max, 2), String(r.stall.ticksLaterThan8_3ms), String(r.stall.ticksLaterThan16_7ms),
                      fixed(Double(r.bytesWritten) / 1e6, 1), String(r.fsyncs))
        }
        var out = "Main-queue stalls while importing \(thousands(Double(objects))) objects (recipes with \(ingredientsPerRecipe) ingredients each), "
            + "saving every \(thousands(Double(saveEvery))); a 1 ms timer on the main thread; \(date), \(cores) cores\n\n" + table.render()
        var imports = Table("Import to disk, same objects, one durable save every \(thousands(Double(saveEvery)))", "seconds", "objects/s", "vs SQLite")
        let sqliteRate = sqlite?.objectsPerSecond
        for layout in [ImportLayout.privateContext, .writerChild, .seedStack] {
            guard let r = run(layout) else { continue }
            imports.add(layout == .privateContext ? layout.title : "Strata " + layout.title, fixed(r.seconds, 2), thousands(r.objectsPerSecond),
                        sqliteRate.map { fixed(r.objectsPerSecond / $0, 2) + "x" } ?? "-")
        }
        if let sqlite {
            imports.add("SQLite 3 (WAL, synchronous=FULL, prepared statements)", fixed(sqlite.seconds, 2), thousands(sqlite.objectsPerSecond), "1.00x")
        }
        out += "\n\n" + imports.render()
        return out
    }
}
