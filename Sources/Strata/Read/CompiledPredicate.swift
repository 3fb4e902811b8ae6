import Foundation
internal import StrataStore

/// A `#Predicate` translated into a test on an object's stored values, so a
/// fetch judges each record it reads without a `ManagedObject` and without
/// Foundation's generic evaluation (three quarters of a scan's time before).
///
/// Translated: `&&`, `||`, `!`, `==`, `!=`, `<`, `<=`, `>`, `>=`, `true` /
/// `false`, on attributes of the fetched object (`$0.name`) and constants
/// (captured values, literals, `nil`). Anything else — a relationship
/// followed, a method called, a computed property — leaves the whole
/// predicate to Foundation (``PredicateEvaluation`` then uses a scratch
/// object), so the answer is the same either way; the translation only
/// makes it cheaper.
///
/// An attribute's key path is mapped to the property it reads by reading it
/// on a probe object, changing one property at a time (``PropertyProbe``):
/// that follows the `@Attribute` wrapper whatever the Swift name, and
/// refuses a computed property that reads several.
indirect enum ValueTest: Sendable {
    case constant(Bool)
    case and(ValueTest, ValueTest)
    case or(ValueTest, ValueTest)
    case not(ValueTest)
    case compare(Operand, Comparison, Operand)
    /// One of a list of constants (`keys.contains($0.sku)`): a hash lookup
    /// per object, however long the list, where a chain of `||`
    /// equalities would cost one comparison per constant.
    case isIn(Operand, ValueList)
    /// A string that starts with the prefix, Character by Character
    /// (`$0.name.starts(with: "So")`): Swift's answer, canonical equivalence included.
    case startsWith(Operand, String)
    /// Through to-one relationship `relationship` (`$0.author?.name == "Ada"`):
    /// whether the object it names, of `destination`, passes `test`; `whenNil`
    /// when it names none. Resolved before a fetch judges anything
    /// (``ManagedObjectContext/resolvingRelations(_:)``), into ``relatedIn``.
    case related(relationship: Int, destination: EntityDescription, test: ValueTest, whenNil: Bool)
    /// Whether to-one relationship `relationship` names one of `targets`;
    /// `whenNil` when it names none.
    case relatedIn(relationship: Int, targets: Set<ObjectID>, whenNil: Bool)

    enum Comparison: Sendable {
        case equal, notEqual, less, lessOrEqual, greater, greaterOrEqual
    }

    /// One side of a comparison.
    enum Operand: Sendable {
        /// Property `index`; a stored null reads as `null` (the zero value a
        /// non-optional Swift property shows for it, or `.null` for an optional).
        case property(index: Int, null: PropertyValue)
        case constant(PropertyValue)

        /// The property it reads, if any.
        var propertyIndex: Int? {
            if case .property(let index, _) = self { return index }
            return nil
        }

        @inline(__always)
        func value(in values: [PropertyValue]) -> PropertyValue {
            switch self {
            case .property(let index, let null):
                let value = values[index]
                if case .null = value { return null }
                return value
            case .constant(let value):
                return value
            }
        }
    }

    /// The highest property index the test reads (nil: none).
    var highestPropertyIndex: Int? {
        switch self {
        case .constant: return nil
        case .and(let a, let b), .or(let a, let b):
            return Self.higher(a.highestPropertyIndex, b.highestPropertyIndex)
        case .not(let a): return a.highestPropertyIndex
        case .startsWith(let operand, _), .isIn(let operand, _):
            return operand.propertyIndex
        case .related(let relationship, _, _, _), .relatedIn(let relationship, _, _):
            return relationship
        case .compare(let lhs, _, let rhs):
            return Self.higher(lhs.propertyIndex, rhs.propertyIndex)
        }
    }

    private static func higher(_ a: Int?, _ b: Int?) -> Int? {
        guard let a else { return b }
        guard let b else { return a }
        return max(a, b)
    }

    /// Whether an object with these stored values passes.
    func evaluate(_ values: [PropertyValue]) -> Bool {
        switch self {
        case .constant(let result): return result
        case .and(let a, let b): return a.evaluate(values) && b.evaluate(values)
        case .or(let a, let b): return a.evaluate(values) || b.evaluate(values)
        case .not(let a): return !a.evaluate(values)
        case .compare(let lhs, let comparison, let rhs):
            return Self.holds(lhs.value(in: values), comparison, rhs.value(in: values))
        case .startsWith(let operand, let prefix):
            return Self.starts(operand.value(in: values), with: prefix)
        case .isIn(let operand, let constants):
            return constants.set.contains(operand.value(in: values))
        case .relatedIn(let relationship, let targets, let whenNil):
            return Self.names(values[relationship], of: targets, whenNil: whenNil)
        case .related:
            preconditionFailure("Strata: a test through a relationship is judged once resolved")
        }
    }

    /// Whether a to-one relationship's value names one of `targets`.
    static func names(_ value: PropertyValue, of targets: Set<ObjectID>, whenNil: Bool) -> Bool {
        switch value {
        case .object(let id): return targets.contains(id)
        default: return whenNil
        }
    }

    /// `value.starts(with: prefix)` for a string; false for anything else.
    static func starts(_ value: PropertyValue, with prefix: String) -> Bool {
        guard case .string(let string) = value else { return false }
        return asciiStarts(string, with: prefix) ?? string.starts(with: prefix)
    }

    /// `string.starts(with: prefix)` — Swift's, Character by Character —
    /// from their bytes where those decide it, else nil: while both are
    /// ASCII, each byte is a Character (but CR LF, one Character: a prefix
    /// ending in CR is left to Swift), and the string's next byte, if
    /// ASCII, starts a new one. A non-ASCII byte is left to Swift: some
    /// non-ASCII characters equal ASCII ones (the Kelvin sign is K).
    static func asciiStarts(_ string: String, with prefix: String) -> Bool? {
        var string = string, prefix = prefix
        return string.withUTF8 { s in
            prefix.withUTF8 { p -> Bool? in
                guard p.last != 0x0D else { return nil }
                // Each of the prefix's Characters takes at least a byte.
                guard s.count >= p.count else { return p.allSatisfy { $0 < 0x80 } ? false : nil }
                for i in 0..<p.count {
                    guard s[i] < 0x80, p[i] < 0x80 else { return nil }
                    if s[i] != p[i] { return false }
                }
                return s.count == p.count || s[p.count] < 0x80 ? true : nil
            }
        }
    }

    /// True when any of `tests` is: a balanced tree of `||`, so a long list
    /// (`[…].contains($0.x)`) does not nest deeply.
    static func any(_ tests: ArraySlice<ValueTest>) -> ValueTest {
        switch tests.count {
        case 0: return .constant(false)
        case 1: return tests.first!
        default:
            let middle = tests.startIndex + tests.count / 2
            return .or(any(tests[..<middle]), any(tests[middle...]))
        }
    }

    /// `a <comparison> b`.
    @inline(__always)
    static func holds(_ a: PropertyValue, _ comparison: Comparison, _ b: PropertyValue) -> Bool {
        switch comparison {
        case .equal: return a == b
        case .notEqual: return a != b
        default: return ordered(a, comparison, b)
        }
    }

    /// `a <comparison> b` with Swift's own operators (so a NaN compares as
    /// Swift says: false); false for values Swift would not order (never
    /// produced by a translated predicate).
    @inline(__always)
    static func ordered(_ a: PropertyValue, _ comparison: Comparison, _ b: PropertyValue) -> Bool {
        switch (a, b) {
        case (.integer(let x), .integer(let y)): return apply(comparison, x, y)
        case (.double(let x), .double(let y)): return apply(comparison, x, y)
        case (.string(let x), .string(let y)): return apply(comparison, x, y)
        case (.date(let x), .date(let y)): return apply(comparison, x, y)
        default: return false
        }
    }

    @inline(__always)
    static func apply<T: Comparable>(_ comparison: Comparison, _ x: T, _ y: T) -> Bool {
        switch comparison {
        case .less: return x < y
        case .lessOrEqual: return x <= y
        case .greater: return x > y
        case .greaterOrEqual: return x >= y
        case .equal: return x == y
        case .notEqual: return x != y
        }
    }

    /// Whether values of this kind are ordered by a translated comparison.
    static func isOrderable(_ value: PropertyValue) -> Bool {
        switch value {
        case .integer, .double, .string, .date: return true
        default: return false
        }
    }

    /// The translation of `predicate` over objects of `entity`; nil when any
    /// part of it is not understood.
    static func compile<Object: ManagedObject>(_ predicate: Predicate<Object>, entity: EntityDescription) -> ValueTest? {
        let compiler = PredicateCompiler(entity: entity, variable: predicate.variable.key)
        // Opened as the type it is: its translation, made once for the type
        // (nil when it has none; the general walk then).
        func translate<Expression: StandardPredicateExpression<Bool>>(_ expression: Expression) -> ValueTest?? {
            ExpressionTranslations.test(for: Expression.self).map { $0(expression, compiler) }
        }
        return translate(predicate.expression) ?? compileWalking(predicate, entity: entity)
    }

    /// The general translation alone, node by node (what ``compile(_:entity:)``
    /// does for shapes ``ExpressionTranslations`` does not know): for the
    /// tests that hold the two to one answer.
    static func compileWalking<Object: ManagedObject>(_ predicate: Predicate<Object>, entity: EntityDescription) -> ValueTest? {
        let compiler = PredicateCompiler(entity: entity, variable: predicate.variable.key)
        func translate<Expression: StandardPredicateExpression<Bool>>(_ expression: Expression) -> ValueTest? {
            ExpressionConformances.valueTest(expression)?.valueTest(compiler)
        }
        return translate(predicate.expression)
    }

    /// Whether ``compile(_:entity:)`` translates `predicate` by a
    /// translation made for its expression type.
    static func hasTypeTranslation<Object: ManagedObject>(_ predicate: Predicate<Object>) -> Bool {
        func made<Expression: StandardPredicateExpression<Bool>>(_: Expression) -> Bool {
            ExpressionTranslations.test(for: Expression.self) != nil
        }
        return made(predicate.expression)
    }
}

