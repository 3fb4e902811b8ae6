import Foundation
@_spi(StoreImplementation) import Strata
@testable import StrataPostgres
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The PostgreSQL server the tests use: the one in the directory
/// `STRATA_POSTGRES_SERVER_DIR` names (started there by
/// `scripts/postgres-server.sh start`), or else one this test process
/// starts itself in a temporary directory with that script, which stops it
/// once the process has ended. Its socket is in the directory; its TCP port on 127.0.0.1 is
/// in the directory's `port` file.
/// Where neither is possible (no PostgreSQL installed), the tests that need
/// a server are skipped, and say why.
enum TestServer {
    /// The server's directory, or why there is no server.
    static let directory: Result<String, SkipReason> = {
        if let directory = ProcessInfo.processInfo.environment["STRATA_POSTGRES_SERVER_DIR"] {
            return .success(directory)
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("strata-pg-\(UUID().uuidString)").path
        let script = scriptPath()
        // Stopped, and the directory removed, once this process has ended (the script watches it).
        guard run(script, "start", directory, String(getpid())) else {
            let reason = SkipReason(text: "no PostgreSQL server could be started (\(script) start failed): install Debian's postgresql")
            FileHandle.standardError.write(Data("StrataPostgresTests: SKIPPING the tests that need a server: \(reason.text)\n".utf8))
            return .failure(reason)
        }
        return .success(directory)
    }()

    struct SkipReason: Error { let text: String }

    static var isAvailable: Bool { (try? directory.get()) != nil }

    /// The server's port, on 127.0.0.1 and in its socket's name.
    static func port() throws -> Int {
        let text = try String(contentsOfFile: try directory.get() + "/port", encoding: .utf8)
        guard let port = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { throw SkipReason(text: "no port file") }
        return port
    }

    /// The password of the roles that must give one (strata_password, strata_tls).
    static let password = "strata-test-password"

    /// The superuser's configuration, over the socket, for database `database`.
    static func configuration(database: String = "postgres") throws -> PostgresConfiguration {
        PostgresConfiguration(endpoint: .unixSocket(directory: try directory.get(), port: try port()), username: "postgres", database: database)
    }

    /// A new, empty database of its own for one test, and its configuration.
    static func freshDatabase() throws -> PostgresConfiguration {
        let name = "strata_test_\(nextDatabase.wrappingAdd(1, ordering: .relaxed).newValue)_\(getpid())"
        let admin = try PostgresSession.connect(try configuration())
        defer { admin.close() }
        try admin.execute("CREATE DATABASE \(SQLIdentifier.quoted(name))", "making a test database")
        return try configuration(database: name)
    }

    private static let nextDatabase = Atomic<Int>(0)

    private static func scriptPath() -> String {
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/postgres-server.sh").path
    }

    /// Runs `/bin/bash arguments…` and waits for it: true if it exited 0.
    /// (posix_spawn and waitpid: Foundation's `Process.waitUntilExit` on
    /// Linux can miss the end of a child whose own child lives on, as the
    /// server started here does.)
    @discardableResult
    private static func run(_ arguments: String...) -> Bool {
        let argv = (["/bin/bash"] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, "/bin/bash", nil, nil, argv, environ) == 0 else { return false }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { return false }
        }
        // Exited (the low seven bits zero), with status 0.
        return status & 0x7f == 0 && (status >> 8) & 0xff == 0
    }
}

/// A coordinator on the PostgreSQL store of `model` in the database
/// `configuration` names, as a process opens it.
func openCoordinator(
    _ configuration: PostgresConfiguration, _ model: ManagedObjectModel, history: PersistentHistory = .default
) throws -> PersistentStoreCoordinator {
    let coordinator = PersistentStoreCoordinator(model: model)
    let store = try PostgresStore(configuration, model: model, history: history)
    do {
        try coordinator.addPersistentStore(store)
    } catch {
        store.close()
        throw error
    }
    return coordinator
}
