import PostgresNIO

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

extension PostgresServerError {
    /// The server's answer `error` carries, if it carries one: in
    /// postgres-nio's error type, or in its older one, in which it reports
    /// a prepared statement's failures (``PreparedStatements``).
    init?(answerIn error: any Error) {
        if let error = error as? PSQLError, error.code == .server, let info = error.serverInfo, let state = info[.sqlState] {
            self.init(sqlState: state, message: info[.message] ?? "(no message)", constraintName: info[.constraintName],
                      tableName: info[.tableName], columnName: info[.columnName])
        } else if case .server(let answer)? = error as? PostgresError, let state = answer.fields[.sqlState] {
            self.init(sqlState: state, message: answer.fields[.message] ?? "(no message)", constraintName: answer.fields[.constraintName],
                      tableName: answer.fields[.tableName], columnName: answer.fields[.columnName])
        } else {
            return nil
        }
    }
}
