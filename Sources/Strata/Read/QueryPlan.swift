internal import StrataStore

/// How a fetch reads the store: every record of the entity, or the entries
/// of one index within key ranges (SQLite's `EXPLAIN QUERY PLAN`).
///
/// ```swift
/// let plan = try context.explain(FetchRequest<Item>(predicate: #Predicate { $0.remoteID == 42 }))
/// print(plan)   // SEARCH Item USING INDEX (remoteID) (remoteID = ?)
/// ```
///
/// Either way, every candidate is judged by the whole predicate, and the
/// pending changes of the context and its ancestors are laid over the
/// store's: an index only narrows which stored records are read.
public struct QueryPlan: Sendable, CustomStringConvertible {
    /// The index read, or nil for a scan of every record of the entity.
    public let index: IndexDescription?
    /// Its position in the entity, for ``index``.
    let indexNumber: Int?
    /// The key ranges of the index that hold every candidate (ascending, disjoint).
    let ranges: KeyRanges
    /// Whether an entry in the ranges is a match by itself: the predicate is
    /// only the terms the ranges express. A count, or a fetch of IDs, then
    /// reads index entries and no record.
    let isExact: Bool
    /// What ``description`` says, kept in parts and put into words only
    /// when asked: a lookup plans a fetch every time it runs.
    let text: Text
    public var description: String { text.description }
    /// Whether the ranges are read last entry first: a fetch sorted in
    /// descending order of an indexed attribute.
    var isDescending = false
    /// When the ranges hold the index's first attribute equal to one of
    /// some values: that attribute and the values' encodings. Pending
    /// objects are looked up by them (``PendingKeyIndex``).
    var leading: LeadingEquality? = nil
    /// For a scan of a store other than the log store: the predicate the
    /// store may narrow its scan by (``PersistentStore``). Its rows are
    /// judged again all the same.
    var narrowing: StorePredicate? = nil

    /// Whether the store is read for fewer than all of the entity's objects
    /// (an index's ranges, or a narrowed scan): then an object held or
    /// changed above the store, which the read did not meet, is judged on
    /// its own values after it.
    var isNarrowed: Bool { indexNumber != nil || narrowing != nil }

    struct LeadingEquality {
        let property: Int
        /// Ascending, each once.
        let encodings: SortedKeys

        /// Whether `key` is one of ``encodings`` (a binary search).
        func contains(_ key: [UInt8]) -> Bool { encodings.contains(key) }
    }

    /// This plan, with `suffix` added to what it says.
    func saying(_ suffix: String) -> QueryPlan {
        QueryPlan(index: index, indexNumber: indexNumber, ranges: ranges, isExact: isExact, text: .suffixed(text, suffix),
                  isDescending: isDescending, leading: leading, narrowing: narrowing)
    }

    static func scan(_ entity: EntityDescription) -> QueryPlan {
        QueryPlan(index: nil, indexNumber: nil, ranges: [], isExact: false, text: .scan(entity))
    }

    /// A scan of another store, which it may narrow by `test`.
    static func scan(_ entity: EntityDescription, narrowedBy test: ValueTest?) -> QueryPlan {
        var plan = scan(entity)
        plan.narrowing = test.flatMap(StorePredicate.init)
        return plan
    }

    /// A plan's description, in parts.
    enum Text: Sendable, CustomStringConvertible {
        case scan(EntityDescription)
        case literal(String)
        /// `SEARCH entity USING INDEX (…) (terms)`.
        case search(EntityDescription, IndexDescription, [UsedTerm])
        /// `SEARCH entity USING INDEX (…) (name = ?)`, for property
        /// `property`: a lookup by one value, which a loop plans once per
        /// call (nothing to allocate).
        case searchEqual(EntityDescription, IndexDescription, property: Int)
        indirect case suffixed(Text, String)
        /// `text` read in the order of `property` (`… ORDER BY name DESC`),
        /// or the whole index in it when `text` is nil.
        indirect case ordered(Text?, EntityDescription, IndexDescription, property: Int, descending: Bool)

