public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A child process the tests start, read and wait for themselves, with
/// `posix_spawn`, `poll` and `waitpid` — not `Foundation.Process`.
///
/// Why not `Process`: on Linux a child it starts can inherit the pipes of a
/// child another thread is starting at the same moment (it closes in the
/// child the descriptors it found open before the spawn; one opened in
/// between goes through), and its `waitUntilExit()` waits on a run loop fed by a
/// signal source; swift-corelibs-foundation's users report hangs of both
/// kinds. Here every pipe is close-on-exec, one thread reads both pipes and
/// reaps the child, and every run has a deadline: a stuck child is killed
/// and named in the error the test fails with.
public enum ChildProcess {
    /// How a child's run ended.
    public struct Result: Sendable {
        /// The exit status, or the number of the signal that ended it.
        public var status: Int32
        /// Whether a signal ended it.
        public var signalled: Bool
        /// Whether ``run(_:_:environment:timeout:onStdout:killWhen:)`` killed it.
        public var killed: Bool
        public var stdout: Data
        public var stderr: Data
    }

    /// Runs `executable` with `arguments` until it exits, reading its stdout
    /// and stderr to their ends (stdin is /dev/null). `onStdout` is given
    /// each chunk of stdout as it arrives; between reads, at most every
    /// 2 ms, `killWhen` is asked whether to SIGKILL the child now.
    ///
    /// - Throws: ``ChildProcessError/couldNotStart(executable:errno:)``, or
    ///   ``ChildProcessError/timedOut(executable:arguments:seconds:stdout:stderr:)``
    ///   after killing a child still running `timeout` seconds after its start.
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, timeout: Double,
        onStdout: (Data) -> Void = { _ in }, killWhen: () -> Bool = { false }
    ) throws(ChildProcessError) -> Result {
        // Pipes made and a child started under one lock: no child started
        // by another thread can inherit these pipes before they are marked
        // close-on-exec (Glibc's module has no `pipe2`).
        spawnLock.lock()
        let out: (read: Int32, write: Int32), err: (read: Int32, write: Int32), pid: pid_t
        do {
            defer { spawnLock.unlock() }
            out = try makePipe(executable)
            do {
                err = try makePipe(executable)
            } catch {
                for fd in [out.read, out.write] { close(fd) }
                throw error
            }
            do {
                pid = try spawn(executable, arguments, environment: environment, stdout: out.write, stderr: err.write)
            } catch {
                for fd in [out.read, out.write, err.read, err.write] { close(fd) }
                throw error
            }
        }
        close(out.write)
        close(err.write)
        defer {
            close(out.read)
            close(err.read)
        }

        let deadline = Date().addingTimeInterval(timeout)
        var result = Result(status: 0, signalled: false, killed: false, stdout: Data(), stderr: Data())
        var open = [out.read, err.read]
        var exitedAt: Date? = nil
        var timedOut = false
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            if open.isEmpty {
                usleep(2_000)
            } else {
                var fds = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
                if poll(&fds, nfds_t(fds.count), 2) > 0 {
                    for polled in fds where polled.revents != 0 {
                        let count = buffer.withUnsafeMutableBytes { read(polled.fd, $0.baseAddress, $0.count) }
                        if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
                        if count <= 0 {
                            open.removeAll { $0 == polled.fd }
                        } else if polled.fd == out.read {
                            let chunk = Data(buffer[..<count])
                            result.stdout.append(chunk)
                            onStdout(chunk)
                        } else {
                            result.stderr.append(contentsOf: buffer[..<count])
                        }
                    }
                }
            }
            if exitedAt == nil {
                var status: Int32 = 0
                let reaped = waitpid(pid, &status, WNOHANG)
                if reaped == pid {
                    exitedAt = Date()
                    // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import.
                    result.signalled = status & 0x7F != 0
                    result.status = result.signalled ? status & 0x7F : (status >> 8) & 0xFF
                } else if reaped < 0 && errno != EINTR {
                    exitedAt = Date()
                    result.status = -1
                }
            }
            if let exitedAt {
                // Done at both ends of file — or soon after the exit, if a
                // process the child started holds its pipes open.
                if open.isEmpty || Date().timeIntervalSince(exitedAt) > 1 { break }
                continue
            }
            if !result.killed && killWhen() {
                kill(pid, SIGKILL)
                result.killed = true
            } else if !result.killed && Date() >= deadline {
                kill(pid, SIGKILL)
                result.killed = true
                timedOut = true
            }
        }
        if timedOut {
            throw .timedOut(
                executable: executable, arguments: arguments, seconds: timeout,
                stdout: String(decoding: result.stdout, as: UTF8.self), stderr: String(decoding: result.stderr, as: UTF8.self))
        }
        return result
    }

    private static let spawnLock = NSLock()

    /// A pipe whose two ends are closed on exec: only the ends dup'ed onto a
    /// child's stdout and stderr are inherited, by that child.
    private static func makePipe(_ executable: String) throws(ChildProcessError) -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw .couldNotStart(executable: executable, errno: errno) }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return (fds[0], fds[1])
    }

    private static func spawn(
        _ executable: String, _ arguments: [String], environment: [String: String]?, stdout: Int32, stderr: Int32
    ) throws(ChildProcessError) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, stdout, 1)
        posix_spawn_file_actions_adddup2(&actions, stderr, 2)

        // Every signal at its default action and none blocked, whatever
        // this process (a test runner) ignores or masks.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var all = sigset_t(), none = sigset_t()
        sigfillset(&all)
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer {
            for string in argv { free(string) }
            for string in envp ?? [] { free(string) }
        }
        var pid: pid_t = 0
        let status = argv.withUnsafeBufferPointer { argv in
            if let envp {
                return envp.withUnsafeBufferPointer { posix_spawn(&pid, executable, &actions, &attributes, argv.baseAddress!, $0.baseAddress!) }
            }
            return posix_spawn(&pid, executable, &actions, &attributes, argv.baseAddress!, environ)
        }
        guard status == 0 else { throw .couldNotStart(executable: executable, errno: status) }
        return pid
    }
}

/// Why ``ChildProcess/run(_:_:environment:timeout:onStdout:killWhen:)`` has no result.
public enum ChildProcessError: Error, CustomStringConvertible {
    case couldNotStart(executable: String, errno: Int32)
    case timedOut(executable: String, arguments: [String], seconds: Double, stdout: String, stderr: String)

    public var description: String {
        switch self {
        case .couldNotStart(let executable, let code):
            return "\(executable) could not be started: \(String(cString: strerror(code)))"
        case .timedOut(let executable, let arguments, let seconds, let stdout, let stderr):
            return "\(executable) \(arguments.joined(separator: " ")) was still running after \(Int(seconds)) s and was killed; "
                + "its stdout ended: \(stdout.suffix(2_000)) — its stderr ended: \(stderr.suffix(2_000))"
        }
    }
}
