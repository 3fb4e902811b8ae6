import CStrataFuzz
import Foundation

// strata-fuzz: the libFuzzer harness for every decoder that reads bytes from
// disk (see Fuzz/README.md).
//
// Built with `-sanitize=fuzzer,address -DSTRATA_FUZZING` it is a libFuzzer
// binary: the target comes from STRATA_FUZZ_TARGET and every argument is
// libFuzzer's. Built normally it is a plain program that replays inputs
// through the same harness, which is how the tests run the committed corpus
// and regressions:
//
//     strata-fuzz list
//     strata-fuzz <target> <file-or-directory>...
//     strata-fuzz generate-corpus <directory>

#if STRATA_FUZZING
/// The target STRATA_FUZZ_TARGET names, read once.
let fuzzTarget: FuzzTarget = {
    let name = ProcessInfo.processInfo.environment["STRATA_FUZZ_TARGET"] ?? ""
    guard let target = FuzzTarget(rawValue: name) else {
        FileHandle.standardError.write(Data("strata-fuzz: set STRATA_FUZZ_TARGET to one of: \(FuzzTarget.allCases.map(\.rawValue).joined(separator: " "))\n".utf8))
        exit(2)
    }
    return target
}()

/// libFuzzer's entry point: one input, which must not trap.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    fuzzTarget.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

@main
struct StrataFuzz {
    /// SwiftPM points the executable's `main` here; libFuzzer's own `main`
    /// may win the link instead, and then this never runs. Either way the
    /// driver is libFuzzer's.
    static func main() {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv, fuzzOneInput))
    }
}
#else
@main
struct StrataFuzz {
    static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        switch arguments.first {
        case "list"?:
            for target in FuzzTarget.allCases { print("\(target.rawValue.padding(toLength: 9, withPad: " ", startingAt: 0)) \(target.summary)") }
        case "generate-corpus"? where arguments.count == 2:
            do { try SeedCorpus.write(to: arguments[1]) } catch { fail("cannot write the corpus: \(error)") }
        case let name? where arguments.count >= 2:
            guard let target = FuzzTarget(rawValue: name) else { fail("no target named \(name)") }
            var count = 0
            for path in arguments.dropFirst() {
                for file in files(at: path) {
                    guard let data = FileManager.default.contents(atPath: file) else { fail("cannot read \(file)") }
                    // Named before it runs, so that a trap says which input it was.
                    if ProcessInfo.processInfo.environment["STRATA_FUZZ_VERBOSE"] != nil { print("\(target.rawValue): \(file)") }
                    data.withUnsafeBytes { target.run($0) }
                    count += 1
                }
            }
            print("strata-fuzz \(target.rawValue): \(count) inputs replayed, all passed")
        default:
            fail("usage: strata-fuzz list | <target> <file-or-directory>... | generate-corpus <directory>")
        }
    }

    /// `path` itself, or the regular files directly inside it (sorted), skipping dot-files.
    static func files(at path: String) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { fail("\(path) does not exist") }
        guard isDirectory.boolValue else { return [path] }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        return names.filter { !$0.hasPrefix(".") }.sorted().map { path + "/" + $0 }
    }

    static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("strata-fuzz: \(message)\n".utf8))
        exit(2)
    }
}
#endif
