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

/// Runs `executable` with `arguments` to completion, reading both pipes to
/// the end before waiting (a full pipe would block the child).
public func runToCompletion(_ executable: String, _ arguments: [String]) throws -> ProcessOutput {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let group = DispatchGroup()
    // Written by the reader block only, read only after `group.wait()`.
    nonisolated(unsafe) var errData = Data()
    DispatchQueue.global().async(group: group) { errData = err.fileHandleForReading.readDataToEndOfFile() }
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    group.wait()
    process.waitUntilExit()
    return ProcessOutput(status: process.terminationStatus, stdoutData: outData, stderr: String(decoding: errData, as: UTF8.self))
}

/// How a crash child's run ended (see ``runCrashChild(_:_:killWhen:)``).
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
    _ executable: String, _ arguments: [String], killWhen: (AcknowledgementCollector) -> Bool
) throws -> CrashChildRun {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    // Under ThreadSanitizer, a report is printed unsymbolized, at once:
    // symbolizing starts llvm-symbolizer, and a kill in the meantime left
    // only that helper's dying words ("LLVM ERROR: IO failure on output
    // stream: Broken pipe") where the report should have been (CI,
    // 2026-11-25). Raw addresses at least say what kind of report it was.
    var environment = ProcessInfo.processInfo.environment
    environment["TSAN_OPTIONS"] = [environment["TSAN_OPTIONS"], "symbolize=0"].compactMap { $0 }.joined(separator: ":")
    process.environment = environment
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    let acks = AcknowledgementCollector()
    let errors = AcknowledgementCollector()
    try process.run()
    // Blocking reads on threads of their own, not `readabilityHandler`: on
    // Linux, installing and tearing down its dispatch read sources, run after
    // run, corrupts libdispatch's epoll bookkeeping and crashes the manager
    // thread in `_dispatch_event_loop_drain` (swift-corelibs-libdispatch #949;
    // seen here once in a ContainerCrashTests run).
    let outRead = readToEnd(out.fileHandleForReading, into: acks)
    let errRead = readToEnd(err.fileHandleForReading, into: errors)
    var killed = false
    while process.isRunning {
        if killWhen(acks) {
            kill(process.processIdentifier, SIGKILL)
            killed = true
            break
        }
        usleep(2_000)
    }
    process.waitUntilExit()
    outRead.wait()
    errRead.wait()
    errors.consume(Data("\n".utf8))
    let (highest, lines) = acks.snapshot
    return CrashChildRun(
        highest: highest, said: lines + errors.snapshot.errors.filter { !$0.isEmpty },
        killed: killed && process.terminationReason == .uncaughtSignal, status: process.terminationStatus)
}

/// Feeds `collector` everything read from `handle` until end of file, on a
/// thread of its own; the semaphore is signalled at the end.
private func readToEnd(_ handle: FileHandle, into collector: AcknowledgementCollector) -> DispatchSemaphore {
    let done = DispatchSemaphore(value: 0)
    Thread {
        // `read(2)` returns what the pipe holds now (FileHandle's
        // `read(upToCount:)` would wait for the whole count); 0 is the end.
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(handle.fileDescriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            collector.consume(Data(buffer[..<count]))
        }
        done.signal()
    }.start()
    return done
}