/// What a translation needs to know: the entity, and which variable is the
/// fetched object.
struct PredicateCompiler {
    let entity: EntityDescription
    let variable: PredicateExpressions.VariableID
}

/// A predicate expression that yields a Bool and can be translated.
protocol ValueTestConvertible {
    func valueTest(_ compiler: PredicateCompiler) -> ValueTest?
}

/// A predicate expression that yields a value and can be translated.
protocol OperandConvertible {
    func operand(_ compiler: PredicateCompiler) -> ValueTest.Operand?
}

extension PredicateExpressions.Conjunction: ValueTestConvertible {
    func valueTest(_ compiler: PredicateCompiler) -> ValueTest? {
        guard let a = ExpressionConformances.valueTest(lhs)?.valueTest(compiler),
              let b = ExpressionConformances.valueTest(rhs)?.valueTest(compiler) else { return nil }
        return .and(a, b)
    }
}

extension PredicateExpressions.Disjunction: ValueTestConvertible {
    func valueTest(_ compiler: PredicateCompiler) -> ValueTest? {
        guard let a = ExpressionConformances.valueTest(lhs)?.valueTest(compiler),
              let b = ExpressionConformances.valueTest(rhs)?.valueTest(compiler) else { return nil }
        return .or(a, b)
    }
}

