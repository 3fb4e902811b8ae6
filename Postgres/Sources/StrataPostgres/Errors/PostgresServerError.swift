/// What a PostgreSQL server said when it refused a statement: the cause of
/// the ``Strata/StrataError`` a store call throws then.
///
/// It keeps the SQLSTATE, the server's message and the names it gave
/// (constraint, table, column); never the statement's parameters, and never
/// the server's `DETAIL` field, which can quote the values of a row.
public struct PostgresServerError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The five-character SQLSTATE (`23505`: a unique violation).
    public var sqlState: String
    /// The server's primary message.
    public var message: String
    /// The constraint concerned, where the server names one.
    public var constraintName: String?
    /// The table concerned, where the server names one.
    public var tableName: String?
    /// The column concerned, where the server names one.
    public var columnName: String?

    public var description: String {
        var text = "PostgreSQL error \(sqlState): \(message)"
        if let constraintName { text += " (constraint \(constraintName))" }
        return text
    }
}
