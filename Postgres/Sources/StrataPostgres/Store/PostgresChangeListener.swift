@_spi(StoreImplementation) import Strata
import PostgresNIO

/// Hears of every save any process makes to a store's database: a
/// connection of its own that `LISTEN`s on ``StoreSchema/changesChannel``
/// and calls `onChange` with each save's history number and identifier
/// as it commits (nil for a notification not of that shape: a wake-up
/// that says nothing).
///
/// A notification is a wake-up, not the change: the caller reads the
/// history after the last number it has seen (``PostgresHistory``), which
/// also covers notifications lost while no connection listened. It does
/// not reconnect: a dropped connection ends the notifications, and
/// ``isClosed`` says so (``PostgresChangeFollower`` makes a new one).
///
/// `Sendable`: immutable references to a session and postgres-nio's
/// listen context, both `Sendable`.
final class PostgresChangeListener: Sendable {
    private let session: PostgresSession
    private let context: PostgresListenContext

    /// Listens; returns once PostgreSQL does (a save that commits after
    /// this returns is heard). `onChange` and `onClose` (the connection
    /// ended, however) run on an event-loop thread: they must not call a
    /// ``PostgresSession`` there, only hand the news on.
    init(
        _ configuration: PostgresConfiguration, onChange: @escaping @Sendable (HeardCommit?) -> Void,
        onClose: (@Sendable () -> Void)? = nil
    ) throws(StrataError) {
        session = try PostgresSession.connect(configuration)
        if let onClose { session.whenClosed(onClose) }
        context = session.listen(on: StoreSchema.changesChannel) { payload in
            onChange(HeardCommit(payload))
        }
        do {
            // Sent after LISTEN on the same connection: back, it listens.
            backendPID = try SchemaInstallation.decode(
                try session.query("SELECT pg_backend_pid()", "listening for saves").first, as: Int32.self, "listening for saves")
        } catch {
            context.stop()
            session.close()
            throw error
        }
    }

    /// A save's commit as its notification tells it: "number identifier".
    struct HeardCommit: Equatable {
        var number: UInt64
        var saveIdentifier: UInt64

        init(number: UInt64, saveIdentifier: UInt64) {
            self.number = number
            self.saveIdentifier = saveIdentifier
        }

        init?(_ payload: String) {
            let parts = payload.split(separator: " ")
            guard parts.count == 2, let number = UInt64(parts[0]), let saveIdentifier = UInt64(parts[1]) else { return nil }
            self.init(number: number, saveIdentifier: saveIdentifier)
        }
    }

    /// The server process of the listening connection (for tests that end it).
    let backendPID: Int32

    /// Whether the connection is gone: nothing more will be heard.
    var isClosed: Bool { session.isClosed }

    /// Stops listening and closes the connection.
    func close() {
        context.stop()
        session.close()
    }
}