extension PredicateExpressions.Negation: ValueTestConvertible {
    func valueTest(_ compiler: PredicateCompiler) -> ValueTest? {
        ExpressionConformances.valueTest(wrapped)?.valueTest(compiler).map { .not($0) }
    }
}

extension PredicateExpressions.Equal: ValueTestConvertible {
    func valueTest(_ compiler: PredicateCompiler) -> ValueTest? {
        ValueTest.comparing(lhs, .equal, rhs, compiler)
    }
}

extension PredicateExpressions.NotEqual: ValueTestConvertible {
    func valueTest(_ compiler: PredicateCompiler) -> ValueTest? {
        ValueTest.comparing(lhs, .notEqual, rhs, compiler)
    }
}

extension PredicateExpressions.Comparison: ValueTestConvertible {
    func valueTest(_ compiler: PredicateCompiler) -> ValueTest? {
        guard let comparison = ValueTest.Comparison(op) else { return nil }
        return ValueTest.comparing(lhs, comparison, rhs, compiler)
    }
}

extension ValueTest.Comparison {
    /// The comparison a `#Predicate`'s `<`, `<=`, `>` or `>=` makes.
    init?(_ operator: PredicateExpressions.ComparisonOperator) {
        switch `operator` {
        case .lessThan: self = .less
        case .lessThanOrEqual: self = .lessOrEqual
        case .greaterThan: self = .greater
        case .greaterThanOrEqual: self = .greaterOrEqual
        @unknown default: return nil
        }
    }
}

