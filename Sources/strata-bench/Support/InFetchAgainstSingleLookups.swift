import ArgumentParser
import Strata

/// Milliseconds for one `IN` fetch of some keys and for the same keys looked
/// up one at a time, each in a fresh background context (nothing registered
/// in it before): five of each in turn, the medians. `inFetch` returns how
/// many objects it fetched, checked against `expected` outside the clock;
/// `singleLookups` throws when a key is not found.
func inFetchAgainstSingleLookups(
    in container: PersistentContainer, childOfWriter: Bool, expected: Int,
    inFetch: (ManagedObjectContext) throws -> Int, singleLookups: (ManagedObjectContext) throws -> Void
) throws -> (inFetchMs: Double, singleLookupsMs: Double) {
    var inFetches: [Double] = []
    var singles: [Double] = []
    for _ in 0..<5 {
        let inContext = container.newBackgroundContext(childOfWriter: childOfWriter)
        inFetches.append(try inContext.performAndWait { () throws in
            var found = 0
            let elapsed = try seconds { found = try inFetch(inContext) }
            guard found == expected else { throw ValidationError("IN fetch: \(found) objects of \(expected)") }
            return elapsed * 1000
        })
        let singleContext = container.newBackgroundContext(childOfWriter: childOfWriter)
        singles.append(try singleContext.performAndWait { () throws in try seconds { try singleLookups(singleContext) } * 1000 })
    }
    return (median(inFetches), median(singles))
}
