import Foundation
@_spi(StoreImplementation) import Strata
@testable import StrataPostgres
import PostgresNIO
import Testing

/// Predicates pushed down to PostgreSQL, against Swift's own answer
/// (``StorePredicate/evaluate(_:)``) on the same rows: never fewer, and
/// exactly those where the translation says it is exact. Randomized, with
/// the values where the two languages differ: NaN, -0.0, nulls, dates
/// finer than a microsecond, strings equal only by canonical equivalence,
/// LIKE's own characters.
@Suite("Fetches as SQL", .enabled(if: TestServer.isAvailable, "no PostgreSQL server (see the message above)"))
struct FetchTests {
    /// A generator with a seed, so a failure can be run again.
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static let day = Date(timeIntervalSince1970: 1_700_000_000)
    static let uuids = [UUID(), UUID(), UUID()]
    /// Per attribute: the values rows and constants are drawn from.
    static let pools: [String: [PropertyValue]] = [
        "title": [.null, .string(""), .string("a"), .string("ab"), .string("abc"), .string("é"), .string("e\u{301}"),
                  .string("e\u{301}x"), .string("K"), .string("\u{212A}"), .string("Zebra"), .string("zebra"),
                  .string("%"), .string("_x"), .string("a%b"), .string("a_b")],
        "visits": [.integer(0), .integer(1), .integer(-1), .integer(42), .integer(Int64.max), .integer(Int64.min)],
        "rating": [.null, .integer(0), .integer(7), .integer(Int64(Int16.min)), .integer(Int64(Int16.max))],
        "rank": [.null, .integer(0), .integer(-3), .integer(Int64(Int32.max))],
        "score": [.null, .double(0), .double(-0.0), .double(1.5), .double(-2.5), .double(.nan), .double(.infinity), .double(-.infinity)],
        "pinned": [.bool(true), .bool(false)],
        "added": [.null, .date(day), .date(day.addingTimeInterval(0.000_000_4)), .date(day.addingTimeInterval(1)),
                  .date(day.addingTimeInterval(-0.000_001)), .date(Date(timeIntervalSince1970: -86_400.000_000_3))],
        "remoteID": [.null, .uuid(uuids[0]), .uuid(uuids[1]), .uuid(uuids[2])],
    ]
    static let prefixes = ["", "a", "e", "é", "K", "%", "_", "a%", "Z"]

    /// Every object `store` gives for `predicate`, and whether it says they all pass.
    func fetched(_ store: PostgresStore, _ entity: EntityDescription, _ predicate: StorePredicate?) throws -> (rows: [(id: ObjectID, row: StoredSnapshot)], isExact: Bool) {
        var rows: [(id: ObjectID, row: StoredSnapshot)] = []
        let isExact = try store.forEachStored(of: entity, matching: predicate) { (id, row) throws(StrataError) -> Bool in
            rows.append((id, row))
            return true
        }
        return (rows, isExact)
    }

    /// 300 rows of values drawn from ``pools``, written in one save;
    /// Strata's view of them: as they read back.
    func insertRandomRows(into store: PostgresStore, _ entity: EntityDescription, _ random: inout SplitMix) throws -> [(id: ObjectID, row: StoredSnapshot)] {
        let names = entity.properties.map(\.name)
        var changes = StoreChanges()
        for key in 1...300 {
            var values = entity.properties.map { property -> PropertyValue in
                if case .relationship(let r) = property, r.isToMany { return .objects([]) }
                return .null
            }
            values[names.firstIndex(of: "url")!] = .string("u\(key)")
            for (name, pool) in Self.pools { values[names.firstIndex(of: name)!] = pool.randomElement(using: &random)! }
            changes.inserted.append((ObjectID(entity: entity, storedPrimaryKey: UInt64(key)), values))
        }
        #expect(try store.write(changes) == .written(1))
        let stored = try fetched(store, entity, nil).rows
        #expect(stored.count == 300)
        return stored
    }

