@_spi(StoreImplementation) import Strata

/// Primary keys for new objects, handed out by the database so that no two
/// processes give two objects one key: `strata_keys` holds each entity's
/// next key, and a reservation moves it on by a block in one statement, in
/// a transaction of its own (a save that fails later does not give the
/// keys back, and a key is never handed out twice). The first key of an
/// entity is 1.
enum PrimaryKeyReservation {
    /// Reserves `count` primary keys of the entity `entity` (its table's
    /// name) and returns them. Call it outside a transaction: inside one,
    /// it would be a transaction within it (refused), and the row it takes
    /// would stay locked against every other process's reservation.
    static func reserve(_ count: UInt64, of entity: String, on session: PostgresSession) throws(StrataError) -> Range<UInt64> {
        guard count > 0 else { return 1..<1 }
        guard let blockSize = Int64(exactly: count), blockSize < Int64.max / 2 else {
            throw StrataError(code: .invalidArgument, message: "cannot reserve \(count) primary keys at once")
        }
        let action = "reserving primary keys of \(entity)"
        // Its own transaction, sent with the statement and waited for once.
        session.send("BEGIN", action)
        let rows = try session.query("""
            INSERT INTO \(unescaped: SQLIdentifier.quoted(StoreSchema.keysTable)) (entity, next) VALUES (\(entity), 1 + \(blockSize))
            ON CONFLICT (entity) DO UPDATE SET next = \(unescaped: SQLIdentifier.quoted(StoreSchema.keysTable)).next + \(blockSize)
            RETURNING next - \(blockSize)
            """, action, thenSending: "COMMIT", action)
        let start = try SchemaInstallation.decode(rows.first, as: Int64.self, action)
        guard start > 0, let first = UInt64(exactly: start) else {
            throw StrataError(code: .corruptRecord, message: "\(action): strata_keys gave \(start), not a key")
        }
        return first..<first + count
    }
}
