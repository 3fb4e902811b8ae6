import SharedTestSupport
import Foundation
import Testing

/// Replays the committed seed corpus and every regression input (Fuzz/) through
/// strata-fuzz built normally: each must pass the harness, which traps on any
/// decoder trap or failed round trip. The regressions are the inputs the
/// fuzzer once crashed on, so a reintroduced bug fails here without a fuzzer.
@Suite struct FuzzCorpusTests {
    static let fuzzDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz").path
    static let targets = ["wal", "batch", "block", "segment", "manifest", "lz4", "varint", "store", "record", "schema", "uri", "history"]

    /// Runs `strata-fuzz arguments`; its exit status and output.
    static func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let path = try #require(builtExecutable(named: "strata-fuzz"), "strata-fuzz is not built beside the tests")
        let result = try runToCompletion(path, arguments)
        return (result.status, result.stdout + result.stderr)
    }

    @Test func theHarnessKnowsEveryTarget() throws {
        let listed = try Self.run(["list"])
        #expect(listed.status == 0)
        let names = listed.output.split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) }
        #expect(names == Self.targets)
    }

    @Test(arguments: targets)
    func corpusAndRegressionsPass(target: String) throws {
        var inputs = [Self.fuzzDirectory + "/Corpus/" + target]
        let regressions = Self.fuzzDirectory + "/Regressions/" + target
        if FileManager.default.fileExists(atPath: regressions) { inputs.append(regressions) }
        let result = try Self.run([target] + inputs)
        #expect(result.status == 0, "strata-fuzz \(target) failed:\n\(result.output)")
        #expect(result.output.contains("all passed"))
        let seeds = try FileManager.default.contentsOfDirectory(atPath: inputs[0]).filter { !$0.hasPrefix(".") }
        #expect(!seeds.isEmpty, "no seed corpus for \(target)")
    }
}