    /// How many stored objects pass `predicate`, as a context asks for a
    /// count: one ungrouped `.count`; nil where PostgreSQL cannot count exactly.
    static func count(_ store: PostgresStore, _ entity: EntityDescription, _ predicate: StorePredicate?) throws -> Int? {
        try store.aggregates(of: entity, matching: predicate, groupedBy: [], computing: [.count], excluding: [])
            .map { $0[0].results[0].values }
    }

    /// Swift's order of two values, as a fetch sorts them: nil first, then
    /// `<` (canonical equivalence for strings), NaN after every number.
    static func swiftOrder(_ a: PropertyValue, _ b: PropertyValue) -> ComparisonResult {
        func order<T: Comparable>(_ x: T, _ y: T) -> ComparisonResult { x < y ? .orderedAscending : y < x ? .orderedDescending : .orderedSame }
        switch (a, b) {
        case (.null, .null): return .orderedSame
        case (.null, _): return .orderedAscending
        case (_, .null): return .orderedDescending
        case (.integer(let x), .integer(let y)): return order(x, y)
        case (.string(let x), .string(let y)): return order(x, y)
        case (.date(let x), .date(let y)): return order(x, y)
        case (.double(let x), .double(let y)):
            if x.isNaN || y.isNaN { return x.isNaN == y.isNaN ? .orderedSame : x.isNaN ? .orderedDescending : .orderedAscending }
            return order(x, y)
        default: Issue.record("no order between \(a) and \(b)"); return .orderedSame
        }
    }

