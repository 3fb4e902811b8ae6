import ArgumentParser
import Foundation
import Strata

/// A line of Swift source, as `strata-bench pages` stores it: its text
/// (indexed), how often that text occurs in the whole corpus (indexed), and
/// the repository it came from.
final class SourceLine: ManagedObject {
    @Attribute("text") var text: String
    @Attribute("uses") var uses: Int
    @Attribute("repository") var repository: String
}

func makeSourceLineModel() throws -> ManagedObjectModel {
    try ManagedObjectModel(entities: [
        EntityDescription(name: "Line", managedObjectClass: SourceLine.self, properties: [
            .attribute("text", .string),
            .attribute("uses", .integer64),
            .attribute("repository", .string),
        ], indexes: [IndexDescription("text"), IndexDescription("uses")]),
    ])
}

/// Real strings nobody here wrote: the lines of the Swift files of the
/// package mirrors every machine of this kind has, leading blanks trimmed,
/// empty lines left out, in the order the repositories and their files
/// come — skewed as code is (a closing brace is one line in eight; most
/// lines start with one of a few keywords) — each with how often its text
/// occurs among the repositories read (those the lines asked for come from).
struct SourceLineCorpus {
    struct Line: Sendable {
        var text: String
        var uses: Int
        var repository: String
    }

    let lines: [Line]

    /// The first `count` lines of the mirrors under `root`.
    static func load(count: Int, root: String) throws -> SourceLineCorpus {
        let repositories = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).sorted().flatMap { owner in
            ((try? FileManager.default.contentsOfDirectory(atPath: root + "/" + owner)) ?? []).sorted()
                .filter { $0.hasSuffix(".git") }.map { root + "/" + owner + "/" + $0 }
        }
        guard !repositories.isEmpty else {
            throw ValidationError("no package mirrors (owner/name.git) under \(root): set STRATA_MIRRORS to the directory that holds them")
        }
        var all: [(text: String, repository: String)] = []
        for repository in repositories {
            let name = repository.split(separator: "/").suffix(2).joined(separator: "/")
            guard let head = try git(["-C", repository, "rev-list", "--all", "-n", "1"]).split(separator: "\n").first else { continue }
            let text = try git(["-C", repository, "grep", "-h", "-I", "-e", ".", String(head), "--", "*.swift"], allowingNoMatch: true)
            for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
                let trimmed = line.drop { $0 == " " || $0 == "\t" }
                guard !trimmed.isEmpty else { continue }
                // Stored as the index and SQLite compare it: composed.
                all.append((String(trimmed).precomposedStringWithCanonicalMapping, name))
            }
            if all.count >= count { break }
        }
        guard all.count >= count else {
            throw ValidationError("the mirrors under \(root) hold \(all.count) lines of Swift; ask for at most that many (--objects)")
        }
        var uses: [String: Int] = [:]
        for line in all { uses[line.text, default: 0] += 1 }
        return SourceLineCorpus(lines: all.prefix(count).map { Line(text: $0.text, uses: uses[$0.text]!, repository: $0.repository) })
    }

    /// What `git` printed; git grep's "nothing found" (status 1) is an empty answer.
    private static func git(_ arguments: [String], allowingNoMatch: Bool = false) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["git"] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        if process.terminationStatus == 1 && allowingNoMatch { return "" }
        guard process.terminationStatus == 0 else {
            throw ValidationError("git \(arguments.joined(separator: " ")) failed with status \(process.terminationStatus)")
        }
        return String(decoding: data, as: UTF8.self)
    }
}
