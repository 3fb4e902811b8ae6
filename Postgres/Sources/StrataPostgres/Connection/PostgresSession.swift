@_spi(StoreImplementation) import Strata
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO
import Synchronization

/// One connection to a PostgreSQL server, for synchronous code: each call
/// blocks its thread until the server has answered.
///
/// Strata's stores are called synchronously, from contexts' queues and the
/// coordinator's locks, so the store talks to postgres-nio through futures it
/// waits for on the calling thread, while NIO's own event-loop threads do the
/// I/O. The rule that follows, as NIO states it: **never call a session on an
/// event-loop thread** (it would wait for itself; NIO traps that). From a
/// Swift task it works, and blocks one thread of the cooperative pool for the
/// round trip.
///
/// **Every write goes in a ``transaction(_:beginning:_:)``.** The unique
/// and foreign-key constraints are checked at commit; a statement run on
/// its own commits as it ends, and when that commit fails, postgres-nio
/// 1.33 reports the statement as done and closes the connection: the
/// write is gone and nobody is told. An explicit `COMMIT` is
/// a statement of its own, and its failure comes back as its error.
///
/// One caller at a time: a session carries one transaction state, and
/// statements of two callers would interleave in it. The store hands each
/// session to one thread at a time.
///
/// A statement may be *sent* without waiting (``send(_:_:)``): it is handed
/// to postgres-nio with the next statement waited for, in order, and that
/// wait throws the first failure. The statements a wait hands over go to
/// the connection's event loop in one hop, and the caller wakes once, when
/// the last has come back — not once per statement (postgres-nio still
/// runs them one after another, each after the one before has come back).
///
/// A read of objects (``read(_:_:_:)``) goes to a statement prepared on
/// the connection once its text has been read twice on it: the server
/// then parses it once, not at every read.
///
/// `@unchecked Sendable`: `unsent`, `isInTransaction` and `statements` are
/// their borrower's alone (the pool lends a session to one caller at a
/// time, the rule above); the rest is immutable references to
/// postgres-nio's `Sendable` connection.
final class PostgresSession: @unchecked Sendable {
    let configuration: PostgresConfiguration
    private let connection: PostgresConnection
    private let logger: Logger
    /// Statements sent and not handed to postgres-nio yet, in order, with
    /// their actions: the next wait hands them over.
    private var unsent: [(query: PostgresQuery, action: String)] = []
    /// Whether a `BEGIN` was sent and no `COMMIT` or `ROLLBACK` since: a
    /// read then goes as an unnamed statement, since a prepared one that
    /// fails (its plan gone stale) would doom the transaction.
    private var isInTransaction = false
    /// The statements prepared on this connection, and the reads counted
    /// towards preparing.
    private var statements = PreparedStatements()

    private init(configuration: PostgresConfiguration, connection: PostgresConnection, logger: Logger) {
        self.configuration = configuration
        self.connection = connection
        self.logger = logger
    }

    /// Connects and authenticates, on NIO's shared event-loop group.
    static func connect(_ configuration: PostgresConfiguration) throws(StrataError) -> PostgresSession {
        var nio: PostgresConnection.Configuration
        switch configuration.endpoint {
        case .unixSocket(let directory, let port):
            guard case .disable = configuration.tls else {
                throw StrataError(code: .invalidArgument, message: """
                    \(configuration): PostgreSQL offers no TLS over a Unix socket; connect over TCP for TLS, or set tls to .disable
                    """)
            }
            nio = .init(unixSocketPath: PostgresConfiguration.Endpoint.socketPath(directory, port),
                        username: configuration.username, password: configuration.password, database: configuration.database)
        case .tcp(let host, let port):
            nio = .init(host: host, port: port, username: configuration.username, password: configuration.password,
                        database: configuration.database, tls: try tls(configuration))
        }
        nio.options.connectTimeout = .milliseconds(Int64(configuration.connectTimeout * 1000))
        // postgres-nio logs at trace level and below only; nothing reaches
        // a handler unless the app raises it, and the password never does.
        var logger = Logger(label: "strata.postgres")
        logger.logLevel = .critical
        let future = PostgresConnection.connect(
            on: MultiThreadedEventLoopGroup.singleton.next(), configuration: nio, id: nextID.wrappingAdd(1, ordering: .relaxed).newValue, logger: logger)
        let session: PostgresSession
        do {
            session = PostgresSession(configuration: configuration, connection: try future.wait(), logger: logger)
        } catch {
            throw StrataError.postgres(error, "connecting", at: configuration)
        }
        // A prepared read is planned for its values at every run (its text
        // is parsed once): a plan made for no values in particular, which
        // PostgreSQL may settle on after five runs, can read a whole table
        // for one row. And a session whose `session_replication_role` is
        // `replica` fires no trigger: its saves would go unnumbered, seen
        // by no other process, past unchecked foreign keys and unique values.
        let role: String
        do throws(StrataError) {
            let settings = try session.query("""
                SELECT set_config('plan_cache_mode', 'force_custom_plan', false), current_setting('session_replication_role')
                """, "connecting")
            guard let setting = settings.first else { throw StrataError(code: .storage, message: "connecting: PostgreSQL returned no row") }
            role = try SchemaInstallation.decode(setting, as: (String, String).self, "connecting").1
        } catch {
            session.close()
            throw error
        }
        guard role != "replica" else {
            session.close()
            throw StrataError(code: .storage, message: """
                \(configuration.username)'s connections to PostgreSQL at \(configuration.endpoint) have session_replication_role \
                set to replica, where PostgreSQL fires no trigger and checks no foreign key: Strata cannot save there. \
                Set it to origin where it is set (ALTER ROLE or ALTER DATABASE … RESET session_replication_role, or postgresql.conf)
                """)
        }
        return session
    }

