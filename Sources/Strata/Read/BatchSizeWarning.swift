internal import StrataStore

#if DEBUG
/// The warning a batched request passed to `fetch(_:)` prints, once per
/// process: an app that sets `fetchBatchSize` expects Core Data's lazy
/// result and gets every object registered.
enum BatchSizeWarning {
    private static let lock = Lock()
    /// Guarded by `lock`.
    nonisolated(unsafe) private static var printed = false

    static func printOnce(for type: Any.Type) {
        guard lock.withLock({ () -> Bool in
            defer { printed = true }
            return !printed
        }) else { return }
        FileHandleStandardError.write("""
            Strata: fetch(_:) of \(type) with a fetchBatchSize registers every match at once (an array cannot wait); \
            fetchResults(_:) holds IDs and fills \(type) objects a batch at a time as they are used (printed once)\n
            """)
    }
}
#endif
