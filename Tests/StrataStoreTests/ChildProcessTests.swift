import Foundation
import SharedTestSupport
import Testing

/// The tests' own child-process runner (``ChildProcess``): what it reports,
/// and that it never waits for ever.
@Suite struct ChildProcessTests {
    @Test func statusOutputAndSignalAreReported() throws {
        let exited = try ChildProcess.run("/bin/sh", ["-c", "printf out; printf err >&2; exit 3"], timeout: 60)
        #expect(exited.status == 3 && !exited.signalled && !exited.killed)
        #expect(String(decoding: exited.stdout, as: UTF8.self) == "out")
        #expect(String(decoding: exited.stderr, as: UTF8.self) == "err")

        let signalled = try ChildProcess.run("/bin/sh", ["-c", "kill -TERM $$"], timeout: 60)
        #expect(signalled.signalled && signalled.status == SIGTERM && !signalled.killed)

        let environment = try ChildProcess.run("/bin/sh", ["-c", "printf %s \"$STRATA_CHILD_TEST\""], environment: ["STRATA_CHILD_TEST": "yes"], timeout: 60)
        #expect(String(decoding: environment.stdout, as: UTF8.self) == "yes")
    }

    @Test func aChildIsKilledWhenAskedAndAtItsDeadline() throws {
        var chunks = 0
        let started = Date()
        let asked = try ChildProcess.run(
            "/bin/sh", ["-c", "echo ready; exec sleep 60"], timeout: 60,
            onStdout: { _ in chunks += 1 }, killWhen: { chunks > 0 })
        #expect(asked.killed && asked.signalled && asked.status == SIGKILL)
        #expect(String(decoding: asked.stdout, as: UTF8.self) == "ready\n")

        do {
            _ = try ChildProcess.run("/bin/sh", ["-c", "echo partial; exec sleep 60"], timeout: 0.5)
            Issue.record("a child sleeping for 60 s ended within 0.5 s")
        } catch .timedOut(_, let arguments, _, let stdout, _) {
            #expect(arguments.last == "echo partial; exec sleep 60" && stdout == "partial\n")
        } catch {
            Issue.record("\(error)")
        }
        #expect(Date().timeIntervalSince(started) < 30, "a kill waited for the sleeps to end")
        #expect(throws: ChildProcessError.self) { try ChildProcess.run("/nonexistent/strata-child", [], timeout: 60) }
    }

    /// Children started at once from many threads hold no pipe of each
    /// other's: a child holding another's pipe would keep that one's reader
    /// waiting until it ends (each child lists its open descriptors).
    @Test func childrenStartedAtOnceHoldNoPipeOfEachOther() async throws {
        #if os(Linux)
        let script = #"for f in /proc/$$/fd/*; do echo "${f##*/} $(readlink "$f")"; done"#
        let listings = try await withThrowingTaskGroup(of: [Int: String].self) { group in
            for _ in 0..<40 {
                group.addTask {
                    let run = try ChildProcess.run("/bin/sh", ["-c", script], timeout: 60)
                    var descriptors: [Int: String] = [:]
                    for line in String(decoding: run.stdout, as: UTF8.self).split(separator: "\n") {
                        let parts = line.split(separator: " ", maxSplits: 1)
                        if parts.count == 2, let fd = Int(parts[0]) { descriptors[fd] = String(parts[1]) }
                    }
                    return descriptors
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let own = listings.map { Set([$0[1], $0[2]].compactMap { $0 }) }
        #expect(own.allSatisfy { $0.count == 2 && $0.allSatisfy { $0.hasPrefix("pipe:") } }, "\(listings)")
        for (index, listing) in listings.enumerated() {
            let others = own.enumerated().filter { $0.offset != index }.reduce(into: Set<String>()) { $0.formUnion($1.element) }
            let held = listing.filter { $0.key > 2 && others.contains($0.value) }
            #expect(held.isEmpty, "a child holds another's pipe: \(held)")
        }
        #endif
    }
}