        var description: String {
            switch self {
            case .scan(let entity): "SCAN \(entity.name)"
            case .literal(let text): text
            case .search(let entity, let index, let used):
                "SEARCH \(entity.name) USING INDEX \(index) (" + used.map { $0.text(entity) }.joined(separator: " AND ") + ")"
            case .searchEqual(let entity, let index, let property):
                Text.search(entity, index, [UsedTerm(property: property, form: .equal)]).description
            case .suffixed(let text, let suffix): text.description + suffix
            case .ordered(let text, let entity, let index, let property, let descending):
                (text?.description ?? "SCAN \(entity.name) USING INDEX \(index)")
                    + " ORDER BY " + entity.properties[property].name + (descending ? " DESC" : "")
            }
        }
    }

    /// A term a plan's ranges express.
    struct UsedTerm: Sendable {
        enum Form: Sendable { case equal, inList(Int), startsWith, greater, greaterOrEqual, less, lessOrEqual }
        let property: Int
        let form: Form

        func text(_ entity: EntityDescription) -> String {
            let name = entity.properties[property].name
            switch form {
            case .equal: return "\(name) = ?"
            case .inList(let count): return "\(name) IN (\(count) values)"
            case .startsWith: return "\(name) STARTS WITH ?"
            case .greater: return "\(name) > ?"
            case .greaterOrEqual: return "\(name) >= ?"
            case .less: return "\(name) < ?"
            case .lessOrEqual: return "\(name) <= ?"
            }
        }
    }
}

/// Picks the index that narrows a translated predicate most: equality on
/// its leading attributes (with one constant, or any of several: `IN`, or
/// `||` of one attribute's equalities), then a range or an ASCII prefix on
/// the next. Only conjuncts (the terms of a top-level `&&`) are used; `||`
/// across attributes, `!=`, relationships and anything Foundation evaluates
/// leave the fetch to a scan. Whatever the index selects is a superset of
/// the matches: the whole predicate is evaluated on each.
enum QueryPlanner {
    /// One `attribute <comparison> constant` term; for equality, the
    /// attribute may equal any of several constants (`[a, b].contains($0.x)`,
    /// or `$0.x == a || $0.x == b`). Or a string attribute's prefix.
    struct Term {
        let property: Int
        /// What a stored null reads as (see ``ValueTest/Operand``).
        let null: PropertyValue
        /// Nil for a prefix.
        let comparison: ValueTest.Comparison?
        /// The constants: one, or for equality any number.
        let constants: [PropertyValue]
        /// For `starts(with:)`: the prefix.
        var prefix: String? = nil

        var constant: PropertyValue { constants[0] }

        init(property: Int, null: PropertyValue, comparison: ValueTest.Comparison, constant: PropertyValue) {
            self.property = property
            self.null = null
            self.comparison = comparison
            self.constants = [constant]
        }

        init(property: Int, null: PropertyValue, equalToAnyOf constants: [PropertyValue]) {
            self.property = property
            self.null = null
            self.comparison = .equal
            self.constants = constants
        }

        init(property: Int, null: PropertyValue, prefix: String) {
            self.property = property
            self.null = null
            self.comparison = nil
            self.constants = []
            self.prefix = prefix
        }
    }

    /// The encodings of terms' constants (``encodings(equalTo:)``), by the
    /// term's position, worked out once however many indexes are weighed.
    struct KnownEncodings {
        private var known: [Int: SortedKeys] = [:]

        mutating func of(_ position: Int, in terms: [Term]) -> SortedKeys {
            if let encodings = known[position] { return encodings }
            let encodings = QueryPlanner.encodings(equalTo: terms[position])
            known[position] = encodings
            return encodings
        }
    }

    static func plan(_ test: ValueTest?, entity: EntityDescription) -> QueryPlan {
        guard let test, !entity.indexes.isEmpty else { return .scan(entity) }
        if let point = pointPlan(test, entity: entity) { return point }
        return generalPlan(test, entity: entity)
    }

