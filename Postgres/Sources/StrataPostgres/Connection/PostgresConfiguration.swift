public import NIOSSL

/// Where a PostgreSQL server is and who Strata is there: what
/// a ``PostgresSession`` connects with.
///
/// ```swift
/// let configuration = PostgresConfiguration(
///     endpoint: .unixSocket(directory: "/var/run/postgresql"),
///     username: "app", password: nil, database: "bookmarks")
/// ```
///
/// The password is never part of a description, an error or a log line.
public struct PostgresConfiguration: Sendable, CustomStringConvertible {
    /// How the server is reached.
    public enum Endpoint: Sendable, Hashable, CustomStringConvertible {
        /// A Unix-domain socket in `directory`, as PostgreSQL's own `-k` and
        /// libpq's `host=/dir` name it (the socket file is
        /// `directory/.s.PGSQL.port`).
        case unixSocket(directory: String, port: Int = 5432)
        /// TCP to `host` on `port`, with TLS as ``PostgresConfiguration/tls`` says.
        case tcp(host: String, port: Int = 5432)

        public var description: String {
            switch self {
            case .unixSocket(let directory, let port): "the socket \(Self.socketPath(directory, port))"
            case .tcp(let host, let port): "\(host):\(port)"
            }
        }

        static func socketPath(_ directory: String, _ port: Int) -> String {
            (directory.hasSuffix("/") ? directory : directory + "/") + ".s.PGSQL.\(port)"
        }
    }

    /// Whether a TCP connection is encrypted (PostgreSQL offers TLS over
    /// TCP only).
    public enum TLS: Sendable, CustomStringConvertible {
        /// Never: the server sees the password's proof and every value in
        /// the clear on the network (a Unix socket, or a trusted loopback).
        case disable
        /// When the server offers it, else in the clear.
        case prefer(TLSConfiguration)
        /// Always: a server without TLS is refused. With
        /// `TLSConfiguration.makeClientConfiguration()` the server's
        /// certificate must be valid for the host name.
        case require(TLSConfiguration)

        public var description: String {
            switch self {
            case .disable: "no TLS"
            case .prefer: "TLS when offered"
            case .require: "TLS required"
            }
        }
    }

    public var endpoint: Endpoint
    /// TLS for a ``Endpoint/tcp(host:port:)`` endpoint; must be
    /// ``TLS/disable`` for a Unix socket.
    public var tls: TLS = .disable
    public var username: String
    /// For password authentication (SCRAM-SHA-256, MD5 or clear text, as
    /// the server asks); nil where the server trusts the connection.
    public var password: String?
    /// The database; nil for the one named as the user.
    public var database: String?
    /// How long a connection attempt may take before it fails, in seconds.
    public var connectTimeout: Double = 10

    public init(endpoint: Endpoint, username: String, password: String? = nil, database: String? = nil, tls: TLS = .disable) {
        self.endpoint = endpoint
        self.tls = tls
        self.username = username
        self.password = password
        self.database = database
    }

    /// The endpoint, user, database and TLS; never the password.
    public var description: String {
        "\(username)@\(endpoint), database \(database ?? username), \(tls)"
    }
}