    /// A fetch's page in its order comes from PostgreSQL in Swift's order
    /// — strings equal by canonical equivalence, NaN, -0.0, nulls, dates
    /// finer than PostgreSQL keeps, ties by primary key — whether the
    /// caller stops in the first page or reads on past it; and a count is
    /// Swift's count where the predicate translates exactly.
    @Test(arguments: [UInt64(1), 2])
    func pagesInOrderAndCountsAnswerAsSwift(seed: UInt64) throws {
        var random = SplitMix(state: seed)
        let model = try bookmarksModel()
        let entity = model.entity(named: "Bookmark")!
        let store = try PostgresStore(try TestServer.freshDatabase(), model: model, scanPageSize: 64)
        defer { store.close() }
        let stored = try insertRandomRows(into: store, entity, &random)
        let names = entity.properties.map(\.name)
        let orderable = ["title", "visits", "rating", "rank", "score", "added"].map { names.firstIndex(of: $0)! }
        let visits = names.firstIndex(of: "visits")!, title = names.firstIndex(of: "title")!
        let predicates: [StorePredicate?] = [
            nil,
            .compare(.property(index: visits, nullReadsAs: .integer(0)), .greater, .constant(.integer(0))),
            .startsWith(.property(index: title, nullReadsAs: .null), "a"),  // judged again in Swift
        ]
        for _ in 0..<40 {
            let order = (0..<Int.random(in: 1...2, using: &random)).map { _ in
                StoreSortKey(property: orderable.randomElement(using: &random)!, descending: Bool.random(using: &random))
            }
            let predicate = predicates.randomElement(using: &random)!
            let swift = stored.filter { predicate?.evaluate($0.row.values) ?? true }.sorted { a, b in
                for key in order {
                    let (x, y) = (a.row.values[key.property], b.row.values[key.property])
                    switch key.descending ? Self.swiftOrder(y, x) : Self.swiftOrder(x, y) {
                    case .orderedAscending: return true
                    case .orderedDescending: return false
                    case .orderedSame: continue
                    }
                }
                return a.id.storedPrimaryKey < b.id.storedPrimaryKey
            }.map(\.id)
            // A page of a few, and everything (past the first page, read again in a transaction).
            for (expecting, taking) in [(7, 7), (10, Int.max)] {
                var postgres: [ObjectID] = []
                let exact = try store.forEachStored(of: entity, matching: predicate, orderedBy: order, expecting: expecting) {
                    (id, row) throws(StrataError) -> Bool in
                    if predicate?.evaluate(row.values) ?? true { postgres.append(id) }
                    return postgres.count < taking
                }
                let sql = try store.explain(entity, matching: predicate, orderedBy: order) ?? "-"
                #expect(exact != nil)
                #expect(postgres == Array(swift.prefix(taking)), "\(order) \(String(describing: predicate)): \(sql)")
            }
            let counted = try Self.count(store, entity, predicate)
            if let counted { #expect(counted == swift.count) } else { #expect(predicate != nil) }
        }
        // Groups and aggregates, other objects left out: as Swift groups, sums and orders the values.
        let groupable = ["title", "visits", "rating", "pinned", "added", "remoteID"].map { names.firstIndex(of: $0)! }
        let (score, added, rating) = (names.firstIndex(of: "score")!, names.firstIndex(of: "added")!, names.firstIndex(of: "rating")!)
        let columns: [StoreAggregate] = [.count, .sum(property: visits), .sum(property: score), .minimum(property: title),
                                         .maximum(property: added), .minimum(property: score), .maximum(property: rating)]
        func swiftResults(_ members: [[PropertyValue]]) -> [StoreGroup.Result] {
            columns.map { column in
                switch column {
                case .count: return StoreGroup.Result(value: .integer(Int64(members.count)), values: members.count)
                case .sum(let p):
                    let held = members.map { $0[p] }.filter { $0 != .null }
                    var sum: PropertyValue = .null
                    if case .integer = held.first {
                        // Exact, as the sum of an integer attribute is: an Int64 if it fits.
                        let exact = held.reduce(Int128(0)) { total, value in if case .integer(let x) = value { total + Int128(x) } else { total } }
                        sum = Int64(exactly: exact).map(PropertyValue.integer) ?? .double(Double(exact))
                    } else if !held.isEmpty {
                        sum = .double(held.reduce(0.0) { total, value in if case .double(let x) = value { total + x } else { total } })
                    }
                    return StoreGroup.Result(value: sum, values: held.count)
                case .minimum(let p), .maximum(let p):
                    let held = members.map { $0[p] }.filter { $0 != .null }
                    let isMinimum = if case .minimum = column { true } else { false }
                    let extreme = held.isEmpty ? .null : held.dropFirst().reduce(held[0]) { best, value in
                        let order = Self.swiftOrder(value, best)
                        return (isMinimum ? order == .orderedAscending : order == .orderedDescending) ? value : best
                    }
                    return StoreGroup.Result(value: extreme, values: held.count)
                }
            }
        }
        func alike(_ a: StoreGroup.Result, _ b: StoreGroup.Result) -> Bool {
            guard a.values == b.values else { return false }
            switch (a.value, b.value) {
            case (.double(let x), .double(let y)):
                return (x.isNaN && y.isNaN) || x == y || abs(x - y) <= 1e-9 * max(abs(x), abs(y))
            case (.double(let x), .integer(let y)), (.integer(let y), .double(let x)):
                return Double(y) == x  // an integer sum past 64 bits, as a double
            default:
                return a.value == b.value
            }
        }
        for _ in 0..<30 {
            let grouping = Array(groupable.shuffled(using: &random).prefix(Int.random(in: 0...2, using: &random)))
            let predicate = predicates.prefix(2).randomElement(using: &random)!
            let excluded = Set(stored.map(\.id).shuffled(using: &random).prefix(Int.random(in: 0...20, using: &random)))
            var swift: [[PropertyValue]: [[PropertyValue]]] = grouping.isEmpty ? [[]: []] : [:]
            for (id, row) in stored where !excluded.contains(id) && (predicate?.evaluate(row.values) ?? true) {
                swift[grouping.map { row.values[$0] }, default: []].append(row.values)
            }
            let groups = try #require(try store.aggregates(of: entity, matching: predicate, groupedBy: grouping, computing: columns, excluding: Array(excluded)))
            #expect(groups.count == swift.count, "one group per combination: \(grouping)")
            for group in groups {
                guard let members = swift[group.values] else { Issue.record("a group Swift has not: \(group.values)"); continue }
                let expected = swiftResults(members)
                for (i, result) in group.results.enumerated() where !alike(result, expected[i]) {
                    Issue.record("\(columns[i]) of \(group.values) by \(grouping): \(result) against Swift's \(expected[i])")
                }
            }
        }
        // Not grouped by PostgreSQL: a double (one group of every NaN); a predicate it does not answer exactly; a Boolean's minimum.
        #expect(try store.aggregates(of: entity, matching: nil, groupedBy: [score], computing: [.count], excluding: []) == nil)
        #expect(try store.aggregates(of: entity, matching: predicates[2], groupedBy: [visits], computing: [.count], excluding: []) == nil)
        #expect(try store.aggregates(of: entity, matching: nil, groupedBy: [], computing: [.minimum(property: names.firstIndex(of: "pinned")!)], excluding: []) == nil)
        // Exact predicates are counted by PostgreSQL; a prefix, judged again in Swift, is not.
        #expect(try Self.count(store, entity, predicates[1]) != nil && Self.count(store, entity, nil) == 300)
        #expect(try Self.count(store, entity, predicates[2]) == nil)
        // An order PostgreSQL does not give as Swift does (booleans, bytes) is left to Swift.
        let pinned = names.firstIndex(of: "pinned")!
        #expect(try store.forEachStored(of: entity, matching: nil, orderedBy: [StoreSortKey(property: pinned, descending: false)], expecting: 5) { _, _ in true } == nil)
    }

    @Test(arguments: [UInt64(1), 2, 3])
    func pushedDownNeverLosesAnAnswer(seed: UInt64) throws {
        var random = SplitMix(state: seed)
        let model = try bookmarksModel()
        let entity = model.entity(named: "Bookmark")!
        let store = try PostgresStore(try TestServer.freshDatabase(), model: model)
        defer { store.close() }
        let names = entity.properties.map(\.name)
        func index(_ name: String) -> Int { names.firstIndex(of: name)! }
        let stored = try insertRandomRows(into: store, entity, &random)

        func operand(_ name: String) -> StorePredicate.Operand {
            let attribute = entity.attributes.first { $0.name == name }!
            let zero: PropertyValue = switch attribute.type {
            case .integer16, .integer32, .integer64: .integer(0)
            case .bool: .bool(false)
            case .string: .string("")
            default: .null
            }
            return .property(index: index(name), nullReadsAs: attribute.isOptional ? .null : zero)
        }
        func leaf() -> StorePredicate {
            let name = Array(Self.pools.keys).sorted().randomElement(using: &random)!
            let pool = Self.pools[name]!
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<6:
                let comparison: StorePredicate.Comparison = [.equal, .notEqual, .less, .lessOrEqual, .greater, .greaterOrEqual].randomElement(using: &random)!
                let constant = StorePredicate.Operand.constant(pool.randomElement(using: &random)!)
                return Bool.random(using: &random) ? .compare(operand(name), comparison, constant) : .compare(constant, comparison, operand(name))
            case 6..<8:
                return .isIn(operand(name), (0..<Int.random(in: 0...4, using: &random)).map { _ in pool.randomElement(using: &random)! })
            case 8:
                return .startsWith(operand(Bool.random(using: &random) ? "title" : "url"), Self.prefixes.randomElement(using: &random)!)
            default:
                return .constant(Bool.random(using: &random))
            }
        }
        func predicate(depth: Int) -> StorePredicate {
            guard depth > 0, Int.random(in: 0..<3, using: &random) > 0 else { return leaf() }
            switch Int.random(in: 0..<3, using: &random) {
            case 0: return .and(predicate(depth: depth - 1), predicate(depth: depth - 1))
            case 1: return .or(predicate(depth: depth - 1), predicate(depth: depth - 1))
            default: return .not(predicate(depth: depth - 1))
            }
        }
        var exact = 0
        for _ in 0..<250 {
            let p = predicate(depth: 3)
            let swift = Set(stored.filter { p.evaluate($0.row.values) }.map(\.id))
            let (rows, isExact) = try fetched(store, entity, p)
            let postgres = Set(rows.map(\.id))
            let sql = try store.explain(entity, matching: p)
            #expect(postgres.isSuperset(of: swift), "missed \(swift.subtracting(postgres).count) rows of \(p): \(sql)")
            if isExact {
                exact += 1
                #expect(postgres.count == swift.count, "\(postgres.count - swift.count) rows too many for an exact \(p): \(sql)")
            }
        }
        // The translation is worth having: most predicates go to PostgreSQL whole.
        #expect(exact > 50)
    }

