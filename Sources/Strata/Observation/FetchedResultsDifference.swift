/// How a ``FetchedResultsController``'s results changed in one delivery:
/// the objects that left, joined, moved and (when asked for) changed in
/// place, with their positions, and the sections that appeared or went.
///
/// Positions follow the rule of a table or collection view's batch update:
/// a deleted object's and a deleted section's are in the results before
/// the change, an inserted one's after it, a move has both, and so does an
/// update. Applied in that order — deletions from the highest position
/// down, then insertions from the lowest up — the old results become the
/// new ones; ``objectIDs`` says the same as a `CollectionDifference` over
/// the flat list of IDs, for those who keep their own array.
public struct FetchedResultsDifference: Sendable, Equatable {
    /// A place in the results: a section, and a position within it (0 with no sections).
    public struct Position: Sendable, Hashable, Comparable, CustomStringConvertible {
        /// The section's index (0 when the controller has no sections).
        public var section: Int
        /// The position within the section.
        public var item: Int

        /// The position `item` of section `section`.
        public init(section: Int, item: Int) {
            self.section = section
            self.item = item
        }

        /// Section first, then position within it.
        public static func < (a: Position, b: Position) -> Bool { (a.section, a.item) < (b.section, b.item) }
        /// `[section, item]`.
        public var description: String { "[\(section), \(item)]" }
    }

    /// An object that left or joined the results.
    public struct Change: Sendable, Equatable {
        /// The object.
        public var objectID: ObjectID
        /// Its position: before the change for a deletion, after it for an insertion.
        public var position: Position
    }

    /// An object that stayed in the results: moved (its sort values put it
    /// elsewhere), or updated in place.
    public struct Move: Sendable, Equatable {
        /// The object.
        public var objectID: ObjectID
        /// Its position before the change.
        public var from: Position
        /// Its position after the change.
        public var to: Position
    }

    /// Objects no longer in the results, at their old positions, in ascending order.
    public var deleted: [Change] = []
    /// Objects new to the results, at their new positions, in ascending order.
    public var inserted: [Change] = []
    /// Objects whose sort values moved them, from old to new position.
    public var moved: [Move] = []
    /// Objects that changed but stayed in place (their old and new
    /// positions), reported only when the controller was made with
    /// `reportsUpdates`.
    public var updated: [Move] = []
    /// Sections gone, by their old index, ascending.
    public var deletedSections: [Int] = []
    /// Sections new, by their new index, ascending.
    public var insertedSections: [Int] = []
    /// The same change to the flat list of IDs: moved objects are a
    /// removal and an insertion associated with each other. Made when
    /// asked for (a `CollectionDifference` checks its changes as it is made).
    public var objectIDs: CollectionDifference<ObjectID> {
        var changes: [CollectionDifference<ObjectID>.Change] = []
        changes.reserveCapacity(flat.count)
        for change in flat {
            changes.append(change.isRemoval
                ? .remove(offset: change.offset, element: change.id, associatedWith: change.associated)
                : .insert(offset: change.offset, element: change.id, associatedWith: change.associated))
        }
        guard let difference = CollectionDifference(changes) else {
            preconditionFailure("a fetched-results controller made an inconsistent difference")
        }
        return difference
    }

    /// The changes to the flat list, for ``objectIDs``.
    var flat: [FlatChange] = []

    struct FlatChange: Sendable, Equatable {
        var isRemoval: Bool
        var offset: Int
        var id: ObjectID
        var associated: Int?
    }

    /// Whether nothing in the results changed.
    public var isEmpty: Bool {
        deleted.isEmpty && inserted.isEmpty && moved.isEmpty && updated.isEmpty
            && deletedSections.isEmpty && insertedSections.isEmpty
    }
}

/// A section of a ``FetchedResultsController``'s results: the objects that
/// hold one value of its section attribute, a run of the flat results.
public struct FetchedResultsSection: Sendable, Equatable {
    /// The value's text: a string itself, any other value as it prints.
    public var name: String
    /// The value the section's objects hold.
    public var value: PropertyValue
    /// The section's objects' positions in the flat results.
    public var range: Range<Int>

    /// How many objects the section holds.
    public var numberOfObjects: Int { range.count }
}

/// One step of a ``FetchedResultsController``'s results as an
/// `AsyncSequence` delivers it: the results after a change, and how they
/// got there from the step before (the first step: from nothing).
public struct FetchedResultsUpdate: Sendable {
    /// The results' IDs, in order.
    public var objectIDs: [ObjectID]
    /// The sections (one covering everything when the controller has none).
    public var sections: [FetchedResultsSection]
    /// How the results changed from the previous element (empty for the first).
    public var difference: FetchedResultsDifference
}
