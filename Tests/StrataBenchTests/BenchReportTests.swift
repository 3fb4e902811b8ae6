import SharedTestSupport
import Foundation
import Testing

/// The `strata-bench` executable, built beside the test bundle.
private let benchExecutable = builtExecutable(named: "strata-bench")

/// Runs strata-bench with `arguments`; returns its exit status and stdout.
private func runBench(_ arguments: [String]) throws -> (status: Int32, stdout: String) {
    let executable = try #require(benchExecutable, "strata-bench was not built beside the tests")
    let result = try runToCompletion(executable, arguments)
    return (result.status, result.stdout)
}

private func scratch(_ name: String) -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("strata-bench-tests/\(name)-\(UUID().uuidString.prefix(8))").path
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

private func object(_ value: Any?, _ what: String) throws -> [String: Any] {
    try #require(value as? [String: Any], "\(what) is not an object")
}

private func number(_ value: Any?, _ what: String) throws -> Double {
    try #require((value as? NSNumber)?.doubleValue, "\(what) is not a number")
}

/// The bench's `--json` documents keep their schema (other tools read them),
/// and a small run of each scenario works end to end.
@Suite(.serialized) struct BenchReportTests {
    @Test func stallJSONSchemaAndPlot() throws {
        let dir = scratch("stall")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let result = try runBench(["stall", "--objects", "800", "--save-every", "200", "--repeats", "2", "--store", dir + "/stores",
                                   "--view-saves-import", "20000", "--json", dir + "/stall.json", "--plot", dir + "/stall.svg"])
        #expect(result.status == 0)
        #expect(result.stdout.contains("(b) import child -> main -> writer -> disk"))
        #expect(result.stdout.contains("(0) the probe alone, nothing imported"))
        #expect(result.stdout.contains("(0') the probe beside a private-context import"))
        #expect(result.stdout.contains("SQLite"))
        let report = try object(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dir + "/stall.json"))), "report")
        #expect(try number(report["objects"], "objects") == 800)
        #expect(try number(report["saveEvery"], "saveEvery") == 200)
        #expect(try number(report["repeats"], "repeats") == 2)
        for key in ["date", "ingredientsPerRecipe", "cores", "runs", "sqlite", "sqliteRuns", "floor", "floorSummary", "summary"] {
            #expect(report[key] != nil, "missing \(key)")
        }
        // Every round of every layout, the rounds interleaved.
        let runs = try #require(report["runs"] as? [Any])
        let layouts = try runs.map { try object($0, "run")["layout"] as? String }
        let order = ["naive", "view-child", "writer-child", "private-context"]
        #expect(layouts == order + order)
        #expect(try runs.map { try number(object($0, "run")["round"], "round") } == [0, 0, 0, 0, 1, 1, 1, 1])
        let stallKeys = ["p50", "p99", "p999", "max", "ticks", "ticksLaterThan8_3ms", "ticksLaterThan16_7ms"]
        for run in runs {
            let run = try object(run, "run")
            for key in ["objects", "saveEvery", "seconds", "objectsPerSecond", "mainThreadCPUms", "bytesWritten", "fsyncs"] {
                #expect(try number(run[key], key) >= 0)
            }
            #expect(try number(run["objectsPerSecond"], "objectsPerSecond") > 0)
            // 800 objects, a durable save every 200; the stacks' writers may
            // fold several chunks into one save, a single context cannot.
            let single = ["naive", "private-context"].contains(run["layout"] as? String ?? "")
            #expect(try number(run["fsyncs"], "fsyncs") >= (single ? 4 : 1))
            let stall = try object(run["stall"], "stall")
            for key in stallKeys { #expect(try number(stall[key], key) >= 0) }
            #expect(try number(stall["p50"], "p50") <= number(stall["max"], "max"))
            let timeline = try #require(stall["timeline"] as? [Any])
            if let point = timeline.first {
                let point = try object(point, "point")
                _ = try number(point["ms"], "ms")
                _ = try number(point["latenessMs"], "latenessMs")
            }
        }
        // The medians the table shows: one per layout, each the median of its rounds.
        let summary = try #require(report["summary"] as? [Any])
        #expect(try summary.map { try object($0, "summary")["layout"] as? String } == order)
        for (i, entry) in summary.enumerated() {
            let entry = try object(entry, "summary")
            #expect(try number(entry["rounds"], "rounds") == 2)
            let rounds = try [runs[i], runs[i + 4]].map { try number(object($0, "run")["seconds"], "seconds") }
            #expect(try abs(number(entry["seconds"], "seconds") - (rounds[0] + rounds[1]) / 2) < 1e-9)
            let medians = try object(entry["stall"], "stall")
            for key in ["p50", "p99", "p999", "max", "worstMax", "ticksLaterThan8_3ms", "ticksLaterThan16_7ms"] {
                #expect(try number(medians[key], key) >= 0)
            }
            #expect(try number(medians["max"], "max") <= number(medians["worstMax"], "worstMax"))
            #expect(try number(entry["vsSQLite"], "vsSQLite") > 0)
            #expect(try number(entry["mainThreadCPUms"], "mainThreadCPUms") >= 0)
            #expect(try number(entry["mainThreadCPUBeyondProbeMs"], "mainThreadCPUBeyondProbeMs") >= 0)
            #expect(try number(entry["mainThreadCPUBeyondProbeMs"], "mainThreadCPUBeyondProbeMs") <= number(entry["mainThreadCPUms"], "mainThreadCPUms"))
        }
        // The naive layout imports on the main thread; the private context
        // leaves it only the probe's ticks.
        let mainCPU = try Dictionary(uniqueKeysWithValues: summary.map { entry in
            let entry = try object(entry, "summary")
            return (entry["layout"] as? String ?? "", try number(entry["mainThreadCPUms"], "mainThreadCPUms"))
        })
        #if os(Linux)  // the only platform with another thread's CPU clock
        #expect(try #require(mainCPU["naive"]) > #require(mainCPU["private-context"]))
        #endif
        // Row (d): view-context saves while the writer saves an import, once per round.
        #expect(result.stdout.contains("(d) one-object edit, view context -> writer"))
        let viewSaveRuns = try #require(report["viewSaveRuns"] as? [Any])
        #expect(viewSaveRuns.count == 2)
        #expect(result.stdout.contains("(d') the same, a fixed"))
        for run in viewSaveRuns {
            let run = try object(run, "viewSaveRun")
            #expect(try number(run["importObjects"], "importObjects") == 20000)
            #expect(try number(run["writerSeconds"], "writerSeconds") > 0)
            #expect(try number(run["controlMicroseconds"], "controlMicroseconds") > 0)
            for kind in ["saves", "control"] {
                let task = try object(run[kind], kind)
                #expect(try number(task["count"], "count") >= 1, "no \(kind) ran during the writer's save")
                for key in ["longestMs", "medianMs", "p99Ms"] { #expect(try number(task[key], key) > 0) }
                #expect(try number(task["medianMs"], "medianMs") <= number(task["longestMs"], "longestMs"))
                #if os(Linux)  // the calling thread's CPU clock and switch counts
                // Each run does some work; the longest one used no more CPU than the most any run used.
                #expect(try number(task["mostCPUMs"], "mostCPUMs") > 0)
                #expect(try number(task["longestCPUMs"], "longestCPUMs") <= number(task["mostCPUMs"], "mostCPUMs"))
                #endif
                for key in ["longestWaits", "longestPreemptions"] { #expect(try number(task[key], key) >= 0) }
                // Every run is counted in exactly one fate, and none is longer than the longest run.
                let runs = try number(task["preemptedRuns"], "preemptedRuns") + number(task["waitedRuns"], "waitedRuns")
                #expect(try runs <= number(task["count"], "count"))
                for key in ["unswitchedLongestMs", "preemptedLongestMs", "waitedLongestMs"] {
                    #expect(try number(task[key], key) <= number(task["longestMs"], "longestMs") + 0.001, "\(key)")
                }
                #expect(try max(number(task["unswitchedLongestMs"], "unswitchedLongestMs"), number(task["preemptedLongestMs"], "preemptedLongestMs"),
                                number(task["waitedLongestMs"], "waitedLongestMs")) >= number(task["longestMs"], "longestMs") * 0.99 - 0.001,
                        "the longest run has no fate")
            }
            for key in ["stall", "controlStall"] { _ = try object(run[key], key) }
        }
        let viewSaves = try object(report["viewSaves"], "viewSaves")
        #expect(try number(viewSaves["rounds"], "rounds") == 2)
        for kind in ["saves", "control"] {
            let task = try object(viewSaves[kind], kind)
            #expect(try number(task["longestMs"], "longestMs") <= number(task["worstMs"], "worstMs"))
            #expect(try number(task["worstCPUMs"], "worstCPUMs") <= number(task["mostCPUMs"], "mostCPUMs"))
            // The summary's totals are the rounds' sums.
            let rounds = try viewSaveRuns.map { try object(object($0, "viewSaveRun")[kind], kind) }
            for (total, perRound) in [("runs", "count"), ("preemptedRuns", "preemptedRuns"), ("waitedRuns", "waitedRuns")] {
                #expect(try number(task[total], total) == rounds.reduce(0) { try $0 + number($1[perRound], perRound) }, "\(kind).\(total)")
            }
        }
        for key in ["stall", "controlStall"] {
            let stall = try object(viewSaves[key], key)
            #expect(try number(stall["max"], "max") <= number(stall["worstMax"], "worstMax"))
        }
        #expect((report["floor"] as? [Any])?.count == 2)
        let floor = try object(report["floorSummary"], "floorSummary")
        #expect(try number(floor["max"], "max") >= 0)
        #expect((report["sqliteRuns"] as? [Any])?.count == 2)
        let sqlite = try object(report["sqlite"], "sqlite")
        for key in ["rounds", "seconds", "objectsPerSecond", "bytesOnDisk"] { #expect(try number(sqlite[key], key) > 0) }

        let svg = try String(contentsOfFile: dir + "/stall.svg", encoding: .utf8)
        #expect(svg.hasPrefix("<svg"))
        #expect(svg.components(separatedBy: "<polyline").count - 1 == 3)  // one line per layout
        #expect(svg.hasSuffix("</svg>\n"))
        // --store keeps the stores: one per layout, plus SQLite's.
        let kept = try FileManager.default.contentsOfDirectory(atPath: dir + "/stores").sorted()
        #expect(kept.contains("view-child") && kept.contains("sqlite.db"))
    }

    @Test func readsAndCompactionJSON() throws {
        let dir = scratch("reads")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let reads = try runBench(["reads", "--objects", "400", "--lookups", "50", "--repeats", "1", "--json", dir + "/reads.json"])
        #expect(reads.status == 0)
        let r = try object(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dir + "/reads.json"))), "reads")
        #expect(try number(r["recipes"], "recipes") == 100)
        for key in ["openMilliseconds", "byIDColdPerSecond", "byIDWarmPerSecond", "byPredicateScannedPerSecond"] {
            let values = try #require(r[key] as? [NSNumber], "missing \(key)")
            #expect(values.count == 1 && values[0].doubleValue > 0)
        }
        #expect(try number(r["byPredicateMatched"], "byPredicateMatched") == 49)  // servings n % 6 + 1 for n in 0..<100: 17 + 16 + 16 above 3

        let compaction = try runBench(["compaction", "--objects", "400", "--json", dir + "/compaction.json"])
        #expect(compaction.status == 0)
        let c = try object(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dir + "/compaction.json"))), "compaction")
        #expect(try number(c["liveObjects"], "liveObjects") == 300)  // a quarter of the recipes, with their ingredients, deleted
        #expect(try number(c["bytesAfter"], "bytesAfter") < number(c["bytesBefore"], "bytesBefore"))
        _ = try object(c["stall"], "stall")
    }

    /// The engine's figures and the same workloads on LMDB and LevelDB: each
    /// engine's run checks it finds every record it wrote, before and after
    /// a reopen, and fails the command otherwise.
    @Test func enginePeersRunSideBySide() throws {
        let dir = scratch("engine")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let run = try runBench(["engine", "--records", "4000", "--repeats", "1", "--writers", "2", "--durable-records", "4000", "--store", dir])
        #expect(run.status == 0)
        let table = try #require(run.stdout.components(separatedBy: "Beside LMDB and LevelDB").last, "no side-by-side table")
        #expect(table.contains("StrataStore") && table.contains("LMDB") && table.contains("LevelDB"))
        for row in ["write, sequential keys", "write, random keys", "point get, warm, random order, 1 thread",
                    "point get, warm, random order, 2 threads", "open, 4,000 records", "durable batches of 1,000, 1 writer",
                    "durable batches of 1,000, 2 writers"] {
            let line = try #require(table.split(separator: "\n").first { $0.hasPrefix(row) }, "no row \(row)")
            // Cells after the label: three engines' figures, the unit, two
            // ratios ("1.23x"), the target; every figure and ratio positive.
            let cells = line.components(separatedBy: "   ").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }.dropFirst()
            let numbers = cells.compactMap { Double($0.replacingOccurrences(of: ",", with: "").replacingOccurrences(of: "x", with: "")) }
            #expect(numbers.count == 5 && numbers.allSatisfy { $0 > 0 }, "\(line)")
        }
    }

    /// `engine --open-only` opens a kept store read-only and reports its
    /// keys and each open's time; a directory that holds no store fails the
    /// command without making one there.
    @Test func engineOpenOnlyOpensAKeptStoreReadOnly() throws {
        let dir = scratch("open-only")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let migrate = try runBench(["migrate", "--objects", "400", "--repeats", "1", "--store", dir])
        #expect(migrate.status == 0)
        let files = try FileManager.default.contentsOfDirectory(atPath: dir + "/base").sorted()
        let open = try runBench(["engine", "--open-only", dir + "/base", "--repeats", "2"])
        #expect(open.status == 0)
        let line = try #require(open.stdout.split(separator: "\n").first { $0.hasPrefix("open of") }, "no open line in \(open.stdout)")
        #expect(line.contains("keys)") && !line.contains("(0 keys)") && line.contains("median"), "\(line)")
        #expect(line.components(separatedBy: " ms").count == 3, "two times and a median: \(line)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir + "/base").sorted() == files, "a read-only open changed the store")

        let missing = try runBench(["engine", "--open-only", dir + "/none", "--repeats", "1"])
        #expect(missing.status != 0)
        #expect(!FileManager.default.fileExists(atPath: dir + "/none/MANIFEST"))
    }

    @Test func lookupJSON() throws {
        let dir = scratch("lookup")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let lookup = try runBench(["lookup", "--objects", "2000", "--repeats", "1", "--json", dir + "/lookup.json"])
        #expect(lookup.status == 0)
        let l = try object(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dir + "/lookup.json"))), "lookup")
        #expect(try number(l["objects"], "objects") == 2000)
        let runs = try #require(l["runs"] as? [[String: Any]], "missing runs")
        #expect(runs.count == 2)  // a child of the view context, a child of the writer
        for run in runs {
            #expect(try number(run["matched"], "matched") == 1)
            #expect(try number(run["milliseconds"], "milliseconds") > 0)
            _ = try number(run["rowCacheMB"], "rowCacheMB")
            _ = try object(run["stall"], "stall")
        }
        for key in ["openAndFirstQueryMs", "engineScanRecordsPerSecond", "engineDecodingScanRecordsPerSecond", "sqliteScanMs",
                    "sqliteOpenAndFirstQueryMs", "sqliteIndexedMs"] {
            let values = try #require(l[key] as? [NSNumber], "missing \(key)")
            #expect(values.count == 1 && values[0].doubleValue > 0)
        }
        #expect((l["floor"] as? [Any])?.count == 1)
        // The fetch by name through an index, in both layouts.
        let indexed = try #require(l["indexed"] as? [[String: Any]])
        #expect(indexed.count == 2)
        for run in indexed { #expect(try number(run["matched"], "matched") == 1) }
        #expect((l["indexedPlan"] as? String)?.hasPrefix("SEARCH Recipe USING INDEX (name)") == true)
    }

    @Test func upsertJSON() throws {
        let dir = scratch("upsert")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let run = try runBench(["upsert", "--objects", "2000", "--upserts", "400", "--save-every", "100", "--lookups", "200",
                                "--fill", "400", "--repeats", "1", "--json", dir + "/upsert.json"])
        #expect(run.status == 0)
        let u = try object(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dir + "/upsert.json"))), "upsert")
        #expect(try number(u["objects"], "objects") == 2000)
        #expect((u["lookupPlan"] as? String)?.hasPrefix("SEARCH Recipe USING INDEX UNIQUE (name)") == true)
        let rounds = try #require(u["rounds"] as? [[String: Any]], "missing rounds")
        #expect(rounds.count == 1)
        let round = try #require(rounds.first)
        #expect(try number(try object(round["lookupMicroseconds"], "lookupMicroseconds")["median"], "median") > 0)
        for layout in ["viewChildStack", "privateContext"] {
            #expect(try number(try object(round[layout], layout)["recordsPerSecond"], "recordsPerSecond") > 0)
        }
        #expect(try number(round["sqliteUpsertsPerSecond"], "sqliteUpsertsPerSecond") > 0)
        #expect((round["fillPerSecond"] as? [String: Any])?.count == 3)
        // Counts, sorted pages, a count and a sum per group: each timed on both.
        let titles = ["count(for:)", "fetch sorted", "count per servings", "sum of rating per servings"]
        for figures in ["queryMs", "sqliteQueryMs"] {
            let queries = try #require(round[figures] as? [String: Any], "missing \(figures)")
            #expect(queries.count == 6)
            #expect(titles.allSatisfy { title in queries.keys.contains { $0.hasPrefix(title) } }, "\(queries.keys.sorted())")
        }
        // The IN fetch of the lookups' names and the same names one by one, on both.
        for figure in ["inFetchMs", "singleLookupsMs", "sqliteInFetchMs", "sqliteSingleLookupsMs"] {
            #expect(try number(round[figure], figure) > 0)
        }
    }

    /// `pages` over a few thousand lines of the mirrors: every page is read
    /// in index order (no sort in memory) and was checked against SQLite's
    /// by the bench itself (a wrong page fails the command).
    @Test func pagesJSON() throws {
        let dir = scratch("pages")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let run = try runBench(["pages", "--objects", "5000", "--repeats", "3", "--json", dir + "/pages.json"])
        #expect(run.status == 0)
        let p = try object(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dir + "/pages.json"))), "pages")
        #expect(try number(p["objects"], "objects") == 5000)
        let pages = try #require(p["pages"] as? [[String: Any]], "missing pages")
        #expect(pages.count == 8)
        for page in pages {
            let plan = try #require(page["plan"] as? String)
            #expect(plan.contains("USING INDEX") && plan.contains("ORDER BY") && !plan.contains("IN MEMORY"), "\(plan)")
            #expect(try number(page["strataMs"], "strataMs") > 0)
            #expect(try number(page["sqliteMs"], "sqliteMs") > 0)
        }
    }

    /// `follow` with two reader processes of each engine, two rounds: every
    /// reader saw every save (a reader that missed one fails the command),
    /// the table has its six rows, each with a rate, the rows with readers
    /// with latencies, and each engine's ratio is the median of two rounds'.
    @Test func followRunsReaderProcesses() throws {
        let run = try runBench(["follow", "--saves", "60", "--readers", "2", "--interval", "1", "--rounds", "2"])
        #expect(run.status == 0, "\(run.stdout)")
        let rows = run.stdout.split(separator: "\n").filter { $0.hasPrefix("Strata, ") || $0.hasPrefix("SQLite, ") }
        #expect(rows.count == 6, "\(run.stdout)")
        for row in rows where row.contains("readers") {
            let cells = row.split(separator: " ", omittingEmptySubsequences: true)
            #expect(!cells.contains("-"), "a run with readers has every figure: \(row)")
        }
        for engine in ["Strata writer with 2 readers following", "SQLite writer with 2 readers polling"] {
            let line = try #require(run.stdout.split(separator: "\n").first { $0.hasPrefix(engine) }, "\(run.stdout)")
            // "…: 92% of its rate with none (the middle half of the rounds: 90–94%; the rounds: 90% = 900 / 1,000, 94% = …)":
            // the median of two is their mean, and their middle half runs from one to the other.
            let percents = line.split(separator: " ").filter { $0.hasSuffix("%") || $0.hasSuffix("%,") }.compactMap { Double($0.trimmingCharacters(in: CharacterSet(charactersIn: "%,"))) }
            #expect(percents.count == 3 && abs(percents[0] - (percents[1] + percents[2]) / 2) <= 1, "\(line)")
            if percents.count == 3 {
                let (low, high) = (Int(min(percents[1], percents[2])), Int(max(percents[1], percents[2])))
                #expect(line.contains("the middle half of the rounds: \(low)–\(high)%;"), "\(line)")
            }
        }
    }

    @Test func historyMeasuresItsCostAndItsReads() throws {
        let run = try runBench(["history", "--records", "600", "--batch", "200", "--saves", "400"])
        #expect(run.status == 0, "\(run.stdout)")
        // Three durable batches for the first import and three more for the mixed one.
        #expect(run.stdout.contains("history after both imports: 6 transactions"), "\(run.stdout)")
        #expect(run.stdout.contains("history on: "))
        let reads = run.stdout.split(separator: "\n").filter { $0.hasPrefix("the newest") }
        #expect(reads.count == 3, "\(run.stdout)")
        #expect(reads.first?.contains(" 100 ") == true, "the newest 100 are 100 transactions: \(reads)")
    }

    /// `observe` on a small store: each change size delivers (the command
    /// fails if a controller does not, or holds other objects first), and
    /// the followed import ends with the controller holding every recipe.
    @Test func observeMeasuresAControllerAndTheImportItFollows() throws {
        let run = try runBench(["observe", "--objects", "3000", "--rounds", "1", "--import-objects", "4000", "--import-rounds", "1"])
        #expect(run.status == 0, "\(run.stdout)")
        let rows = run.stdout.split(separator: "\n").filter { $0.hasPrefix("N = ") }
        #expect(rows.count == 2, "1 and 100 changed (10,000 is more than the store holds): \(run.stdout)")
        #expect(run.stdout.contains("a controller following the recipes in main"), "\(run.stdout)")
        #expect(run.stdout.contains("re-running the fetch"), "\(run.stdout)")
    }

    /// `graph --only memory`: the in-memory store's saves and SQLite's
    /// `:memory:` ones, each with its figures.
    @Test func graphMeasuresTheInMemoryStoreBesideSQLite() throws {
        let run = try runBench(["graph", "--only", "memory", "--objects", "3000", "--repeats", "1"])
        expectFigures(in: run, rows: 6) { $0.contains("tenth") || $0.contains("last ÷ first") }
    }

    @Test func batchMeasuresEachRequestBesideSQLite() throws {
        let run = try runBench(["batch", "--objects", "2000", "--batch", "400", "--rounds", "2"])
        expectFigures(in: run, rows: 17) { $0.hasPrefix("Strata: ") || $0.hasPrefix("SQLite: ") }
        #expect(run.stdout.contains("batch insert: ") && run.stdout.contains("batch insert, filled: "), "\(run.stdout)")
        // Each round's ratio, of its own two times: two per request.
        let line = try #require(run.stdout.split(separator: "\n").first { $0.hasPrefix("the rounds, over the object graph's: ") })
        let rounds = try Regex(#"([0-9.]+)× \(([0-9.]+) s / ([0-9.]+) s\)"#)
        let pairs = line.matches(of: rounds).map { match in
            (match.output[1].substring.flatMap { Double($0) }, match.output[2].substring.flatMap { Double($0) },
             match.output[3].substring.flatMap { Double($0) })
        }
        #expect(pairs.count == 4 && pairs.allSatisfy { $0.0 != nil && $0.1 != nil && $0.2 != nil }, "\(line)")
        for case let (ratio?, batch?, graph?) in pairs {
            // The times are printed to 0.01 s and the ratio to 0.01.
            #expect(batch > 0.005 && (graph - 0.005) / (batch + 0.005) - 0.005 <= ratio
                && ratio <= (graph + 0.005) / (batch - 0.005) + 0.005, "\(line)")
        }
        // The re-insert's own writes: none (the process's may include a flush the first insert left).
        #expect(run.stdout.contains("the unchanged re-insert logged 0 bytes "), "\(run.stdout)")
    }

    /// The run succeeded, and printed `rows` rows that `isFigure` picks,
    /// each with its figures (a row of a part that did not run shows "-").
    private func expectFigures(in run: (status: Int32, stdout: String), rows: Int, _ isFigure: (Substring) -> Bool) {
        #expect(run.status == 0, "\(run.stdout)")
        let picked = run.stdout.split(separator: "\n").filter(isFigure)
        #expect(picked.count == rows, "\(run.stdout)")
        for row in picked {
            #expect(!row.split(separator: " ", omittingEmptySubsequences: true).contains("-"), "every row has its figures: \(row)")
        }
    }
}