    @Test func explainShowsTheSQLAndWhatSwiftJudges() throws {
        let model = try bookmarksModel()
        let entity = model.entity(named: "Bookmark")!
        let store = try PostgresStore(try TestServer.freshDatabase(), model: model)
        defer { store.close() }
        let visits = entity.properties.firstIndex { $0.name == "visits" }!
        let score = entity.properties.firstIndex { $0.name == "score" }!
        let exact = try store.explain(entity, matching: .compare(.property(index: visits, nullReadsAs: .integer(0)), .greater, .constant(.integer(10))))
        #expect(exact.hasPrefix(#"SELECT t."strata_id", t."strata_version", t."url", "#))
        #expect(exact.hasSuffix(#"FROM "Bookmark" t WHERE ("visits" IS NOT NULL AND "visits" > $1::bigint) AND t."strata_id" > $2 ORDER BY t."strata_id" LIMIT $3"#))
        // A to-many relationship comes with the row, as the keys of a subquery.
        #expect(exact.contains(#"ARRAY(SELECT j.target_id FROM "Bookmark_tags" j WHERE j.source_id = t."strata_id")"#))
        let narrowed = try store.explain(entity, matching: .compare(.property(index: score, nullReadsAs: .null), .greater, .constant(.double(1))))
        #expect(narrowed.hasSuffix("LIMIT $3 -- then judged in Swift"))
    }

