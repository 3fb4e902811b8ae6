// The crash tests' child: writes batches to a store until it is killed,
// printing "ack <batch>" for each batch whose write returned (durable under
// the sync mode used), and flushing stdout so the parent sees it at once.
//
// usage: strata-crash-child <store directory> <seed> [grouped|always|none]
//        strata-crash-child <store directory> exhaust-descriptors
//
// The second form runs the process out of descriptors under an open store:
// with its limit lowered to 256, it writes a batch, takes every free
// descriptor, starts the process's first worker of a global queue (what
// Swift's tasks or `DispatchQueue.global()` do at any moment) and posts to
// the main queue, which its main thread drains itself (as a run loop does),
// prints "worker started" and "posted to the main queue", and writes on until
// the store needs a new file and reports the failure. libdispatch must not
// trap.
import Dispatch
import Foundation
import StrataStore
import CrashWorkload

let arguments = CommandLine.arguments
if arguments.count == 3, arguments[2] == "exhaust-descriptors" {
    exhaustDescriptors(directory: arguments[1])
}
guard arguments.count == 3 || arguments.count == 4, let seed = UInt64(arguments[2]),
      let sync = arguments.count == 4 ? CrashWorkload.syncModes[arguments[3]] : .grouped
else {
    FileHandle.standardError.write(Data("usage: strata-crash-child <store directory> <seed> [grouped|always|none]\n".utf8))
    exit(2)
}
/// Writes a line straight to fd 1, unbuffered: the parent must see every
/// acknowledgement the moment it is made, before any SIGKILL.
func report(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

do {
    let store = try StrataStore(directory: arguments[1], options: CrashWorkload.options(sync: sync))
    var batch = (try store.get(CrashWorkload.lastKey)).flatMap { Int(String(decoding: $0, as: UTF8.self)) } ?? 0
    var random = seed
    while true {
        batch += 1
        try store.write(CrashWorkload.batch(batch))
        report("ack \(batch)")
        random = random &* 6364136223846793005 &+ 1442695040888963407
        if random >> 58 == 0 { try store.compact() }  // now and then, a compaction to be killed in
    }
} catch {
    report("error \(error)")
    exit(1)
}

func exhaustDescriptors(directory: String) -> Never {
    // A few hundred descriptors, not the million some machines allow.
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    limit.rlim_cur = min(limit.rlim_cur, 256)
    setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    do {
        let store = try StrataStore(directory: directory, options: CrashWorkload.options)
        try store.write(CrashWorkload.batch(1))
        report("ack 1")
        var taken = 0
        while dup(STDERR_FILENO) >= 0 { taken += 1 }
        report("took \(taken) descriptors, errno \(errno)")
        let started = DispatchSemaphore(value: 0)
        DispatchQueue.global().async { started.signal() }
        guard started.wait(timeout: .now() + .seconds(10)) == .success else {
            report("no global worker started in 10 s")
            exit(3)
        }
        report("worker started")
        DispatchQueue.main.async {}
        report("posted to the main queue")
        for batch in 2...100_000 {
            try store.write(CrashWorkload.batch(batch))
            report("ack \(batch)")
        }
        report("100,000 batches written without a new file")
        exit(0)
    } catch {
        report("error \(error)")
        exit(1)
    }
}
