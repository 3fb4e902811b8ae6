@_spi(StoreImplementation) import Strata
import PostgresNIO

/// Hears of every save any process makes to a store's database: a
/// connection of its own that `LISTEN`s on ``StoreSchema/changesChannel``
/// and calls `onChange` with each save's history number as it commits.
///
/// A notification is a wake-up, not the change: the caller reads the
/// history after the last number it has seen (``PostgresHistory``), which
/// also covers notifications lost while no connection listened. It does
/// not reconnect yet: a dropped connection ends the notifications.
///
/// `Sendable`: immutable references to a session and postgres-nio's
/// listen context, both `Sendable`.
final class PostgresChangeListener: Sendable {
    private let session: PostgresSession
    private let context: PostgresListenContext

    /// Listens; returns once PostgreSQL does (a save that commits after
    /// this returns is heard). `onChange` runs on an event-loop thread: it
    /// must not call a ``PostgresSession`` there, only hand the number on.
    init(_ configuration: PostgresConfiguration, onChange: @escaping @Sendable (UInt64) -> Void) throws(StrataError) {
        session = try PostgresSession.connect(configuration)
        context = session.listen(on: StoreSchema.changesChannel) { payload in
            if let number = UInt64(payload) { onChange(number) }
        }
        do {
            // Sent after LISTEN on the same connection: back, it listens.
            try session.query("SELECT 1", "listening for saves")
        } catch {
            context.stop()
            session.close()
            throw error
        }
    }

    /// Stops listening and closes the connection.
    func close() {
        context.stop()
        session.close()
    }
}
