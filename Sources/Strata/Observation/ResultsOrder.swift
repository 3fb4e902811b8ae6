import Foundation

/// A fetched-results controller's order: its request's sort descriptors,
/// each reading one stored attribute, then the objects' primary keys — a
/// total order, so every object has one place and a binary search finds it.
///
/// Comparing is done on the sort values alone (an entry's ``ResultsEntry``
/// key): natively where the descriptor compares a non-optional number,
/// date or string as Swift does, with the descriptor's string comparator
/// where it has one, and otherwise by the descriptor itself on two scratch
/// objects holding the values — the comparison a fetch makes. The scratch
/// objects belong to no context: any one thread at a time may compare
/// (``FetchedResultsController`` compares on one serial queue).
final class ResultsOrder: @unchecked Sendable {
    // `@unchecked Sendable`: the scratch objects are written by every
    // comparison; the controller compares on one queue at a time (its
    // computing queue, or its context's).

    enum Comparison {
        /// Swift's `<` on values of one kind, reversed for `.reverse`.
        case native(reverse: Bool)
        case string(String.StandardComparator)
        /// The descriptor's own comparison of two objects.
        case descriptor((ManagedObject, ManagedObject) -> ComparisonResult)
    }

    /// The attribute each descriptor reads, in the descriptors' order.
    let propertyIndexes: [Int]
    private let comparisons: [Comparison]
    private let a: ManagedObject
    private let b: ManagedObject

    /// Throws unless every descriptor reads one stored attribute.
    init<Object: ManagedObject>(_ descriptors: [SortDescriptor<Object>], entity: EntityDescription) throws(StrataError) {
        var indexes: [Int] = []
        var comparisons: [Comparison] = []
        for descriptor in descriptors {
            guard let keyPath = descriptor.keyPath, let read = PropertyProbe.property(read: keyPath, entity: entity),
                  case .attribute(let attribute) = entity.properties[read.index] else {
                throw StrataError(.invalidArgument, """
                    a FetchedResultsController sorts by stored attributes of \(entity.name); \
                    a sort descriptor of its request reads something else
                    """)
            }
            indexes.append(read.index)
            let reverse = descriptor.order == .reverse
            let byDescriptor = Comparison.descriptor { descriptor.compare(unsafeDowncast($0, to: Object.self), unsafeDowncast($1, to: Object.self)) }
            switch attribute.type {
            case _ where attribute.isOptional:
                comparisons.append(byDescriptor)
            case .integer16, .integer32, .integer64, .double, .date:
                comparisons.append(.native(reverse: reverse))
            case .string:
                if let comparator = descriptor.stringComparator {
                    var comparator = comparator
                    comparator.order = descriptor.order
                    comparisons.append(.string(comparator))
                } else {
                    comparisons.append(.native(reverse: reverse))
                }
            default:
                comparisons.append(byDescriptor)
            }
        }
        propertyIndexes = indexes
        self.comparisons = comparisons
        a = entity.scratchObject(linkedTo: nil)
        b = entity.scratchObject(linkedTo: nil)
        a.values = entity.initialValues
        b.values = entity.initialValues
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
        case .native(let reverse):
            let result = Self.native(x, y)
            guard reverse else { return result }
            switch result {
            case .orderedAscending: return .orderedDescending
            case .orderedDescending: return .orderedAscending
            case .orderedSame: return .orderedSame
            }
        case .string(let comparator):
            guard case .string(let s) = x, case .string(let t) = y else { return Self.native(x, y) }
            return comparator.compare(s, t)
        case .descriptor(let compare):
            let index = propertyIndexes[i]
            a.values[index] = x
            b.values[index] = y
            return compare(a, b)
        }
    }

    private static func native(_ x: PropertyValue, _ y: PropertyValue) -> ComparisonResult {
        switch (x, y) {
        case (.integer(let s), .integer(let t)): return s < t ? .orderedAscending : s > t ? .orderedDescending : .orderedSame
        case (.double(let s), .double(let t)): return s < t ? .orderedAscending : s > t ? .orderedDescending : .orderedSame
        case (.date(let s), .date(let t)): return s < t ? .orderedAscending : s > t ? .orderedDescending : .orderedSame
        case (.string(let s), .string(let t)): return s < t ? .orderedAscending : s > t ? .orderedDescending : .orderedSame
        default:
            // Values of another kind than the attribute's (a broken store): an order all the same.
            return PropertyValue.precedes(x, y) ? .orderedAscending : PropertyValue.precedes(y, x) ? .orderedDescending : .orderedSame
        }
    }
}
