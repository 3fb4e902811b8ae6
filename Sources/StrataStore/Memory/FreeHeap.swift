internal import CStrataSystem

/// The C heap's free memory, as the system sees it.
package enum FreeHeap {
    /// Hands free pages back to the system (glibc's `malloc_trim`; nothing
    /// elsewhere). It walks every arena under its lock, so it costs in
    /// proportion to the heap: call it off any queue a user waits on, after
    /// a large release, not routinely. True when memory went back.
    @discardableResult
    package static func release() -> Bool {
        strata_release_free_heap() == 1
    }
}