    /// postgres-nio's TLS setting for `configuration`'s.
    private static func tls(_ configuration: PostgresConfiguration) throws(StrataError) -> PostgresConnection.Configuration.TLS {
        do {
            switch configuration.tls {
            case .disable: return .disable
            case .prefer(let tls): return .prefer(try NIOSSLContext(configuration: tls))
            case .require(let tls): return .require(try NIOSSLContext(configuration: tls))
            }
        } catch {
            throw StrataError(code: .invalidArgument, message: "\(configuration): the TLS configuration cannot be used: \(error)")
        }
    }

    /// Runs one statement and returns its rows; `action` names it in an
    /// error ("reading the model's version").
    @discardableResult
    func query(_ query: PostgresQuery, _ action: String) throws(StrataError) -> [PostgresRow] {
        send(query, action)
        return try waitForSent()
    }

    /// Runs `query`, then `next` (a statement whose rows nobody needs: a
    /// transaction's `COMMIT`), sent together and waited for together —
    /// one wake-up for the two; returns `query`'s rows, or throws the first
    /// failure. After a failure of `query` in a transaction, the server
    /// ends it at a `COMMIT` as at a `ROLLBACK`.
    func query(_ query: PostgresQuery, _ action: String, thenSending next: String, _ nextAction: String) throws(StrataError) -> [PostgresRow] {
        send(query, action)
        send(PostgresQuery(unsafeSQL: next), nextAction)
        return try waitForSent(rowsOf: unsent.count - 2)
    }

    /// Sends one statement that returns nothing the caller needs, without
    /// waiting for it: the next ``query(_:_:)`` hands it over first, waits
    /// for it, and throws its failure.
    func send(_ query: PostgresQuery, _ action: String) {
        // Strata's own transaction control, spelled as Strata spells it.
        if query.sql.hasPrefix("BEGIN") {
            isInTransaction = true
        } else if query.sql == "COMMIT" || query.sql == "ROLLBACK" {
            isInTransaction = false
        }
        unsent.append((query, action))
    }

    /// Runs a read whose rows ``StoredRows`` decodes — on a statement
    /// prepared on this connection where ``PreparedStatements`` says so,
    /// else as any statement. A prepared statement's cells come labelled
    /// as text, though in binary like every other's: read them through
    /// ``StoredRows/binary(_:)``.
    func read(_ sql: String, _ parameters: StatementParameters, _ action: String) throws(StrataError) -> [PostgresRow] {
        if !isInTransaction, unsent.isEmpty, let rows = try readPrepared(sql, parameters, action) { return rows }
        return try query(PostgresQuery(unsafeSQL: sql, binds: parameters.bindings), action)
    }

    /// `sql` run as a prepared statement, or nil where it is not one (yet)
    /// or its statement has to go (the caller then runs it unnamed).
    private func readPrepared(_ sql: String, _ parameters: StatementParameters, _ action: String) throws(StrataError) -> [PostgresRow]? {
        let statement: PreparedQuery
        switch statements.use(sql) {
        case .unnamed:
            return nil
        case .prepared(let prepared):
            statement = prepared
        case .prepare:
            do {
                statement = try connection.prepare(query: sql).wait()
            } catch {
                // A statement the server will not prepare (a parameter's
                // type it cannot infer) goes unnamed, which says what is wrong if anything is.
                statements.refuse(sql)
                return nil
            }
            statements.add(statement, for: sql)
        }
        do {
            return try statement.execute(parameters.values).wait()
        } catch {
            // The server's answer for the read itself (a timeout, a
            // cancel) is the read's error; the statement's own failure (a
            // table changed under its plan, a parameter of another type
            // than the server inferred, the statement gone) or the
            // connection's runs the read again unnamed, which changes
            // nothing and says what is wrong if anything is.
            if let state = PostgresServerError(answerIn: error)?.sqlState, !PreparedStatements.isStatementsOwn(state) {
                throw StrataError.postgres(error, action, at: configuration)
            }
            statements.refuse(sql)
            statement.deallocate().whenComplete { _ in }
            return nil
        }
    }

