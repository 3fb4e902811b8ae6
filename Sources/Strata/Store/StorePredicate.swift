/// A fetch's predicate as a store other than the log store receives it: the
/// part of a `#Predicate` that Strata translates (its `ValueTest`), in
/// terms a store can turn into a query of its own — `SQL`, for the
/// PostgreSQL store.
///
/// A store may answer with more objects than pass (a narrowing it cannot
/// make exact: a `NaN`, a date finer than it keeps, strings compared by
/// canonical equivalence), never fewer; Strata judges what it is given by
/// ``evaluate(_:)``, which is the answer a store's must match where it
/// says it is exact.
@_spi(StoreImplementation)
public indirect enum StorePredicate: Sendable, Hashable {
    /// How two values compare: as Swift compares them (a `NaN` equals
    /// nothing, strings compare by canonical equivalence, `nil` equals
    /// `nil`; an order between values of different kinds never holds).
    public enum Comparison: Sendable, Hashable {
        case equal, notEqual, less, lessOrEqual, greater, greaterOrEqual

        /// The comparison with its sides swapped: `c < x` is `x > c`.
        public var mirrored: Comparison { Comparison(valueTestComparison.mirrored) }
    }

    /// One side of a comparison.
    public enum Operand: Sendable, Hashable {
        /// Property `index` of the object (in the entity's order); a
        /// stored null reads as `nullReadsAs` (`.null` for an optional, the
        /// zero value a non-optional Swift property shows for it).
        case property(index: Int, nullReadsAs: PropertyValue)
        case constant(PropertyValue)
    }

    case constant(Bool)
    case and(StorePredicate, StorePredicate)
    case or(StorePredicate, StorePredicate)
    case not(StorePredicate)
    case compare(Operand, Comparison, Operand)
    /// The operand equals one of the values (`keys.contains($0.sku)`).
    case isIn(Operand, [PropertyValue])
    /// The operand is a string that starts with the prefix, Character by
    /// Character (`$0.name.starts(with: "So")`).
    case startsWith(Operand, String)
    /// To-one relationship `relationship` names one of `targets`; `whenNil`
    /// when it names none.
    case relatedIn(relationship: Int, targets: [ObjectID], whenNil: Bool)

    /// Whether an object with these values (in the entity's property
    /// order, as stored: nulls included) passes.
    public func evaluate(_ values: [PropertyValue]) -> Bool {
        ValueTest(self).evaluate(values)
    }
}

extension StorePredicate {
    /// `test` for a store; nil while it holds a test through a relationship
    /// not yet resolved (a fetch resolves those first).
    init?(_ test: ValueTest) {
        switch test {
        case .constant(let value): self = .constant(value)
        case .and(let a, let b):
            guard let a = StorePredicate(a), let b = StorePredicate(b) else { return nil }
            self = .and(a, b)
        case .or(let a, let b):
            guard let a = StorePredicate(a), let b = StorePredicate(b) else { return nil }
            self = .or(a, b)
        case .not(let a):
            guard let a = StorePredicate(a) else { return nil }
            self = .not(a)
        case .compare(let lhs, let comparison, let rhs): self = .compare(Operand(lhs), Comparison(comparison), Operand(rhs))
        case .isIn(let operand, let list): self = .isIn(Operand(operand), list.values)
        case .startsWith(let operand, let prefix): self = .startsWith(Operand(operand), prefix)
        case .relatedIn(let relationship, let targets, let whenNil):
            self = .relatedIn(relationship: relationship, targets: Array(targets), whenNil: whenNil)
        case .related: return nil
        }
    }
}

extension StorePredicate.Operand {
    init(_ operand: ValueTest.Operand) {
        switch operand {
        case .property(let index, let null): self = .property(index: index, nullReadsAs: null)
        case .constant(let value): self = .constant(value)
        }
    }

    var valueTestOperand: ValueTest.Operand {
        switch self {
        case .property(let index, let null): .property(index: index, null: null)
        case .constant(let value): .constant(value)
        }
    }
}

extension StorePredicate.Comparison {
    init(_ comparison: ValueTest.Comparison) {
        switch comparison {
        case .equal: self = .equal
        case .notEqual: self = .notEqual
        case .less: self = .less
        case .lessOrEqual: self = .lessOrEqual
        case .greater: self = .greater
        case .greaterOrEqual: self = .greaterOrEqual
        }
    }

    var valueTestComparison: ValueTest.Comparison {
        switch self {
        case .equal: .equal
        case .notEqual: .notEqual
        case .less: .less
        case .lessOrEqual: .lessOrEqual
        case .greater: .greater
        case .greaterOrEqual: .greaterOrEqual
        }
    }
}

extension ValueTest {
    /// The test `predicate` stands for.
    init(_ predicate: StorePredicate) {
        switch predicate {
        case .constant(let value): self = .constant(value)
        case .and(let a, let b): self = .and(ValueTest(a), ValueTest(b))
        case .or(let a, let b): self = .or(ValueTest(a), ValueTest(b))
        case .not(let a): self = .not(ValueTest(a))
        case .compare(let lhs, let comparison, let rhs):
            self = .compare(lhs.valueTestOperand, comparison.valueTestComparison, rhs.valueTestOperand)
        case .isIn(let operand, let values): self = .isIn(operand.valueTestOperand, ValueList(values))
        case .startsWith(let operand, let prefix): self = .startsWith(operand.valueTestOperand, prefix)
        case .relatedIn(let relationship, let targets, let whenNil):
            self = .relatedIn(relationship: relationship, targets: Set(targets), whenNil: whenNil)
        }
    }
}