    /// The plan of a lookup by one attribute's value (`$0.sku == sku`,
    /// what every find-or-create asks): ``PointTerm/plan(of:)``. It is the
    /// plan ``generalPlan(_:entity:)`` makes of such a test (each index the
    /// attribute leads scores the same, and the first wins); nil for any
    /// other test.
    static func pointPlan(_ test: ValueTest, entity: EntityDescription) -> QueryPlan? {
        PointTerm(test, entity: entity)?.plan(of: entity)
    }

    /// ``plan(_:entity:)`` for any test: every index weighed.
    static func generalPlan(_ test: ValueTest, entity: EntityDescription) -> QueryPlan {
        var terms: [Term] = []
        var onlyTerms = true
        collect(test, into: &terms, onlyTerms: &onlyTerms)
        var best: (score: Int, plan: QueryPlan)?
        var known = KnownEncodings()
        for number in entity.indexes.indices {
            if let candidate = plan(index: number, terms: terms, onlyTerms: onlyTerms, entity: entity, known: &known), candidate.score > (best?.score ?? 0) {
                best = candidate
            }
        }
        if let best { return best.plan }
        // Say why an index that leads with a tested attribute went unused.
        if let long = terms.first(where: { term in
            term.constants.count > maxPrefixes && entity.indexedProperties.contains { $0.first == term.property }
        }) {
            return QueryPlan(index: nil, indexNumber: nil, ranges: [], isExact: false, text: .literal(
                "SCAN \(entity.name) (an IN list of \(long.constants.count) values on \(entity.properties[long.property].name) is over the \(maxPrefixes) an index read takes)"))
        }
        return .scan(entity)
    }

    /// `onlyTerms` turns false when a conjunct is not such a term.
    private static func collect(_ test: ValueTest, into terms: inout [Term], onlyTerms: inout Bool) {
        switch test {
        case .and(let a, let b):
            collect(a, into: &terms, onlyTerms: &onlyTerms)
            collect(b, into: &terms, onlyTerms: &onlyTerms)
        case .compare(.property(let index, let null), let comparison, .constant(let value)):
            terms.append(Term(property: index, null: null, comparison: comparison, constant: value))
        case .compare(.constant(let value), let comparison, .property(let index, let null)):
            terms.append(Term(property: index, null: null, comparison: comparison.mirrored, constant: value))
        case .or:
            // Equalities of one attribute, joined by `||`: one term, several constants.
            if let (property, null, constants) = alternatives(test) {
                terms.append(Term(property: property, null: null, equalToAnyOf: constants))
            } else {
                onlyTerms = false
            }
        case .startsWith(.property(let index, let null), let prefix):
            terms.append(Term(property: index, null: null, prefix: prefix))
        case .isIn(.property(let index, let null), let constants):
            // `IN`: one term, its constants as listed (the plan's ranges
            // are their encodings, sorted, each once).
            terms.append(Term(property: index, null: null, equalToAnyOf: constants.values))
        default:
            onlyTerms = false
        }
    }

    /// The attribute and constants of `test` when it is equalities of one
    /// attribute with constants joined by `||`; nil otherwise.
    private static func alternatives(_ test: ValueTest) -> (Int, PropertyValue, [PropertyValue])? {
        switch test {
        case .or(let a, let b):
            guard let left = alternatives(a), let right = alternatives(b), left.0 == right.0 else { return nil }
            return (left.0, left.1, left.2 + right.2)
        case .compare(.property(let index, let null), .equal, .constant(let value)),
             .compare(.constant(let value), .equal, .property(let index, let null)):
            return (index, null, [value])
        default:
            return nil
        }
    }

    /// The ranges of index `number` for `terms`, and how much they narrow
    /// (two per attribute held equal, one for a range); nil when no term applies.
    private static func plan(
        index number: Int, terms: [Term], onlyTerms: Bool, entity: EntityDescription, known: inout KnownEncodings
    ) -> (score: Int, plan: QueryPlan)? {
        planWithShape(index: number, terms: terms, onlyTerms: onlyTerms, entity: entity, known: &known).map { ($0.score, $0.plan) }
    }