    /// Hands every statement sent to postgres-nio, in order, and waits for
    /// them all; returns the rows of the one at `position` among them (the
    /// last by default), or throws the first failure (the later ones failed
    /// with it, or ran in a transaction the failure has doomed).
    private func waitForSent(rowsOf position: Int? = nil) throws(StrataError) -> [PostgresRow] {
        let waiting = unsent
        unsent = []
        let wanted = position ?? waiting.count - 1
        if let only = waiting.first, waiting.count == 1 {
            // A lookup: no hand-over to make, nothing to gather.
            do {
                return try connection.query(only.query, logger: logger).wait().rows
            } catch {
                throw StrataError.postgres(error, only.action, at: configuration)
            }
        }
        let (connection, logger, queries) = (self.connection, self.logger, waiting.map(\.query))
        let loop = connection.eventLoop
        // On the event loop, postgres-nio queues each statement behind the
        // one before without a hop of its own; the answers come back as one.
        let handed = loop.flatSubmit {
            EventLoopFuture.whenAllComplete(queries.map { connection.query($0, logger: logger) }, on: loop)
        }
        let answers: [Result<PostgresQueryResult, any Error>]
        do {
            answers = try handed.wait()
        } catch {
            // Only the event loop's shutting down fails the hand-over itself.
            throw StrataError.postgres(error, waiting.first?.action ?? "waiting", at: configuration)
        }
        var rows: [PostgresRow] = []
        for (i, answer) in answers.enumerated() {
            switch answer {
            case .success(let result): if i == wanted { rows = result.rows }
            case .failure(let error): throw StrataError.postgres(error, waiting[i].action, at: configuration)
            }
        }
        return rows
    }

    /// Runs one statement written by Strata with no parameters (DDL, whose
    /// identifiers ``SQLIdentifier`` quotes).
    func execute(_ sql: String, _ action: String) throws(StrataError) {
        try query(PostgresQuery(unsafeSQL: sql), action)
    }

    /// Runs `body` in one transaction: `begin` (`BEGIN`, or one that sets
    /// the isolation), then `COMMIT` if it returns,
    /// or `ROLLBACK` if it throws (after a failed statement the server
    /// refuses every other until then). A `COMMIT` that fails throws; its
    /// transaction is gone.
    func transaction<T>(
        _ action: String, beginning begin: String = "BEGIN", _ body: () throws(StrataError) -> T
    ) throws(StrataError) -> T {
        try execute(begin, action)
        let result: T
        do {
            result = try body()
        } catch {
            // The connection may be what failed; the error that matters is the body's.
            try? execute("ROLLBACK", action)
            throw error
        }
        try execute("COMMIT", action)
        return result
    }

    /// Calls `handler` with the payload of each notification on `channel`
    /// (a plain identifier), on an event-loop thread, until the returned
    /// context is stopped or the connection ends. PostgreSQL listens once
    /// a statement sent after this has come back.
    func listen(on channel: String, _ handler: @escaping @Sendable (String) -> Void) -> PostgresListenContext {
        connection.addListener(channel: channel) { _, notification in handler(notification.payload) }
    }

    /// Calls `body` once the connection has ended, however it ended (on an
    /// event-loop thread).
    func whenClosed(_ body: @escaping @Sendable () -> Void) {
        connection.closeFuture.whenComplete { _ in body() }
    }

    /// Whether `sql` goes unnamed on this connection from now on (tests
    /// pin that a statement that failed is dropped).
    func refusesToPrepare(_ sql: String) -> Bool { statements.refuses(sql) }

    /// Whether the connection is gone (closed here, or by the server or the
    /// network): a pool lends it no more.
    var isClosed: Bool { connection.isClosed }

    /// Closes the connection (idempotent).
    func close() {
        try? connection.close().wait()
    }

    deinit {
        if !connection.isClosed { connection.close().whenComplete { _ in } }
    }

    /// Connection IDs for postgres-nio's log metadata.
    private static let nextID = Atomic<Int>(0)
}
