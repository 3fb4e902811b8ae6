/// What a context's objects point to instead of the context itself: one per
/// context, holding it unretained, cleared by the context's `deinit`.
///
/// A weak reference in every object would make each property write pay a
/// weak load plus a retain and release of the context through its side
/// table, a visible share of an import's time. The objects share one
/// strong reference to this link instead, and the write path uses the
/// context at +0. An
/// object that outlives its context sees nil, as it would through a weak
/// reference.
///
/// The one thing a weak reference would do that this does not: survive a context
/// being deallocated on one thread while another thread is inside one of
/// its objects. That is already a violation of Rule 1 (an object is used
/// only on its context's queue, and a block on that queue holds the
/// context), as it is in Core Data, whose objects hold their context
/// unretained too.
///
/// `@unchecked Sendable`: `unmanaged` is written only by the context's
/// initializer and `deinit`; reads happen on the context's queue, which
/// those writes cannot overlap (see above).
final class ContextLink: @unchecked Sendable {
    var unmanaged: Unmanaged<ManagedObjectContext>?
    /// The context's ``ManagedObjectContext/tracksObservation``, where
    /// every property read of its objects can check it (written on the
    /// context's queue, like the reads).
    @exclusivity(unchecked) var tracksObservation = false

    /// The context, retained (nil once it is gone).
    var context: ManagedObjectContext? { unmanaged?.takeUnretainedValue() }
}
