import Foundation
@_spi(StoreImplementation) import Strata
@testable import StrataPostgres
import PostgresNIO
import Synchronization
import Testing

/// The sessions a store borrows, and the primary keys it reserves, under
/// threads at once.
@Suite("Sessions and primary keys", .enabled(if: TestServer.isAvailable, "no PostgreSQL server (see the message above)"))
struct PoolTests {
    @Test func neverMoreSessionsThanItsCapacity() throws {
        let pool = PostgresSessionPool(try TestServer.configuration(), capacity: 3)
        defer { pool.close() }
        let lent = Atomic<Int>(0), mostLent = Atomic<Int>(0)
        let backends = Mutex<Set<Int32>>([])
        let failures = Mutex<[StrataError]>([])
        // Eight threads of their own (Dispatch would run two at a time on two cores).
        let done = DispatchGroup()
        for _ in 0..<8 {
            done.enter()
            Thread {
                defer { done.leave() }
                for _ in 0..<20 {
                    do throws(StrataError) {
                        try pool.withSession { (session) throws(StrataError) in
                            let now = lent.wrappingAdd(1, ordering: .relaxed).newValue
                            mostLent.max(now, ordering: .relaxed)
                            defer { lent.wrappingSubtract(1, ordering: .relaxed) }
                            // Held a moment, so that borrowers overlap.
                            let pid = try SchemaInstallation.decode(
                                try session.query("SELECT pg_backend_pid() FROM pg_sleep(0.002)", "asking the backend").first,
                                as: Int32.self, "asking the backend")
                            backends.withLock { _ = $0.insert(pid) }
                        }
                    } catch {
                        failures.withLock { $0.append(error) }
                    }
                }
            }.start()
        }
        done.wait()
        #expect(failures.withLock { $0 }.isEmpty)
        #expect(mostLent.load(ordering: .relaxed) <= 3)
        #expect(mostLent.load(ordering: .relaxed) == 3)  // the eight did wait for one another
        #expect(backends.withLock { $0.count } <= 3)
        #expect(pool.openCount <= 3)
    }

    @Test func aSessionTheServerEndedIsReplaced() throws {
        let pool = PostgresSessionPool(try TestServer.configuration(), capacity: 1)
        defer { pool.close() }
        let first = try pool.withSession { (session) throws(StrataError) in
            try SchemaInstallation.decode(try session.query("SELECT pg_backend_pid()", "pid").first, as: Int32.self, "pid")
        }
        let admin = try PostgresSession.connect(try TestServer.configuration())
        defer { admin.close() }
        try admin.query("SELECT pg_terminate_backend(\(first))", "ending a backend")
        // A statement sent before the client hears of the end fails, typed;
        // once it has, the pool lets the session go and lends a new one.
        var errors: [StrataError] = []
        for _ in 0..<3 {
            do throws(StrataError) {
                try pool.withSession { (session) throws(StrataError) in _ = try session.query("SELECT 1", "a query") }
            } catch {
                errors.append(error)
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        #expect(errors.allSatisfy { $0.code == .storage })
        #expect(errors.count <= 1)
        let second = try pool.withSession { (session) throws(StrataError) in
            try SchemaInstallation.decode(try session.query("SELECT pg_backend_pid()", "pid").first, as: Int32.self, "pid")
        }
        #expect(second != first)
    }

    @Test func closeWaitsForWhatIsLentThenRefuses() throws {
        let pool = PostgresSessionPool(try TestServer.configuration(), capacity: 2)
        let borrowed = DispatchSemaphore(value: 0)
        let order = Mutex<[String]>([])
        let borrower = Thread {
            try? pool.withSession { (session) throws(StrataError) in
                borrowed.signal()
                Thread.sleep(forTimeInterval: 0.2)
                try session.query("SELECT 1", "a query")
                order.withLock { $0.append("gave back") }
            }
        }
        borrower.start()
        borrowed.wait()
        pool.close()
        order.withLock { $0.append("closed") }
        #expect(order.withLock { $0 } == ["gave back", "closed"])
        #expect(pool.openCount == 0)
        let refused = #expect(throws: StrataError.self) {
            try pool.withSession { (_) throws(StrataError) in }
        }
        #expect(refused?.code == .noPersistentStore)
    }

    @Test func primaryKeysFromManySessionsNeverMeet() throws {
        let configuration = try TestServer.freshDatabase()
        let model = try bookmarksModel()
        let setup = try PostgresSession.connect(configuration)
        _ = try SchemaInstallation.prepare(try StoreSchema(model), of: model, on: setup)
        setup.close()
        let pool = PostgresSessionPool(configuration, capacity: 4)
        defer { pool.close() }
        let ranges = Mutex<[Range<UInt64>]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for i in 0..<50 {
                let count = UInt64(1 + (thread * 7 + i) % 10)
                if let range = try? pool.withSession({ (session) throws(StrataError) in
                    try PrimaryKeyReservation.reserve(count, of: "Bookmark", on: session)
                }) {
                    ranges.withLock { $0.append(range) }
                }
            }
        }
        let all = ranges.withLock { $0 }.sorted { $0.lowerBound < $1.lowerBound }
        #expect(all.count == 200)
        #expect(all.first?.lowerBound == 1)
        // Back to back: no key twice, none skipped.
        #expect(zip(all, all.dropFirst()).allSatisfy { $0.upperBound == $1.lowerBound })
        // Another entity counts on its own.
        let tags = try pool.withSession { (session) throws(StrataError) in try PrimaryKeyReservation.reserve(5, of: "Tag", on: session) }
        #expect(tags == 1..<6)
    }
}