    /// ``plan(index:terms:onlyTerms:entity:)``, with how many leading
    /// attributes it holds equal and in how many alternative key prefixes.
    private static func planWithShape(
        index number: Int, terms: [Term], onlyTerms: Bool, entity: EntityDescription, known: inout KnownEncodings
    ) -> (score: Int, plan: QueryPlan, heldEqual: Int, prefixes: Int)? {
        let properties = entity.indexedProperties[number]
        let prefix = IndexKeyCoding.prefix(of: entity, index: number)
        // Each equal attribute may hold its constant, or be null where a
        // stored null reads as that constant: a set of key prefixes, each
        // of `prefixes` followed by each of `tail` (the last attribute's
        // alternatives, kept apart: the keys of a long `IN` are not each
        // copied into an array of their own).
        var prefixes: [[UInt8]] = [prefix]
        var tail: SortedKeys?
        var prefixCount: Int { prefixes.count * (tail?.count ?? 1) }
        func allPrefixes() -> [[UInt8]] {
            guard let tail else { return prefixes }
            return prefixes.flatMap { p in tail.map { p + $0 } }
        }
        var used: [QueryPlan.UsedTerm] = []
        var score = 0
        var position = 0
        var startsWithUsed = false
        var leading: QueryPlan.LeadingEquality?
        while position < properties.count,
              let t = terms.firstIndex(where: { $0.property == properties[position] && $0.comparison == .equal && usable($0, entity) }) {
            let term = terms[t]
            let alternatives = known.of(t, in: terms)
            guard prefixCount * alternatives.count <= maxPrefixes else { break }
            prefixes = allPrefixes()
            tail = alternatives
            if position == 0 { leading = QueryPlan.LeadingEquality(property: term.property, encodings: alternatives) }
            used.append(QueryPlan.UsedTerm(property: term.property, form: term.constants.count == 1 ? .equal : .inList(term.constants.count)))
            score += 2
            position += 1
        }
        var ranges: [KeyRange] = []
        if position < properties.count {
            let property = properties[position]
            let lower = terms.first { $0.property == property && ($0.comparison == .greater || $0.comparison == .greaterOrEqual) && usable($0, entity) }
            let upper = terms.first { $0.property == property && ($0.comparison == .less || $0.comparison == .lessOrEqual) && usable($0, entity) }
            let starting = terms.first { $0.property == property && $0.prefix.map(isIndexablePrefix) == true && entity.attributeTypes[property] == .string }
            if lower == nil && upper == nil, let starting, let text = starting.prefix {
                // The entries whose string starts with the prefix's bytes: a
                // superset (a Character may go on past the prefix's end, as
                // "q" + U+0301 does past "q"), so the plan is not exact.
                used.append(QueryPlan.UsedTerm(property: property, form: .startsWith))
                score += 1
                startsWithUsed = true
                for p in allPrefixes() {
                    var bytes = p + [1]
                    for byte in text.utf8 {
                        bytes.append(byte)
                        if byte == 0 { bytes.append(0xFF) }
                    }
                    ranges.append(KeyRange(prefix: bytes))
                }
            } else if lower != nil || upper != nil {
                if let lower { used.append(QueryPlan.UsedTerm(property: property, form: lower.comparison == .greater ? .greater : .greaterOrEqual)) }
                if let upper { used.append(QueryPlan.UsedTerm(property: property, form: upper.comparison == .less ? .less : .lessOrEqual)) }
                score += 1
                // Stored nulls read as a value that may itself be in range.
                let nullsMatch = [lower, upper].allSatisfy { term in term.map { ValueTest.holds($0.null, $0.comparison!, $0.constant) } ?? true }
                for p in allPrefixes() {
                    if nullsMatch { ranges.append(KeyRange(prefix: p + [0])) }
                    let start = lower.map { term -> [UInt8] in
                        let at = p + encoding(of: term.constant)
                        return term.comparison == .greater ? endOfPrefix(at) ?? at : at
                    } ?? (p + [1])
                    let end = upper.map { term -> [UInt8]? in
                        let at = p + encoding(of: term.constant)
                        return term.comparison == .less ? at : endOfPrefix(at)
                    } ?? endOfPrefix(p)
                    ranges.append(KeyRange(start: start, end: end))
                }
            }
        }
        guard score > 0 else { return nil }
        var keyRanges: KeyRanges
        if ranges.isEmpty {
            // A range per prefix, in one buffer.
            keyRanges = KeyRanges()
            keyRanges.reserveCapacity(ranges: prefixCount, bytes: 2 * prefixCount * (prefix.count + 16))
            for p in prefixes {
                if let tail {
                    tail.withKeys { count, key in keyRanges.appendPrefixes(p, followedByEach: count, key) }
                } else {
                    keyRanges.appendPrefix { $0 += p }
                }
            }
        } else {
            keyRanges = KeyRanges(ranges)
        }
        // Built in order when one attribute's alternatives (sorted) are
        // appended to one prefix: an `IN` of many values is not sorted twice.
        if !keyRanges.isAscending { keyRanges = keyRanges.sorted() }
        let index = entity.indexes[number]
        // Every term expressed by the ranges, nothing else asked: exact.
        let isExact = onlyTerms && used.count == terms.count && !startsWithUsed
        return (score, QueryPlan(index: index, indexNumber: number, ranges: keyRanges, isExact: isExact, text: .search(entity, index, used), leading: leading),
                position, prefixCount)
    }

