import Dispatch
import Foundation

/// The same workloads on StrataStore, LMDB and LevelDB in one run, each
/// engine through ``PeerEngine``, the rounds interleaved engine by engine:
/// on this noisy VM only a ratio measured side by side holds.
struct PeerComparison {
    let root: String
    let records: Int
    let batchSize: Int
    let repeats: Int
    let writers: Int
    /// Records of each durable run (every batch waits for its sync).
    let durableRecords: Int

    /// One engine's figures, one entry per round.
    struct Figures {
        var fillSequential: [Double] = []  // records/s
        var fillRandom: [Double] = []      // records/s
        var gets: [Double] = []            // gets/s
        var getsTwoThreads: [Double] = []  // gets/s
        var open: [Double] = []            // seconds
        var durableOneWriter: [Double] = []  // batches/s
        var durableWriters: [Double] = []    // batches/s
    }

    static var engines: [any PeerEngine.Type] { [StrataPeer.self, LMDBEngine.self, LevelDBEngine.self] }

    func run(values: [[UInt8]], sequentialKeys: [[UInt8]], randomKeys: [[UInt8]], order: [Int]) throws -> [(name: String, figures: Figures)] {
        var figures = Self.engines.map { ($0.name, Figures()) }
        for round in 0..<repeats {
            for (e, engine) in Self.engines.enumerated() {
                try measure(engine, round: round, into: &figures[e].1, values: values,
                            sequentialKeys: sequentialKeys, randomKeys: randomKeys, order: order)
            }
        }
        return figures.map { (name: $0.0, figures: $0.1) }
    }

    private func measure(
        _ engine: any PeerEngine.Type, round: Int, into f: inout Figures, values: [[UInt8]],
        sequentialKeys: [[UInt8]], randomKeys: [[UInt8]], order: [Int]
    ) throws {
        let name = engine.name
        let directory = root + "/peer-\(name)-\(round)"
        progress("engine: peers: round \(round + 1)/\(repeats): \(name): fill sequential, point gets")
        var store = try engine.init(directory: directory, durable: false)
        f.fillSequential.append(try fill(store, sequentialKeys, values: values))
        // Readers end before their store closes (an LMDB transaction must).
        do {
            let reader = try store.makeReader()
            for key in sequentialKeys { _ = try reader.get(key) }  // warm
            var found = 0
            let t = try seconds { for i in order where try reader.get(sequentialKeys[i]) { found += 1 } }
            guard found == records else { throw PeerEngineError(description: "\(name): gets found \(found) of \(records)") }
            f.gets.append(Double(records) / t)
        }
        let halves = [Array(order[..<(records / 2)]), Array(order[(records / 2)...])]
        let misses = LockedCounter()
        let shared = store
        let t2 = seconds {
            let done = DispatchGroup()
            for half in halves {
                done.enter()
                Thread {
                    if let reader = try? shared.makeReader() {
                        for i in half where (try? reader.get(sequentialKeys[i])) != true { misses.add() }
                    } else {
                        misses.add()
                    }
                    done.leave()
                }.start()
            }
            done.wait()
        }
        guard misses.value == 0 else { throw PeerEngineError(description: "\(name): parallel gets missed \(misses.value)") }
        f.getsTwoThreads.append(Double(records) / t2)
        try store.close()

        progress("engine: peers: round \(round + 1)/\(repeats): \(name): open, fill random, durable batches")
        f.open.append(try seconds { store = try engine.init(directory: directory, durable: false) })
        do {
            let reader = try store.makeReader()
            guard try reader.get(sequentialKeys[0]), try reader.get(sequentialKeys[records - 1]) else {
                throw PeerEngineError(description: "\(name): the reopened store lacks records")
            }
        }
        try store.close()
        try FileManager.default.removeItem(atPath: directory)

        store = try engine.init(directory: directory, durable: false)
        f.fillRandom.append(try fill(store, randomKeys, values: values))
        try store.close()
        try FileManager.default.removeItem(atPath: directory)

        let durableKeys = sequentialKeys[..<durableRecords]
        let batches = Double((durableRecords + batchSize - 1) / batchSize)
        store = try engine.init(directory: directory, durable: true)
        f.durableOneWriter.append(batches / (Double(durableRecords) / (try fill(store, durableKeys, values: values))))
        try store.close()
        try FileManager.default.removeItem(atPath: directory)

        store = try engine.init(directory: directory, durable: true)
        let perWriter = durableRecords / writers
        let failures = LockedCounter()
        let concurrent = store
        let elapsed = seconds {
            let done = DispatchGroup()
            for w in 0..<writers {
                done.enter()
                Thread { [self] in
                    do { _ = try fill(concurrent, sequentialKeys[(w * perWriter)..<((w + 1) * perWriter)], values: values) } catch { failures.add() }
                    done.leave()
                }.start()
            }
            done.wait()
        }
        guard failures.value == 0 else { throw PeerEngineError(description: "\(name): a durable writer failed") }
        f.durableWriters.append(Double(writers * ((perWriter + batchSize - 1) / batchSize)) / elapsed)
        try store.close()
        try FileManager.default.removeItem(atPath: directory)
    }

