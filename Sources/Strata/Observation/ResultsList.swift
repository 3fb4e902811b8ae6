/// An object's state after a change, as its context sees it: in the
/// results with these sort values (`key`), or not (`key` nil). Every
/// object a delivery names counts as changed (for `reportsUpdates`).
struct JudgedObject: Sendable {
    let id: ObjectID
    let key: [PropertyValue]?
}

/// The whole of a controller's results, in its order, and how to change
/// them by a few objects at a time: O(changed × log n) comparisons to find
/// the changed objects' old and new places, and one pass over the arrays
/// to rebuild them — never a re-fetch or a re-sort.
///
/// With a fetch limit the list still holds every match (an object leaving
/// the first `limit` lets the next one in without a fetch); what is
/// published is its first `limit`.
struct ResultsList: Sendable {
    /// An object that stayed in the results: its place before and after.
    struct Shift: Equatable {
        let id: ObjectID
        let from: Int
        let to: Int
    }

    /// An object to place anew, with its place before when it was there.
    struct Placement {
        let id: ObjectID
        let key: [PropertyValue]
        let from: Int?
    }

    /// An object that changed without its sort values changing.
    struct InPlace {
        let id: ObjectID
        let key: [PropertyValue]
        let from: Int
    }

    /// The matches' IDs and sort values, in order.
    private(set) var ids: [ObjectID] = []
    private(set) var keys: [[PropertyValue]] = []
    /// Each match's sort values, for finding its place.
    private var keyOf: [ObjectID: [PropertyValue]] = [:]
    /// The published results' sections, as of the last fill or change.
    private(set) var sections: [FetchedResultsSection] = []

    let limit: Int
    let sectioned: Bool
    let reportsUpdates: Bool

    init(limit: Int, sectioned: Bool, reportsUpdates: Bool) {
        self.limit = limit
        self.sectioned = sectioned
        self.reportsUpdates = reportsUpdates
    }

    /// The list of `matches`, in any order, sorted by `order`.
    mutating func fill(_ matches: [(ObjectID, [PropertyValue])], order: ResultsOrder) {
        let sorted = matches.sorted { order.precedes($0.1, $0.0, $1.1, $1.0) }
        ids = sorted.map(\.0)
        keys = sorted.map(\.1)
        keyOf = Dictionary(sorted.lazy.map { ($0.0, $0.1) }, uniquingKeysWith: { a, _ in a })
        sections = publishedSections()
    }

    /// What is published: the first `limit` matches (all of them without a limit).
    var publishedCount: Int { limit > 0 ? min(limit, ids.count) : ids.count }
    var publishedIDs: [ObjectID] { limit > 0 && ids.count > limit ? Array(ids.prefix(limit)) : ids }

    /// The published results' sections, from the list.
    private func publishedSections() -> [FetchedResultsSection] {
        let count = publishedCount
        guard sectioned else { return [FetchedResultsSection(name: "", value: .null, range: 0..<count)] }
        var sections: [FetchedResultsSection] = []
        var start = 0
        while start < count {
            let value = keys[start][0]
            var end = start + 1
            while end < count && keys[end][0] == value { end += 1 }
            sections.append(FetchedResultsSection(name: Self.name(of: value), value: value, range: start..<end))
            start = end
        }
        return sections
    }

    private static func name(of value: PropertyValue) -> String {
        if case .string(let string) = value { return string }
        return value.description
    }

