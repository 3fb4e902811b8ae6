import Foundation

/// SplitMix64: a tiny seeded generator, so random tests reproduce from their seed.
public struct SeededGenerator: RandomNumberGenerator {
    public var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A seed from STRATA_TEST_SEED, or a fresh one; tests print it on failure.
public func testSeed() -> UInt64 {
    if let text = ProcessInfo.processInfo.environment["STRATA_TEST_SEED"], let seed = UInt64(text) { return seed }
    return UInt64.random(in: 1...UInt64.max)
}
