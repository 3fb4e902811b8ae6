// swift-tools-version: 6.0
//
// Strata: Core Data's object-graph model for platforms without Core Data,
// over StrataStore, an append-only log-structured storage engine.
//
// Dependency direction (one module per layer, as swift-nio does):
//
//     CLZ4, CStrataCRC32C,  C shims: liblz4, hardware CRC32C,
//     CStrataScheduling,    the thread's scheduler slice (sched_setattr),
//     CStrataSystem         early writeback (sync_file_range)
//             ↑
//       StrataStore         the storage engine; knows nothing of objects
//             ↑
//          Strata           the object graph: model, contexts, coordinator
//             ↑
//  strata-bench, strata-dump   thin executables over the libraries
//       Examples/              the README's first program, built and run by tests
//       StrataMacros           @Entity, its own product: swift-syntax is
//                              built only by those who use it
//       strata-fuzz            the libFuzzer harness (Fuzz/)
//
// strata-bench alone links SQLite, LMDB and LevelDB (CSQLite, CLMDB,
// CLevelDB), the peers it measures Strata beside.
import CompilerPluginSupport
import PackageDescription

let strictSwift: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "Strata",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "Strata", targets: ["Strata"]),
        .library(name: "StrataStore", targets: ["StrataStore"]),
        .library(name: "StrataMacros", targets: ["StrataMacros"]),
        .executable(name: "strata-bench", targets: ["strata-bench"]),
        .executable(name: "strata-dump", targets: ["strata-dump"]),
    ],
    dependencies: [
        // For the command-line tools only; Strata and StrataStore depend on nothing.
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        // strata-bench's latency histograms.
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        // @Entity (StrataMacros) only.
        .package(url: "https://github.com/swiftlang/swift-syntax", from: "603.0.1"),
    ],
    targets: [
        .systemLibrary(
            name: "CLZ4",
            pkgConfig: "liblz4",
            providers: [.apt(["liblz4-dev"]), .brew(["lz4"])]
        ),
        .target(name: "CStrataCRC32C"),
        .target(name: "CStrataScheduling"),
        .target(name: "CStrataSystem"),
        // SQLite, for strata-bench's side-by-side baseline only.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]
        ),
        // LMDB and LevelDB, for strata-bench engine's side-by-side figures only.
        .systemLibrary(
            name: "CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"]), .brew(["lmdb"])]
        ),
        .systemLibrary(
            name: "CLevelDB",
            providers: [.apt(["libleveldb-dev"]), .brew(["leveldb"])]
        ),
        .target(
            name: "StrataStore",
            dependencies: ["CLZ4", "CStrataCRC32C", "CStrataScheduling", "CStrataSystem"],
            swiftSettings: strictSwift
        ),
        .target(
            name: "Strata",
            dependencies: ["StrataStore"],
            swiftSettings: strictSwift
        ),
        // @Entity and its markers: the declarations, and the compiler plugin
        // that expands them.
        .macro(
            name: "StrataMacrosPlugin",
            dependencies: [
                .product(name: "SwiftSyntaxMacros", package: "swift-syntax"),
                .product(name: "SwiftCompilerPlugin", package: "swift-syntax"),
            ],
            swiftSettings: strictSwift
        ),
        .target(
            name: "StrataMacros",
            dependencies: ["Strata", "StrataMacrosPlugin"],
            swiftSettings: strictSwift
        ),
        .executableTarget(
            name: "strata-bench",
            dependencies: [
                "Strata", "StrataStore", "CSQLite", "CLMDB", "CLevelDB", "CStrataSystem",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ],
            swiftSettings: strictSwift
        ),
        .executableTarget(
            name: "strata-dump",
            dependencies: ["Strata", "StrataStore", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: strictSwift
        ),
        // The README's first program and its version 2, built and run by
        // StrataMacrosTests (FirstProgramTests) so that what the README shows
        // compiles and does what it says.
        .executableTarget(
            name: "strata-example-bookmarks",
            dependencies: ["StrataMacros"],
            path: "Examples/Bookmarks",
            swiftSettings: strictSwift
        ),
        .executableTarget(
            name: "strata-example-bookmarks-v2",
            dependencies: ["StrataMacros"],
            path: "Examples/BookmarksV2",
            swiftSettings: strictSwift
        ),
        // The crash tests: a child process writes the batches CrashWorkload
        // describes and reports each acknowledged one on stdout until the test
        // SIGKILLs it; the test checks the store against the same description.
        .target(
            name: "CrashWorkload",
            dependencies: ["StrataStore"],
            path: "Tests/CrashWorkload",
            swiftSettings: strictSwift
        ),
        // What several test targets share: finding the package's executables
        // beside a test binary, running them, a seeded generator.
        .target(
            name: "SharedTestSupport",
            path: "Tests/SharedTestSupport",
            swiftSettings: strictSwift
        ),
        .executableTarget(
            name: "strata-crash-child",
            dependencies: ["StrataStore", "CrashWorkload"],
            path: "Tests/CrashChild",
            swiftSettings: strictSwift
        ),
        // The user-level crash test: a child saves ContainerCrashWorkload's
        // saves through a PersistentContainer until SIGKILLed.
        .target(
            name: "ContainerCrashWorkload",
            dependencies: ["Strata", "StrataStore"],
            path: "Tests/ContainerCrashWorkload",
            swiftSettings: strictSwift
        ),
        .executableTarget(
            name: "strata-container-crash-child",
            dependencies: ["Strata", "ContainerCrashWorkload"],
            path: "Tests/ContainerCrashChild",
            swiftSettings: strictSwift
        ),
        // The libFuzzer harness for every decoder that reads bytes from disk
        // (Fuzz/README.md). Built normally, it replays the committed corpus;
        // built with -sanitize=fuzzer,address -DSTRATA_FUZZING, it fuzzes.
        .target(name: "CStrataFuzz", path: "Fuzz/Sources/CStrataFuzz"),
        .executableTarget(
            name: "strata-fuzz",
            dependencies: ["Strata", "StrataStore", "CStrataFuzz"],
            path: "Fuzz/Sources/strata-fuzz",
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "StrataFuzzTests",
            dependencies: ["strata-fuzz", "SharedTestSupport"],
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "StrataTests",
            dependencies: [
                "Strata", "StrataStore", "ContainerCrashWorkload", "SharedTestSupport",
                "strata-container-crash-child", "strata-dump",
            ],
            // Stores made by earlier builds, read by FixtureStoreTests from the source tree.
            exclude: ["FixtureStores"],
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "StrataMacrosTests",
            dependencies: [
                "StrataMacros", "StrataMacrosPlugin", "StrataStore", "SharedTestSupport",
                "strata-example-bookmarks", "strata-example-bookmarks-v2",
                .product(name: "SwiftSyntaxMacrosTestSupport", package: "swift-syntax"),
            ],
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "StrataBenchTests",
            dependencies: ["strata-bench", "SharedTestSupport"],
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "StrataDumpTests",
            dependencies: ["Strata", "StrataStore", "strata-dump", "SharedTestSupport"],
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "StrataStoreTests",
            dependencies: ["StrataStore", "CrashWorkload", "strata-crash-child", "SharedTestSupport"],
            swiftSettings: strictSwift
        ),
    ]
)