extension PredicateExpressions.SequenceContains: ValueTestConvertible {
    /// `[a, b, c].contains($0.x)`, for a constant collection of attribute
    /// values: whether `$0.x` equals one of them, as a set lookup. (Set
    /// membership is `==`, as `contains` is: a NaN is in no set, and
    /// strings compare by canonical equivalence.)
    func valueTest(_ compiler: PredicateCompiler) -> ValueTest? {
        guard let constants = (sequence as? any ConstantSequence)?.propertyValues(),
              let element = ExpressionConformances.operand(element)?.operand(compiler) else { return nil }
        if case .constant(let value) = element { return .constant(constants.contains(value)) }
        return .isIn(element, ValueList(constants))
    }
}

/// The constants of an `IN` test, as the predicate lists them, and as a
/// set built the first time a value is tested against them: a fetch whose
/// index entries answer the test (``QueryPlan/isExact``) never builds it
/// (hashing every string of a long list costs as much as planning its seeks).
///
/// `@unchecked Sendable`: `values` never changes; `built` is guarded by `lock`.
final class ValueList: @unchecked Sendable {
    let values: [PropertyValue]
    private let lock = Lock()
    private var built: Set<PropertyValue>?

    init(_ values: [PropertyValue]) {
        self.values = values
    }

    /// The constants as a set (`==`, as `contains` compares: a NaN is in
    /// none, strings compare by canonical equivalence).
    var set: Set<PropertyValue> {
        lock.withLock {
            if let built { return built }
            let set = Set(values)
            built = set
            return set
        }
    }
}

extension PredicateExpressions.SequenceStartsWith: ValueTestConvertible {
    /// `$0.name.starts(with: "So")`, with a constant prefix.
    func valueTest(_ compiler: PredicateCompiler) -> ValueTest? {
        guard let operand = ExpressionConformances.operand(base)?.operand(compiler),
              case .property(_, .string) = operand,
              let constant = ExpressionConformances.operand(prefix)?.operand(compiler),
              case .constant(.string(let prefix)) = constant else { return nil }
        return .startsWith(operand, prefix)
    }
}

/// A constant collection in a predicate.
protocol ConstantSequence {
    /// Its elements, when each is an attribute value.
    func propertyValues() -> [PropertyValue]?
}

extension PredicateExpressions.Value: ConstantSequence {
    func propertyValues() -> [PropertyValue]? {
        // A string is a sequence too, of characters: not attribute values.
        guard let sequence = value as? any Sequence, !(value is String) else { return nil }
        // The lists an `IN` is mostly given, converted by code made for
        // them, not through the generic sequence below.
        if let strings = value as? [String] { return strings.map { $0.propertyValue } }
        if let integers = value as? [Int] { return integers.map { $0.propertyValue } }
        if let uuids = value as? [UUID] { return uuids.map { $0.propertyValue } }
        func values<S: Sequence>(_ sequence: S) -> [PropertyValue]? {
            // An attribute type's elements (`[String]`, `Set<Int>`): the
            // element type is cast once, not each element.
            if let type = S.Element.self as? any AttributeValueConvertible.Type {
                func converted<T: AttributeValueConvertible>(_: T.Type) -> [PropertyValue] {
                    // `T` is `S.Element` itself, opened: the cast reinterprets nothing.
                    sequence.map { unsafeBitCast($0, to: T.self).propertyValue }
                }
                return converted(type)
            }
            var values: [PropertyValue] = []
            for element in sequence {
                guard let value = element as? any AttributeValueConvertible else { return nil }
                values.append(value.propertyValue)
            }
            return values
        }
        return values(sequence)
    }
}

