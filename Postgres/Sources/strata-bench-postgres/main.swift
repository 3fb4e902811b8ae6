import Foundation

// strata-bench-postgres: the PostgreSQL store's figures (issue 45), against
// a server `scripts/postgres-server.sh start DIR` started (`make
// bench-postgres` starts and stops one). Thin: each scenario is a file.
//
//   strata-bench-postgres --server-dir DIR [--seconds 10] [--processes 1,2,4]
//       [--merges 1000] [--objects 10000] [--lookups 2000] [--records 10000]
//       [--kills 20] [--pages 1000] [--migrate-objects 200000]
//       [--only saves|merge|lookup|pages|import|migrate|kill]

let arguments = Array(CommandLine.arguments.dropFirst())

func option(_ name: String) -> String? {
    guard let i = arguments.firstIndex(of: "--\(name)"), i + 1 < arguments.count else { return nil }
    return arguments[i + 1]
}

func require(_ name: String) throws -> String {
    guard let value = option(name) else { throw BenchError("--\(name) is required") }
    return value
}

do {
    let server = try Server(directory: try require("server-dir"))
    if arguments.first == "worker" {
        let database = try require("database")
        switch arguments.dropFirst().first {
        case "saves":
            try await Saves.worker(
                server, way: try require("way"), database: database, worker: Int(try require("worker"))!,
                seconds: Double(try require("seconds"))!, start: Date(timeIntervalSince1970: Double(try require("start-at"))!))
        case "merge":
            try MergeLatency.worker(server, database: database, saves: Int(try require("saves"))!)
        case "kill":
            try KillCycles.worker(server, database: database, from: Int(try require("from"))!)
        default:
            throw BenchError("unknown worker \(arguments.dropFirst().first ?? "")")
        }
    } else {
        let only = option("only")
        print("strata-bench-postgres: PostgreSQL at \(server.directory) (Unix socket), \(ProcessInfo.processInfo.activeProcessorCount) CPUs")
        if only == nil || only == "saves" {
            let counts = (option("processes") ?? "1,2,4").split(separator: ",").map { Int($0)! }
            try await Saves.run(server, processes: counts, seconds: Double(option("seconds") ?? "10")!)
        }
        if only == nil || only == "merge" {
            try await MergeLatency.run(server, saves: Int(option("merges") ?? "1000")!, pause: 0.005)
        }
        if only == nil || only == "lookup" {
            try await Lookup.run(server, objects: Int(option("objects") ?? "10000")!, lookups: Int(option("lookups") ?? "2000")!)
        }
        if only == nil || only == "pages" {
            try await Pages.run(server, objects: Int(option("objects") ?? "10000")!, pages: Int(option("pages") ?? "1000")!)
        }
        if only == nil || only == "import" {
            try await Import.run(server, records: Int(option("records") ?? "10000")!)
        }
        if only == nil || only == "migrate" {
            try await Migrate.run(server, objects: Int(option("migrate-objects") ?? "200000")!, rounds: 3)
        }
        if only == nil || only == "kill" {
            try await KillCycles.run(server, cycles: Int(option("kills") ?? "20")!)
        }
    }
} catch {
    FileHandle.standardError.write(Data("strata-bench-postgres: \(String(reflecting: error))\n".utf8))
    exit(1)
}
