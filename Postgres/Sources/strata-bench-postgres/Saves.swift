import Foundation
import PostgresNIO
import Strata
import StrataPostgres

/// Saves of 100 new objects, as fast as each process can, in 1, 2 and 4
/// processes at once: through the seed stack (a container's block save)
/// and through postgres-nio alone (one multi-row INSERT in a transaction,
/// written by hand, into the same table) — and, to show what the object
/// graph costs on its own, the same block saves into an in-memory log
/// store in each process (no server).
enum Saves {
    static let objectsPerSave = 100

    /// The parent's part: each process count, both ways, side by side.
    static func run(_ server: Server, processes counts: [Int], seconds: Double) async throws {
        print("Saves of \(objectsPerSave) new objects, \(fixed(seconds, 0)) s a run, each process saving in a loop")
        print("| processes | Strata saves/s | postgres-nio saves/s | Strata / postgres-nio time | Strata save p50 / p99 ms | postgres-nio p50 / p99 ms | the object graph alone (in memory) saves/s, p50 ms |")
        print("|---|---|---|---|---|---|---|")
        for count in counts {
            var row: [String: (rate: Double, p50: Double, p99: Double)] = [:]
            for way in ["strata", "nio", "memory"] {
                let database = try await server.freshDatabase("bench_saves_\(way)_\(count)")
                // The tables made once, before the clock: a process opening the store does it.
                let container = try PersistentContainer(
                    name: "setup", model: try BenchModel.make(), postgres: server.configuration(database: database), viewContext: .privateQueue)
                try container.close()
                let start = Date(timeIntervalSinceNow: 3)
                let results = try Workers.run(count, [
                    "saves", "--way", way, "--server-dir", server.directory, "--database", database,
                    "--seconds", String(seconds), "--start-at", String(start.timeIntervalSince1970),
                ])
                let saves = results.reduce(0) { $0 + Double($1["saves"] ?? "0")! }
                row[way] = (saves / seconds, results.map { Double($0["p50"]!)! }.percentile(0.5), results.map { Double($0["p99"]!)! }.max()!)
            }
            let strata = row["strata"]!, nio = row["nio"]!, memory = row["memory"]!
            print("| \(count) | \(fixed(strata.rate)) | \(fixed(nio.rate)) | \(fixed(nio.rate / strata.rate, 2))× | \(fixed(strata.p50, 2)) / \(fixed(strata.p99, 2)) | \(fixed(nio.p50, 2)) / \(fixed(nio.p99, 2)) | \(fixed(memory.rate)), \(fixed(memory.p50, 2)) |")
        }
    }

    /// One worker: saves until `seconds` have passed from `start`.
    static func worker(_ server: Server, way: String, database: String, worker: Int, seconds: Double, start: Date) async throws {
        var latencies: [Double] = []
        var saved = 0
        let deadline = start.addingTimeInterval(seconds)
        if way == "strata" || way == "memory" {
            let container = way == "strata"
                ? try PersistentContainer(
                    name: "saves", model: try BenchModel.make(), postgres: server.configuration(database: database), viewContext: .privateQueue)
                : try PersistentContainer(name: "saves", model: try BenchModel.make(), directory: nil, viewContext: .privateQueue)
            defer { try? container.close() }
            Workers.wait(until: start)
            while Date() < deadline {
                let began = Date(), n = saved
                try container.saveAndWait { context in
                    for i in 0..<objectsPerSave {
                        let entry = Entry(context: context)
                        entry.key = "w\(worker)-\(n)-\(i)"
                        entry.title = BenchModel.title(n &* 100 &+ i)
                        entry.count = i
                        entry.stamp = began
                        entry.batch = n
                    }
                }
                latencies.append(Date().timeIntervalSince(began) * 1000)
                saved += 1
            }
        } else {
            let connection = try await server.connect(database: database)
            Workers.wait(until: start)
            var key = Int64(worker) << 40
            while Date() < deadline {
                let began = Date(), n = saved
                var ids: [Int64] = [], keys: [String] = [], titles: [String] = [], counts: [Int64] = [], stamps: [Date] = [], batches: [Int64] = []
                for i in 0..<objectsPerSave {
                    key += 1
                    ids.append(key)
                    keys.append("w\(worker)-\(n)-\(i)")
                    titles.append(BenchModel.title(n &* 100 &+ i))
                    counts.append(Int64(i))
                    stamps.append(began)
                    batches.append(Int64(n))
                }
                _ = try await connection.query("BEGIN", logger: Server.logger)
                _ = try await connection.query("""
                    INSERT INTO "Entry" (strata_id, strata_version, key, title, count, stamp, batch) \
                    SELECT i, 1, k, t, c, s, b FROM unnest(\(ids)::bigint[], \(keys)::text[], \(titles)::text[], \(counts)::bigint[], \
                    \(stamps)::timestamptz[], \(batches)::bigint[]) AS r(i, k, t, c, s, b)
                    """, logger: Server.logger)
                _ = try await connection.query("COMMIT", logger: Server.logger)
                latencies.append(Date().timeIntervalSince(began) * 1000)
                saved += 1
            }
            try await connection.close()
        }
        Workers.report(["saves": String(saved), "p50": fixed(latencies.percentile(0.5), 3), "p99": fixed(latencies.percentile(0.99), 3)])
    }
}