extension PredicateExpressions.Value: ValueTestConvertible, OperandConvertible {
    func valueTest(_ compiler: PredicateCompiler) -> ValueTest? {
        (value as? Bool).map { .constant($0) }
    }

    func operand(_ compiler: PredicateCompiler) -> ValueTest.Operand? {
        ExpressionConformances.attributeValue(value).map { .constant($0) }
    }
}

extension PredicateExpressions.NilLiteral: OperandConvertible {
    func operand(_ compiler: PredicateCompiler) -> ValueTest.Operand? { .constant(.null) }
}

extension PredicateExpressions.KeyPath: ValueTestConvertible {
    /// A Bool attribute used as a condition (`$0.vegetarian && …`).
    func valueTest(_ compiler: PredicateCompiler) -> ValueTest? {
        guard Output.self == Bool.self, let property = operand(compiler) else { return nil }
        return .compare(property, .equal, .constant(.bool(true)))
    }
}

extension PredicateExpressions.KeyPath: OperandConvertible {
    func operand(_ compiler: PredicateCompiler) -> ValueTest.Operand? {
        guard let variable = ExpressionConformances.variable(root), variable.id == compiler.variable,
              let read = PropertyProbe.property(read: keyPath, entity: compiler.entity) else { return nil }
        return .property(index: read.index, null: read.null)
    }
}

/// The predicate's input variable, whatever its type.
protocol PredicateVariable {
    var id: PredicateExpressions.VariableID { get }
}

extension PredicateExpressions.Variable: PredicateVariable {
    var id: PredicateExpressions.VariableID { key }
}

extension ValueTest {
    fileprivate static func comparing<L, R>(_ lhs: L, _ comparison: Comparison, _ rhs: R, _ compiler: PredicateCompiler) -> ValueTest? {
        let left = ExpressionConformances.operand(lhs), right = ExpressionConformances.operand(rhs)
        guard let left, let right else {
            // An attribute of the object a to-one relationship names (an
            // optional chain, no operand of its own), against a constant.
            if let related = (lhs as? any RelatedOperandConvertible)?.relatedOperand(compiler), case .constant(let value)? = right?.operand(compiler) {
                return through(related, comparison, value)
            }
            if let related = (rhs as? any RelatedOperandConvertible)?.relatedOperand(compiler), case .constant(let value)? = left?.operand(compiler) {
                return through(related, comparison.mirrored, value)
            }
            return nil
        }
        guard let a = left.operand(compiler), let b = right.operand(compiler) else { return nil }
        return compared(a, comparison, b)
    }

    /// `a <comparison> b`, or nil for an order this translation does not
    /// vouch for: between two optionals, or between values of different kinds.
    static func compared(_ a: Operand, _ comparison: Comparison, _ b: Operand) -> ValueTest? {
        if comparison != .equal && comparison != .notEqual {
            for operand in [a, b] {
                switch operand {
                case .constant(let value) where !ValueTest.isOrderable(value): return nil
                // An optional (its null reads as nil), or a kind without an order.
                case .property(_, let null) where !ValueTest.isOrderable(null): return nil
                default: break
                }
            }
        }
        return .compare(a, comparison, b)
    }
}

extension ValueTest {
    /// `related <comparison> value`, where `related` is an attribute of the
    /// object a to-one relationship names: with none, the attribute reads
    /// as nil, so the comparison is decided now.
    fileprivate static func through(_ related: RelatedOperand, _ comparison: Comparison, _ value: PropertyValue) -> ValueTest? {
        guard comparison == .equal || comparison == .notEqual else { return nil }
        return .related(relationship: related.relationship, destination: related.destination,
                        test: .compare(related.operand, comparison, .constant(value)),
                        whenNil: ValueTest.holds(.null, comparison, value))
    }
}