    /// Writes `keys` in batches of `batchSize`; returns records/s.
    private func fill(_ store: any PeerEngine, _ keys: ArraySlice<[UInt8]>, values: [[UInt8]]) throws -> Double {
        let t = try seconds {
            var i = keys.startIndex
            while i < keys.endIndex {
                let end = min(i + batchSize, keys.endIndex)
                try store.write(keys[i..<end], values: values)
                i = end
            }
        }
        return Double(keys.count) / t
    }

    private func fill(_ store: any PeerEngine, _ keys: [[UInt8]], values: [[UInt8]]) throws -> Double {
        try fill(store, keys[...], values: values)
    }

    /// The side-by-side table: each figure's median over the rounds, and
    /// StrataStore's ratio to each peer (above 1: StrataStore ahead).
    static func render(_ results: [(name: String, figures: Figures)], records: Int, batchSize: Int, writers: Int, durableRecords: Int) -> String {
        guard let strata = results.first?.figures else { return "" }
        let peers = results.dropFirst()
        var columns = ["measurement"] + results.map(\.name) + ["unit"]
        columns += peers.map { "StrataStore ÷ \($0.name)" }
        columns.append("target")
        var t = Table(columns)
        func row(_ label: String, _ unit: String, _ target: String, lowerIsBetter: Bool = false, scale: Double = 1, _ figure: (Figures) -> [Double]) {
            let ours = median(figure(strata))
            var cells = [label] + results.map { formatted(median(figure($0.figures)) * scale, unit: unit) } + [unit]
            cells += peers.map { peer in
                let theirs = median(figure(peer.figures))
                let ratio = lowerIsBetter ? theirs / ours : ours / theirs
                return fixed(ratio, ratio < 0.1 ? 3 : 2) + "x"
            }
            cells.append(target)
            t.add(cells)
        }
        row("write, sequential keys, batches of \(thousands(Double(batchSize))), no sync", "records/s", "≥ 1x LMDB") { $0.fillSequential }
        row("write, random keys, batches of \(thousands(Double(batchSize))), no sync", "records/s", "≥ 2x LevelDB") { $0.fillRandom }
        row("point get, warm, random order, 1 thread", "gets/s", "≥ 1x LMDB") { $0.gets }
        row("point get, warm, random order, 2 threads", "gets/s", "scales") { $0.getsTwoThreads }
        row("open, \(thousands(Double(records))) records", "ms", "≤ LevelDB", lowerIsBetter: true, scale: 1000) { $0.open }
        row("durable batches of \(thousands(Double(batchSize))), 1 writer", "batches/s", "≥ 1x LMDB") { $0.durableOneWriter }
        row("durable batches of \(thousands(Double(batchSize))), \(writers) writers", "batches/s", "≥ 2x LMDB") { $0.durableWriters }
        return "Beside LMDB and LevelDB: the same workloads through each engine's own API, rounds interleaved; medians of the rounds; "
            + "durable runs write \(thousands(Double(durableRecords))) records\n\n" + t.render()
    }

    private static func formatted(_ value: Double, unit: String) -> String {
        unit == "ms" ? fixed(value, 1) : thousands(value)
    }
}
