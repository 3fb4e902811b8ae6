import Foundation

/// The path of an executable product of this package, built beside the
/// test binary (SwiftPM puts products and test bundles in one folder); nil
/// when it is not there.
public func builtExecutable(named name: String) -> String? {
    #if os(Linux)
    let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    #else
    let me = Bundle.main.bundleURL.path
    #endif
    var dir = URL(fileURLWithPath: me).deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = dir.appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        dir = dir.deletingLastPathComponent()
    }
    return nil
}