    /// At most this many key prefixes (alternatives of the equal
    /// attributes, multiplied): each is a seek of the in-memory index, so a
    /// seek per value of an `IN` list costs what a lookup of that value
    /// does. A plan holds the attributes equal while their product stays
    /// within it; an `IN` list on the leading attribute longer than this
    /// leaves the fetch to a scan, and ``QueryPlanner/plan(_:entity:)``
    /// says so in the plan's description.
    static let maxPrefixes = 1 << 20

    /// Whether the index can serve `term`: constants of the attribute's own
    /// type (or nil, for equality), and no NaN (which equals nothing).
    private static func usable(_ term: Term, _ entity: EntityDescription) -> Bool {
        guard let type = entity.attributeTypes[term.property], term.prefix == nil, !term.constants.isEmpty else { return false }
        return term.constants.allSatisfy { constant in
            if case .null = constant { return term.comparison == .equal }
            return usable(constant, type)
        }
    }

    /// Whether an index of an attribute of `type` can hold `constant`: one
    /// of its type, and no NaN (which equals nothing).
    static func usable(_ constant: PropertyValue, _ type: AttributeType) -> Bool {
        if case .double(let d) = constant, d.isNaN { return false }
        return IndexKeyCoding.matches(constant, type)
    }

    /// Whether an index serves `starts(with: prefix)`: a non-empty ASCII
    /// prefix, whose bytes every string that starts with it begins with
    /// (an ASCII Character is one byte, and canonical composition leaves it
    /// alone when no mark follows it — a mark would make it another Character).
    private static func isIndexablePrefix(_ prefix: String) -> Bool {
        !prefix.isEmpty && prefix.utf8.allSatisfy { $0 < 0x80 }
    }

    /// The encodings a stored value equal to one of the term's constants can
    /// have, ascending, each once.
    private static func encodings(equalTo term: Term) -> SortedKeys {
        if term.constants.count == 1, case let constant = term.constants[0], constant != .null, !ValueTest.holds(term.null, .equal, constant) {
            return SortedKeys(one: encoding(of: constant))
        }
        // Every encoding in one buffer, sorted as spans of it.
        var bytes: [UInt8] = []
        // Room for every encoding, so the buffer is not copied as it grows:
        // a string's is its UTF-8, a tag and an end (escapes aside).
        bytes.reserveCapacity(term.constants.reduce(0) { room, constant in
            if case .string(let string) = constant { return room + string.utf8.count + 3 }
            return room + 17
        })
        var spans: [Range<Int>] = []
        spans.reserveCapacity(term.constants.count + 1)
        var nullEncoded = false
        // A stored null reads as null (the usual case: no constant but null
        // equals it), or as a value some constant may equal.
        var nullMayEqual = term.null != .null
        for constant in term.constants {
            if case .null = constant {
                nullEncoded = true
                continue
            }
            let start = bytes.count
            IndexKeyCoding.appendValue(constant, to: &bytes)
            spans.append(start..<bytes.count)
            if nullMayEqual && ValueTest.holds(term.null, .equal, constant) {
                nullEncoded = true
                nullMayEqual = false
            }
        }
        if nullEncoded {
            spans.append(bytes.count..<bytes.count + 1)
            bytes.append(0)
        }
        return SortedKeys(sorting: spans, of: bytes)
    }

