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
/// `@unchecked Sendable`: `stopped`, `woken`, `listener` and
/// `followingThread` are guarded by `condition`; the rest is immutable
/// once `init` returns.
final class PostgresChangeFollower: @unchecked Sendable {
    /// The longest wait between reads of the history without a wake-up.
    static let pollInterval: TimeInterval = 5

    private let condition = NSCondition()
    private var stopped = false
    private var woken = true
    private var listener: PostgresChangeListener?
    private var thread: Thread?
    /// The following thread, once it runs: ``stop()`` there does not wait for itself.
    private var followingThread: pthread_t?
    private let finished = DispatchSemaphore(value: 0)

    /// Starts following `store` (whose database `configuration` names) after
    /// history number `after`. `deliver` runs on the follower's thread.
    init(
        _ store: PostgresStore, _ configuration: PostgresConfiguration, after: UInt64,
        deliver: @escaping @Sendable ([StoredTransaction]) -> Void, onError: @escaping @Sendable (StrataError) -> Void
    ) {
        let thread = Thread { [self] in
            defer { finished.signal() }
            condition.lock()
            followingThread = pthread_self()
            condition.unlock()
            follow(store, configuration, after: after, deliver: deliver, onError: onError)
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
        deliver: ([StoredTransaction]) -> Void, onError: (StrataError) -> Void
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
                        configuration, onChange: { [weak self] _ in self?.wake() }, onClose: { [weak self] in self?.wake() })
                    condition.lock()
                    listener = listening
                    // Whatever committed while no one listened.
                    woken = true
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
            if !woken && !stopped { _ = condition.wait(until: Date(timeIntervalSinceNow: Self.pollInterval)) }
            woken = false
            let done = stopped
            condition.unlock()
            if done { break }
            do throws(StrataError) {
                while !isStopped {
                    let transactions = try store.transactions(after: last)
                    guard let newest = transactions.last else { break }
                    deliver(transactions)
                    last = newest.number
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

    /// A listener heard a commit.
    private func wake() {
        condition.lock()
        woken = true
        condition.broadcast()
        condition.unlock()
    }
}
