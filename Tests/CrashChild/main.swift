// The crash tests' child: writes batches to a store until it is killed,
// printing "ack <batch>" for each batch whose write returned (durable under
// the sync mode used), and flushing stdout so the parent sees it at once.
//
// usage: strata-crash-child <store directory> <seed> [grouped|always|none]
import Foundation
import StrataStore
import CrashWorkload

let arguments = CommandLine.arguments
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