    static func encoding(of value: PropertyValue) -> [UInt8] {
        var bytes: [UInt8] = []
        // One allocation: a string's bytes, its tag and its end (escapes aside).
        if case .string(let string) = value { bytes.reserveCapacity(string.utf8.count + 3) }
        IndexKeyCoding.appendValue(value, to: &bytes)
        return bytes
    }
}

extension QueryPlanner {
    /// The plan reading index `number` whose ranges express all of `test`
    /// (every entry in them is a match, ``QueryPlan/isExact``); for no test,
    /// the whole index. Nil when the test asks more than the index's ranges say.
    static func exactPlan(_ test: ValueTest?, entity: EntityDescription, index number: Int) -> QueryPlan? {
        let index = entity.indexes[number]
        guard let test else {
            return QueryPlan(index: index, indexNumber: number, ranges: [KeyRange(prefix: IndexKeyCoding.prefix(of: entity, index: number))],
                             isExact: true, text: .literal("SCAN \(entity.name) USING INDEX \(index)"))
        }
        var terms: [Term] = []
        var onlyTerms = true
        collect(test, into: &terms, onlyTerms: &onlyTerms)
        var known = KnownEncodings()
        guard let shaped = planWithShape(index: number, terms: terms, onlyTerms: onlyTerms, entity: entity, known: &known), shaped.plan.isExact else {
            return nil
        }
        return shaped.plan
    }

    /// The plan of an index whose leading attributes are `grouping` (in any
    /// order) and whose ranges express all of `test`: counting each run of
    /// its entries answers a count per group (SQLite's covering index for a
    /// `GROUP BY`). Nil when no index does.
    static func groupCountPlan(_ test: ValueTest?, entity: EntityDescription, grouping: [Int]) -> QueryPlan? {
        let grouped = Set(grouping)
        for number in entity.indexes.indices {
            let leading = entity.indexedProperties[number].prefix(grouped.count)
            guard leading.count == grouped.count, Set(leading) == grouped,
                  let plan = exactPlan(test, entity: entity, index: number) else { continue }
            return QueryPlan(index: plan.index, indexNumber: plan.indexNumber, ranges: plan.ranges, isExact: true,
                             text: .suffixed(plan.text, " FOR GROUP BY"))
        }
        return nil
    }

    /// A plan whose index yields the candidates of `test` in ascending
    /// order of attribute `property` (then by the index's later attributes
    /// and the primary key), or in descending order when `descending`: an
    /// index that has the attribute after the leading attributes the
    /// predicate holds equal, in one key prefix. Nil when no index does. A
    /// fetch sorted by the attribute, with a limit, then reads the first
    /// entries and stops.
    static func ordered(_ test: ValueTest?, entity: EntityDescription, by property: Int, descending: Bool = false) -> QueryPlan? {
        var terms: [Term] = []
        var onlyTerms = true
        if let test { collect(test, into: &terms, onlyTerms: &onlyTerms) }
        var best: (score: Int, plan: QueryPlan)?
        var known = KnownEncodings()
        for number in entity.indexes.indices {
            guard let k = entity.indexedProperties[number].firstIndex(of: property) else { continue }
            let index = entity.indexes[number]
            if let shaped = planWithShape(index: number, terms: terms, onlyTerms: onlyTerms, entity: entity, known: &known) {
                // Sorted by the attribute across the ranges: every attribute
                // before it held equal, in one prefix.
                guard shaped.heldEqual >= k, shaped.prefixes == 1, shaped.score > (best?.score ?? -1) else { continue }
                let plan = shaped.plan
                best = (shaped.score, QueryPlan(index: index, indexNumber: number, ranges: plan.ranges, isExact: plan.isExact,
                                                text: .ordered(plan.text, entity, index, property: property, descending: descending)))
            } else if k == 0, best == nil {
                best = (0, QueryPlan(index: index, indexNumber: number, ranges: [KeyRange(prefix: IndexKeyCoding.prefix(of: entity, index: number))],
                                     isExact: test == nil, text: .ordered(nil, entity, index, property: property, descending: descending)))
            }
        }
        guard var plan = best?.plan else { return nil }
        plan.isDescending = descending
        return plan
    }
}

