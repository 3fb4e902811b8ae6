import Foundation
@_spi(StoreImplementation) import Strata

/// Sessions to one server, each lent to one caller at a time, at most
/// ``capacity`` open at once: what a store's reads and saves borrow.
///
/// A session is made when one is asked for and none is idle, below the
/// capacity; above it, the caller waits for one to come back. A session
/// that comes back closed (the server ended it, the network dropped it) is
/// let go of, and the next borrower gets a new one — so a server restart
/// costs the statements under way, not the pool.
///
/// ``close()`` refuses new borrowers, waits for the sessions lent to come
/// back, and closes them all. It must not be called by a borrower (it would
/// wait for itself).
///
/// `@unchecked Sendable`: `idle`, `open` and `closed` are guarded by
/// `condition`'s lock; `configuration` and `capacity` are immutable.
final class PostgresSessionPool: @unchecked Sendable {
    let configuration: PostgresConfiguration
    /// The most sessions open at once.
    let capacity: Int

    private let condition = NSCondition()
    /// Sessions back from their borrowers, ready to lend.
    private var idle: [PostgresSession] = []
    /// Sessions open or being opened: lent, idle, or connecting.
    private var open = 0
    private var closed = false

    init(_ configuration: PostgresConfiguration, capacity: Int) {
        precondition(capacity > 0, "a pool of no sessions")
        self.configuration = configuration
        self.capacity = capacity
    }

    /// Calls `body` with a session of its own for the call. Throws
    /// ``Strata/StrataError/Code/noPersistentStore`` once the pool is
    /// closed, and what connecting or `body` throws.
    func withSession<T>(_ body: (PostgresSession) throws(StrataError) -> T) throws(StrataError) -> T {
        let session = try borrow()
        defer { giveBack(session) }
        return try body(session)
    }

    private func borrow() throws(StrataError) -> PostgresSession {
        condition.lock()
        while true {
            if closed {
                condition.unlock()
                throw StrataError(code: .noPersistentStore, message: "the PostgreSQL store at \(configuration.endpoint) is closed")
            }
            if let session = idle.popLast() {
                if session.isClosed {
                    open -= 1
                    continue
                }
                condition.unlock()
                return session
            }
            if open < capacity { break }
            condition.wait()
        }
        open += 1
        condition.unlock()
        do {
            return try PostgresSession.connect(configuration)
        } catch {
            condition.lock()
            open -= 1
            condition.signal()
            condition.unlock()
            throw error
        }
    }

    private func giveBack(_ session: PostgresSession) {
        condition.lock()
        let keep = !closed && !session.isClosed
        if keep { idle.append(session) } else { open -= 1 }
        // A borrower waits for a session; close() for the last one back.
        condition.broadcast()
        condition.unlock()
        if !keep { session.close() }
    }

    /// Closes the pool: no session is lent after this begins; it returns
    /// once every lent session has come back, and all are closed.
    /// Idempotent.
    func close() {
        condition.lock()
        closed = true
        condition.broadcast()
        while open > idle.count { condition.wait() }
        let sessions = idle
        idle = []
        open = 0
        condition.unlock()
        for session in sessions { session.close() }
    }

    /// Sessions open now (lent, idle or connecting): for tests.
    var openCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return open
    }
}
