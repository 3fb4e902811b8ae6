import Foundation
import Strata
import StrataPostgres

/// A save in one process merged into another process's view context: this
/// process saves one object `saves` times (its `stamp` the time just before
/// the save), paced; a worker process holds the object in its container's
/// view context and, after each merge there, reads the stamp: the time
/// from before the save to the value in the other view context.
enum MergeLatency {
    static func run(_ server: Server, saves: Int, pause: Double) async throws {
        let database = try await server.freshDatabase("bench_merge")
        let container = try PersistentContainer(
            name: "saver", model: try BenchModel.make(), postgres: server.configuration(database: database), viewContext: .privateQueue)
        defer { try? container.close() }
        try container.saveAndWait { context in
            let probe = Entry(context: context)
            probe.key = "probe"
            probe.title = "probe"
            probe.stamp = Date()
            probe.count = -1
        }
        let (follower, pipe) = try Workers.start([
            "worker", "merge", "--server-dir", server.directory, "--database", database, "--saves", String(saves), "--worker", "0",
        ])
        // The follower holds the probe when it says so.
        var buffered = Data()
        while !String(decoding: buffered, as: UTF8.self).contains("READY") {
            let chunk = pipe.fileHandleForReading.availableData
            guard !chunk.isEmpty else { throw BenchError("the following process ended before it was ready") }
            buffered.append(chunk)
        }
        var saveTimes: [Double] = []
        for i in 0..<saves {
            let began = Date()
            try container.saveAndWait { context in
                let probe = try Entry.first(in: context, where: #Predicate { $0.key == "probe" })!
                probe.stamp = Date()
                probe.count = i
            }
            saveTimes.append(Date().timeIntervalSince(began) * 1000)
            usleep(UInt32(pause * 1_000_000))
        }
        buffered.append(pipe.fileHandleForReading.readDataToEndOfFile())
        follower.waitUntilExit()
        guard let line = String(decoding: buffered, as: UTF8.self).split(separator: "\n").last(where: { $0.hasPrefix("RESULT ") }) else {
            throw BenchError("the following process reported nothing (status \(follower.terminationStatus))")
        }
        let result = Workers.parse(line)
        print("\nA save merged into another process's view context (\(saves) saves of one object, \(fixed(pause * 1000, 0)) ms apart)")
        print("| merges seen | save → other view context p50 ms | p99 ms | max ms | the save alone p50 / p99 ms |")
        print("|---|---|---|---|---|")
        print("| \(result["merges"]!) | \(result["p50"]!) | \(result["p99"]!) | \(result["max"]!) | \(fixed(saveTimes.percentile(0.5), 2)) / \(fixed(saveTimes.percentile(0.99), 2)) |")
    }

    /// The following process: holds the probe in its view context and
    /// times each merge, until it has seen the last save.
    static func worker(_ server: Server, database: String, saves: Int) throws {
        let container = try PersistentContainer(
            name: "follower", model: try BenchModel.make(), postgres: server.configuration(database: database), viewContext: .privateQueue)
        defer { try? container.close() }
        let view = container.viewContext
        let probe = try view.performAndWait { () throws in try Entry.first(in: view, where: #Predicate { $0.key == "probe" })! }
        let probeID = probe.objectID
        let done = DispatchSemaphore(value: 0)
        let samples = LockedSamples()
        // The coordinator queues the writer's merge before it posts the
        // notification, and the writer queues the view context's in its own:
        // a block queued on the writer and then on the view context runs
        // after both.
        let writer = container.writerContext
        let observer = NotificationCenter.default.addObserver(
            forName: PersistentStoreCoordinator.storeDidChangeRemotely, object: container.coordinator, queue: nil
        ) { _ in
            writer.perform {
                view.perform {
                    let now = Date()
                    guard let probe = try? view.existingObject(with: probeID) as? Entry else { return }
                    samples.add(now.timeIntervalSince(probe.stamp) * 1000)
                    if probe.count == saves - 1 { done.signal() }
                }
            }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        Workers.say("READY")
        let merged = withExtendedLifetime(probe) { done.wait(timeout: .now() + .seconds(600)) }
        guard merged == .success else { throw BenchError("the last save never reached the view context") }
        let all = samples.all
        Workers.report(["merges": String(all.count), "p50": fixed(all.percentile(0.5), 2), "p99": fixed(all.percentile(0.99), 2), "max": fixed(all.max() ?? .nan, 2)])
    }
}

/// `@unchecked Sendable`: `samples` is guarded by `lock`.
final class LockedSamples: @unchecked Sendable {
    private let lock = NSLock()
    private var samples: [Double] = []
    func add(_ sample: Double) { lock.lock(); samples.append(sample); lock.unlock() }
    var all: [Double] { lock.lock(); defer { lock.unlock() }; return samples }
}
