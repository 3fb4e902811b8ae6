import Foundation
import PostgresNIO
import Strata
import StrataPostgres
#if canImport(Glibc)
import Glibc
#endif

/// A process killed mid-save (SIGKILL), `cycles` times: each cycle a
/// worker saves batches of ten objects through the seed stack and says
/// `ACK n` once a batch's save has returned; it is killed at a random
/// moment; then every acknowledged batch must be stored, and every stored
/// batch whole (ten objects, never fewer).
enum KillCycles {
    static let objectsPerBatch = 10

    static func run(_ server: Server, cycles: Int) async throws {
        let database = try await server.freshDatabase("bench_kill")
        let setup = try PersistentContainer(
            name: "setup", model: try BenchModel.make(), postgres: server.configuration(database: database), viewContext: .privateQueue)
        try setup.close()
        let connection = try await server.connect(database: database)
        var next = 0, acknowledged = 0, killedMidSave = 0
        for _ in 0..<cycles {
            let (worker, pipe) = try Workers.start([
                "worker", "kill", "--server-dir", server.directory, "--database", database, "--from", String(next), "--worker", "0",
            ])
            usleep(UInt32.random(in: 400_000...1_200_000))
            kill(worker.processIdentifier, SIGKILL)
            worker.waitUntilExit()
            let acks = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                .split(separator: "\n").compactMap { $0.hasPrefix("ACK ") ? Int($0.dropFirst(4)) : nil }
            var stored: [Int: Int] = [:]
            for try await (batch, count) in try await connection.query(
                #"SELECT batch, count(*) FROM "Entry" GROUP BY batch"#, logger: Server.logger
            ).decode((Int64, Int64).self) {
                stored[Int(batch)] = Int(count)
            }
            for batch in acks where stored[batch] != objectsPerBatch {
                throw BenchError("batch \(batch) was acknowledged and is not stored whole (\(stored[batch] ?? 0) of \(objectsPerBatch) objects)")
            }
            for (batch, count) in stored where count != objectsPerBatch {
                throw BenchError("batch \(batch) is stored in part: \(count) of \(objectsPerBatch) objects")
            }
            let newest = stored.keys.max() ?? -1
            // A batch stored but not acknowledged: killed between the commit and the acknowledgement.
            if newest > (acks.max() ?? -1) { killedMidSave += 1 }
            acknowledged += acks.count
            next = newest + 1
        }
        try await connection.close()
        print("\nA process killed (SIGKILL) while saving, \(cycles) cycles")
        print("| cycles | batches acknowledged | acknowledged and lost | stored in part | killed between commit and acknowledgement |")
        print("|---|---|---|---|---|")
        print("| \(cycles) | \(acknowledged) | 0 | 0 | \(killedMidSave) |")
    }

    /// The worker: saves batches until it is killed.
    static func worker(_ server: Server, database: String, from: Int) throws {
        let container = try PersistentContainer(
            name: "killed", model: try BenchModel.make(), postgres: server.configuration(database: database), viewContext: .privateQueue)
        var batch = from
        while true {
            let n = batch
            try container.saveAndWait { context in
                for i in 0..<objectsPerBatch {
                    let entry = Entry(context: context)
                    entry.key = "b\(n)-\(i)"
                    entry.title = BenchModel.title(n &* 10 &+ i)
                    entry.stamp = Date()
                    entry.batch = n
                }
            }
            Workers.say("ACK \(n)")
            batch += 1
        }
    }
}
