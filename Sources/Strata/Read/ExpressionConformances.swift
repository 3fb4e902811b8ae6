internal import StrataStore
import Synchronization

/// Which of the translation's protocols a predicate expression's type (or a
/// constant's) conforms to, looked up once per type.
///
/// The translation (``ValueTest/compile(_:entity:)``) walks a `#Predicate`'s
/// expression tree by casting each node to the protocol it needs
/// (`lhs as? any OperandConvertible`). A dynamic cast to a protocol asks the
/// runtime's conformance tables every time, and a find-or-create by
/// `#Predicate` translates its predicate on every call. Here each type's
/// answer is kept (``ConformanceTable``, read without a lock), and the node
/// is opened as the type it is, which moves nothing.
///
/// Only a value whose dynamic type is its static type is answered from the
/// table; an existential or a subclass instance is cast as before.
enum ExpressionConformances {
    static func valueTest<E>(_ expression: E) -> (any ValueTestConvertible)? {
        guard isExactly(expression) else { return expression as? any ValueTestConvertible }
        guard let type = valueTests.conformance(of: E.self) else { return nil }
        func open<T: ValueTestConvertible>(_: T.Type) -> any ValueTestConvertible { unsafeBitCast(expression, to: T.self) }
        return open(type)
    }

    static func operand<E>(_ expression: E) -> (any OperandConvertible)? {
        guard isExactly(expression) else { return expression as? any OperandConvertible }
        guard let type = operands.conformance(of: E.self) else { return nil }
        func open<T: OperandConvertible>(_: T.Type) -> any OperandConvertible { unsafeBitCast(expression, to: T.self) }
        return open(type)
    }

    static func variable<E>(_ expression: E) -> (any PredicateVariable)? {
        guard isExactly(expression) else { return expression as? any PredicateVariable }
        guard let type = variables.conformance(of: E.self) else { return nil }
        func open<T: PredicateVariable>(_: T.Type) -> any PredicateVariable { unsafeBitCast(expression, to: T.self) }
        return open(type)
    }

    /// A constant as an attribute value (`.null` for a nil optional).
    static func attributeValue<V>(_ value: V) -> PropertyValue? {
        guard isExactly(value) else { return (value as? any AttributeValueConvertible)?.propertyValue }
        guard let type = attributeValues.conformance(of: V.self) else { return nil }
        func open<T: AttributeValueConvertible>(_: T.Type) -> PropertyValue { unsafeBitCast(value, to: T.self).propertyValue }
        return open(type)
    }

    /// Whether `value`'s dynamic type is `T` itself (not an existential
    /// holding another type, nor a subclass): then what `T` conforms to is
    /// what the value conforms to.
    @inline(__always)
    private static func isExactly<T>(_ value: T) -> Bool {
        ObjectIdentifier(type(of: value)) == ObjectIdentifier(T.self)
    }

    private static let valueTests = ConformanceTable<any ValueTestConvertible.Type> { $0 as? any ValueTestConvertible.Type }
    private static let operands = ConformanceTable<any OperandConvertible.Type> { $0 as? any OperandConvertible.Type }
    private static let variables = ConformanceTable<any PredicateVariable.Type> { $0 as? any PredicateVariable.Type }
    private static let attributeValues = ConformanceTable<any AttributeValueConvertible.Type> { $0 as? any AttributeValueConvertible.Type }
}

