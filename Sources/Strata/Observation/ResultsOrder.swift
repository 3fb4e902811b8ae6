import Foundation

/// A fetched-results controller's order: its request's sort descriptors,
/// each reading one stored attribute, then the objects' primary keys — a
/// total order, so every object has one place and a binary search finds it.
///
/// Comparing is done on the sort values alone (an entry's ``ResultsEntry``
/// key): a number, date or string (optional or not) in
/// ``PropertyValue/compare(_:_:)``'s order — Swift's, nil first and NaN
/// last, which a binary search needs and a descriptor's own `<` does not
/// give (a NaN is neither before nor after anything) — with the
/// descriptor's string comparator where it has one, and otherwise by the
/// descriptor itself on two scratch objects holding the values. The
/// scratch objects belong to no context: any one thread at a time may
/// compare (``FetchedResultsController`` compares on one serial queue).
final class ResultsOrder: @unchecked Sendable {
    // `@unchecked Sendable`: the scratch objects are written by every
    // comparison by a descriptor; the controller compares on one queue at
    // a time (its computing queue, or its context's).

    enum Comparison {
        /// ``PropertyValue/compare(_:_:)``, reversed for `.reverse`.
        case values(reverse: Bool)
        case string(String.StandardComparator)
        /// The descriptor's own comparison of two objects.
        case descriptor((ManagedObject, ManagedObject) -> ComparisonResult)
    }

    /// The attribute each descriptor reads, in the descriptors' order.
    let propertyIndexes: [Int]
    private let comparisons: [Comparison]
    /// Made only when a descriptor compares objects.
    private let scratch: (a: ManagedObject, b: ManagedObject)?

    /// Nil unless every descriptor reads one stored attribute.
    init?<Object: ManagedObject>(sorting descriptors: [SortDescriptor<Object>], entity: EntityDescription) {
        var indexes: [Int] = []
        var comparisons: [Comparison] = []
        for descriptor in descriptors {
            guard let keyPath = descriptor.keyPath, let read = PropertyProbe.property(read: keyPath, entity: entity),
                  case .attribute(let attribute) = entity.properties[read.index] else { return nil }
            indexes.append(read.index)
            let reverse = descriptor.order == .reverse
            switch attribute.type {
            case .integer16, .integer32, .integer64, .double, .date:
                comparisons.append(.values(reverse: reverse))
            case .string:
                if let comparator = descriptor.stringComparator {
                    var comparator = comparator
                    comparator.order = descriptor.order
                    comparisons.append(.string(comparator))
                } else {
                    comparisons.append(.values(reverse: reverse))
                }
            default:
                comparisons.append(.descriptor { descriptor.compare(unsafeDowncast($0, to: Object.self), unsafeDowncast($1, to: Object.self)) })
            }
        }
        propertyIndexes = indexes
        self.comparisons = comparisons
        let comparesObjects = comparisons.contains { if case .descriptor = $0 { true } else { false } }
        scratch = comparesObjects ? (entity.scratchObject(linkedTo: nil), entity.scratchObject(linkedTo: nil)) : nil
    }

    /// The order as a store other than the log store reads it (its keys,
    /// then the primary key): nil when a descriptor compares by a string
    /// comparator or by the objects, which a store cannot follow.
    var storeSortKeys: [StoreSortKey]? {
        var keys: [StoreSortKey] = []
        for (index, comparison) in zip(propertyIndexes, comparisons) {
            guard case .values(let reverse) = comparison else { return nil }
            keys.append(StoreSortKey(property: index, descending: reverse))
        }
        return keys
    }

    /// The sort values of an object holding `values`.
    func key(of values: [PropertyValue]) -> [PropertyValue] {
        propertyIndexes.map { values[$0] }
    }

    /// Whether `x` (with sort values `xKey`) comes before `y`.
    func precedes(_ xKey: [PropertyValue], _ x: ObjectID, _ yKey: [PropertyValue], _ y: ObjectID) -> Bool {
        for i in comparisons.indices {
            switch compare(xKey[i], yKey[i], by: i) {
            case .orderedAscending: return true
            case .orderedDescending: return false
            case .orderedSame: continue
            }
        }
        return x.primaryKey < y.primaryKey
    }

    private func compare(_ x: PropertyValue, _ y: PropertyValue, by i: Int) -> ComparisonResult {
        switch comparisons[i] {
        case .values(let reverse):
            return reverse ? PropertyValue.compare(y, x) : PropertyValue.compare(x, y)
        case .string(let comparator):
            guard case .string(let s) = x, case .string(let t) = y else {
                // A nil of an optional string: first, or last in reverse.
                return comparator.order == .reverse ? PropertyValue.compare(y, x) : PropertyValue.compare(x, y)
            }
            return comparator.compare(s, t)
        case .descriptor(let compare):
            let (a, b) = scratch!
            let index = propertyIndexes[i]
            a.values[index] = x
            b.values[index] = y
            return compare(a, b)
        }
    }
}