/// An attribute read through a to-one relationship.
struct RelatedOperand {
    let relationship: Int
    let destination: EntityDescription
    /// The attribute, among the destination's properties.
    let operand: ValueTest.Operand
}

/// `$0.author?.name`: an optional chain through a to-one relationship of
/// the fetched object to an attribute of the object it names.
protocol RelatedOperandConvertible {
    func relatedOperand(_ compiler: PredicateCompiler) -> RelatedOperand?
}

extension PredicateExpressions.OptionalFlatMap: RelatedOperandConvertible {
    func relatedOperand(_ compiler: PredicateCompiler) -> RelatedOperand? {
        guard let relationship = (wrapped as? any ToOneKeyPath)?.toOneRelationship(compiler),
              let destination = compiler.entity.destinations[relationship] else { return nil }
        let inner = PredicateCompiler(entity: destination, variable: variable.key)
        guard let operand = ExpressionConformances.operand(transform)?.operand(inner), case .property = operand else { return nil }
        return RelatedOperand(relationship: relationship, destination: destination, operand: operand)
    }
}

/// A key path of the fetched object to a to-one relationship.
protocol ToOneKeyPath {
    func toOneRelationship(_ compiler: PredicateCompiler) -> Int?
}

extension PredicateExpressions.KeyPath: ToOneKeyPath {
    /// Which to-one relationship the key path writes, found by writing a
    /// scratch target through it on a scratch object (no context is
    /// involved: with none, the write only stores the target's ID).
    func toOneRelationship(_ compiler: PredicateCompiler) -> Int? {
        guard let variable = ExpressionConformances.variable(root), variable.id == compiler.variable,
              let writable = keyPath as? ReferenceWritableKeyPath<Root.Output, Output> else { return nil }
        let entity = compiler.entity
        let key = PropertyProbe.CacheKey(entity: ObjectIdentifier(entity), keyPath: keyPath)
        if let cached = PropertyProbe.lock.withLock({ PropertyProbe.relationships[key] }) { return cached }
        // The to-one relationships whose targets the key path's type holds.
        let candidates = entity.properties.indices.filter { i in
            guard let destination = entity.destinations[i], !entity.toManyFlags[i] else { return false }
            return destination.scratchObject(linkedTo: nil) is Output
        }
        var found: Int?
        // Writing another entity's object would be refused (a trap): only
        // when every candidate has one destination is the write safe.
        if let first = candidates.first, candidates.allSatisfy({ entity.destinations[$0] === entity.destinations[first] }) {
            let object = entity.scratchObject(linkedTo: nil)
            if let typed = object as? Root.Output, let value = entity.destinations[first]!.scratchObject(linkedTo: nil) as? Output {
                object.values = entity.initialValues
                typed[keyPath: writable] = value
                let written = candidates.filter { if case .object = object.values[$0] { true } else { false } }
                if written.count == 1 { found = written[0] }
            }
        }
        PropertyProbe.lock.withLock { PropertyProbe.relationships[key] = found }
        return found
    }
}

/// Which stored property a key path of a managed object class reads.
enum PropertyProbe {
    struct Read: Sendable {
        let index: Int
        /// What the key path shows for a stored null.
        let null: PropertyValue
    }

    static let lock = Lock()
    /// Guarded by `lock`: found once per entity and key path.
    nonisolated(unsafe) private static var cache: [CacheKey: Read?] = [:]
    /// Guarded by `lock`: the to-one relationship a key path writes, found
    /// once per entity and key path (``ToOneKeyPath``).
    nonisolated(unsafe) static var relationships: [CacheKey: Int?] = [:]

    struct CacheKey: Hashable, @unchecked Sendable {
        // `@unchecked Sendable`: key paths are immutable values; the entity
        // only identifies (see ObjectID on why entities live forever).
        let entity: ObjectIdentifier
        let keyPath: AnyKeyPath
    }

