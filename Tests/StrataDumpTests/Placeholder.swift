import Testing

@Suite struct StrataDumpPlaceholderTests {
    @Test func builds() {}
}
