import CSQLite
import Foundation
import Strata
import StrataStore

/// The follow benchmark's model: one `Tick` per save, and the one
/// `Counter` every save sets to its number (what a reader reads to know
/// which saves reached it).
final class Tick: ManagedObject {
    @Attribute("n") var n: Int64
    @Attribute("note") var note: String
}

final class Counter: ManagedObject {
    @Attribute("last") var last: Int64
}

func makeFollowModel() throws -> ManagedObjectModel {
    try ManagedObjectModel(entities: [
        EntityDescription(name: "Tick", managedObjectClass: Tick.self, properties: [
            .attribute("n", .integer64),
            .attribute("note", .string),
        ]),
        EntityDescription(name: "Counter", managedObjectClass: Counter.self, properties: [
            .attribute("last", .integer64, defaultValue: .integer(0)),
        ]),
    ])
}

/// The writing side of a run.
protocol FollowWriter {
    /// What the readers open.
    var path: String { get }
    /// Save `s`, durable when it returns.
    func save(_ s: Int) throws
    func close() throws
}

/// Saves through the ready-made container: a block save per tick, each
/// reaching the disk before it returns (the default `.grouped` sync).
final class StrataFollowWriter: FollowWriter {
    let path: String
    private let container: PersistentContainer

    init(directory: String) throws {
        path = directory + "/store"
        container = try PersistentContainer(name: "Writer", model: try makeFollowModel(), directory: path, viewContext: .privateQueue)
        try container.saveAndWait { context in _ = Counter(context: context) }
    }

    func save(_ s: Int) throws {
        try container.saveAndWait { context in
            let tick = Tick(context: context)
            tick.n = Int64(s)
            tick.note = "tick \(s)"
            if let counter = try Counter.first(in: context) { counter.last = Int64(s) }
        }
    }

    func close() throws { try container.close() }
}

/// What a reader process saw, said to the benchmark once it has seen the
/// last save: a line to the writer's process at each notification would
/// wake a thread of it (its reader of the pipe) at each of every reader's
/// catch-ups — the benchmark's cost, in the process it measures, which an
/// app's readers do not have.
///
/// `@unchecked Sendable`: `lines` is guarded by `lock`.
final class SeenSaves: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []

    /// Notes that save `last` was seen at `at` (monotonic seconds).
    func note(_ last: Int, at: Double) {
        lock.withLock { lines.append("seen \(last) \(at)") }
    }

    /// Says every line noted, in order.
    func say() {
        let text = lock.withLock { lines.map { $0 + "\n" }.joined() }
        FileHandle.standardOutput.write(Data(text.utf8))
    }
}

/// A reader process of the Strata runs: opens the store read-only, follows
/// it, and notes the last save it sees at each notification, until it has
/// seen save `until`; then says `seen LAST SECONDS` for each (``SeenSaves``).
enum StrataFollower {
    static func run(store: String, until: Int) throws {
        var options = StoreOptions()
        options.readOnly = true
        let container = try PersistentContainer(name: "Reader", model: try makeFollowModel(), directory: store, options: options, viewContext: .privateQueue)
        let context = container.newBackgroundContext()
        let done = DispatchSemaphore(value: 0)
        let seen = SeenSaves()
        let observer = NotificationCenter.default.addObserver(
            forName: PersistentStoreCoordinator.storeDidChangeRemotely, object: container.coordinator, queue: nil
        ) { _ in
            let at = monotonicSeconds()
            let last = (try? context.performAndWait { () throws -> Int in Int(try Counter.first(in: context)?.last ?? 0) }) ?? 0
            seen.note(last, at: at)
            if last >= until { done.signal() }
        }
        let following = try container.coordinator.followStore { error in say("error \(error)") }
        say("ready")
        done.wait()
        following.cancel()
        NotificationCenter.default.removeObserver(observer)
        seen.say()
        try container.close()
    }
}