    /// Applies `changes` (an object named again is taken once) and returns
    /// how the published results changed; nil when they did not.
    mutating func apply(_ changes: [JudgedObject], order: ResultsOrder) -> FetchedResultsDifference? {
        let oldSections = sections
        let oldIDs = ids
        // The objects that leave (old place) or are placed anew (with their
        // old place when they were there before: they stay, with new sort
        // values), and those that changed in place (old place).
        var removedAt: [Int] = []
        var placed: [Placement] = []
        var inPlace: [InPlace] = []
        // Of those placed anew, the ones whose section changed: moved even where their flat place did not.
        var changedSection = Set<ObjectID>()
        var seen = Set<ObjectID>(minimumCapacity: changes.count)
        for change in changes where seen.insert(change.id).inserted {
            let old = keyOf[change.id]
            switch (old, change.key) {
            case (nil, nil): continue
            case (let old?, nil):
                removedAt.append(index(of: change.id, key: old, order: order))
                keyOf[change.id] = nil
            case (nil, let new?):
                placed.append(Placement(id: change.id, key: new, from: nil))
                keyOf[change.id] = new
            case (let old?, let new?):
                if old == new {
                    if reportsUpdates { inPlace.append(InPlace(id: change.id, key: old, from: index(of: change.id, key: old, order: order))) }
                    continue
                }
                let from = index(of: change.id, key: old, order: order)
                if sectioned && old[0] != new[0] { changedSection.insert(change.id) }
                removedAt.append(from)
                placed.append(Placement(id: change.id, key: new, from: from))
                keyOf[change.id] = new
            }
        }
        guard !removedAt.isEmpty || !placed.isEmpty || !inPlace.isEmpty else { return nil }
        removedAt.sort()
        placed.sort { order.precedes($0.key, $0.id, $1.key, $1.id) }
        let to = rebuild(removing: removedAt, placing: placed, order: order)
        sections = publishedSections()

        var stayed: [Shift] = []
        var joined: [Int] = []
        for (k, item) in placed.enumerated() {
            if let from = item.from { stayed.append(Shift(id: item.id, from: from, to: to[k])) } else { joined.append(to[k]) }
        }
        let stayedFrom = Set(stayed.map(\.from))
        let left = removedAt.filter { !stayedFrom.contains($0) }
        var updated = inPlace.map { Shift(id: $0.id, from: $0.from, to: index(of: $0.id, key: $0.key, order: order)) }

        let difference: FetchedResultsDifference
        if limit > 0 {
            difference = prefixDifference(old: Array(oldIDs.prefix(limit)), oldSections: oldSections, stayed: stayed,
                                          changedSection: changedSection, updated: updated)
        } else {
            var moved = stayed.filter { $0.from != $0.to || changedSection.contains($0.id) }
            if moved.count != stayed.count {
                if Self.keepsOrder(old: oldIDs, new: ids, left: left, joined: joined, moved: moved) {
                    if reportsUpdates { updated += stayed.filter { $0.from == $0.to && !changedSection.contains($0.id) } }
                } else {
                    moved = stayed
                }
            }
            difference = self.difference(old: oldIDs, oldSections: oldSections, left: left, joined: joined, moved: moved, updated: updated)
        }
        return difference.isEmpty ? nil : difference
    }

    /// Rebuilds the list without the entries at `removedAt` (ascending) and
    /// with `placed` (in order) merged in, copying the runs between; returns
    /// where each placed entry went.
    private mutating func rebuild(
        removing removedAt: [Int], placing placed: [Placement], order: ResultsOrder
    ) -> [Int] {
        var newIDs: [ObjectID] = []
        var newKeys: [[PropertyValue]] = []
        let count = ids.count - removedAt.count + placed.count
        newIDs.reserveCapacity(count)
        newKeys.reserveCapacity(count)
        var to: [Int] = []
        to.reserveCapacity(placed.count)
        var r = 0
        var start = 0  // the first old entry not copied yet
        // Copies old entries from `start` up to `end`, leaving out removed ones.
        func copy(upTo end: Int) {
            while start < end {
                while r < removedAt.count && removedAt[r] < start { r += 1 }
                let stop = r < removedAt.count ? min(removedAt[r], end) : end
                newIDs.append(contentsOf: ids[start..<stop])
                newKeys.append(contentsOf: keys[start..<stop])
                start = stop
                if r < removedAt.count && removedAt[r] == start && start < end { start += 1; r += 1 }
            }
        }
        for item in placed {
            // Its place among the old entries (removed ones included: they are skipped when copied).
            let low = firstPlace(notBefore: item.key, item.id, from: start, order: order)
            copy(upTo: low)
            to.append(newIDs.count)
            newIDs.append(item.id)
            newKeys.append(item.key)
        }
        copy(upTo: ids.count)
        ids = newIDs
        keys = newKeys
        return to
    }

    /// The place of `id`, which holds `key`, in the list.
    private func index(of id: ObjectID, key: [PropertyValue], order: ResultsOrder) -> Int {
        let low = firstPlace(notBefore: key, id, from: 0, order: order)
        precondition(low < ids.count && ids[low] == id, "a fetched-results controller lost the place of \(id)")
        return low
    }

    /// The first place from `start` whose entry does not come before `id`
    /// holding `key` (a binary search).
    private func firstPlace(notBefore key: [PropertyValue], _ id: ObjectID, from start: Int, order: ResultsOrder) -> Int {
        var low = start, high = ids.count
        while low < high {
            let mid = (low + high) / 2
            if order.precedes(keys[mid], ids[mid], key, id) { low = mid + 1 } else { high = mid }
        }
        return low
    }

