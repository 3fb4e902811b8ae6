import ArgumentParser
import Foundation
import Strata
import StrataStore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `strata-bench follow`: processes that read a store while another writes
/// it. A writer process saves one small object at a time through the
/// ready-made container, each save durable before the next; reader
/// processes open the store read-only and follow it
/// (`coordinator.followStore()`), and note when each save's change
/// reached them. Reported: the time from a save's return in the writer to
/// its notification in each reader (p50, p99, max, over every save and
/// reader), with the writer pacing its saves and saving back to back; and
/// the writer's rate with the readers following vs none: the median of the
/// rounds' ratios, each of two runs back to back, over fifteen rounds by
/// default, with their middle half (one round's ratio on a shared machine
/// can land anywhere from two thirds to four thirds). The paced runs, long
/// by design, run in three of the rounds: their latencies are pooled.
/// Beside it, SQLite in WAL mode with the same durability, its readers
/// polling `PRAGMA data_version` every millisecond (SQLite has no
/// notification).
struct FollowCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "follow",
        abstract: "Reader processes following a writer process's durable saves: save-to-notification latency (p50, p99) and the writer's rate with readers vs none, beside SQLite."
    )

    @Option(help: "Saves the writer makes in each run.") var saves = 5_000
    @Option(help: "Reader processes.") var readers = 4
    @Option(help: "Milliseconds between the writer's saves in the paced run.") var interval = 2.0
    @Option(help: "Rounds, each running the writer with no reader and with readers back to back (the ratio: the median of the rounds').") var rounds = 15
    @Option(help: "Rounds of those that also run the paced writer, its latencies pooled (default: 3, or every round when fewer).") var pacedRounds: Int?
    @Option(help: "Keep the stores in this directory (default: a temporary one, removed after).") var store: String?
    @Flag(name: .customLong("no-sqlite"), help: "Skip the SQLite baseline.") var noSQLite = false
    @Option(help: .hidden) var readerOf: String?
    @Option(help: .hidden) var sqliteReaderOf: String?
    @Option(help: .hidden) var until = 0

    func validate() throws {
        guard rounds > 0 else { throw ValidationError("--rounds must be at least 1") }
        if let pacedRounds, !(1...rounds).contains(pacedRounds) { throw ValidationError("--paced-rounds must be from 1 to --rounds") }
    }

    func run() throws {
        if let readerOf { return try StrataFollower.run(store: readerOf, until: until) }
        if let sqliteReaderOf { return try SQLiteFollower.run(path: sqliteReaderOf, until: until) }
        let work = try WorkDirectory(store, scenario: "follow")
        defer { work.cleanUp() }
        let executable = try Self.ownExecutable()
        let alone = "no reader, back to back", followed = "\(readers) readers, back to back"
        let paced = "\(readers) readers, a save every \(fixed(interval, 1)) ms"
        var engines: [(name: String, engine: FollowEngine)] = [("Strata", .strata)]
        if !noSQLite { engines.append(("SQLite", .sqlite)) }
        // Each engine's runs, by label, one a round.
        var runs: [String: [FollowRun]] = [:]
        let pacedRounds = self.pacedRounds ?? min(3, rounds)
        var n = 0
        for round in 0..<rounds {
            for (name, engine) in engines {
                // The two runs the ratio compares go back to back, in turn
                // first and second, so that a machine growing faster or
                // slower through a round favours neither.
                var order = [(alone, 0, 0.0), (followed, readers, 0.0)]
                if round % 2 == 1 { order.reverse() }
                // The paced runs spread evenly over the rounds.
                if (round + 1) * pacedRounds / rounds != round * pacedRounds / rounds { order.append((paced, readers, interval)) }
                for (label, readerCount, pace) in order {
                    n += 1
                    progress("follow: round \(round + 1) of \(rounds), \(name), \(label) ...")
                    runs["\(name), \(label)", default: []].append(
                        try FollowRun.measure(engine, directory: work.path + "/run\(n)", executable: executable,
                                              saves: saves, readers: readerCount, interval: pace))
                }
            }
        }
        var out = "strata-bench follow — \(saves) durable saves of one object per run, \(readers) reader processes, \(ProcessInfo.processInfo.activeProcessorCount) cores; "
        out += "\(rounds) rounds, \(pacedRounds) of them paced too; rates their medians, latencies over every run; " + ISO8601DateFormatter().string(from: Date()) + "\n\n"
        var table = Table(["", "saves/s", "save → reader p50 ms", "p99 ms", "max ms", "notifications per reader", "reader CPU µs per save"])
        for (name, _) in engines {
            for label in [alone, followed, paced] {
                let rowRuns = runs["\(name), \(label)"] ?? []
                let latency = rowRuns.flatMap(\.latencies).sorted()
                let withReaders = rowRuns.first.map { $0.readers > 0 } ?? false
                func at(_ q: Double) -> String { latency.isEmpty ? "-" : fixed(latency[min(latency.count - 1, Int(Double(latency.count) * q))] * 1e3, 2) }
                table.add("\(name), \(label)", thousands(median(rowRuns.map(\.savesPerSecond))), at(0.5), at(0.99),
                          latency.last.map { fixed($0 * 1e3, 2) } ?? "-",
                          withReaders ? thousands(median(rowRuns.map { Double($0.notifications) / Double($0.readers) })) : "-",
                          withReaders ? fixed(median(rowRuns.map(\.readerCPUPerSave)) * 1e6, 1) : "-")
            }
        }
        out += table.render() + "\n"
        // Each round's ratio is of two runs side by side; the figure is their median.
        for (name, _) in engines {
            let pairs = Array(zip(runs["\(name), \(followed)"] ?? [], runs["\(name), \(alone)"] ?? []))
            guard !pairs.isEmpty else { continue }
            let ratios = pairs.map { $0.savesPerSecond / $1.savesPerSecond }
            let sorted = ratios.sorted()
            let verb = name == "Strata" ? "following" : "polling"
            out += "\(name) writer with \(readers) readers \(verb): \(fixed(median(ratios) * 100, 0))% of its rate with none"
            out += " (the middle half of the rounds: \(fixed(sorted[sorted.count / 4] * 100, 0))–\(fixed(sorted[(sorted.count * 3) / 4] * 100, 0))%;"
            out += " the rounds: " + pairs.map {
                fixed($0.savesPerSecond / $1.savesPerSecond * 100, 0) + "% = " + thousands($0.savesPerSecond) + " / " + thousands($1.savesPerSecond)
            }.joined(separator: ", ") + ")\n"
        }
        out += "(latency: from the writer's save returning to a reader's notification of it, over every save and reader, on one monotonic clock; "
        out += "a reader that catches several saves at once notes each; below zero, a reader had the save before the writer's call returned: "
        out += "its batch was complete in the log, the fsync under way; a Strata reader catches up at once when idle and, while the writer streams saves, at most once every 1 to 4 ms; "
        out += "SQLite's readers poll PRAGMA data_version every 1 ms)\n"
        print(out, terminator: "")
    }

    /// This program's path, for its reader processes.
    static func ownExecutable() throws -> String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        if n > 0 { return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        return ProcessInfo.processInfo.arguments[0]
    }
}