/// SQLite in WAL mode, one transaction per save with `synchronous=FULL`
/// (durable when the commit returns, as Strata's saves are).
final class SQLiteFollowWriter: FollowWriter {
    let path: String
    private var db: OpaquePointer?
    private var insert: OpaquePointer?
    private var update: OpaquePointer?

    init(directory: String) throws {
        path = directory + "/follow.sqlite"
        guard sqlite3_open(path, &db) == SQLITE_OK else { throw FollowFailure("SQLite: cannot open \(path)") }
        // A reader opening the database, or rebuilding its shared index,
        // holds a lock for a moment: the commit waits for it, as an app's would.
        sqlite3_busy_timeout(db, 10_000)
        for sql in ["PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL",
                    "CREATE TABLE tick (id INTEGER PRIMARY KEY, n INTEGER NOT NULL, note TEXT NOT NULL)",
                    "CREATE TABLE counter (id INTEGER PRIMARY KEY, last INTEGER NOT NULL)",
                    "INSERT INTO counter (id, last) VALUES (1, 0)"] {
            guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { throw failure() }
        }
        guard sqlite3_prepare_v2(db, "INSERT INTO tick (n, note) VALUES (?, ?)", -1, &insert, nil) == SQLITE_OK,
              sqlite3_prepare_v2(db, "UPDATE counter SET last = ? WHERE id = 1", -1, &update, nil) == SQLITE_OK else { throw failure() }
    }

    func save(_ s: Int) throws {
        guard sqlite3_exec(db, "BEGIN", nil, nil, nil) == SQLITE_OK else { throw failure() }
        sqlite3_bind_int64(insert, 1, Int64(s))
        sqlite3_bind_text(insert, 2, "tick \(s)", -1, unsafeBitCast(-1, to: sqlite3_destructor_type.self))
        var rc = sqlite3_step(insert)
        sqlite3_reset(insert)
        guard rc == SQLITE_DONE else { throw failure() }
        sqlite3_bind_int64(update, 1, Int64(s))
        rc = sqlite3_step(update)
        sqlite3_reset(update)
        guard rc == SQLITE_DONE, sqlite3_exec(db, "COMMIT", nil, nil, nil) == SQLITE_OK else { throw failure() }
    }

    func close() throws {
        sqlite3_finalize(insert)
        sqlite3_finalize(update)
        sqlite3_close(db)
    }

    private func failure() -> FollowFailure { FollowFailure("SQLite: " + String(cString: sqlite3_errmsg(db))) }
}

/// A reader process of the SQLite runs: polls `PRAGMA data_version` every
/// millisecond (what changes when another connection commits) and, when it
/// changed, reads the counter; says what it saw at the end (``SeenSaves``).
enum SQLiteFollower {
    static func run(path: String, until: Int) throws {
        var db: OpaquePointer?
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK else { throw FollowFailure("SQLite: cannot open \(path)") }
        defer { sqlite3_close(db) }
        sqlite3_busy_timeout(db, 10_000)
        var version: OpaquePointer?, counter: OpaquePointer?
        guard sqlite3_prepare_v2(db, "PRAGMA data_version", -1, &version, nil) == SQLITE_OK,
              sqlite3_prepare_v2(db, "SELECT last FROM counter WHERE id = 1", -1, &counter, nil) == SQLITE_OK else {
            throw FollowFailure("SQLite: " + String(cString: sqlite3_errmsg(db)))
        }
        defer {
            sqlite3_finalize(version)
            sqlite3_finalize(counter)
        }
        func step(_ statement: OpaquePointer?) -> Int64? {
            defer { sqlite3_reset(statement) }
            return sqlite3_step(statement) == SQLITE_ROW ? sqlite3_column_int64(statement, 0) : nil
        }
        say("ready")
        let seen = SeenSaves()
        var seenVersion = step(version) ?? 0
        var last: Int64 = 0
        while last < until {
            usleep(1_000)
            guard let now = step(version), now != seenVersion else { continue }
            let at = monotonicSeconds()
            seenVersion = now
            last = step(counter) ?? last
            seen.note(Int(last), at: at)
        }
        seen.say()
    }
}