    /// The attribute `keyPath` reads on objects of `entity`; nil when it reads
    /// none, several, a relationship, or values that are not attribute values.
    static func property(read keyPath: AnyKeyPath, entity: EntityDescription) -> Read? {
        let entityID = ObjectIdentifier(entity)
        let known = lock.withLock { () -> Read?? in
            // A lookup in a loop passes the same key path object every time
            // (a literal is made once): found by identity, without hashing it.
            if let hit = recent.first(where: { $0.keyPath === keyPath && $0.entity == entityID }) { return .some(hit.read) }
            guard let cached = cache[CacheKey(entity: entityID, keyPath: keyPath)] else { return nil }
            remember(entityID, keyPath, cached)
            return .some(cached)
        }
        if let known { return known }
        let read = probe(keyPath, entity)
        lock.withLock {
            cache[CacheKey(entity: entityID, keyPath: keyPath)] = read
            remember(entityID, keyPath, read)
        }
        return read
    }

    /// Guarded by `lock`: the last few key paths asked for, held (so none
    /// is freed and its address reused) and compared by identity.
    nonisolated(unsafe) private static var recent: [(entity: ObjectIdentifier, keyPath: AnyKeyPath, read: Read?)] = []

    /// Call with `lock` held.
    private static func remember(_ entity: ObjectIdentifier, _ keyPath: AnyKeyPath, _ read: Read?) {
        if recent.count == 8 { recent.removeFirst() }
        recent.append((entity, keyPath, read))
    }

    private static func probe(_ keyPath: AnyKeyPath, _ entity: EntityDescription) -> Read? {
        let object = entity.scratchObject(linkedTo: nil)
        // (A key path of another root type reads nil below.)
        func read(_ values: [PropertyValue]) -> PropertyValue?? {
            object.values = values
            guard let result = object[keyPath: keyPath] else { return nil }
            if let value = result as? any AttributeValueConvertible { return .some(value.propertyValue) }
            return .some(nil)  // read something that is not an attribute value
        }
        let base = entity.initialValues
        guard case .some(let baseline?) = read(base) else { return nil }
        var found: Int?
        for i in entity.properties.indices {
            guard case .attribute(let attribute) = entity.properties[i] else { continue }
            var changed = base
            changed[i] = distinct(attribute.type, from: base[i])
            guard case .some(let value?) = read(changed) else { return nil }
            if value != baseline {
                guard found == nil else { return nil }  // reads more than one property
                found = i
            }
        }
        guard let index = found else { return nil }
        var nulled = base
        nulled[index] = .null
        guard case .some(let null?) = read(nulled) else { return nil }
        // The key path must show exactly the stored value (a wrapper, not a
        // computed property that transforms it).
        var changed = base
        changed[index] = distinct(attributeType(entity, index), from: base[index])
        guard case .some(let shown?) = read(changed), shown == changed[index] else { return nil }
        return Read(index: index, null: null)
    }

    private static func attributeType(_ entity: EntityDescription, _ index: Int) -> AttributeType {
        guard case .attribute(let attribute) = entity.properties[index] else { preconditionFailure("not an attribute") }
        return attribute.type
    }

    /// A value of `type` other than `value`.
    private static func distinct(_ type: AttributeType, from value: PropertyValue) -> PropertyValue {
        let candidates: [PropertyValue]
        switch type {
        case .string: candidates = [.string("\u{1}probe"), .string("\u{2}probe")]
        case .integer16, .integer32, .integer64: candidates = [.integer(7), .integer(9)]
        case .double: candidates = [.double(7.5), .double(9.5)]
        case .bool: candidates = [.bool(true), .bool(false)]
        case .date: candidates = [.date(Date(timeIntervalSinceReferenceDate: 7)), .date(Date(timeIntervalSinceReferenceDate: 9))]
        case .binaryData: candidates = [.data(Data([7])), .data(Data([9]))]
        case .uuid:
            candidates = [.uuid(UUID(uuid: (7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))),
                          .uuid(UUID(uuid: (9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))]
        }
        return candidates[0] != value ? candidates[0] : candidates[1]
    }
}
