import ArgumentParser

/// `strata-bench`: the figures Strata exists for, measured side by side in one run.
@main
struct StrataBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "strata-bench",
        abstract: "Measures how Strata keeps the main queue free, and its object graph and storage engine.",
        subcommands: [StallCommand.self, ReadsCommand.self, LookupCommand.self, UpsertCommand.self, ImportCommand.self, ServerCommand.self, FollowCommand.self, HistoryCommand.self, ObserveCommand.self, BatchCommand.self, CompactionCommand.self, MigrateCommand.self, EngineCommand.self, GraphCommand.self, QueryMemoryCommand.self, PagesCommand.self],
        defaultSubcommand: StallCommand.self
    )
}
