import Foundation
@_spi(StoreImplementation) import Strata

/// Follows every save made to a store's database, by any process, from a
/// history number on: each transaction delivered once, in number order,
/// none missed — across lost connections.
///
/// A thread of its own waits for a listener's wake-up (or, as a safety
/// net, for ``pollInterval``), then reads the history after the last
/// number it delivered and hands the transactions to `deliver`. When the
/// listening connection is lost (the server restarted, the network
/// dropped), it connects again — after 0.1 s, doubling to 2 s while it
/// fails, each failure told to `onError` — and reads the history from its
/// last number, which brings in whatever committed meanwhile.
///
/// A follower that falls further behind than the history's limits keep
/// finds a hole where pruned transactions were: it says so to `onError`
/// (``Strata/StrataError/Code/historyExpired``) and goes on from there.
///
/// A wake-up carries the number and the identifier of the save that sent
/// it. When the saves heard since the last delivery are every one after
/// it, and `passOver` claims them all by their identifiers (the
/// coordinator's own saves, which it merged as it made them), the history
/// is not read: a process that saves alone costs the server no read per
/// save.
///
/// `@unchecked Sendable`: `stopped`, `woken`, `wokenBlind`, `heard`, `listener` and
/// `followingThread` are guarded by `condition`; the rest is immutable
/// once `init` returns.
final class PostgresChangeFollower: @unchecked Sendable {
    /// The longest wait between reads of the history without a wake-up.
    static let pollInterval: TimeInterval = 5
    /// The most transactions one read of the history takes.
    static let readLimit = 1_000

    private let condition = NSCondition()
    private var stopped = false
    private var woken = true
    /// The commits wake-ups told of since the following last looked: the
    /// identifier of each save, by its number.
    private var heard: [UInt64: UInt64] = [:]
    /// Whether `woken` came from the poll's timer or a listener's loss
    /// rather than a notification: the history must be read then.
    private var wokenBlind = true
    private var listener: PostgresChangeListener?
    private var thread: Thread?
    /// The following thread, once it runs: ``stop()`` there does not wait for itself.
    private var followingThread: pthread_t?
    private let finished = DispatchSemaphore(value: 0)

    /// Starts following `store` (whose database `configuration` names) after
    /// history number `after`. `deliver` runs on the follower's thread.
    init(
        _ store: PostgresStore, _ configuration: PostgresConfiguration, after: UInt64,
        deliver: @escaping @Sendable ([StoredTransaction]) -> Void,
        passOver: @escaping @Sendable ([UInt64]) -> Bool = { _ in false },
        onError: @escaping @Sendable (StrataError) -> Void
    ) {
        let thread = Thread { [self] in
            defer { finished.signal() }
            condition.lock()
            followingThread = pthread_self()
            condition.unlock()
            follow(store, configuration, after: after, deliver: deliver, passOver: passOver, onError: onError)
        }
        thread.name = "strata.postgres.follow"
        self.thread = thread
        thread.start()
    }

    /// The server process of the listening connection, once there is one
    /// (for tests that end it).
    var listenerBackendPID: Int32? {
        condition.lock()
        defer { condition.unlock() }
        return listener?.backendPID
    }

    /// Stops following: returns once the thread has ended (a delivery under
    /// way finishes first) — but from `deliver`, on the thread, where it
    /// only stops the next delivery. Idempotent.
    func stop() {
        condition.lock()
        let onFollowingThread = followingThread.map { pthread_equal($0, pthread_self()) != 0 } ?? false
        guard !stopped else {
            condition.unlock()
            return
        }
        stopped = true
        condition.broadcast()
        condition.unlock()
        if !onFollowingThread { finished.wait() }
    }

    private func follow(
        _ store: PostgresStore, _ configuration: PostgresConfiguration, after: UInt64,
        deliver: ([StoredTransaction]) -> Void, passOver: ([UInt64]) -> Bool, onError: (StrataError) -> Void
    ) {
        var last = after
        var backoff: TimeInterval = 0.1
        while true {
            condition.lock()
            if listener?.isClosed ?? true {
                listener?.close()
                listener = nil
                condition.unlock()
                do throws(StrataError) {
                    let listening = try PostgresChangeListener(
                        configuration, onChange: { [weak self] commit in self?.wake(heard: commit) },
                        onClose: { [weak self] in self?.wake(heard: nil) })
                    condition.lock()
                    listener = listening
                    // Whatever committed while no one listened.
                    woken = true
                    wokenBlind = true
                    condition.unlock()
                    backoff = 0.1
                } catch {
                    onError(error)
                    condition.lock()
                    if !stopped { _ = condition.wait(until: Date(timeIntervalSinceNow: backoff)) }
                    backoff = min(backoff * 2, 2)
                    let done = stopped
                    condition.unlock()
                    if done { break }
                    continue
                }
                condition.lock()
            }
            if !woken && !stopped && !condition.wait(until: Date(timeIntervalSinceNow: Self.pollInterval)) { wokenBlind = true }
            let blind = wokenBlind || !woken
            woken = false
            wokenBlind = false
            let commits = heard
            heard = [:]
            let done = stopped
            condition.unlock()
            if done { break }
            // Only this coordinator's own saves since the last read: nothing to read.
            if !blind, let own = Self.saves(after: last, in: commits), passOver(own) {
                last += UInt64(own.count)
                continue
            }
            do throws(StrataError) {
                while !isStopped {
                    let transactions = try store.transactions(after: last, limit: Self.readLimit)
                    guard let newest = transactions.last else { break }
                    // Numbers have no holes but those pruning makes: the
                    // transactions in between are gone, unread.
                    if let first = transactions.first, first.number > last + 1 {
                        onError(StrataError(code: .historyExpired, message: """
                            following other processes' saves: transactions #\(last + 1) to #\(first.number - 1) were pruned before \
                            this process read them (it fell further behind than the history's limits keep); objects they changed \
                            may be stale here until refreshed
                            """))
                    }
                    deliver(transactions)
                    last = newest.number
                    // Fewer than asked for: none newer has committed.
                    if transactions.count < Self.readLimit { break }
                }
            } catch {
                onError(error)
            }
        }
        condition.lock()
        let closing = listener
        listener = nil
        condition.unlock()
        closing?.close()
    }

    private var isStopped: Bool {
        condition.lock()
        defer { condition.unlock() }
        return stopped
    }

    /// The identifiers of the saves numbered after `last` up to the newest
    /// of `commits`, when `commits` has every one of them; nil when it
    /// lacks one (a notification not heard, or not yet) or has none.
    static func saves(after last: UInt64, in commits: [UInt64: UInt64]) -> [UInt64]? {
        guard let newest = commits.keys.max(), newest > last, newest - last <= UInt64(commits.count) else { return nil }
        var saves: [UInt64] = []
        for number in last + 1...newest {
            guard let save = commits[number] else { return nil }
            saves.append(save)
        }
        return saves
    }

    /// A listener heard a save's commit, or (nil) lost its connection or
    /// heard a notification that says nothing: the history must be read.
    private func wake(heard commit: PostgresChangeListener.HeardCommit?) {
        condition.lock()
        woken = true
        if let commit { heard[commit.number] = commit.saveIdentifier } else { wokenBlind = true }
        condition.broadcast()
        condition.unlock()
    }
}
