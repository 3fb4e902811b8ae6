import Foundation
import Logging
import PostgresNIO
import StrataPostgres

/// The PostgreSQL server the benchmark runs against: the one
/// `scripts/postgres-server.sh start DIR` started (`--server-dir DIR`, as
/// `make bench-postgres` passes), reached on its Unix socket as `postgres`.
struct Server {
    let directory: String
    let port: Int

    init(directory: String) throws {
        self.directory = directory
        let text = try String(contentsOfFile: directory + "/port", encoding: .utf8)
        guard let port = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw BenchError("no port in \(directory)/port: start a server with scripts/postgres-server.sh start \(directory)")
        }
        self.port = port
    }

    func configuration(database: String) -> PostgresConfiguration {
        PostgresConfiguration(endpoint: .unixSocket(directory: directory, port: port), username: "postgres", database: database)
    }

    /// postgres-nio's own configuration of the same connection, for the baselines.
    func nioConfiguration(database: String) -> PostgresConnection.Configuration {
        .init(unixSocketPath: "\(directory)/.s.PGSQL.\(port)", username: "postgres", password: nil, database: database)
    }

    static let logger: Logger = {
        var logger = Logger(label: "strata-bench-postgres")
        logger.logLevel = .critical
        return logger
    }()

    /// A connection of postgres-nio alone.
    func connect(database: String) async throws -> PostgresConnection {
        try await PostgresConnection.connect(configuration: nioConfiguration(database: database), id: 1, logger: Self.logger)
    }

    /// A new, empty database for one scenario.
    func freshDatabase(_ name: String) async throws -> String {
        let admin = try await connect(database: "postgres")
        defer { Task { try? await admin.close() } }
        _ = try await admin.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name)"), logger: Self.logger)
        _ = try await admin.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: Self.logger)
        return name
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
