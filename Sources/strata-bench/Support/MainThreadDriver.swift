import Foundation

/// Runs `work` on a worker thread while the calling (main) thread spins the
/// main run loop, so that main-queue blocks run on the real main thread.
enum MainThreadDriver {
    static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) -> Result<T, any Error> {
        let box = ResultBox<T>()
        let thread = Thread {
            let result = Result { try work() }
            box.set(result)
        }
        thread.stackSize = 8 << 20
        thread.start()
        while box.get() == nil {
            _ = RunLoop.main.run(mode: .default, before: Date(timeIntervalSinceNow: 0.005))
        }
        return box.get()!
    }
}

/// `@unchecked Sendable`: `value` is guarded by `lock`.
final class ResultBox<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Result<T, any Error>?
    func set(_ result: Result<T, any Error>) { lock.withLock { value = result } }
    func get() -> Result<T, any Error>? { lock.withLock { value } }
}

