import Foundation
import NIOSSL
@_spi(StoreImplementation) import Strata
@testable import StrataPostgres
import PostgresNIO
import Testing

/// Connecting as PostgreSQL users expect: a password over SCRAM-SHA-256,
/// TLS when asked for, and the password in no error.
@Suite("Connecting to PostgreSQL", .enabled(if: TestServer.isAvailable, "no PostgreSQL server (see the message above)"))
struct ConnectionTests {
    func tcp(_ user: String, password: String?, tls: PostgresConfiguration.TLS = .disable) throws -> PostgresConfiguration {
        PostgresConfiguration(endpoint: .tcp(host: "127.0.0.1", port: try TestServer.port()), username: user,
                              password: password, database: "postgres", tls: tls)
    }

    /// A client TLS configuration that takes the test server's self-signed certificate.
    var anyCertificate: TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateVerification = .none
        return tls
    }

    @Test func aPasswordOverSCRAM() throws {
        let session = try PostgresSession.connect(try tcp("strata_password", password: TestServer.password))
        defer { session.close() }
        #expect(try session.query("SELECT current_user::text", "who").first?.decode(String.self) == "strata_password")

        let wrong = "not-the-password-\(UUID())"
        let refused = #expect(throws: StrataError.self) { _ = try PostgresSession.connect(try tcp("strata_password", password: wrong)) }
        #expect(refused?.code == .storage)
        #expect(refused?.message.contains("check the password") == true)
        #expect((refused?.cause as? PostgresServerError)?.sqlState == "28P01")
        #expect(!"\(String(describing: refused))".contains(wrong))

        let none = #expect(throws: StrataError.self) { _ = try PostgresSession.connect(try tcp("strata_password", password: nil)) }
        #expect(none?.message.contains("configuration has none") == true)
    }

    @Test func tlsWhenRequired() throws {
        let session = try PostgresSession.connect(try tcp("strata_tls", password: TestServer.password, tls: .require(anyCertificate)))
        defer { session.close() }
        let encrypted = try session.query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", "ssl").first?.decode(Bool.self)
        #expect(encrypted == true)
        // The server refuses strata_tls in the clear.
        let clear = #expect(throws: StrataError.self) { _ = try PostgresSession.connect(try tcp("strata_tls", password: TestServer.password)) }
        #expect(clear?.message.contains("pg_hba.conf") == true)
        // The default client configuration checks the certificate, which the test server signed itself.
        let unverified = #expect(throws: StrataError.self) {
            _ = try PostgresSession.connect(try tcp("strata_tls", password: TestServer.password, tls: .require(.makeClientConfiguration())))
        }
        #expect(unverified?.code == .storage)
        #expect(unverified?.message.contains("TLS handshake") == true)
        #expect(!"\(String(describing: unverified))".contains(TestServer.password))
    }

    @Test func tlsOverASocketIsAMistake() throws {
        var configuration = try TestServer.configuration()
        configuration.tls = .require(anyCertificate)
        let refused = #expect(throws: StrataError.self) { _ = try PostgresSession.connect(configuration) }
        #expect(refused?.code == .invalidArgument)
        #expect(refused?.message.contains("no TLS over a Unix socket") == true)
    }
}
