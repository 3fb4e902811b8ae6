import Foundation
import PostgresNIO
import Strata
import StrataPostgres

/// An import as apps write it: records in batches of 1,000, half of each
/// batch's keys already stored and half new, mixed — each record found and
/// updated, or created. Three ways on three databases seeded alike:
/// `findOrCreate(where:equals:in:)` per record (Core Data's and
/// MagicalRecord's pattern), an upsert (every record inserted, merged by
/// the uniqueness constraint and a merge policy), and postgres-nio alone
/// (one hand-written statement a batch: UPDATE the stored keys, INSERT the
/// others — PostgreSQL's `ON CONFLICT` takes no deferrable constraint).
enum Import {
    static let batchSize = 1_000

    static func run(_ server: Server, records: Int) async throws {
        print("\nAn import of \(records) records in batches of \(batchSize), half of each batch's keys stored already (mixed), each record updated or created")
        print("| way | seconds | records/s | ÷ postgres-nio's time |")
        print("|---|---|---|---|")
        var times: [(String, Double)] = []
        for way in ["find-or-create", "upsert", "postgres-nio"] {
            let database = try await server.freshDatabase("bench_import_\(way.replacingOccurrences(of: "-", with: "_"))")
            let container = try PersistentContainer(
                name: "import", model: try BenchModel.make(), postgres: server.configuration(database: database), viewContext: .privateQueue)
            defer { try? container.close() }
            // Stored before the clock: the even keys.
            for start in stride(from: 0, to: records, by: 2 * batchSize) {
                try container.saveAndWait { context in
                    for n in stride(from: start, to: min(records, start + 2 * batchSize), by: 2) { insert(n, round: 0, in: context) }
                }
            }
            let began = Date()
            if way == "postgres-nio" {
                let connection = try await server.connect(database: database)
                var nextID = Int64(1) << 40
                for start in stride(from: 0, to: records, by: batchSize) {
                    let numbers = start..<min(records, start + batchSize)
                    let ids = numbers.map { _ in nextID += 1; return nextID }
                    let keys = numbers.map { "key-\($0)" }, titles = numbers.map { BenchModel.title($0 &* 3) }
                    let counts = numbers.map { Int64($0) }, stamps = numbers.map { _ in began }
                    _ = try await connection.query("BEGIN", logger: Server.logger)
                    _ = try await connection.query("""
                        WITH input AS (SELECT * FROM unnest(\(ids)::bigint[], \(keys)::text[], \(titles)::text[], \(counts)::bigint[], \
                        \(stamps)::timestamptz[]) AS r(i, k, t, c, s)), \
                        updated AS (UPDATE "Entry" e SET title = input.t, count = input.c, stamp = input.s, strata_version = e.strata_version + 1 \
                        FROM input WHERE e.key = input.k RETURNING e.key) \
                        INSERT INTO "Entry" (strata_id, strata_version, key, title, count, stamp, batch) \
                        SELECT i, 1, k, t, c, s, 1 FROM input WHERE k NOT IN (SELECT key FROM updated)
                        """, logger: Server.logger)
                    _ = try await connection.query("COMMIT", logger: Server.logger)
                }
                try await connection.close()
            } else {
                for start in stride(from: 0, to: records, by: batchSize) {
                    try container.saveAndWait { context in
                        if way == "upsert" { context.mergePolicy = .mergeByPropertyObjectTrump }
                        for n in start..<min(records, start + batchSize) {
                            if way == "upsert" {
                                insert(n, round: 1, in: context)
                            } else {
                                let entry = try Entry.findOrCreate(where: \.key, equals: "key-\(n)", in: context)
                                fill(entry, n, round: 1)
                            }
                        }
                    }
                }
            }
            let seconds = Date().timeIntervalSince(began)
            times.append((way, seconds))
            // Every record there, updated or created once.
            let check = container.newBackgroundContext()
            let stored = try check.performAndWait { () throws in try check.count(for: FetchRequest<Entry>()) }
            guard stored == records else { throw BenchError("\(way): \(stored) objects stored, not \(records)") }
        }
        let baseline = times.last!.1
        for (way, seconds) in times {
            print("| \(way) | \(fixed(seconds, 2)) | \(fixed(Double(records) / seconds, 0)) | \(fixed(seconds / baseline, 2))× |")
        }
    }

    private static func insert(_ n: Int, round: Int, in context: ManagedObjectContext) {
        let entry = Entry(context: context)
        entry.key = "key-\(n)"
        fill(entry, n, round: round)
    }

    private static func fill(_ entry: Entry, _ n: Int, round: Int) {
        entry.title = BenchModel.title(n &* (round == 0 ? 1 : 3))
        entry.count = n
        entry.stamp = Date()
        entry.batch = round
    }
}
