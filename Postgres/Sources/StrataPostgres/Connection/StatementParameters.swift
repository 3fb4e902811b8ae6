import NIOCore
import PostgresNIO

/// A statement's parameters, kept value by value, so that the statement
/// can go as an unnamed statement (``bindings``) or to a statement
/// prepared on the connection (``values``): postgres-nio's
/// `PostgresBindings` keeps its values in one buffer it does not show.
///
/// Every value is encoded in binary, with its type; a statement's text
/// names each parameter's type where PostgreSQL could infer another
/// (`$1::bigint`), since a prepared statement takes the types the server
/// inferred when it was prepared.
struct StatementParameters {
    private(set) var values: [PostgresData] = []

    var count: Int { values.count }

    mutating func append<Value: PostgresNonThrowingEncodable>(_ value: Value) {
        var buffer = ByteBuffer()
        value.encode(into: &buffer, context: .default)
        values.append(PostgresData(type: Value.psqlType, formatCode: Value.psqlFormat, value: buffer))
    }

    /// The values as an unnamed statement takes them.
    var bindings: PostgresBindings {
        var bindings = PostgresBindings(capacity: values.count)
        for value in values { bindings.append(value) }
        return bindings
    }
}
