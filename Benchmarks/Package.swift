// swift-tools-version: 6.1
//
// StrataStore's and Strata's micro-benchmarks, a package of their own (as swift-nio keeps
// its benchmarks) so the library's package depends on nothing.
//
//     cd Benchmarks && swift package benchmark
//
// ordo-one/benchmark (formerly package-benchmark; the plugin warns about the
// old identifier) is used with the "MallocInterposer" trait only: that is its
// malloc counting on Swift 6.3+, and leaving out its default
// "RuntimeInterposer" trait (ARC counting, unused here) keeps
// swift-runtime-interposer out of the dependency graph.
import PackageDescription

let package = Package(
    name: "StrataStoreBenchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "Strata", path: "../"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "StrataStoreBenchmarks",
            dependencies: [
                .product(name: "StrataStore", package: "Strata"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/StrataStoreBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // Strata's object graph, through its public API: record encode and
        // decode (a save and a fetch of 16 objects), a child→parent save.
        .executableTarget(
            name: "StrataGraphBenchmarks",
            dependencies: [
                .product(name: "Strata", package: "Strata"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/StrataGraphBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
