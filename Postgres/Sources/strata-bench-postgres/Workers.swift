import Foundation

/// Worker processes: the benchmark runs copies of itself (`worker …`),
/// each reporting one line `RESULT key=value …` on its standard output.
enum Workers {
    /// Starts `count` workers with `arguments` (each gets `--worker i`),
    /// and returns their results once all have ended.
    static func run(_ count: Int, _ arguments: [String]) throws -> [[String: String]] {
        var running: [(Process, Pipe)] = []
        for i in 0..<count {
            running.append(try start(["worker"] + arguments + ["--worker", String(i)]))
        }
        var results: [[String: String]] = []
        for (process, pipe) in running {
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            guard process.terminationStatus == 0, let line = output.split(separator: "\n").last(where: { $0.hasPrefix("RESULT ") }) else {
                throw BenchError("a worker failed (status \(process.terminationStatus)): \(output)")
            }
            results.append(parse(line))
        }
        return results
    }

    /// Starts a copy of this executable with `arguments`, its standard output piped here.
    static func start(_ arguments: [String]) throws -> (Process, Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        return (process, pipe)
    }

    static func parse(_ line: Substring) -> [String: String] {
        var fields: [String: String] = [:]
        for field in line.dropFirst("RESULT ".count).split(separator: " ") {
            let parts = field.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
        }
        return fields
    }

    /// Prints a worker's result line.
    static func report(_ fields: KeyValuePairs<String, String>) {
        say("RESULT " + fields.map { "\($0.key)=\($0.value)" }.joined(separator: " "))
    }

    /// Writes `line` to standard output at once (a worker may be killed next).
    static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// Sleeps until `date` (workers start their timed loops together).
    static func wait(until date: Date) {
        let seconds = date.timeIntervalSinceNow
        if seconds > 0 { usleep(UInt32(seconds * 1_000_000)) }
    }
}

/// Medians and percentiles of samples, in milliseconds.
extension Array where Element == Double {
    func percentile(_ p: Double) -> Double {
        guard !isEmpty else { return .nan }
        let sorted = self.sorted()
        return sorted[Swift.min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]
    }
}

func fixed(_ value: Double, _ digits: Int = 1) -> String { String(format: "%.\(digits)f", value) }
