import Foundation

/// The directory a scenario keeps its stores in: `store` when the user
/// named one (kept afterwards), else a fresh temporary one, removed by
/// `cleanUp()`.
struct WorkDirectory {
    let path: String
    private let keep: Bool

    init(_ store: String?, scenario: String) throws {
        path = store ?? (FileManager.default.temporaryDirectory.path + "/strata-\(scenario)-\(ProcessInfo.processInfo.processIdentifier)")
        keep = store != nil
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func cleanUp() {
        if !keep { try? FileManager.default.removeItem(atPath: path) }
    }
}
