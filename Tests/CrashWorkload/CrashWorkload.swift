public import StrataStore

/// What the crash child writes, and what the parent expects to find: batch b
/// puts keys `b/<b>/<j>` for j < count(b), sets `meta/last` to b, and every
/// third batch deletes the keys of batch b - 5.
public enum CrashWorkload {
    public static let lastKey = Array("meta/last".utf8)

    public static var options: StoreOptions { options(sync: .grouped) }

    /// The sync modes the child can be asked for, by name on its command line.
    public static let syncModes: [String: StoreOptions.SyncMode] = ["grouped": .grouped, "always": .always, "none": .none]

    public static func options(sync: StoreOptions.SyncMode) -> StoreOptions {
        var options = StoreOptions()
        options.syncMode = sync
        options.logSizeLimit = 192 << 10  // flush often, so kills land in flushes too
        options.blockSize = 4 << 10
        options.segmentSizeLimit = 512 << 10
        options.compactionDeadRatio = 0.25
        return options
    }

    public static func count(_ b: Int) -> Int { 1 + (b * 7) % 13 }

    public static func key(_ b: Int, _ j: Int) -> [UInt8] { Array("b/\(b)/\(j)".utf8) }

    public static func value(_ b: Int, _ j: Int) -> [UInt8] {
        let length = (b * 31 + j * 7) % 200 + (b % 17 == 0 && j == 0 ? 20_000 : 0)
        return (0..<length).map { UInt8(truncatingIfNeeded: b &+ $0 &* 7 &+ j) }
    }

    public static func deletes(_ b: Int) -> Int? { b % 3 == 0 && b > 5 ? b - 5 : nil }

    public static func batch(_ b: Int) -> WriteBatch {
        var batch = WriteBatch()
        for j in 0..<count(b) { batch.put(key(b, j), value(b, j)) }
        batch.put(lastKey, Array(String(b).utf8))
        if let victim = deletes(b) {
            for j in 0..<count(victim) { batch.delete(key(victim, j)) }
        }
        return batch
    }

    /// The exact contents after batches 1...last.
    public static func expected(through last: Int) -> [[UInt8]: [UInt8]] {
        var model: [[UInt8]: [UInt8]] = [:]
        guard last >= 1 else { return model }
        for b in 1...last {
            for j in 0..<count(b) { model[key(b, j)] = value(b, j) }
            model[lastKey] = Array(String(b).utf8)
            if let victim = deletes(b) { for j in 0..<count(victim) { model[key(victim, j)] = nil } }
        }
        return model
    }
}
