import Foundation
import PostgresNIO
import Strata
import StrataPostgres

/// A release's model change over a table of `objects` entries, as a server
/// meets it at start-up: an attribute added with a default, one renamed, an
/// index added. The time to open the store with the later model (the
/// migration, in one transaction) and the table's size after, beside the
/// same change written by hand as DDL through postgres-nio, and beside the
/// way that rewrites the table (the column added, then every row filled
/// with an `UPDATE`), on databases holding the same rows.
enum Migrate {
    /// The later model: `title` renamed `headline`, `rating` added with a
    /// default, an index on `count`.
    static func laterModel() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Entry", properties: [
                .attribute("key", .string),
                .attribute("headline", .string, renamedFrom: "title"),
                .attribute("count", .integer64, defaultValue: .integer(0)),
                .attribute("stamp", .date),
                .attribute("batch", .integer64, defaultValue: .integer(0)),
                .attribute("rating", .integer64, defaultValue: .integer(3)),
            ], indexes: [IndexDescription(["count"])], uniquenessConstraints: [["key"]]),
        ])
    }

    static func run(_ server: Server, objects: Int, rounds: Int) async throws {
        var strata: [Double] = [], handWritten: [Double] = [], rewriting: [Double] = []
        var sizes: [String: (before: Int64, after: Int64)] = [:]
        for round in 0..<rounds {
            // In turn, so the three meet the same machine.
            for way in ["strata", "ddl", "update"] {
                let database = try await server.freshDatabase("bench_migrate_\(way)_\(round)")
                try await fill(server, database: database, objects: objects)
                let connection = try await server.connect(database: database)
                let before = try await tableBytes(connection)
                let began = DispatchTime.now().uptimeNanoseconds
                switch way {
                case "strata":
                    let container = try PersistentContainer(
                        name: "migrate", model: try laterModel(), postgres: server.configuration(database: database), viewContext: .privateQueue)
                    strata.append(Double(DispatchTime.now().uptimeNanoseconds - began) / 1e6)
                    try container.close()
                case "ddl":
                    try await transaction(connection, [
                        #"ALTER TABLE "Entry" RENAME COLUMN title TO headline"#,
                        #"ALTER TABLE "Entry" ADD COLUMN rating bigint NOT NULL DEFAULT 3"#,
                        #"ALTER TABLE "Entry" ALTER COLUMN rating DROP DEFAULT"#,
                        #"CREATE INDEX "Entry_count_idx" ON "Entry" (count)"#,
                    ])
                    handWritten.append(Double(DispatchTime.now().uptimeNanoseconds - began) / 1e6)
                default:
                    try await transaction(connection, [
                        #"ALTER TABLE "Entry" RENAME COLUMN title TO headline"#,
                        #"ALTER TABLE "Entry" ADD COLUMN rating bigint"#,
                        #"UPDATE "Entry" SET rating = 3"#,
                        #"ALTER TABLE "Entry" ALTER COLUMN rating SET NOT NULL"#,
                        #"CREATE INDEX "Entry_count_idx" ON "Entry" (count)"#,
                    ])
                    rewriting.append(Double(DispatchTime.now().uptimeNanoseconds - began) / 1e6)
                }
                sizes[way] = (before, try await tableBytes(connection))
                try await connection.close()
            }
        }
        func row(_ name: String, _ times: [Double], _ way: String) -> String {
            let size = sizes[way]!
            return "| \(name) | \(fixed(times.percentile(0.5), 0)) | \(fixed(times.percentile(0.5) / handWritten.percentile(0.5), 2))× | \(size.before / 1_048_576) → \(size.after / 1_048_576) |"
        }
        print("\nA model change over \(objects) stored objects at start-up (an attribute renamed, one added with a default, an index added), medians of \(rounds)")
        print("| | ms | vs the DDL by hand | table MiB before → after |")
        print("|---|---|---|---|")
        print(row("Strata: open with the later model (inferred migration, one transaction)", strata, "strata"))
        print(row("postgres-nio: the DDL by hand (the default added, then dropped)", handWritten, "ddl"))
        print(row("postgres-nio: the column filled by `UPDATE` (rewrites every row)", rewriting, "update"))
    }

    /// A store of the benchmark's first model holding `objects` entries,
    /// written with one statement (the migration's cost is what is measured).
    static func fill(_ server: Server, database: String, objects: Int) async throws {
        let container = try PersistentContainer(
            name: "migrate", model: try BenchModel.make(), postgres: server.configuration(database: database), viewContext: .privateQueue)
        try container.close()
        let connection = try await server.connect(database: database)
        try await connection.query("""
            INSERT INTO "Entry" (strata_id, strata_version, key, title, count, stamp, batch) \
            SELECT n, 1, 'key-' || n, repeat('a title ', (1 + n % 7)::int), n % 1000, now(), 0 FROM generate_series(1, \(objects)) AS n
            """, logger: Server.logger)
        try await connection.query("VACUUM ANALYZE \"Entry\"", logger: Server.logger)
        try await connection.close()
    }

    static func transaction(_ connection: PostgresConnection, _ statements: [String]) async throws {
        try await connection.query("BEGIN", logger: Server.logger)
        for statement in statements { try await connection.query(PostgresQuery(unsafeSQL: statement), logger: Server.logger) }
        try await connection.query("COMMIT", logger: Server.logger)
    }

    static func tableBytes(_ connection: PostgresConnection) async throws -> Int64 {
        for try await size in try await connection.query(#"SELECT pg_total_relation_size('"Entry"')"#, logger: Server.logger).decode(Int64.self) {
            return size
        }
        return 0
    }
}
