import Foundation
@_spi(StoreImplementation) import Strata
import PostgresNIO

/// A ``Strata/StorePredicate`` as a `WHERE` clause over an entity's table:
/// never fewer rows than pass, and exactly those where ``isExact`` says so.
///
/// PostgreSQL's answer differs from Swift's in places, each handled by
/// narrowing less rather than wrongly:
/// - a `NaN` equals itself and sorts above everything in PostgreSQL, and
///   equals nothing and orders with nothing in Swift: a comparison of a
///   `double` column is a narrowing only, and one with a `NaN` constant is
///   not made at all;
/// - a date is kept to the microsecond: against a constant that is not,
///   `<` and `>` become `<=` and `>=`, and `!=` is not made;
/// - strings are equal in Swift by canonical equivalence, and ordered by
///   their canonical compositions' scalars: both sides are put in NFC
///   (`normalize`), and compared byte by byte (`COLLATE "C"`: UTF-8's
///   byte order is its scalars' order);
/// - an order between Booleans (or UUIDs) never holds in Swift, and does
///   in PostgreSQL: such a comparison is `FALSE`;
/// - SQL's nulls make a comparison unknown: every leaf is written so it is
///   true or false (the comparison beside `IS [NOT] NULL`, a shape an index
///   can serve — `COALESCE` around it would hide it from the planner), so
///   `NOT` of an exact clause is exact.
/// A part it does not make reads `TRUE` (every row), not exact.
struct SQLPredicate {
    var sql: String
    var isExact: Bool

    static let everything = SQLPredicate(sql: "TRUE", isExact: false)

    /// A fetch's `WHERE` clause: `predicate`'s, or `TRUE` (exact) without one.
    static func clause(
        _ predicate: StorePredicate?, of entity: EntityDescription, layout: StoreSchema.EntityLayout, into bindings: inout StatementParameters
    ) -> SQLPredicate {
        guard let predicate else { return SQLPredicate(sql: "TRUE", isExact: true) }
        return translate(predicate, of: entity, layout: layout, into: &bindings)
    }

    /// `predicate` over the table of `entity`, laid out as `layout`, its
    /// constants appended to `bindings`.
    static func translate(
        _ predicate: StorePredicate, of entity: EntityDescription, layout: StoreSchema.EntityLayout, into bindings: inout StatementParameters
    ) -> SQLPredicate {
        switch predicate {
        case .constant(let value):
            return SQLPredicate(sql: value ? "TRUE" : "FALSE", isExact: true)
        case .and(let a, let b):
            let a = translate(a, of: entity, layout: layout, into: &bindings), b = translate(b, of: entity, layout: layout, into: &bindings)
            return SQLPredicate(sql: "(\(a.sql) AND \(b.sql))", isExact: a.isExact && b.isExact)
        case .or(let a, let b):
            let a = translate(a, of: entity, layout: layout, into: &bindings), b = translate(b, of: entity, layout: layout, into: &bindings)
            return SQLPredicate(sql: "(\(a.sql) OR \(b.sql))", isExact: a.isExact && b.isExact)
        case .not(let a):
            // Only an exact clause can be negated: NOT of a wider one would be narrower than the answer.
            var scratch = bindings
            let inner = translate(a, of: entity, layout: layout, into: &scratch)
            guard inner.isExact else { return .everything }
            bindings = scratch
            return SQLPredicate(sql: "(NOT \(inner.sql))", isExact: true)
        case .compare(let lhs, let comparison, let rhs):
            switch (lhs, rhs) {
            case (.property(let index, let null), .constant(let value)):
                return compare(index, null, comparison, value, entity, layout, &bindings)
            case (.constant(let value), .property(let index, let null)):
                return compare(index, null, comparison.mirrored, value, entity, layout, &bindings)
            default:
                return .everything
            }
        case .isIn(let operand, let values):
            guard case .property(let index, let null) = operand, let column = attributeColumn(index, entity, layout),
                  case .attribute(let attribute) = entity.properties[index] else { return .everything }
            return isIn(column, attribute.type, null, values, &bindings)
        case .startsWith(let operand, let prefix):
            guard case .property(let index, _) = operand, let column = attributeColumn(index, entity, layout),
                  case .attribute(let attribute) = entity.properties[index], attribute.type == .string,
                  !prefix.utf8.contains(0) else { return .everything }
            let escaped = prefix.replacingOccurrences(of: "\\", with: "\\\\")
                .replacingOccurrences(of: "%", with: "\\%").replacingOccurrences(of: "_", with: "\\_")
            bindings.append(escaped)
            // A narrowing: Swift compares Characters, a grapheme at a time.
            return SQLPredicate(sql: "(\(column) IS NOT NULL AND normalize(\(column), NFC) LIKE normalize($\(bindings.count), NFC) || '%')", isExact: false)
        case .relatedIn(let relationship, let targets, let whenNil):
            guard relationship < layout.properties.count, case .column(let name) = layout.properties[relationship] else { return .everything }
            let column = SQLIdentifier.quoted(name)
            bindings.append(targets.map { Int64(bitPattern: $0.storedPrimaryKey) })
            let named = "(\(column) IS NOT NULL AND \(column) = ANY($\(bindings.count)::bigint[]))"
            return SQLPredicate(sql: whenNil ? "(\(column) IS NULL OR \(named))" : named, isExact: true)
        }
    }

