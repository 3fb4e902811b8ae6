import Foundation

/// The directory a scenario keeps its stores in: `store` when the user
/// named one (kept afterwards), else a fresh temporary one, removed by
/// `cleanUp()`. With `reusing`, a named directory's contents are kept
/// from the run before (`reused` says whether there were any), so that a
/// profiling session need not import again.
struct WorkDirectory {
    let path: String
    let reused: Bool
    private let keep: Bool

    init(_ store: String?, scenario: String, reusing: Bool = false) throws {
        path = store ?? (FileManager.default.temporaryDirectory.path + "/strata-\(scenario)-\(ProcessInfo.processInfo.processIdentifier)")
        keep = store != nil
        let existing = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        reused = keep && reusing && !existing.isEmpty
        if !reused { try? FileManager.default.removeItem(atPath: path) }
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func cleanUp() {
        if !keep { try? FileManager.default.removeItem(atPath: path) }
    }
}
