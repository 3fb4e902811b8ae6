/// The result of ``ManagedObjectContext/fetchResults(_:)``: the IDs of the
/// objects a request describes, in order, filled into objects a batch at a
/// time as they are used (Core Data's batched fetch).
///
/// ```swift
/// var request = FetchRequest<Recipe>(sortBy: [SortDescriptor(\.name)])
/// request.fetchBatchSize = 100
/// let recipes = try context.fetchResults(request)
/// for recipe in recipes.prefix(10) { print(recipe.name) }   // fills one batch
/// ```
///
/// It belongs to the context that fetched it: use it on that context's queue
/// (like the objects it hands out), and hand ``objectIDs`` to other queues.
public struct FetchedResults<Result: ManagedObject>: RandomAccessCollection {
    /// The objects' IDs, in the request's order.
    public let objectIDs: [ObjectID]
    let context: ManagedObjectContext
    /// How many objects are filled together.
    public let batchSize: Int

    public var startIndex: Int { objectIDs.startIndex }
    public var endIndex: Int { objectIDs.endIndex }

    /// The object at `position`, registered in the context; on first use it
    /// and the rest of its batch are read from the context's source.
    public subscript(position: Int) -> Result {
        context.checkQueue()
        let id = objectIDs[position]
        if let object = context.registry[id], !object.flags.contains(.fault) {
            return unsafeDowncast(object, to: Result.self)
        }
        let start = position - position % batchSize
        context.prefetch(objectIDs[start..<Swift.min(start + batchSize, objectIDs.count)])
        return unsafeDowncast(context.registeredOrFault(for: id, fetched: true), to: Result.self)
    }
}
