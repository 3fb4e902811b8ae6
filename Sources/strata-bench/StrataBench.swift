import ArgumentParser

/// `strata-bench`: the figures Strata exists for, measured side by side in one run.
@main
struct StrataBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "strata-bench",
        abstract: "Measures Strata's storage engine and object graph.",
        subcommands: [EngineCommand.self, GraphCommand.self],
        defaultSubcommand: EngineCommand.self
    )
}
