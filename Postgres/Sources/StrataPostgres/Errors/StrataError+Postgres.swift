@_spi(StoreImplementation) import Strata
import NIOSSL
import PostgresNIO

extension StrataError {
    /// `error`, thrown by postgres-nio while doing `action` (a phrase:
    /// "creating the tables"), as the typed error Strata's callers switch
    /// on, with what to do in its message. Neither the message nor the
    /// cause carries the password or a statement's parameters.
    static func postgres(
        _ error: any Error, _ action: String, at configuration: PostgresConfiguration,
        file: String = #fileID, line: Int = #line
    ) -> StrataError {
        if let error = error as? StrataError { return error }
        if let server = PostgresServerError(answerIn: error) {
            let (code, message) = Self.explain(server, action, configuration)
            return StrataError(code: code, message: message, cause: server, file: file, line: line)
        }
        guard let error = error as? PSQLError else {
            return StrataError(code: .storage, message: "\(action) on PostgreSQL at \(configuration.endpoint) failed: \(error)",
                               file: file, line: line)
        }
        let message: String
        switch error.code {
        case .connectionError where error.underlying is NIOSSLError:
            message = """
                the TLS handshake with PostgreSQL at \(configuration.endpoint) failed while \(action) \
                (\(error.underlying.map { "\($0)" } ?? "")): check the server's certificate against the TLS configuration \
                (a certificate the server signed itself needs its own certificate among trustRoots)
                """
        case .connectionError:
            let reason = error.underlying.map { " (\($0))" } ?? ""
            message = """
                cannot connect to PostgreSQL at \(configuration.endpoint)\(reason) while \(action): \
                check that the server is running and listens there
                """
        case .serverClosedConnection, .clientClosedConnection, .uncleanShutdown:
            message = "the connection to PostgreSQL at \(configuration.endpoint) closed while \(action); nothing after its last commit was kept"
        case .authMechanismRequiresPassword:
            message = """
                PostgreSQL at \(configuration.endpoint) asks \(configuration.username) for a password while \(action), \
                and the configuration has none: give PostgresConfiguration a password
                """
        case .unsupportedAuthMechanism, .saslError:
            message = """
                PostgreSQL at \(configuration.endpoint) asked \(configuration.username) to authenticate in a way this \
                client cannot (\(error.code)) while \(action): use SCRAM-SHA-256, MD5 or trust in pg_hba.conf
                """
        case .sslUnsupported:
            message = "PostgreSQL at \(configuration.endpoint) does not offer TLS, which the configuration requires"
        default:
            message = "\(action) on PostgreSQL at \(configuration.endpoint) failed: \(error.code)"
        }
        return StrataError(code: .storage, message: message, cause: ConnectionFailure(code: "\(error.code)"), file: file, line: line)
    }

    /// The code and the message for what the server refused.
    private static func explain(
        _ server: PostgresServerError, _ action: String, _ configuration: PostgresConfiguration
    ) -> (Code, String) {
        let said = "\(server.message) (SQLSTATE \(server.sqlState))"
        switch server.sqlState {
        case "23505":
            let constraint = server.constraintName.map { " \($0)" } ?? ""
            return (.constraintConflict, "\(action): the unique constraint\(constraint) refused the values: \(said)")
        case "40001", "40P01":
            return (.mergeConflict, "\(action): another transaction changed the same rows first: \(said)")
        case "28P01", "28000":
            return (.storage, """
                PostgreSQL at \(configuration.endpoint) refused \(configuration.username) while \(action): \(said); \
                check the password and the server's pg_hba.conf
                """)
        case "3D000":
            let database = configuration.database ?? configuration.username
            return (.storage, """
                PostgreSQL at \(configuration.endpoint) has no database \(database): create it (createdb \(database)) \
                or name another in the configuration
                """)
        case "42501":
            return (.storage, "\(configuration.username) may not do this while \(action): \(said); grant it the privilege")
        default:
            return (.storage, "\(action) failed: PostgreSQL said \(said)")
        }
    }
}

/// The cause of a failure below the SQL level (connecting, a connection
/// lost): postgres-nio's error code only, as its description can hold the
/// statement that was running.
struct ConnectionFailure: Error, Sendable, CustomStringConvertible {
    let code: String
    var description: String { "postgres-nio: \(code)" }
}