/// CPU seconds (user and system) used by this process's children that
/// have ended and been waited for.
func childrenCPUSeconds() -> Double {
    var usage = rusage()
    #if canImport(Glibc)
    getrusage(RUSAGE_CHILDREN.rawValue, &usage)
    #else
    getrusage(RUSAGE_CHILDREN, &usage)
    #endif
    func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// The monotonic clock, in seconds: the same clock in every process.
func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

enum FollowEngine { case strata, sqlite }

/// One run: the writer's saves, and what its readers noted.
struct FollowRun {
    var savesPerSecond = 0.0
    var readers = 0
    /// Seconds from each save's return to each reader's notification of it.
    var latencies: [Double] = []
    var notifications = 0
    /// CPU seconds (user and system) a reader process used, per save.
    var readerCPUPerSave = 0.0

    static func measure(_ engine: FollowEngine, directory: String, executable: String, saves: Int, readers: Int, interval: Double) throws -> FollowRun {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let writer: any FollowWriter = engine == .strata ? try StrataFollowWriter(directory: directory) : try SQLiteFollowWriter(directory: directory)
        let flag = engine == .strata ? "--reader-of" : "--sqlite-reader-of"
        let cpuBefore = childrenCPUSeconds()
        var children: [FollowerProcess] = []
        var saved = [Double](repeating: 0, count: saves + 1)
        let start: Double
        do {
            for _ in 0..<readers { children.append(try FollowerProcess(executable, [flag, writer.path, "--until", "\(saves)"])) }
            for child in children { try child.waitUntilReady() }
            start = monotonicSeconds()
            for s in 1...saves {
                if interval > 0 {
                    let due = start + Double(s - 1) * interval / 1e3
                    let wait = due - monotonicSeconds()
                    if wait > 0 { usleep(UInt32(wait * 1e6)) }
                }
                try writer.save(s)
                saved[s] = monotonicSeconds()
            }
        } catch {
            // The readers wait for saves that will not come: they end with the run.
            for child in children { child.terminate() }
            throw error
        }
        var run = FollowRun()
        run.savesPerSecond = Double(saves) / (saved[saves] - start)
        run.readers = readers
        for child in children {
            let seen = try child.finish()
            run.notifications += seen.count
            var previous = 0
            for (last, at) in seen where last > previous {
                for s in (previous + 1)...min(last, saves) { run.latencies.append(at - saved[s]) }
                previous = last
            }
            if previous < saves { throw FollowFailure("a reader saw saves up to \(previous) of \(saves)") }
        }
        // Every reader has ended and been waited for: their CPU is counted.
        if readers > 0 { run.readerCPUPerSave = (childrenCPUSeconds() - cpuBefore) / Double(readers * saves) }
        try writer.close()
        return run
    }
}

struct FollowFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A reader process: started, waited for until it says it is ready, and
/// read to its end — each line `seen LAST SECONDS`, said once it has seen
/// the last save (``SeenSaves``) — on a thread of its own, so that a full
/// pipe never stops it.
final class FollowerProcess: @unchecked Sendable {
    // `@unchecked Sendable`: `lines` is written by the reading thread before
    // `finished` is signalled and read only after.
    private let process = Process()
    private let output = Pipe()
    private var lines: [String] = []
    private let ready = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    init(_ executable: String, _ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["follow"] + arguments
        process.standardOutput = output
        try process.run()
        let handle = output.fileHandleForReading
        Thread.detachNewThread { [self] in
            var pending = Data()
            var saidReady = false
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...newline)
                    if line == "ready" && !saidReady {
                        saidReady = true
                        ready.signal()
                    } else {
                        lines.append(line)
                    }
                }
            }
            if !saidReady { ready.signal() }
            finished.signal()
        }
    }

    /// Ends the process, if it still runs.
    func terminate() {
        if process.isRunning { process.terminate() }
    }

    func waitUntilReady() throws {
        guard ready.wait(timeout: .now() + 60) == .success, process.isRunning else { throw FollowFailure("a reader process did not start") }
    }

    /// Waits for the process to end (it ends once it has seen the last
    /// save) and returns what it saw: the last save and when, per line.
    func finish() throws -> [(Int, Double)] {
        guard finished.wait(timeout: .now() + 120) == .success else {
            process.terminate()
            throw FollowFailure("a reader process did not see the last save within 120 s")
        }
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw FollowFailure("a reader process exited with \(process.terminationStatus): \(lines.suffix(3))") }
        return lines.compactMap { line in
            let parts = line.split(separator: " ")
            guard parts.count == 3, parts[0] == "seen", let last = Int(parts[1]), let at = Double(parts[2]) else { return nil }
            return (last, at)
        }
    }
}

/// Writes a line to standard output at once (no buffer to flush): the
/// parent reads as it goes.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
