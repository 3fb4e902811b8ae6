// swift-tools-version: 6.0
//
// StrataPostgres: Strata's object graph over a PostgreSQL database that
// several processes share (issue 45). A package of its own, beside the root
// one, for two reasons:
// - apps that keep to the log store never resolve or build NIO, swift-crypto
//   and postgres-nio;
// - the root package's tests build twice in CI (debug and ThreadSanitizer);
//   this one's build once, in `make test-postgres`.
//
// Dependency direction: StrataPostgres → Strata (the object graph, through
// its store seam) and PostgresNIO. Strata knows nothing of it.
import PackageDescription

let strictSwift: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "StrataPostgres",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "StrataPostgres", targets: ["StrataPostgres"]),
        .executable(name: "strata-bench-postgres", targets: ["strata-bench-postgres"]),
    ],
    dependencies: [
        .package(name: "Strata", path: "../"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // TLS to the server (postgres-nio depends on it already).
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // The benchmark's baselines log through it, as postgres-nio asks (already resolved through postgres-nio).
        .package(url: "https://github.com/apple/swift-log.git", from: "1.5.3"),
    ],
    targets: [
        .target(
            name: "StrataPostgres",
            dependencies: [
                .product(name: "Strata", package: "Strata"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strictSwift
        ),
        // The PostgreSQL store's figures beside postgres-nio alone: thin, a file per scenario.
        .executableTarget(
            name: "strata-bench-postgres",
            dependencies: [
                "StrataPostgres",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "StrataPostgresTests",
            dependencies: ["StrataPostgres"],
            swiftSettings: strictSwift
        ),
    ]
)
