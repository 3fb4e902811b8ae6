import ArgumentParser
import Dispatch
import Foundation
import StrataStore

/// `strata-bench stall` (the default): how long the main queue stalls while
/// recipe-like objects are imported and saved to disk, through each stack
/// layout, side by side with the same import into SQLite.
///
/// The machines this runs on are shared and noisy, and a maximum is the
/// noisiest figure there is: so every layout runs `--repeats` times, the
/// rounds interleaved (a, b, c, private, SQLite, a, b, …), the table shows
/// the median of each figure over the rounds, and each round also measures
/// the probe alone — how late the main queue's timer runs on this machine
/// with nothing imported at all, the floor no layout can go below. The
/// private-context import, which never touches the main queue, gives the
/// floor under load: how late the timer runs while the import's threads
/// take the cores.
struct StallCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stall",
        abstract: "Main-queue stalls during an import, per stack layout, beside SQLite (the default)."
    )

    @Option(help: "Objects imported per layout (recipes plus their ingredients).") var objects = 200_000
    @Option(help: "Objects per save.") var saveEvery = 2_000
    @Option(help: "Ingredients per recipe.") var ingredients = 3
    @Option(help: "Rounds of every layout; the table shows medians over the rounds.") var repeats = 5
    @Option(help: "Keep the stores in this directory (default: a temporary one, removed after).") var store: String?
    @Option(help: "Write every figure to this JSON file.") var json: String?
    @Option(help: "Draw the main-queue stall over time, one line per layout, into this SVG file.") var plot: String?
    @Flag(name: .customLong("no-sqlite"), help: "Skip the SQLite baseline.") var noSQLite = false
    @Option(help: "Objects of the import the writer saves while the view context saves an edit every 4 ms (0: skip that scenario).")
    var viewSavesImport = 100_000
    @OptionGroup var backgroundScheduling: BackgroundSchedulingOption
    @Option(name: .customLong("layout"), help: "Run only these layouts (repeatable): naive, view-child, writer-child, private-context.")
    var layouts: [ImportLayout] = []

    func run() throws {
        let work = try WorkDirectory(store, scenario: "stall")
        defer { work.cleanUp() }
        let root = work.path
        let (objects, saveEvery, ingredients, noSQLite, rounds) = (objects, saveEvery, ingredients, noSQLite, max(1, repeats))
        let viewSaves = viewSavesImport > 0 ? ViewSavesDuringImport(importObjects: viewSavesImport, ingredients: ingredients) : nil
        let chosen = layouts.isEmpty ? ImportLayout.stallLayouts + [.privateContext] : layouts
        backgroundScheduling.apply()
        let report = try MainThreadDriver.run { () throws -> StallReport in
            var report = StallReport(date: ISO8601DateFormatter().string(from: Date()), objects: objects, saveEvery: saveEvery,
                                     ingredientsPerRecipe: ingredients, cores: ProcessInfo.processInfo.activeProcessorCount, repeats: rounds)
            for round in 0..<rounds {
                for layout in chosen {
                    progress("stall: round \(round + 1)/\(rounds): importing \(objects) objects through \(layout.rawValue) ...")
                    let directory = root + "/" + layout.rawValue
                    try? FileManager.default.removeItem(atPath: directory)
                    var run = try runImport(layout: layout, objects: objects, saveEvery: saveEvery, ingredients: ingredients, directory: directory)
                    run.round = round
                    report.runs.append(run)
                }
                if let viewSaves {
                    progress("stall: round \(round + 1)/\(rounds): a control task, then view-context edits in its place, while the writer saves an import of \(viewSaves.importObjects) objects ...")
                    var run = try viewSaves.run(directory: root + "/view-saves")
                    run.round = round
                    report.viewSaveRuns.append(run)
                }
                if !noSQLite {
                    progress("stall: round \(round + 1)/\(rounds): the same import into SQLite ...")
                    let path = root + "/sqlite.db"
                    for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
                    let (seconds, bytes) = try SQLiteImport.run(objects: objects, saveEvery: saveEvery, ingredients: ingredients, path: path)
                    report.sqliteRuns.append(SQLiteRun(round: round, seconds: seconds, objectsPerSecond: Double(objects) / seconds, bytesOnDisk: bytes))
                }
                // As long as the median import of this round, with nothing imported.
                let importSeconds = median(report.runs.filter { $0.round == round }.map(\.seconds))
                progress("stall: round \(round + 1)/\(rounds): the probe alone for \(fixed(importSeconds, 2)) s ...")
                report.floor.append(StallProbe.alone(for: importSeconds))
            }
            report.summarize(chosen)
            report.backgroundScheduling = BackgroundScheduling.state
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

extension ImportLayout: ExpressibleByArgument {}

struct SQLiteRun: Codable, Sendable {
    var round: Int
    var seconds: Double
    var objectsPerSecond: Double
    var bytesOnDisk: UInt64
}

/// Medians over rounds of a probe's figures (milliseconds).
struct StallMedians: Codable, Sendable {
    var p50: Double
    var p99: Double
    var p999: Double
    /// The median of the rounds' longest stalls.
    var max: Double
    /// The longest stall of any round.
    var worstMax: Double
    var ticksLaterThan8_3ms: Double
    var ticksLaterThan16_7ms: Double
    /// The longest tick of the round whose longest stall is the median one, taken apart.
    var longestTick: TickAnatomy?

    init(_ rounds: [StallFigures]) {
        p50 = median(rounds.map(\.p50))
        p99 = median(rounds.map(\.p99))
        p999 = median(rounds.map(\.p999))
        max = median(rounds.map(\.max))
        worstMax = rounds.map(\.max).max() ?? 0
        ticksLaterThan8_3ms = median(rounds.map { Double($0.ticksLaterThan8_3ms) })
        ticksLaterThan16_7ms = median(rounds.map { Double($0.ticksLaterThan16_7ms) })
        let byLongest = rounds.sorted { $0.max < $1.max }
        longestTick = byLongest.isEmpty ? nil : byLongest[(byLongest.count - 1) / 2].longestTick
    }
}

/// The medians over the rounds of one layout.
struct StallSummary: Codable, Sendable {
    var layout: String
    var rounds: Int
    var seconds: Double
    var objectsPerSecond: Double
    var stall: StallMedians
    var mainThreadCPUms: Double
    /// The median over the rounds of the main thread's CPU less the
    /// probe's own: row (0')'s main CPU per second of its import in the
    /// same round, times this layout's import seconds (nil without row (0')).
    var mainThreadCPUBeyondProbeMs: Double?
    var bytesWritten: Double
    var fsyncs: Double
    /// The median over the rounds of (this layout's objects/s ÷ SQLite's in the same round).
    var vsSQLite: Double?
}

struct SQLiteSummary: Codable, Sendable {
    var rounds: Int
    var seconds: Double
    var objectsPerSecond: Double
    var bytesOnDisk: Double
}

/// Everything one `stall` run measured (the `--json` document): every
/// round of every layout in `runs`, SQLite's rounds in `sqliteRuns`, the
/// probe alone in `floor`, and the medians the table shows in `summary`.
struct StallReport: Codable, Sendable {
    var date: String
    var objects: Int
    var saveEvery: Int
    var ingredientsPerRecipe: Int
    var cores: Int
    var repeats: Int
    /// Whether Strata's background work ran with its long scheduler slice:
    /// "on", "off" (`--no-background-scheduling`) or "unsupported" (Darwin, Linux before 6.12).
    var backgroundScheduling = ""
    var runs: [ImportRun] = []
    var sqliteRuns: [SQLiteRun] = []
    /// The probe alone, once per round.
    var floor: [StallFigures] = []
    var summary: [StallSummary] = []
    /// View-context saves while the writer saves a large import, once per round.
    var viewSaveRuns: [ViewSavesRun] = []
    var viewSaves: ViewSavesSummary?
    var floorSummary: StallMedians?
    var sqlite: SQLiteSummary?

    func summary(_ layout: ImportLayout) -> StallSummary? { summary.first { $0.layout == layout.rawValue } }

    /// The round of `layout` whose longest stall is the median one: what the plot draws.
    func medianRun(_ layout: ImportLayout) -> ImportRun? {
        let rounds = runs.filter { $0.layout == layout.rawValue }.sorted { $0.stall.max < $1.stall.max }
        return rounds.isEmpty ? nil : rounds[(rounds.count - 1) / 2]
    }

    mutating func summarize(_ layouts: [ImportLayout]) {
        summary = layouts.compactMap { layout in
            let rounds = runs.filter { $0.layout == layout.rawValue }
            guard !rounds.isEmpty else { return nil }
            let ratios = rounds.compactMap { run in sqliteRuns.first { $0.round == run.round }.map { run.objectsPerSecond / $0.objectsPerSecond } }
            let beyondProbe = rounds.compactMap { run -> Double? in
                guard let floor = runs.first(where: { $0.layout == ImportLayout.privateContext.rawValue && $0.round == run.round }),
                      floor.seconds > 0 else { return nil }
                return max(0, run.mainThreadCPUms - floor.mainThreadCPUms / floor.seconds * run.seconds)
            }
            return StallSummary(
                layout: layout.rawValue, rounds: rounds.count,
                seconds: median(rounds.map(\.seconds)), objectsPerSecond: median(rounds.map(\.objectsPerSecond)),
                stall: StallMedians(rounds.map(\.stall)), mainThreadCPUms: median(rounds.map(\.mainThreadCPUms)),
                mainThreadCPUBeyondProbeMs: beyondProbe.isEmpty ? nil : median(beyondProbe),
                bytesWritten: median(rounds.map { Double($0.bytesWritten) }), fsyncs: median(rounds.map { Double($0.fsyncs) }),
                vsSQLite: ratios.isEmpty ? nil : median(ratios))
        }
        floorSummary = floor.isEmpty ? nil : StallMedians(floor)
        viewSaves = viewSaveRuns.isEmpty ? nil : ViewSavesSummary(viewSaveRuns)
        sqlite = sqliteRuns.isEmpty ? nil : SQLiteSummary(
            rounds: sqliteRuns.count, seconds: median(sqliteRuns.map(\.seconds)),
            objectsPerSecond: median(sqliteRuns.map(\.objectsPerSecond)), bytesOnDisk: median(sqliteRuns.map { Double($0.bytesOnDisk) }))
    }

    func render() -> String {
        var table = Table("Layout", "import s", "objects/s", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "worst max", ">8.3ms", ">16.7ms", "main CPU ms", "beyond probe", "MB written", "fsyncs")
        for layout in ImportLayout.stallLayouts {
            guard let s = summary(layout) else { continue }
            let m = s.stall
            table.add(layout.title, fixed(s.seconds, 2), thousands(s.objectsPerSecond), fixed(m.p50, 2), fixed(m.p99, 2),
                      fixed(m.p999, 2), fixed(m.max, 2), fixed(m.worstMax, 2), count(m.ticksLaterThan8_3ms), count(m.ticksLaterThan16_7ms),
                      fixed(s.mainThreadCPUms, 1), s.mainThreadCPUBeyondProbeMs.map { fixed($0, 1) } ?? "-",
                      fixed(s.bytesWritten / 1e6, 1), count(s.fsyncs))
        }
        if let s = floorSummary {
            table.add("(0) the probe alone, nothing imported", "-", "-", fixed(s.p50, 2), fixed(s.p99, 2), fixed(s.p999, 2), fixed(s.max, 2),
                      fixed(s.worstMax, 2), count(s.ticksLaterThan8_3ms), count(s.ticksLaterThan16_7ms), "-", "-", "-", "-")
        }
        // The floor under load: the same import on a private context, the
        // main queue never touched — what two busy threads on this machine's
        // cores cost the main thread's timer by themselves.
        if let s = summary(.privateContext) {
            let m = s.stall
            table.add("(0') the probe beside a private-context import", "-", "-", fixed(m.p50, 2), fixed(m.p99, 2), fixed(m.p999, 2),
                      fixed(m.max, 2), fixed(m.worstMax, 2), count(m.ticksLaterThan8_3ms), count(m.ticksLaterThan16_7ms),
                      fixed(s.mainThreadCPUms, 1), "-", "-", "-")
        }
        var out = "Main-queue stalls while importing \(thousands(Double(objects))) objects (recipes with \(ingredientsPerRecipe) ingredients each), "
            + "saving every \(thousands(Double(saveEvery))); a 1 ms timer on the main thread; medians of \(repeats) interleaved round(s); "
            + "\(date), \(cores) cores; background scheduling \(backgroundScheduling)\n\n" + table.render()
        var imports = Table("Import to disk, same objects, one durable save every \(thousands(Double(saveEvery)))", "seconds", "objects/s", "vs SQLite")
        for layout in [ImportLayout.privateContext, .writerChild, .viewChildStack] {
            guard let s = summary(layout) else { continue }
            imports.add(layout == .privateContext ? layout.title : "Strata " + layout.title, fixed(s.seconds, 2), thousands(s.objectsPerSecond),
                        s.vsSQLite.map { fixed($0, 2) + "x" } ?? "-")
        }
        if let s = sqlite {
            imports.add("SQLite 3 (WAL, synchronous=FULL, prepared statements)", fixed(s.seconds, 2), thousands(s.objectsPerSecond), "1.00x")
        }
        out += "\n\n" + imports.render()
        if let v = viewSaves {
            var saves = Table("View-context edit saved every 4 ms while the writer takes in and saves \(thousands(Double(v.importObjects))) objects",
                              "writer s", "runs", "longest ms", "worst", "worst: CPU ms, waits/preempted", "most CPU ms", "median ms",
                              "main max late ms", "worst max", "p99 ms")
            func add(_ title: String, _ task: MainTaskSummary, writerSeconds: String, stall: [String]) {
                saves.add(title, writerSeconds, count(task.count), fixed(task.longestMs, 3), fixed(task.worstMs, 3),
                          "\(fixed(task.worstCPUMs, 3)), \(task.worstWaits)/\(task.worstPreemptions)", fixed(task.mostCPUMs, 3),
                          fixed(task.medianMs, 3), stall[0], stall[1], stall[2])
            }
            add("(d) one-object edit, view context -> writer", v.saves, writerSeconds: fixed(v.writerSeconds, 2),
                stall: [fixed(v.stall.max, 2), fixed(v.stall.worstMax, 2), fixed(v.stall.p99, 2)])
            add("(d') the same, a fixed \(fixed(v.controlMicroseconds, 0)) us task instead of each edit", v.control, writerSeconds: "-",
                stall: [fixed(v.controlStall.max, 2), fixed(v.controlStall.worstMax, 2), fixed(v.controlStall.p99, 2)])
            if let s = summary(.privateContext) {
                saves.add("(0') the probe beside a private-context import", "-", "-", "-", "-", "-", "-", "-",
                          fixed(s.stall.max, 2), fixed(s.stall.worstMax, 2), fixed(s.stall.p99, 2))
            }
            out += "\n\n" + saves.render()
            var fates = Table("The same runs, all rounds, by what happened to the main thread in each", "runs",
                              "never switched out: longest ms", "preempted only: runs", "longest ms", "waited: runs", "longest ms")
            for (title, task) in [("(d) view-context saves", v.saves), ("(d') the fixed task", v.control)] {
                fates.add(title, count(Double(task.runs)), fixed(task.unswitchedLongestMs, 3), count(Double(task.preemptedRuns)),
                          fixed(task.preemptedLongestMs, 3), count(Double(task.waitedRuns)), fixed(task.waitedLongestMs, 3))
            }
            out += "\n\n" + fates.render()
        }
        out += "\n\n" + renderLongestTicks()
        out += "\n\n(medians over the rounds; \"worst max\" is the longest stall of any round; \"main CPU ms\" is the CPU the main thread "
            + "used during the import, the probe's own ticks included — row (0') is the probe's share; \"beyond probe\" is main CPU less row (0')'s "
            + "per second of import, in the same round; \"vs SQLite\" is the median of each round's ratio; in (d), \"worst\" is the longest save of any "
            + "round, with the main thread's CPU time in it and how often it was switched out in it, to wait or preempted; \"most CPU ms\" is "
            + "the most CPU any one save used; (d') is the same writer save, in the same round, with a fixed task sized to take the time in "
            + "its title on an idle core in place of each save: what the machine does meanwhile to any task that short, and to the main queue; "
            + "by what happened to the main thread: a run \"waited\" when the thread blocked at least once in it (a lock, a condition, I/O: "
            + "Strata's own waits), was \"preempted only\" when it lost its core without blocking (the machine's scheduling), and was never "
            + "switched out otherwise (its own cost, plus any time the host took the virtual CPU away, which the guest cannot see); "
            + "a longest tick taken apart: from the main thread's scheduler statistics, the time since the tick before, split into "
            + "running (the main queue's own work), waiting for a CPU while runnable (another thread had the core: the machine's scheduling), "
            + "and asleep (waiting for the timer, or blocked; more than the 1 ms period means the wakeup itself came late))"
        return out
    }

    /// Each row's median longest tick, taken apart (see ``TickAnatomy``).
    private func renderLongestTicks() -> String {
        var table = Table("The longest tick of each row's median round, taken apart", "late ms", "running ms", "waiting for a CPU ms", "asleep ms")
        func add(_ title: String, _ stall: StallMedians?) {
            guard let tick = stall?.longestTick else { return }
            table.add(title, fixed(tick.lateMs, 2), fixed(tick.runningMs, 2), fixed(tick.waitingForCPUMs, 2), fixed(tick.asleepMs, 2))
        }
        for layout in ImportLayout.stallLayouts { add(layout.title, summary(layout)?.stall) }
        add("(0) the probe alone, nothing imported", floorSummary)
        add("(0') the probe beside a private-context import", summary(.privateContext)?.stall)
        add("(d) one-object edit, view context -> writer", viewSaves?.stall)
        add("(d') the same, a fixed task instead of each edit", viewSaves?.controlStall)
        return table.render()
    }
}