    /// The quoted column of attribute `index`, if it is one kept in a column.
    private static func attributeColumn(_ index: Int, _ entity: EntityDescription, _ layout: StoreSchema.EntityLayout) -> String? {
        guard index < layout.properties.count, case .column(let name) = layout.properties[index],
              case .attribute = entity.properties[index] else { return nil }
        return SQLIdentifier.quoted(name)
    }

    /// `attribute <comparison> value`, where a stored null reads as `null`.
    private static func compare(
        _ index: Int, _ null: PropertyValue, _ comparison: StorePredicate.Comparison, _ value: PropertyValue,
        _ entity: EntityDescription, _ layout: StoreSchema.EntityLayout, _ bindings: inout StatementParameters
    ) -> SQLPredicate {
        guard let column = attributeColumn(index, entity, layout), case .attribute(let attribute) = entity.properties[index] else {
            return .everything
        }
        // An order holds between numbers, strings and dates only (Swift's, as Strata judges: never between
        // Booleans, UUIDs, data or nil, which PostgreSQL would order).
        if comparison != .equal && comparison != .notEqual {
            switch value {
            case .integer, .double, .string, .date: break
            default: return SQLPredicate(sql: "FALSE", isExact: true)
            }
        }
        // Against nil: only equality means anything.
        if case .null = value {
            let isNil = null == .null  // a stored null reads as nil
            switch comparison {
            case .equal: return SQLPredicate(sql: isNil ? "(\(column) IS NULL)" : "FALSE", isExact: true)
            case .notEqual: return SQLPredicate(sql: isNil ? "(\(column) IS NOT NULL)" : "TRUE", isExact: true)
            default: return SQLPredicate(sql: "FALSE", isExact: true)
            }
        }
        // Whether a stored null, read as `null`, passes too.
        let nullPasses = StorePredicate.compare(.constant(null), comparison, .constant(value)).evaluate([])
        var exact = true
        var comparison = comparison
        let left: String, right: String
        switch (attribute.type, value) {
        case (.double, .double(let d)):
            guard !d.isNaN else { return .everything }
            exact = false  // a stored NaN: PostgreSQL's order puts it above everything
            left = column
            bindings.append(d)
            right = "$\(bindings.count)::double precision"
        case (.date, .date(let date)):
            if !keptExactly(date) {
                exact = false
                switch comparison {
                case .less: comparison = .lessOrEqual
                case .greater: comparison = .greaterOrEqual
                case .notEqual: return .everything
                default: break
                }
            }
            left = column
            bindings.append(date)
            right = "$\(bindings.count)::timestamp with time zone"
        case (.string, .string(let string)):
            guard !string.utf8.contains(0) else { return .everything }
            // In NFC and compared byte by byte (`COLLATE "C"`, as the columns
            // are): the order of the canonical composition's scalars, Swift's.
            left = "normalize(\(column), NFC)"
            bindings.append(string)
            right = "(normalize($\(bindings.count)::text, NFC) COLLATE \"C\")"
        case (.integer16, .integer(let i)), (.integer32, .integer(let i)), (.integer64, .integer(let i)):
            left = column
            bindings.append(i)
            right = "$\(bindings.count)::bigint"
        case (.bool, .bool(let b)):
            left = column
            bindings.append(b)
            right = "$\(bindings.count)::boolean"
        case (.uuid, .uuid(let u)):
            guard comparison == .equal || comparison == .notEqual else { return .everything }
            left = column
            bindings.append(u)
            right = "$\(bindings.count)::uuid"
        default:
            return .everything
        }
        // Each leaf true or false, never null (`NOT` of it exact), in a
        // shape an index can serve: the column's test beside `IS [NOT] NULL`.
        let test: String
        switch comparison {
        case .equal: test = "(\(column) IS NOT NULL AND \(left) = \(right))"
        case .notEqual: test = "(\(column) IS NULL OR \(left) <> \(right))"
        case .less: test = "(\(column) IS NOT NULL AND \(left) < \(right))"
        case .lessOrEqual: test = "(\(column) IS NOT NULL AND \(left) <= \(right))"
        case .greater: test = "(\(column) IS NOT NULL AND \(left) > \(right))"
        case .greaterOrEqual: test = "(\(column) IS NOT NULL AND \(left) >= \(right))"
        }
        // `<>` took a stored null as passing; the others as not.
        let nullTakenAs = comparison == .notEqual
        guard nullPasses != nullTakenAs else { return SQLPredicate(sql: test, isExact: exact) }
        return SQLPredicate(sql: nullPasses ? "(\(column) IS NULL OR \(test))" : "(\(column) IS NOT NULL AND \(test))", isExact: exact)
    }

