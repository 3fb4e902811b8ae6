/// Who made a set of changes, for the store's persistent history: the
/// transaction authors that named some of them, and whether some were made
/// by no named author. A store transaction has an author only when one
/// name covers every change it writes.
struct TransactionAuthors: Sendable {
    var names: Set<String> = []
    /// Whether some changes were made where no author was set.
    var unnamed = false

    /// The one author of every change; nil when none or several.
    var single: String? { !unnamed && names.count == 1 ? names.first : nil }

    mutating func formUnion(_ other: TransactionAuthors) {
        names.formUnion(other.names)
        unnamed = unnamed || other.unnamed
    }

    /// These authors as a context with `author` hands them on: changes no
    /// author named are its author's.
    func labelled(by author: String?) -> TransactionAuthors {
        guard unnamed, let author else { return self }
        var labelled = self
        labelled.names.insert(author)
        labelled.unnamed = false
        return labelled
    }
}

/// The authors of a context's changes since its last save: its own (made
/// here: ``ManagedObjectContext/transactionAuthor``'s) and those of the
/// child saves it took in. Confined to the context's queue, like the
/// changes it describes.
struct CarriedAuthors {
    private(set) var authors = TransactionAuthors()
    /// Counts child saves taken in: a save forgets only what it carried.
    private(set) var mark: UInt64 = 0

    /// A change made here (not taken in from a child).
    mutating func noteOwnChange() { authors.unnamed = true }

    /// A child save taken in; returns what ``endTakingIn(_:)`` restores.
    @discardableResult
    mutating func add(_ child: TransactionAuthors) -> Bool {
        authors.formUnion(child)
        mark &+= 1
        return authors.unnamed
    }

    /// Whether changes no author named are here once a child save with
    /// `child`'s authors is taken in: what ``endTakingIn(_:)`` restores.
    func whenTakenIn(_ child: TransactionAuthors) -> Bool { authors.unnamed || child.unnamed }

    /// After taking in a child's save, whose changes to objects here went
    /// through the change tracking a change made here goes through: they
    /// are the child's, so whether this context has changes of its own
    /// returns to `unnamed` (from ``add(_:)`` or ``whenTakenIn(_:)``).
    mutating func endTakingIn(_ unnamed: Bool) { authors.unnamed = unnamed }

    /// After a save that carried `authors` as they were at `mark`:
    /// forgotten, unless another child save came in meanwhile (a guest's,
    /// while the store write was under way) — the next save carries them
    /// all then, and its author is nil if they differ.
    mutating func saved(since mark: UInt64) {
        if self.mark == mark { authors = TransactionAuthors() }
    }

    /// The context's changes were thrown away (`reset()`, `rollback()`).
    mutating func forget() { authors = TransactionAuthors() }
}