/// One attribute equal to one constant, read through the first index that
/// attribute leads (`$0.sku == sku`): the test of every find-or-create,
/// recognized without collecting terms or weighing every index, and its
/// constant encoded once — for the plan's key prefix and for the lookup of
/// pending objects by key alike.
struct PointTerm {
    let property: Int
    /// What a stored null reads as (`ValueTest.Operand.property`'s).
    let null: PropertyValue
    let constant: PropertyValue
    /// The index read: the first the attribute leads.
    let indexNumber: Int
    /// The constant's encoding in the index.
    let key: [UInt8]

    /// Nil for any other test, and for a constant a stored null reads as
    /// (which needs the null's key too).
    init?(_ test: ValueTest, entity: EntityDescription) {
        switch test {
        case .compare(.property(let index, let null), .equal, .constant(let value)),
             .compare(.constant(let value), .equal, .property(let index, let null)):
            self.init(property: index, null: null, equalTo: value, entity: entity)
        default:
            return nil
        }
    }

    /// Attribute `property` (whose stored null reads as `null`) equal to
    /// `constant`, without a `ValueTest` to take apart (an allocation per
    /// lookup: the type is indirect); nil where ``init(_:entity:)`` is.
    init?(property: Int, null: PropertyValue, equalTo constant: PropertyValue, entity: EntityDescription) {
        guard constant != .null, !ValueTest.holds(null, .equal, constant), let type = entity.attributeTypes[property],
              QueryPlanner.usable(constant, type),
              let number = entity.indexedProperties.firstIndex(where: { $0.first == property }) else { return nil }
        self.property = property
        self.null = null
        self.constant = constant
        indexNumber = number
        key = QueryPlanner.encoding(of: constant)
    }

    /// Whether an object with `values` passes the term, as the equality's
    /// `ValueTest` would judge it.
    func passes(_ values: [PropertyValue]) -> Bool {
        let value = values[property]
        if case .null = value { return ValueTest.holds(null, .equal, constant) }
        return ValueTest.holds(value, .equal, constant)
    }

    /// The pending objects a lookup of the term meets are those keyed so (``PendingKeyIndex``).
    var leading: QueryPlan.LeadingEquality {
        QueryPlan.LeadingEquality(property: property, encodings: SortedKeys(one: key))
    }

    /// The index's entries for the constant: its prefix and the key, in the
    /// ranges' one buffer.
    func ranges(of entity: EntityDescription) -> KeyRanges {
        var ranges = KeyRanges()
        ranges.reserveCapacity(ranges: 1, bytes: 2 * (IndexKeyCoding.prefixLength + key.count))
        ranges.appendPrefix { start in
            IndexKeyCoding.appendPrefix(of: entity, index: indexNumber, to: &start)
            start.append(contentsOf: key)
        }
        return ranges
    }

    func plan(of entity: EntityDescription) -> QueryPlan {
        let index = entity.indexes[indexNumber]
        return QueryPlan(index: index, indexNumber: indexNumber, ranges: ranges(of: entity),
                         isExact: true, text: .searchEqual(entity, index, property: property), leading: leading)
    }
}