    /// `attribute IN values`, where a stored null reads as `null`.
    private static func isIn(
        _ column: String, _ type: AttributeType, _ null: PropertyValue, _ values: [PropertyValue], _ bindings: inout StatementParameters
    ) -> SQLPredicate {
        let nullPasses = StorePredicate.isIn(.constant(null), values).evaluate([])
        let listed: String
        var exact = true
        switch type {
        case .integer16, .integer32, .integer64:
            bindings.append(values.compactMap { if case .integer(let i) = $0 { i } else { nil } })
            listed = "\(column) = ANY($\(bindings.count)::bigint[])"
        case .string:
            let strings = values.compactMap { if case .string(let s) = $0 { s } else { nil } }
            guard !strings.contains(where: { $0.utf8.contains(0) }) else { return .everything }
            bindings.append(strings)
            listed = "normalize(\(column), NFC) = ANY(ARRAY(SELECT normalize(s, NFC) FROM unnest($\(bindings.count)::text[]) AS u(s)))"
        case .uuid:
            bindings.append(values.compactMap { if case .uuid(let u) = $0 { u } else { nil } })
            listed = "\(column) = ANY($\(bindings.count)::uuid[])"
        case .double:
            // A NaN is in no list in Swift, in PostgreSQL's it equals itself.
            exact = false
            bindings.append(values.compactMap { if case .double(let d) = $0, !d.isNaN { d } else { nil } })
            listed = "\(column) = ANY($\(bindings.count)::double precision[])"
        default:
            return .everything
        }
        let test = "(\(column) IS NOT NULL AND \(listed))"
        return SQLPredicate(sql: nullPasses ? "(\(column) IS NULL OR \(test))" : test, isExact: exact)
    }

    /// Whether `date` comes back from PostgreSQL as it went (a whole number
    /// of microseconds, as postgres-nio sends and reads it): then a
    /// comparison with it is as Swift's.
    static func keptExactly(_ date: Date) -> Bool {
        guard let microseconds = RowCoding.microseconds(date) else { return false }
        return RowCoding.date(microseconds: microseconds) == date
    }
}
