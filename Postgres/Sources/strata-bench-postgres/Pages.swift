import Foundation
import PostgresNIO
import Strata
import StrataPostgres

/// The list pages an app shows, among `objects` stored entries with their
/// indexes: the 20 with the highest count, the 20 after a title, a count,
/// and a count and sum per batch — a context's `fetch` with a sort and a
/// limit, `count(for:)` and a `DictionaryFetchRequest`
/// (a fresh context per 20 pages, as request handlers make them), beside
/// postgres-nio's prepared statements answering the same from the same
/// table.
enum Pages {
    struct Top: PostgresPreparedStatement {
        static let sql = #"SELECT strata_id, strata_version, key, title, count, stamp, batch FROM "Entry" ORDER BY count DESC, strata_id LIMIT 20"#
        typealias Row = (Int64, Int64, String, String, Int64, Date, Int64)
        func makeBindings() -> PostgresBindings { PostgresBindings() }
        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }

    struct After: PostgresPreparedStatement {
        static let sql = #"""
            SELECT strata_id, strata_version, key, title, count, stamp, batch FROM "Entry" \#
            WHERE normalize(title, NFC) > normalize($1, NFC) ORDER BY normalize(title, NFC), strata_id LIMIT 20
            """#
        typealias Row = (Int64, Int64, String, String, Int64, Date, Int64)
        var title: String
        func makeBindings() -> PostgresBindings {
            var bindings = PostgresBindings()
            bindings.append(title)
            return bindings
        }
        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }

    struct Count: PostgresPreparedStatement {
        static let sql = #"SELECT count(*)::bigint FROM "Entry" WHERE count >= $1"#
        typealias Row = Int64
        var least: Int
        func makeBindings() -> PostgresBindings {
            var bindings = PostgresBindings()
            bindings.append(Int64(least))
            return bindings
        }
        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Int64.self) }
    }

    struct PerBatch: PostgresPreparedStatement {
        static let sql = #"SELECT batch, count(*)::bigint, sum(count)::text FROM "Entry" GROUP BY batch"#
        typealias Row = (Int64, Int64, String)
        func makeBindings() -> PostgresBindings { PostgresBindings() }
        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }

    static func run(_ server: Server, objects: Int, pages: Int) async throws {
        let database = try await server.freshDatabase("bench_pages")
        let container = try PersistentContainer(
            name: "pages", model: try BenchModel.make(indexes: true), postgres: server.configuration(database: database), viewContext: .privateQueue)
        defer { try? container.close() }
        for start in stride(from: 0, to: objects, by: 1_000) {
            try container.saveAndWait { context in
                for n in start..<min(objects, start + 1_000) {
                    let entry = Entry(context: context)
                    entry.key = "key-\(n)"
                    entry.title = BenchModel.title(n) + " \(n)"
                    entry.count = (n &* 7_919) % 100_003
                    entry.batch = n % 100
                    entry.stamp = Date()
                }
            }
        }
        let connection = try await server.connect(database: database)
        let titles = ["a", "n", "soup", "x", "z"]
        var strata: [String: [Double]] = [:], nio: [String: [Double]] = [:]
        func timed(_ name: String, into times: inout [String: [Double]], _ body: () throws -> Void) rethrows {
            let began = DispatchTime.now().uptimeNanoseconds
            try body()
            times[name, default: []].append(Double(DispatchTime.now().uptimeNanoseconds - began) / 1e6)
        }
        // Alternating rounds of 20 pages of each kind, so both meet the same machine.
        for round in stride(from: 0, to: pages, by: 20) {
            let context = ManagedObjectContext(.privateQueue, coordinator: container.coordinator)
            try context.performAndWait { () throws in
                for i in round..<min(pages, round + 20) {
                    try timed("top", into: &strata) {
                        var request = FetchRequest<Entry>(sortBy: [SortDescriptor(\.count, order: .reverse)])
                        request.fetchLimit = 20
                        guard try context.fetch(request).count == 20 else { throw BenchError("top: not 20") }
                    }
                    let after = titles[i % titles.count]
                    try timed("after", into: &strata) {
                        var request = FetchRequest<Entry>(predicate: #Predicate { $0.title > after }, sortBy: [SortDescriptor(\.title)])
                        request.fetchLimit = 20
                        guard try context.fetch(request).count == 20 else { throw BenchError("after \(after): not 20") }
                    }
                    let least = (i * 977) % 100_003
                    try timed("count", into: &strata) {
                        _ = try context.count(for: FetchRequest<Entry>(predicate: #Predicate { $0.count >= least }))
                    }
                    try timed("groups", into: &strata) {
                        let rows = try context.fetch(DictionaryFetchRequest<Entry>(propertiesToFetch: ["batch", .count(), .sum("count")], groupBy: ["batch"]))
                        guard rows.count == min(100, objects) else { throw BenchError("groups: \(rows.count)") }
                    }
                }
            }
            for i in round..<min(pages, round + 20) {
                var began = DispatchTime.now().uptimeNanoseconds
                var rows = 0
                for try await _ in try await connection.execute(Top(), logger: Server.logger) { rows += 1 }
                guard rows == 20 else { throw BenchError("top: \(rows) rows") }
                nio["top", default: []].append(Double(DispatchTime.now().uptimeNanoseconds - began) / 1e6)
                began = DispatchTime.now().uptimeNanoseconds
                rows = 0
                for try await _ in try await connection.execute(After(title: titles[i % titles.count]), logger: Server.logger) { rows += 1 }
                guard rows == 20 else { throw BenchError("after: \(rows) rows") }
                nio["after", default: []].append(Double(DispatchTime.now().uptimeNanoseconds - began) / 1e6)
                began = DispatchTime.now().uptimeNanoseconds
                for try await _ in try await connection.execute(Count(least: (i * 977) % 100_003), logger: Server.logger) {}
                nio["count", default: []].append(Double(DispatchTime.now().uptimeNanoseconds - began) / 1e6)
                began = DispatchTime.now().uptimeNanoseconds
                rows = 0
                for try await _ in try await connection.execute(PerBatch(), logger: Server.logger) { rows += 1 }
                guard rows == min(100, objects) else { throw BenchError("per batch: \(rows) rows") }
                nio["groups", default: []].append(Double(DispatchTime.now().uptimeNanoseconds - began) / 1e6)
            }
        }
        try await connection.close()
        print("\nList pages among \(objects) objects with their indexes (\(pages) of each, a fresh context per 20, alternating rounds of 20)")
        print("| | Strata p50 ms | p99 ms | postgres-nio p50 ms | p99 ms | Strata / postgres-nio (p50) |")
        print("|---|---|---|---|---|---|")
        for (name, label) in [("top", "the 20 with the highest count"), ("after", "the 20 after a title, by title"), ("count", "a count of those with count ≥ x"), ("groups", "a count and a sum per batch (100 groups)")] {
            let s = strata[name]!, n = nio[name]!
            print("| \(label) | \(fixed(s.percentile(0.5), 3)) | \(fixed(s.percentile(0.99), 3)) | \(fixed(n.percentile(0.5), 3)) | \(fixed(n.percentile(0.99), 3)) | \(fixed(s.percentile(0.5) / n.percentile(0.5), 2))× |")
        }
    }
}
