import PostgresNIO

/// The statements prepared on one connection, by their text, and when a
/// text is prepared: at its second read on the connection, so that a
/// text read once (a one-off query) costs no round trip of preparing; up to
/// ``limit`` a connection, the rest going unnamed. None is closed to make
/// room, so a prepared statement keeps its meaning as long as its
/// connection lives.
///
/// postgres-nio 1.33 prepares statements whose text is not a type's
/// static property only through `PostgresDatabase.prepare(query:)`, which
/// leaves the parameters' types for the server to infer (Strata's reads
/// name a parameter's type in their text wherever the server could infer
/// another than the value's) and labels the result's columns as
/// text although they come in binary (``StoredRows/binary(_:)``).
struct PreparedStatements {
    enum Use {
        /// Run it as an unnamed statement.
        case unnamed
        /// Prepare it, then run it prepared.
        case prepare
        /// Run it on this statement, prepared already.
        case prepared(PreparedQuery)
    }

    static let readsBeforePreparing = 2
    static let limit = 100
    /// How many texts are counted, or refused, at most (the counts start
    /// over past it).
    static let countedLimit = 1_000

    private var prepared: [String: PreparedQuery] = [:]
    private var reads: [String: Int] = [:]
    private var refused: Set<String> = []

    /// How to run `sql`, counting this read.
    mutating func use(_ sql: String) -> Use {
        if let statement = prepared[sql] { return .prepared(statement) }
        guard prepared.count < Self.limit, !refused.contains(sql) else { return .unnamed }
        let count = (reads[sql] ?? 0) + 1
        guard count < Self.readsBeforePreparing else {
            reads[sql] = nil
            return .prepare
        }
        if reads.count >= Self.countedLimit { reads.removeAll() }
        reads[sql] = count
        return .unnamed
    }

    mutating func add(_ statement: PreparedQuery, for sql: String) {
        prepared[sql] = statement
    }

    /// `sql` goes unnamed from now on: the server would not prepare it, or
    /// its statement failed.
    mutating func refuse(_ sql: String) {
        prepared[sql] = nil
        if refused.count < Self.countedLimit { refused.insert(sql) }
    }

    func refuses(_ sql: String) -> Bool { refused.contains(sql) }

    /// Whether a prepared statement's failure with SQLSTATE `state` is its
    /// own, not the read's: its plan cannot give the rows it was prepared
    /// for after a table changed (`0A000`), a parameter is of another type
    /// than the server inferred (`22P03`), or the statement is gone — a
    /// pooler in front of the server gave the session another connection
    /// (`26000`).
    static func isStatementsOwn(_ state: String) -> Bool {
        state == "0A000" || state == "22P03" || state == "26000"
    }
}
