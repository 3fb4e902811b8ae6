import Foundation
import PostgresNIO
import Strata
import StrataPostgres

/// A lookup by a unique attribute among `objects` stored ones: a context's
/// `first(in:where:)` with `#Predicate` (a fresh context per 100 lookups,
/// as request handlers make them) beside postgres-nio's prepared `SELECT`
/// of the same row from the same table.
enum Lookup {
    struct ByKey: PostgresPreparedStatement {
        static let sql = #"SELECT strata_id, strata_version, key, title, count, stamp, batch FROM "Entry" WHERE key = $1"#
        typealias Row = (Int64, Int64, String, String, Int64, Date, Int64)
        var key: String
        func makeBindings() -> PostgresBindings {
            var bindings = PostgresBindings()
            bindings.append(key)
            return bindings
        }
        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }

    static func run(_ server: Server, objects: Int, lookups: Int) async throws {
        let database = try await server.freshDatabase("bench_lookup")
        let container = try PersistentContainer(
            name: "lookup", model: try BenchModel.make(), postgres: server.configuration(database: database), viewContext: .privateQueue)
        defer { try? container.close() }
        for start in stride(from: 0, to: objects, by: 1_000) {
            try container.saveAndWait { context in
                for n in start..<min(objects, start + 1_000) {
                    let entry = Entry(context: context)
                    entry.key = "key-\(n)"
                    entry.title = BenchModel.title(n)
                    entry.stamp = Date()
                }
            }
        }
        var generator = SystemRandomNumberGenerator()
        let keys = (0..<lookups).map { _ in "key-\(Int.random(in: 0..<objects, using: &generator))" }
        let connection = try await server.connect(database: database)
        var strataTimes: [Double] = [], nioTimes: [Double] = []
        // Alternating rounds of 100, so both meet the same machine.
        for round in stride(from: 0, to: lookups, by: 100) {
            let context = ManagedObjectContext(.privateQueue, coordinator: container.coordinator)
            try context.performAndWait { () throws in
                for key in keys[round..<min(lookups, round + 100)] {
                    let began = DispatchTime.now().uptimeNanoseconds
                    guard let found = try Entry.first(in: context, where: #Predicate { $0.key == key }), found.key == key else {
                        throw BenchError("\(key) not found")
                    }
                    strataTimes.append(Double(DispatchTime.now().uptimeNanoseconds - began) / 1e6)
                }
            }
            for key in keys[round..<min(lookups, round + 100)] {
                let began = DispatchTime.now().uptimeNanoseconds
                var found = false
                for try await row in try await connection.execute(ByKey(key: key), logger: Server.logger) { found = row.2 == key }
                guard found else { throw BenchError("\(key) not found") }
                nioTimes.append(Double(DispatchTime.now().uptimeNanoseconds - began) / 1e6)
            }
        }
        try await connection.close()
        print("\nA lookup by a unique attribute among \(objects) objects (\(lookups) random keys, alternating rounds of 100)")
        print("| | p50 ms | p99 ms | Strata / postgres-nio (p50) |")
        print("|---|---|---|---|")
        print("| `Entry.first(in:where:)` | \(fixed(strataTimes.percentile(0.5), 3)) | \(fixed(strataTimes.percentile(0.99), 3)) | \(fixed(strataTimes.percentile(0.5) / nioTimes.percentile(0.5), 2))× |")
        print("| postgres-nio prepared SELECT | \(fixed(nioTimes.percentile(0.5), 3)) | \(fixed(nioTimes.percentile(0.99), 3)) | |")
    }
}
