@_spi(StoreImplementation) import Strata

/// Names in SQL: every table, column, index and constraint name Strata
/// writes goes through here, quoted, so an entity called `Order` or an
/// attribute called `select` or `it's` is a name and never SQL.
///
/// PostgreSQL cuts a name longer than 63 bytes without a word
/// (`NAMEDATALEN`), which could make two names one: a name the model gives
/// (an entity, an attribute) that long is refused when the schema is built;
/// a name Strata makes up (an index, a join table's constraint) is
/// shortened with a hash of the whole.
enum SQLIdentifier {
    /// PostgreSQL's longest name, in bytes of UTF-8.
    static let maximumLength = 63

    /// `name` quoted as a PostgreSQL identifier (`"it""s"`).
    static func quoted(_ name: String) -> String {
        // Most names hold no quote: those skip Foundation's search and replace.
        guard name.utf8.contains(UInt8(ascii: "\"")) else { return "\"" + name + "\"" }
        return "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// Checks a name the model gives: not empty, no NUL, at most
    /// ``maximumLength`` bytes. `what` names it in the error ("entity
    /// Bookmark's attribute").
    static func check(_ name: String, _ what: String) throws(StrataError) {
        guard !name.isEmpty, !name.utf8.contains(0) else {
            throw StrataError(code: .invalidModel, message: "\(what) \"\(name)\" cannot be a PostgreSQL name (empty, or holds a NUL)")
        }
        guard name.utf8.count <= maximumLength else {
            throw StrataError(code: .invalidModel, message: """
                \(what) \(name) is \(name.utf8.count) bytes long; PostgreSQL keeps names of at most \(maximumLength) \
                (it would cut this one short): give it a shorter name
                """)
        }
    }

    /// A name Strata makes up from `parts` joined by `_`: as is when it
    /// fits, else cut and ended with a hash of the whole, so two long names
    /// stay two.
    static func made(_ parts: [String]) -> String {
        let whole = parts.joined(separator: "_")
        guard whole.utf8.count > maximumLength else { return whole }
        let hash = String(fnv1a(whole), radix: 16)
        var prefix = ""
        for character in whole {
            guard prefix.utf8.count + String(character).utf8.count + 1 + hash.utf8.count <= maximumLength else { break }
            prefix.append(character)
        }
        return prefix + "_" + hash
    }

    /// 64-bit FNV-1a of `text`'s UTF-8: stable across processes and
    /// versions (Swift's `Hasher` is seeded per process).
    private static func fnv1a(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return hash
    }
}