/// Types' conformances to one protocol, each found once (`resolve`, a cast
/// of the metatype) and kept for the process's life: a predicate's types
/// are few, and a type is never unloaded. Also what else is made once per
/// type (``kept(for:making:)``: the translations of ``ExpressionTranslations``).
///
/// Read without a lock: the table is an immutable ``Snapshot`` published
/// through an atomic pointer. A type not in it is resolved and kept, under
/// `lock`, in `recent`, which a larger snapshot takes in once it holds an
/// eighth of the snapshot's count: snapshots grow geometrically, so the
/// ones replaced — never freed, since a reader may still hold one and
/// holds no reference to it — come to a few times the last one's size in
/// all, and a type waits in `recent` (a lock and a hash) only until then.
///
/// `@unchecked Sendable`: `current` is atomic and the snapshots it points
/// at are immutable once published; `recent` is guarded by `lock`, which
/// also serializes publication.
final class ConformanceTable<Metatype>: @unchecked Sendable {
    /// Open addressing over the types' addresses: a power-of-two number of
    /// slots at most half full, probed linearly from the address's hash.
    private final class Snapshot {
        /// `key` 0: an empty slot (no type lives at address 0).
        let slots: [(key: UInt, conformance: Metatype?)]
        let count: Int

        init(slots: [(key: UInt, conformance: Metatype?)], count: Int) {
            self.slots = slots
            self.count = count
        }

        /// The conformance kept for `key`: nil when the key is not in the
        /// table, `.some(nil)` when its type conforms to nothing.
        func find(_ key: UInt) -> Metatype?? {
            let slot = slots[Self.slot(of: key, in: slots)]
            return slot.key == key ? .some(slot.conformance) : nil
        }

        private static func slot(of key: UInt, in slots: [(key: UInt, conformance: Metatype?)]) -> Int {
            let mask = slots.count - 1
            var i = Int(truncatingIfNeeded: (key &* 0x9E37_79B9_7F4A_7C15) >> 32) & mask
            while slots[i].key != 0 && slots[i].key != key { i = (i + 1) & mask }
            return i
        }

        /// This table with `added` taken in, in as many slots as keep it
        /// at most half full.
        func adding(_ added: [UInt: Metatype?]) -> Snapshot {
            let total = count + added.count
            var size = slots.count
            while total * 2 > size { size *= 2 }
            var grown = Array(repeating: (key: UInt(0), conformance: Metatype?.none), count: size)
            for entry in slots where entry.key != 0 { grown[Self.slot(of: entry.key, in: grown)] = entry }
            for (key, conformance) in added { grown[Self.slot(of: key, in: grown)] = (key, conformance) }
            return Snapshot(slots: grown, count: total)
        }
    }

    private let current: Atomic<UInt>
    private let lock = Lock()
    /// Guarded by `lock`: types resolved since the snapshot was published.
    private var recent: [UInt: Metatype?] = [:]
    private let resolve: (Any.Type) -> Metatype?

    init(_ resolve: @escaping (Any.Type) -> Metatype?) {
        self.resolve = resolve
        let empty = Snapshot(slots: Array(repeating: (key: 0, conformance: nil), count: 16), count: 0)
        current = Atomic(UInt(bitPattern: Unmanaged.passRetained(empty).toOpaque()))
    }

    private var snapshot: Snapshot {
        Unmanaged<Snapshot>.fromOpaque(UnsafeRawPointer(bitPattern: current.load(ordering: .acquiring))!).takeUnretainedValue()
    }

    func conformance(of type: Any.Type) -> Metatype? {
        kept(for: type) { resolve(type) }
    }

    /// What is kept for `type`, made by `make` the first time it is asked
    /// for (outside the lock: `make` may ask this table, or another, for
    /// other types).
    func kept(for type: Any.Type, making make: () -> Metatype?) -> Metatype? {
        let key = UInt(bitPattern: ObjectIdentifier(type))
        if let known = snapshot.find(key) { return known }
        if let waiting = lock.withLock({ recent[key] }) { return waiting }
        let answer = make()
        lock.withLock {
            let published = snapshot
            guard published.find(key) == nil, recent[key] == nil else { return }
            recent[key] = answer
            guard recent.count >= Swift.max(1, published.count / 8) else { return }
            // Published, and never released: see the type's comment.
            current.store(UInt(bitPattern: Unmanaged.passRetained(published.adding(recent)).toOpaque()), ordering: .releasing)
            recent = [:]
        }
        return answer
    }
}
