import ArgumentParser

/// `strata-dump`: looks inside a Strata store without changing it.
@main
struct StrataDump: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "strata-dump",
        abstract: "Inspects a Strata store read-only."
    )

    func run() throws {
        print("strata-dump: not yet")
    }
}
