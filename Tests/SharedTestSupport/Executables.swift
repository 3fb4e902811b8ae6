public import Foundation

/// The path of an executable product of this package, built beside the
/// test binary (SwiftPM puts products and test bundles in one folder); nil
/// when it is not there.
public func builtExecutable(named name: String) -> String? {
    #if os(Linux)
    let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    #else
    let me = Bundle.main.bundleURL.path
    #endif
    var dir = URL(fileURLWithPath: me).deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = dir.appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        dir = dir.deletingLastPathComponent()
    }
    return nil
}

/// What a finished child process said.
public struct ProcessOutput: Sendable {
    public var status: Int32
    public var stdoutData: Data
    public var stderr: String
    public var stdout: String { String(decoding: stdoutData, as: UTF8.self) }
}

/// Runs `executable` with `arguments` to completion (``ChildProcess``):
/// a child still running after `timeout` seconds is killed, and the error
/// names it.
public func runToCompletion(_ executable: String, _ arguments: [String], timeout: Double = 300) throws -> ProcessOutput {
    let result = try ChildProcess.run(executable, arguments, timeout: timeout)
    return ProcessOutput(status: result.status, stdoutData: result.stdout, stderr: String(decoding: result.stderr, as: UTF8.self))
}

/// How a crash child's run ended (see ``runCrashChild(_:_:timeout:killWhen:)``).
public struct CrashChildRun {
    /// The highest `ack N` it printed (0 for none).
    public var highest: Int
    /// Every other line it printed on stdout, and all of its stderr.
    public var said: [String]
    /// Whether the test killed it (false: it exited by itself).
    public var killed: Bool
    /// Its exit status, or the signal that ended it.
    public var status: Int32
}

/// Starts a crash child (a process that prints `ack N` for each durable
/// write) and SIGKILLs it as soon as `killWhen` holds — polled every few
/// milliseconds with the acknowledgements so far — unless it exits first.
///
/// ```swift
/// let deadline = Date().addingTimeInterval(0.2)
/// let run = try runCrashChild(child, [store]) { _ in Date() >= deadline }
/// ```
public func runCrashChild(
    _ executable: String, _ arguments: [String], timeout: Double = 300, killWhen: (AcknowledgementCollector) -> Bool
) throws -> CrashChildRun {
    // Under ThreadSanitizer, a report is printed unsymbolized, at once:
    // symbolizing starts llvm-symbolizer, and a kill in the meantime left
    // only that helper's dying words ("LLVM ERROR: IO failure on output
    // stream: Broken pipe") where the report should have been (CI,
    // 2026-11-25). Raw addresses at least say what kind of report it was.
    var environment = ProcessInfo.processInfo.environment
    environment["TSAN_OPTIONS"] = [environment["TSAN_OPTIONS"], "symbolize=0"].compactMap { $0 }.joined(separator: ":")
    let acks = AcknowledgementCollector()
    let run = try ChildProcess.run(
        executable, arguments, environment: environment, timeout: timeout,
        onStdout: { acks.consume($0) }, killWhen: { killWhen(acks) })
    let errors = AcknowledgementCollector()
    errors.consume(run.stderr + Data("\n".utf8))
    let (highest, lines) = acks.snapshot
    return CrashChildRun(
        highest: highest, said: lines + errors.snapshot.errors.filter { !$0.isEmpty },
        killed: run.killed && run.signalled, status: run.status)
}
