import Foundation
import Testing

/// The repository's root, from this file's path (Tests/StrataTests/…).
private let repositoryRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// What the documents cite must exist: every test PROMISES.md names, and
/// every identifier of the behaviour contract (`Strata.docc/Contract.md`)
/// that code, tests and articles cite. A renamed test or a mistyped
/// identifier fails here, naming the citation.
@Suite struct PromisesTests {
    /// A test PROMISES.md names: a suite (or test target) alone, or a test in it.
    struct TestCitation: Hashable, CustomStringConvertible {
        let suite: String
        let test: String?
        var description: String { test.map { "\(suite).\($0)" } ?? suite }
    }

    /// A contract identifier cited at a place in a file.
    struct ContractCitation: Hashable, CustomStringConvertible {
        let number: Int
        let file: String
        let line: Int
        var description: String { "C\(number) at \(file):\(line)" }
    }

    // MARK: Reading the documents

    /// The tests `markdown` cites: `` `Suite.test` `` (or `Suite/test`), a
    /// bare `` `SuiteTests` ``, and the bare `` `test` `` names in the
    /// parentheses right after a bare suite, as in
    /// "`UserPathTests` (`aLookup…`, 10 pending; `aLong…`)". A single
    /// lower-camel-case identifier in backticks there is taken for a test of
    /// that suite.
    static func testCitations(in markdown: String) -> [TestCitation] {
        var citations: [TestCitation] = []
        for match in markdown.matches(of: #/`([A-Z][A-Za-z0-9_]*Tests)(?:[./]([A-Za-z_][A-Za-z0-9_]*))?`/#) {
            let suite = String(match.output.1)
            if let test = match.output.2 {
                citations.append(TestCitation(suite: suite, test: String(test)))
                continue
            }
            citations.append(TestCitation(suite: suite, test: nil))
            // A parenthesis right after the suite lists tests of it.
            let rest = markdown[match.range.upperBound...]
            guard let open = rest.prefixMatch(of: #/\s*\(/#) else { continue }
            var depth = 1
            var end = open.range.upperBound
            while end < rest.endIndex, depth > 0 {
                if rest[end] == "(" { depth += 1 } else if rest[end] == ")" { depth -= 1 }
                end = rest.index(after: end)
            }
            for name in rest[open.range.upperBound..<end].matches(of: #/`([a-z][A-Za-z0-9_]*)`/#) {
                citations.append(TestCitation(suite: suite, test: String(name.output.1)))
            }
        }
        return citations
    }

    /// The funcs declared directly in each type (`struct`, `class`, `enum`,
    /// `actor` or `extension`) of a Swift source, by type name. Nesting is
    /// read from indentation, as the project's code is formatted; the
    /// contents of multi-line string literals are skipped.
    static func declarations(in source: String) -> [String: Set<String>] {
        var declared: [String: Set<String>] = [:]
        var scopes: [(indent: Int, name: String)] = []
        var inString = false
        for line in source.split(separator: "\n", omittingEmptySubsequences: false) {
            let delimiters = line.ranges(of: "\"\"\"").count
            if inString {
                if delimiters % 2 == 1 { inString = false }
                continue
            }
            if delimiters % 2 == 1 { inString = true }  // the code before the opening delimiter still counts
            let text = line.drop { $0 == " " }
            let indent = line.count - text.count
            guard !text.hasPrefix("//"), text.contains("func ") || text.contains("struct ")
                || text.contains("class ") || text.contains("enum ") || text.contains("actor ")
                || text.contains("extension ")
            else { continue }
            if let function = text.prefixMatch(of: #/(?:@[A-Za-z]+(?:\(.*?\))?\s+)*(?:(?:public|package|internal|fileprivate|private|open|final|static|class|override|mutating|nonisolated)\s+)*func\s+([A-Za-z_][A-Za-z0-9_]*)/#) {
                scopes.removeAll { $0.indent >= indent }
                if let owner = scopes.last { declared[owner.name, default: []].insert(String(function.output.1)) }
            } else if let type = text.prefixMatch(of: #/(?:@[A-Za-z]+(?:\(.*?\))?\s+)*(?:(?:public|package|internal|fileprivate|private|open|final|indirect)\s+)*(?:struct|class|enum|actor|extension)\s+([A-Za-z_][A-Za-z0-9_]*)/#) {
                let name = String(type.output.1)
                scopes.removeAll { $0.indent >= indent }
                scopes.append((indent, name))
                declared[name, default: []].formUnion([])
            }
        }
        return declared
    }

    /// The citations of `declared` (type name → funcs) that name no such
    /// suite, or no such func in it. A bare suite may also be a test target
    /// (`targets`, the directories under Tests/).
    static func missing(_ citations: [TestCitation], declared: [String: Set<String>], targets: Set<String>) -> [TestCitation] {
        citations.filter { citation in
            guard let funcs = declared[citation.suite] else {
                return citation.test != nil || !targets.contains(citation.suite)
            }
            return citation.test.map { !funcs.contains($0) } ?? false
        }
    }

    /// The contract identifiers cited in `text`: after "contract" (`contract
    /// C14`, `contract C16–C17`, `contract C10 and C19–C21`), at the start of
    /// a comment (`// C14`, `/// C14: …`, `// MARK: C14 — …`), and at the
    /// start of a test's display name (`@Test("C14: …")`). Nothing else
    /// counts, so "C2…CB" in a comment on UTF-8 is not a citation.
    static func contractCitations(in text: String, file: String) -> [ContractCitation] {
        var citations: [ContractCitation] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            guard line.contains("C") else { continue }
            // A run: C14, or C16–C17, or C10 and C19–C21.
            var runs: [Substring] = line.matches(of: #/[Cc]ontract (C[0-9]{1,3}(?:\s*(?:–|-|,|and)\s*C[0-9]{1,3})*)\b/#).map(\.output.1)
            if let match = line.prefixMatch(of: #/\s*//+\s*(?:MARK:\s*)?(C[0-9]{1,3}(?:\s*(?:–|-|,|and)\s*C[0-9]{1,3})*)\b/#) {
                runs.append(match.output.1)
            }
            if let match = line.firstMatch(of: #/@Test\("(C[0-9]{1,3}(?:\s*(?:–|-|,|and)\s*C[0-9]{1,3})*)\b/#) {
                runs.append(match.output.1)
            }
            for found in runs {
                for number in found.matches(of: #/C([0-9]+)/#) {
                    citations.append(ContractCitation(number: Int(number.output.1)!, file: file, line: index + 1))
                }
            }
        }
        return citations
    }

    /// The statements the contract defines, in order: each item starts with
    /// its identifier in bold (`**C14**`); `retired` is true for one marked
    /// *retired*.
    static func contractStatements(in article: String) -> [(number: Int, retired: Bool)] {
        let starts = article.matches(of: #/\*\*C([0-9]+)\*\*/#)
        return starts.enumerated().map { index, match in
            let end = index + 1 < starts.count ? starts[index + 1].range.lowerBound : article.endIndex
            let text = article[match.range.upperBound..<end]
            return (Int(match.output.1)!, text.contains("*retired*"))
        }
    }

    // MARK: Reading the repository

    static func read(_ relativePath: String) throws -> String {
        try String(contentsOf: repositoryRoot.appendingPathComponent(relativePath), encoding: .utf8)
    }

    /// The files under `directory` (relative to the repository) whose names
    /// end in one of `extensions`, as (path relative to the repository, text).
    static func files(under directory: String, extensions: Set<String>) throws -> [(path: String, text: String)] {
        let base = repositoryRoot.appendingPathComponent(directory)
        guard let enumerator = FileManager.default.enumerator(at: base, includingPropertiesForKeys: nil) else { return [] }
        var found: [(String, String)] = []
        for case let url as URL in enumerator where extensions.contains(url.pathExtension) {
            let path = String(url.standardizedFileURL.path.dropFirst(repositoryRoot.standardizedFileURL.path.count + 1))
            found.append((path, try String(contentsOf: url, encoding: .utf8)))
        }
        return found.sorted { $0.0 < $1.0 }
    }

    static func contractNumbers() throws -> [(number: Int, retired: Bool)] {
        contractStatements(in: try read("Sources/Strata/Strata.docc/Contract.md"))
    }

    /// Every contract citation in Tests/ and Sources/ (Swift and DocC articles).
    static func allContractCitations() throws -> [ContractCitation] {
        let sources = try files(under: "Tests", extensions: ["swift"]) + files(under: "Sources", extensions: ["swift", "md"])
        return sources.flatMap { contractCitations(in: $0.text, file: $0.path) }
    }

    // MARK: The checks

    @Test func everyTestPromisesCitesExists() throws {
        let citations = Self.testCitations(in: try Self.read("PROMISES.md"))
        #expect(citations.count > 30, "PROMISES.md cites fewer tests than it does: the citations were not read")
        var declared: [String: Set<String>] = [:]
        for file in try Self.files(under: "Tests", extensions: ["swift"]) {
            declared.merge(Self.declarations(in: file.text)) { $0.union($1) }
        }
        let targets = Set(try FileManager.default.contentsOfDirectory(atPath: repositoryRoot.appendingPathComponent("Tests").path))
        for citation in Self.missing(citations, declared: declared, targets: targets) {
            if let test = citation.test, declared[citation.suite] != nil {
                Issue.record("PROMISES.md cites `\(citation)`, but \(citation.suite) has no func \(test)")
            } else {
                Issue.record("PROMISES.md cites `\(citation)`, but no suite or test target \(citation.suite) exists under Tests/")
            }
        }
    }

    @Test func everyContractIdentifierCitedExists() throws {
        let defined = Set(try Self.contractNumbers().map(\.number))
        let citations = try Self.allContractCitations()
        #expect(citations.count > 100, "the code and tests cite the contract more than that: the citations were not read")
        for citation in citations where !defined.contains(citation.number) {
            Issue.record("contract C\(citation.number), cited at \(citation.file):\(citation.line), is not in Sources/Strata/Strata.docc/Contract.md")
        }
    }

    /// Identifiers are never reused or renumbered: C1, C2, … in order, each
    /// once, a retired statement keeping its place.
    @Test func contractIdentifiersAreNumberedInOrderEachOnce() throws {
        let numbers = try Self.contractNumbers().map(\.number)
        #expect(!numbers.isEmpty)
        #expect(numbers == Array(1...max(numbers.count, 1)), "Contract.md's identifiers are not C1…C\(numbers.count) in order: \(numbers)")
    }

    /// Each statement in force is checked by at least one test that cites it.
    @Test func everyStatementIsCitedByATest() throws {
        let cited = Set(try Self.files(under: "Tests", extensions: ["swift"]).flatMap {
            Self.contractCitations(in: $0.text, file: $0.path).map(\.number)
        })
        for statement in try Self.contractNumbers() where !statement.retired && !cited.contains(statement.number) {
            Issue.record("no test cites contract C\(statement.number)")
        }
    }

    // MARK: The checks can fail

    /// A citation of a test, or of a suite, that is not there is reported;
    /// a real one is not. (The sample sources are built from pieces so that
    /// this file's own text cites nothing.)
    @Test func aMissingTestOrSuiteIsReported() {
        let source = ["@Suite struct SampleTests {", "    @Test func realTest() {}", "    struct Nested {",
                      "        func nestedHelper() {}", "    }", "    @Test(arguments: [1]) func laterTest(_ x: Int) {}", "}"]
        let declared = Self.declarations(in: source.joined(separator: "\n"))
        #expect(declared["SampleTests"] == ["realTest", "laterTest"])
        let tick = "`"
        let markdown = "\(tick)SampleTests.realTest\(tick), \(tick)SampleTests/missingTest\(tick), \(tick)GoneTests\(tick), "
            + "\(tick)SampleTests\(tick) (\(tick)laterTest\(tick), ten; \(tick)alsoMissing\(tick)), \(tick)TargetTests\(tick)"
        let missing = Self.missing(Self.testCitations(in: markdown), declared: declared, targets: ["TargetTests"])
        #expect(missing.map(\.description) == ["SampleTests.missingTest", "GoneTests", "SampleTests.alsoMissing"])
    }

    /// Each form of contract citation is read, and nothing else is.
    @Test func everyFormOfContractCitationIsRead() {
        let c = "C"
        let text = [
            "/// Saves (contract \(c)9, \(c)11 and \(c)16–\(c)17): into the parent.",
            "    // \(c)14, \(c)99",
            "    /// \(c)3: a confinement context.",
            "    // MARK: \(c)5 — perform",
            "    @Test(\"\(c)22: traps\")",
            "    // Below U+0300: a sequence led by \(c)2…CB.",
            "    let \(c)7 = 1  // not a citation",
        ].joined(separator: "\n")
        let citations = Self.contractCitations(in: text, file: "Sample.swift")
        #expect(citations.map(\.number) == [9, 11, 16, 17, 14, 99, 3, 5, 22])
        let defined = Set(Self.contractStatements(in: "- **\(c)1** one\n- **\(c)2** two, *retired*").map(\.number))
        #expect(defined == [1, 2])
        #expect(citations.filter { !defined.contains($0.number) }.map(\.description).contains("C99 at Sample.swift:2"))
    }
}
