import Foundation
import Testing

@testable import StrataStore

/// A fresh directory for a store, removed when the test ends.
final class ScratchDirectory {
    let path: String
    /// `inMemory`: on tmpfs (/dev/shm) where there is one, for tests that fsync a lot.
    init(_ name: String = #function, inMemory: Bool = false) {
        let root = inMemory && FileManager.default.fileExists(atPath: "/dev/shm")
            ? URL(fileURLWithPath: "/dev/shm") : FileManager.default.temporaryDirectory
        let base = root.appendingPathComponent("strata-tests")
        try? FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        let clean = name.filter { $0.isLetter || $0.isNumber }
        path = base.appendingPathComponent("\(clean)-\(UUID().uuidString.prefix(8))").path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    /// The path of a store inside it (not created).
    var store: String { path + "/store" }
    deinit { try? FileManager.default.removeItem(atPath: path) }

    func files() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: store)) ?? []).sorted()
    }
}

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

func string(_ bytes: [UInt8]?) -> String? { bytes.map { String(decoding: $0, as: UTF8.self) } }

/// Small limits so that flushes and compactions happen within a test.
func smallOptions(sync: StoreOptions.SyncMode = .none) -> StoreOptions {
    var options = StoreOptions()
    options.syncMode = sync
    options.logSizeLimit = 64 << 10
    options.blockSize = 4 << 10
    options.blockCacheCapacity = 256 << 10
    options.segmentSizeLimit = 128 << 10
    return options
}

func readFileBytes(_ path: String) -> [UInt8] { Array(FileManager.default.contents(atPath: path) ?? Data()) }
func writeFileBytes(_ path: String, _ bytes: [UInt8]) { try! Data(bytes).write(to: URL(fileURLWithPath: path)) }

extension StrataStore {
    /// Puts one key (a test shorthand).
    @discardableResult
    func put(_ key: String, _ value: String) throws -> UInt64 {
        var batch = WriteBatch()
        batch.put(bytes(key), bytes(value))
        return try write(batch)
    }

    @discardableResult
    func delete(_ key: String) throws -> UInt64 {
        var batch = WriteBatch()
        batch.delete(bytes(key))
        return try write(batch)
    }

    func string(_ key: String) throws -> String? { StrataStoreTests.string(try get(bytes(key))) }
}

/// Runs `body(i)` for i in 0..<count on `count` threads of their own, all at
/// once, and waits for them. (`concurrentPerform` uses one thread per core,
/// which on two cores never puts more than two writers in the queue.)
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let group = DispatchGroup()
    for i in 0..<count {
        group.enter()
        let thread = Thread {
            body(i)
            group.leave()
        }
        thread.start()
    }
    group.wait()
}
