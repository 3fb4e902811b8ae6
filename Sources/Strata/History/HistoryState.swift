import Foundation
internal import StrataStore

/// What a coordinator knows of its store's persistent history, to number
/// and prune transactions as it saves. Written under the coordinator's
/// `saveLock` (every change to the history is a save or a cursor write)
/// and `lock`; read under `lock`.
struct HistoryState {
    var settings: PersistentHistory
    /// The number the next transaction gets.
    var next: UInt64 = 1
    /// The oldest transaction kept (`next` when none is).
    var oldest: UInt64 = 1
    /// When the oldest kept transaction was saved; nil when none is kept.
    var oldestTimestamp: Date?
    /// Every transaction up to this one was removed (0: none was).
    var pruned: UInt64 = 0
    var cursors: [String: UInt64] = [:]

    /// Transactions a save removes at most, beside its own: pruning keeps
    /// up with any rate of saves, and no save pays for a long backlog.
    static let pruneStep: UInt64 = 32
    /// Keys a batch of ``PersistentStoreCoordinator/pruneHistory(through:)`` removes.
    static let deleteBatch = 10_000

    /// The history `store` holds. A store opened for writing with history
    /// off has its transactions and cursors removed, and the mark of what
    /// was removed moved past them, so tokens from before expire.
    static func load(from store: any RecordStore, settings: PersistentHistory, readOnly: Bool) throws(StrataError) -> HistoryState {
        var state = HistoryState(settings: settings)
        state.pruned = try HistoryCoding.pruned(in: store)
        var first = try HistoryCoding.transactionNumber(in: store, newest: false)
        let last = try HistoryCoding.transactionNumber(in: store, newest: true)
        try store.forEachWhile(prefix: [HistoryCoding.cursorTag]) { key, value throws(StrataError) -> Bool in
            if let name = HistoryCoding.cursorName(fromKey: key), let number = HistoryCoding.number(fromValue: value) {
                state.cursors[name] = number
            }
            return true
        }
        let newest = max(last ?? 0, state.pruned)
        if !settings.isEnabled && !readOnly && (first != nil || !state.cursors.isEmpty) {
            // Saves from now on go unrecorded: what was recorded goes, and
            // every token up to one past the newest expires.
            state.pruned = newest + 1
            try removeAll(from: store, through: last ?? 0, cursors: Array(state.cursors.keys), pruned: state.pruned)
            state.cursors = [:]
            first = nil
        }
        state.next = max(newest, state.pruned) + 1
        state.oldest = first ?? state.next
        if let first { state.oldestTimestamp = try store.get(HistoryCoding.key(first)).flatMap(HistoryCoding.timestamp(of:)) }
        return state
    }

    /// Removes every transaction up to `through` and the named cursors, the
    /// mark first: a crash part way leaves tokens expired and the rest to
    /// remove at the next open.
    private static func removeAll(from store: any RecordStore, through: UInt64, cursors: [String], pruned: UInt64) throws(StrataError) {
        var batch = WriteBatch()
        batch.put(HistoryCoding.prunedKey, HistoryCoding.numberValue(pruned))
        for name in cursors { batch.delete(HistoryCoding.cursorKey(name)) }
        try store.write(batch)
        var keys: [[UInt8]] = []
        try store.forEachKey(in: HistoryCoding.ranges(from: 0), descending: false) { key, _ throws(StrataError) -> Bool in
            keys.append(Array(key))
            return true
        }
        for start in stride(from: 0, to: keys.count, by: deleteBatch) {
            var batch = WriteBatch()
            for key in keys[start..<min(start + deleteBatch, keys.count)] { batch.delete(key) }
            try store.write(batch)
        }
    }

    /// The transactions a save that records transaction `newest` also
    /// removes: those every cursor has passed, those past the count limit,
    /// and those past the age limit (`timestamps` reads one's time) — at
    /// most ``pruneStep``, never the newest. Nil when none.
    func pruning(newest: UInt64, now: Date, timestamps: (UInt64) -> Date?) -> ClosedRange<UInt64>? {
        guard newest > oldest else { return nil }
        let last = min(newest - 1, oldest + Self.pruneStep - 1)
        var through = pruned
        if let limit = settings.maximumTransactions, newest > UInt64(max(limit, 1)) {
            through = max(through, newest - UInt64(max(limit, 1)))
        }
        if let slowest = cursors.values.min() { through = max(through, slowest) }
        if let age = settings.maximumAge, let oldestTimestamp, now.timeIntervalSince(oldestTimestamp) > age {
            // The oldest is past it; so may be some after it.
            var number = max(oldest, through + 1)
            while number <= last, let time = timestamps(number), now.timeIntervalSince(time) > age {
                through = number
                number += 1
            }
            through = max(through, oldest)
        }
        through = min(through, last)
        return through >= oldest ? oldest...through : nil
    }
}