    /// With a limit: the published prefix before and after, compared by ID
    /// (a prefix is short).
    private func prefixDifference(
        old: [ObjectID], oldSections: [FetchedResultsSection],
        stayed: [Shift], changedSection: Set<ObjectID>, updated: [Shift]
    ) -> FetchedResultsDifference {
        let new = publishedIDs
        let published = new.count
        let newSet = Set(new)
        let oldSet = Set(old)
        let left = old.indices.filter { !newSet.contains(old[$0]) }
        let joined = new.indices.filter { !oldSet.contains(new[$0]) }
        let candidates = stayed.filter { $0.from < old.count && $0.to < published }
        var moved = candidates.filter { $0.from != $0.to || changedSection.contains($0.id) }
        var inPlace = updated.filter { $0.from < old.count && $0.to < published }
        if moved.count != candidates.count {
            if Self.keepsOrder(old: old, new: new, left: left, joined: joined, moved: moved) {
                if reportsUpdates { inPlace += candidates.filter { $0.from == $0.to && !changedSection.contains($0.id) } }
            } else {
                moved = candidates
            }
        }
        return difference(old: old, oldSections: oldSections, left: left, joined: joined, moved: moved, updated: inPlace)
    }

    /// Whether the objects neither leaving, joining nor moving are in the
    /// same order before and after (so the difference, applied, gives `new`).
    private static func keepsOrder(old: [ObjectID], new: [ObjectID], left: [Int], joined: [Int], moved: [Shift]) -> Bool {
        let skipOld = (left + moved.map(\.from)).sorted()
        let skipNew = (joined + moved.map(\.to)).sorted()
        var i = 0, j = 0, a = 0, b = 0
        while true {
            while a < skipOld.count && skipOld[a] == i { i += 1; a += 1 }
            while b < skipNew.count && skipNew[b] == j { j += 1; b += 1 }
            if i >= old.count || j >= new.count { return i >= old.count && j >= new.count }
            if old[i] != new[j] { return false }
            i += 1; j += 1
        }
    }

    private func difference(
        old: [ObjectID], oldSections: [FetchedResultsSection], left: [Int], joined: [Int],
        moved: [Shift], updated: [Shift]
    ) -> FetchedResultsDifference {
        let newSections = sections
        let new = publishedIDs
        func position(_ index: Int, in sections: [FetchedResultsSection]) -> FetchedResultsDifference.Position {
            var low = 0, high = sections.count
            while low < high {
                let mid = (low + high) / 2
                if sections[mid].range.upperBound <= index { low = mid + 1 } else { high = mid }
            }
            return .init(section: low, item: index - (low < sections.count ? sections[low].range.lowerBound : 0))
        }
        var result = FetchedResultsDifference()
        result.flat.reserveCapacity(left.count + joined.count + 2 * moved.count)
        for i in left {  // ascending, as `removedAt`
            result.deleted.append(.init(objectID: old[i], position: position(i, in: oldSections)))
            result.flat.append(.init(isRemoval: true, offset: i, id: old[i], associated: nil))
        }
        for i in joined {  // ascending, as the places they were given
            result.inserted.append(.init(objectID: new[i], position: position(i, in: newSections)))
            result.flat.append(.init(isRemoval: false, offset: i, id: new[i], associated: nil))
        }
        for move in moved.sorted(by: { $0.to < $1.to }) {
            result.moved.append(.init(objectID: move.id, from: position(move.from, in: oldSections), to: position(move.to, in: newSections)))
            result.flat.append(.init(isRemoval: true, offset: move.from, id: move.id, associated: move.to))
            result.flat.append(.init(isRemoval: false, offset: move.to, id: move.id, associated: move.from))
        }
        for update in updated.sorted(by: { $0.to < $1.to }) {
            result.updated.append(.init(objectID: update.id, from: position(update.from, in: oldSections), to: position(update.to, in: newSections)))
        }
        if sectioned {
            let oldValues = Set(oldSections.map(\.value))
            let newValues = Set(newSections.map(\.value))
            result.deletedSections = oldSections.indices.filter { !newValues.contains(oldSections[$0].value) }
            result.insertedSections = newSections.indices.filter { !oldValues.contains(newSections[$0].value) }
        }
        return result
    }
}
