import Foundation
import SharedTestSupport
import Testing

/// The package's root, from this file's path (Tests/StrataMacrosTests/…).
private let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// The README's first program is `Examples/Bookmarks` and its version 2
/// `Examples/BookmarksV2`, built with the package: each code block the
/// README marks `<!-- compiled: PATH -->` must appear in that file as it is
/// written, and the programs must print what the README says they print.
@Suite(.serialized) struct FirstProgramTests {
    /// The blocks `document` (a path from the package root) marks: (path, code).
    static func markedBlocks(in document: String = "README.md") throws -> [(path: String, code: String)] {
        let text = try String(contentsOf: packageRoot.appendingPathComponent(document), encoding: .utf8)
        var blocks: [(String, String)] = []
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)[...]
        while let line = lines.popFirst() {
            guard line.hasPrefix("<!-- compiled: "), line.hasSuffix(" -->") else { continue }
            let path = String(line.dropFirst("<!-- compiled: ".count).dropLast(" -->".count))
            guard lines.first == "```swift" else {
                Issue.record("\(document): the marker for \(path) is not followed by a ```swift block")
                continue
            }
            lines.removeFirst()
            var code: [Substring] = []
            while let next = lines.popFirst(), next != "```" { code.append(next) }
            blocks.append((path, code.joined(separator: "\n") + "\n"))
        }
        return blocks
    }

    @Test func everyMarkedBlockIsInTheProgramItNames() throws {
        let blocks = try Self.markedBlocks()
        #expect(Set(blocks.map(\.path)) == ["Examples/Bookmarks/main.swift", "Examples/BookmarksV2/main.swift"],
                "the README marks its first program and version 2")
        for (path, code) in blocks {
            let source = try String(contentsOf: packageRoot.appendingPathComponent(path), encoding: .utf8)
            #expect(source.contains(code), "README's block for \(path) is not in \(path) as written:\n\(code)")
        }
    }

    /// The guide's samples are excerpts of the same programs: each marked
    /// block's lines, comments and blank lines aside, are a run of the
    /// program's lines, comments and blank lines aside.
    @Test func everyMarkedSampleOfTheGuideIsInTheProgramItNames() throws {
        let catalog = "Sources/Strata/Strata.docc"
        let articles = try FileManager.default.contentsOfDirectory(atPath: packageRoot.appendingPathComponent(catalog).path)
            .filter { $0.hasSuffix(".md") }
        var checked = 0
        for article in articles {
            for (path, code) in try Self.markedBlocks(in: "\(catalog)/\(article)") {
                let source = try String(contentsOf: packageRoot.appendingPathComponent(path), encoding: .utf8)
                #expect(("\n" + Self.codeLines(source)).contains("\n" + Self.codeLines(code)),
                        "\(article): a block marked for \(path) is not in it:\n\(code)")
                checked += 1
            }
        }
        #expect(checked >= 5, "GettingStarted marks its samples")
    }

    /// `text` without comment lines and blank lines, one line per line, for comparing excerpts.
    static func codeLines(_ text: String) -> String {
        text.split(separator: "\n").filter { line in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            return !trimmed.isEmpty && !trimmed.hasPrefix("//")
        }.joined(separator: "\n") + "\n"
    }

    @Test func theProgramsPrintWhatTheReadmeSays() throws {
        let first = try #require(builtExecutable(named: "strata-example-bookmarks"), "the first program was not built")
        let second = try #require(builtExecutable(named: "strata-example-bookmarks-v2"), "version 2 was not built")
        let store = FileManager.default.temporaryDirectory.appendingPathComponent("strata-first-program-\(UUID().uuidString.prefix(8))").path
        defer { try? FileManager.default.removeItem(atPath: store) }
        let expected = """
            most visited: Swift (42), SQLite (23), SwiftNIO (17)
            per tag: database 2, language 1, networking 1, swift 3

            """
        // Twice: the second import finds what the first made.
        for run in 1...2 {
            let output = try runToCompletion(first, [store])
            #expect(output.status == 0, "run \(run): \(output.stderr)")
            #expect(output.stdout == expected, "run \(run)")
        }
        let readme = try String(contentsOf: packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        #expect(readme.contains(expected.trimmingCharacters(in: .newlines)), "the README shows what the first program prints")
        // Version 2 opens the version-1 store (the rename inferred) and keeps it.
        for run in 1...2 {
            let output = try runToCompletion(second, [store])
            #expect(output.status == 0, "version 2, run \(run): \(output.stderr)")
            #expect(output.stdout == "version 2: GRDB, SQLite, Swift: start here, SwiftNIO\n", "version 2, run \(run)")
        }
        // Version 1 again is refused: the store has moved past its model.
        let refused = try runToCompletion(first, [store])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("migrated past this model"), "\(refused.stderr.prefix(500))")
    }
}
