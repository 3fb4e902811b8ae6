import Foundation

/// A condition written as text, for tools that have no `#Predicate` to
/// hand (`strata-dump explain`): the test such a predicate translates to.
///
///     servings >= 2 AND rating < 4.5
///     name IN ('Soup', 'Stew') AND vegetarian = true
///     name STARTS WITH 'So' AND created > '2026-01-01T00:00:00Z'
///     notes = nil
///
/// Terms are joined by `AND`; each compares an attribute with a constant
/// (`=`, `!=`, `<`, `<=`, `>`, `>=`), lists constants (`IN (…)`), or gives
/// a string's prefix (`STARTS WITH`). A constant is read as the attribute's
/// type: a number, `'text'` or `"text"`, `true` / `false`, `nil`, a date as
/// ISO 8601 text or seconds since 2001, a UUID as text.
enum ConditionText {
    static func parse(_ text: String, entity: EntityDescription) throws(StrataError) -> ValueTest {
        var scanner = Scanner(text: text, entity: entity)
        var test = try scanner.term()
        while scanner.skip(keyword: "AND") { test = .and(test, try scanner.term()) }
        guard scanner.atEnd else { throw scanner.failure("expected AND or the end") }
        return test
    }

    private struct Scanner {
        let characters: [Character]
        var position = 0
        let text: String
        let entity: EntityDescription

        init(text: String, entity: EntityDescription) {
            self.text = text
            self.characters = Array(text)
            self.entity = entity
        }

        var atEnd: Bool {
            mutating get {
                skipSpaces()
                return position == characters.count
            }
        }

        func failure(_ message: String) -> StrataError {
            StrataError(.invalidArgument, "condition \(String(reflecting: text)), at character \(position + 1): \(message)")
        }

        mutating func skipSpaces() {
            while position < characters.count, characters[position].isWhitespace { position += 1 }
        }

        /// Skips `keyword` (any case) when it comes next, as a whole word.
        mutating func skip(keyword: String) -> Bool {
            skipSpaces()
            let word = Array(keyword)
            guard position + word.count <= characters.count,
                  String(characters[position..<(position + word.count)]).uppercased() == keyword,
                  position + word.count == characters.count || !characters[position + word.count].isLetter else { return false }
            position += word.count
            return true
        }

        mutating func skip(_ symbol: String) -> Bool {
            skipSpaces()
            let symbol = Array(symbol)
            guard position + symbol.count <= characters.count, Array(characters[position..<(position + symbol.count)]) == symbol else { return false }
            position += symbol.count
            return true
        }

        mutating func word() -> String? {
            skipSpaces()
            let start = position
            while position < characters.count, characters[position].isLetter || characters[position].isNumber
                    || "_.-+:".contains(characters[position]) { position += 1 }
            return position > start ? String(characters[start..<position]) : nil
        }

        mutating func term() throws(StrataError) -> ValueTest {
            guard let name = word() else { throw failure("expected an attribute's name") }
            guard let index = entity.propertyIndex[name], let type = entity.attributeTypes[index] else {
                throw failure("\(entity.name) has no attribute \(name)")
            }
            let property = ValueTest.Operand.property(index: index, null: .null)
            if skip(keyword: "STARTS") {
                guard skip(keyword: "WITH"), type == .string, case .string(let prefix) = try constant(type) else {
                    throw failure("STARTS WITH takes a string attribute and a string")
                }
                return .startsWith(property, prefix)
            }
            if skip(keyword: "IN") {
                guard skip("(") else { throw failure("expected ( after IN") }
                var tests: [ValueTest] = []
                repeat {
                    tests.append(.compare(property, .equal, .constant(try constant(type))))
                } while skip(",")
                guard skip(")") else { throw failure("expected , or ) in the list") }
                return ValueTest.any(tests[...])
            }
            let comparisons: [(String, ValueTest.Comparison)] = [
                ("==", .equal), ("!=", .notEqual), ("<=", .lessOrEqual), (">=", .greaterOrEqual),
                ("=", .equal), ("<", .less), (">", .greater),
            ]
            guard let comparison = comparisons.first(where: { skip($0.0) })?.1 else {
                throw failure("expected =, !=, <, <=, >, >=, IN or STARTS WITH after \(name)")
            }
            return .compare(property, comparison, .constant(try constant(type)))
        }

        /// A constant, read as a value of `type`.
        mutating func constant(_ type: AttributeType) throws(StrataError) -> PropertyValue {
            skipSpaces()
            let text: String
            let quoted: Bool
            if position < characters.count, characters[position] == "'" || characters[position] == "\"" {
                let quote = characters[position]
                position += 1
                let start = position
                while position < characters.count, characters[position] != quote { position += 1 }
                guard position < characters.count else { throw failure("a string has no closing \(quote)") }
                text = String(characters[start..<position])
                position += 1
                quoted = true
            } else {
                guard let word = word() else { throw failure("expected a value") }
                text = word
                quoted = false
            }
            if !quoted, text == "nil" || text.lowercased() == "null" { return .null }
            let value: PropertyValue?
            switch type {
            case .string: value = quoted ? .string(text) : nil
            case .integer16, .integer32, .integer64: value = Int64(text).map { .integer($0) }
            case .double: value = Double(text).map { .double($0) }
            case .bool: value = ["true": true, "false": false][text.lowercased()].map { .bool($0) }
            case .date:
                let parsed = Double(text).map { Date(timeIntervalSinceReferenceDate: $0) } ?? (try? Date(text, strategy: .iso8601))
                value = parsed.map { .date($0) }
            case .uuid: value = UUID(uuidString: text).map { .uuid($0) }
            case .binaryData: value = nil
            }
            guard let value else { throw failure("\(String(reflecting: text)) is not a value of type \(type)") }
            return value
        }
    }
}
