import ArgumentParser
import StrataStore

/// `--no-background-scheduling`, shared by the scenarios that measure the
/// main queue: runs Strata's background work with the threads' own scheduler
/// slice, to compare with the default (see `BackgroundScheduling`).
struct BackgroundSchedulingOption: ParsableArguments {
    @Flag(name: .customLong("no-background-scheduling"),
          help: "Run Strata's background work with the threads' own scheduler slice (see BackgroundScheduling), to compare.")
    var off = false

    /// Switches background scheduling off when asked; call before any work.
    func apply() {
        if off { BackgroundScheduling.isEnabled = false }
    }
}

extension BackgroundScheduling {
    /// What a report says of it: "on", "off" or "unsupported" (Darwin, Linux before 6.12).
    static var state: String { !isEnabled ? "off" : isSupported ? "on" : "unsupported" }
}