    /// A lookup by a unique string (or an indexed one) compares in NFC, as
    /// Swift does: the index it can use is made on that expression. Asked
    /// with sequential scans off, PostgreSQL's plan for the lookup's
    /// statement uses an index — with the clause wrapped in anything an
    /// index cannot serve, it would scan the table whatever the setting.
    @Test func aLookupByAUniqueStringCanUseAnIndex() throws {
        let model = try bookmarksModel()
        let entity = model.entity(named: "Bookmark")!
        let configuration = try TestServer.freshDatabase()
        let store = try PostgresStore(configuration, model: model)
        defer { store.close() }
        let url = entity.properties.firstIndex { $0.name == "url" }!
        let visits = entity.properties.firstIndex { $0.name == "visits" }!
        let session = try PostgresSession.connect(configuration)
        defer { session.close() }
        try session.execute("SET enable_seqscan = off", "planning")
        for (predicate, binding) in [
            (StorePredicate.compare(.property(index: url, nullReadsAs: .null), .equal, .constant(.string("https://swift.org"))), PostgresBindable.text),
            (.compare(.property(index: visits, nullReadsAs: .integer(0)), .greater, .constant(.integer(10))), .integer),
        ] {
            let sql = try store.explain(entity, matching: predicate)
            var bindings = PostgresBindings()
            switch binding {
            case .text: bindings.append("https://swift.org")
            case .integer: bindings.append(Int64(10))
            }
            bindings.append(Int64(0))
            bindings.append(Int64(1_000))
            let plan = try session.query(PostgresQuery(unsafeSQL: "EXPLAIN " + sql, binds: bindings), "planning")
                .map { (row) throws(StrataError) in try SchemaInstallation.decode(row, as: String.self, "planning") }.joined(separator: "\n")
            #expect(plan.contains("Index"), "\(plan)")
            #expect(!plan.contains(#"Seq Scan on "Bookmark""#), "\(plan)")
        }
    }

    enum PostgresBindable { case text, integer }
}
