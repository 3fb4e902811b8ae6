import Foundation
internal import StrataStore

/// A `#Predicate`'s translation made once per expression type, then run on
/// each predicate of that type: the common shapes (`&&`, `||`, `!`, `==`,
/// `!=`, `<`, `<=`, `>`, `>=` between an attribute of the fetched object, a
/// constant and `nil`; a Bool attribute or constant as a condition).
///
/// A find-or-create by `#Predicate` translates a new predicate on every
/// call (`#Predicate { $0.sku == sku }` captures a new value each time), and
/// the general translation (``ValueTestConvertible``) opens every node as an
/// existential of the protocol it needs: a boxed copy of the node, its
/// conformance looked up, the box destroyed. Here each node's translation
/// is a closure made for its type, which knows its children's types and so
/// calls their translations directly on the stored properties: per call,
/// only what differs from one predicate of the type to the next is read
/// (the constants, the key paths, the comparison's operator, the variable).
///
/// An expression type with a node outside these shapes has no translation
/// here (nil, kept as such): ``ValueTest/compile(_:entity:)`` then walks it
/// through the general translation, which gives the same answer for the
/// shapes both know (tested side by side).
enum ExpressionTranslations {
    typealias Test<E> = (E, PredicateCompiler) -> ValueTest?
    typealias Operand<E> = (E, PredicateCompiler) -> ValueTest.Operand?

    /// The translation of expressions of type `E` yielding a Bool, if every
    /// node of the type has one.
    static func test<E>(for _: E.Type) -> Test<E>? {
        guard let kept = tests.kept(for: E.self, making: { makeTest(E.self) }) else { return nil }
        return unsafeDowncast(kept, to: Translation<Test<E>>.self).translate
    }

    /// The translation of expressions of type `E` yielding a value.
    static func operand<E>(for _: E.Type) -> Operand<E>? {
        guard let kept = operands.kept(for: E.self, making: { makeOperand(E.self) }) else { return nil }
        return unsafeDowncast(kept, to: Translation<Operand<E>>.self).translate
    }

    /// A translation, boxed for the table (which keeps one per type, so the
    /// box's type is known from the type asked for). Shared by every thread:
    /// the closure never changes, and captures only other translations and
    /// types.
    private final class Translation<Function> {
        let translate: Function
        init(_ translate: Function) { self.translate = translate }
    }

    private static let tests = ConformanceTable<AnyObject> { _ in nil }
    private static let operands = ConformanceTable<AnyObject> { _ in nil }

    private static func makeTest<E>(_: E.Type) -> AnyObject? {
        guard let translatable = E.self as? any TestTranslatable.Type else { return nil }
        func open<T: TestTranslatable>(_: T.Type) -> AnyObject? {
            guard let translate = T.makeTestTranslation() else { return nil }
            // `E` is `T`: the translation of one is the other's.
            let typed: Test<E> = { expression, compiler in translate(unsafeBitCast(expression, to: T.self), compiler) }
            return Translation(typed)
        }
        return open(translatable)
    }

    private static func makeOperand<E>(_: E.Type) -> AnyObject? {
        guard let translatable = E.self as? any OperandTranslatable.Type else { return nil }
        func open<T: OperandTranslatable>(_: T.Type) -> AnyObject? {
            guard let translate = T.makeOperandTranslation() else { return nil }
            let typed: Operand<E> = { expression, compiler in translate(unsafeBitCast(expression, to: T.self), compiler) }
            return Translation(typed)
        }
        return open(translatable)
    }

    /// How to read the variable's ID from a key path's root of type `Root`,
    /// when `Root` is a predicate variable.
    static func variableID<Root>(of _: Root.Type) -> ((Root) -> PredicateExpressions.VariableID)? {
        guard let variable = Root.self as? any PredicateVariable.Type else { return nil }
        func open<T: PredicateVariable>(_: T.Type) -> (Root) -> PredicateExpressions.VariableID {
            { root in unsafeBitCast(root, to: T.self).id }
        }
        return open(variable)
    }

    /// How to read a constant of type `Value` as an attribute value, when
    /// `Value` is an attribute type (an existential is not: its values'
    /// types vary, and the general translation casts each).
    static func attributeValue<Value>(of _: Value.Type) -> ((Value) -> PropertyValue)? {
        guard let convertible = Value.self as? any AttributeValueConvertible.Type else { return nil }
        func open<T: AttributeValueConvertible>(_: T.Type) -> (Value) -> PropertyValue {
            { value in unsafeBitCast(value, to: T.self).propertyValue }
        }
        return open(convertible)
    }
}

/// An expression type yielding a Bool whose translation can be made for
/// the type (``ExpressionTranslations``).
protocol TestTranslatable {
    /// Nil when a node below has none.
    static func makeTestTranslation() -> ExpressionTranslations.Test<Self>?
}

/// An expression type yielding a value whose translation can be made for the type.
protocol OperandTranslatable {
    static func makeOperandTranslation() -> ExpressionTranslations.Operand<Self>?
}

extension PredicateExpressions.Conjunction: TestTranslatable {
    static func makeTestTranslation() -> ExpressionTranslations.Test<Self>? {
        guard let a = ExpressionTranslations.test(for: LHS.self), let b = ExpressionTranslations.test(for: RHS.self) else { return nil }
        return { expression, compiler in
            guard let left = a(expression.lhs, compiler), let right = b(expression.rhs, compiler) else { return nil }
            return .and(left, right)
        }
    }
}

extension PredicateExpressions.Disjunction: TestTranslatable {
    static func makeTestTranslation() -> ExpressionTranslations.Test<Self>? {
        guard let a = ExpressionTranslations.test(for: LHS.self), let b = ExpressionTranslations.test(for: RHS.self) else { return nil }
        return { expression, compiler in
            guard let left = a(expression.lhs, compiler), let right = b(expression.rhs, compiler) else { return nil }
            return .or(left, right)
        }
    }
}

extension PredicateExpressions.Negation: TestTranslatable {
    static func makeTestTranslation() -> ExpressionTranslations.Test<Self>? {
        guard let wrapped = ExpressionTranslations.test(for: Wrapped.self) else { return nil }
        return { expression, compiler in wrapped(expression.wrapped, compiler).map { .not($0) } }
    }
}

// Each node reads its sides itself: closures that read them (`{ $0.lhs }`),
// shared by the nodes of one shape, cost every translation a copy of each
// side through its value witness and a thunk per call.

extension PredicateExpressions.Equal: TestTranslatable {
    static func makeTestTranslation() -> ExpressionTranslations.Test<Self>? {
        guard let a = ExpressionTranslations.operand(for: LHS.self), let b = ExpressionTranslations.operand(for: RHS.self) else { return nil }
        return { expression, compiler in
            guard let left = a(expression.lhs, compiler), let right = b(expression.rhs, compiler) else { return nil }
            return ValueTest.compared(left, .equal, right)
        }
    }
}

extension PredicateExpressions.NotEqual: TestTranslatable {
    static func makeTestTranslation() -> ExpressionTranslations.Test<Self>? {
        guard let a = ExpressionTranslations.operand(for: LHS.self), let b = ExpressionTranslations.operand(for: RHS.self) else { return nil }
        return { expression, compiler in
            guard let left = a(expression.lhs, compiler), let right = b(expression.rhs, compiler) else { return nil }
            return ValueTest.compared(left, .notEqual, right)
        }
    }
}

extension PredicateExpressions.Comparison: TestTranslatable {
    static func makeTestTranslation() -> ExpressionTranslations.Test<Self>? {
        guard let a = ExpressionTranslations.operand(for: LHS.self), let b = ExpressionTranslations.operand(for: RHS.self) else { return nil }
        return { expression, compiler in
            guard let comparison = ValueTest.Comparison(expression.op),
                  let left = a(expression.lhs, compiler), let right = b(expression.rhs, compiler) else { return nil }
            return ValueTest.compared(left, comparison, right)
        }
    }
}

extension PredicateExpressions.KeyPath: OperandTranslatable {
    static func makeOperandTranslation() -> ExpressionTranslations.Operand<Self>? {
        guard let variable = ExpressionTranslations.variableID(of: Root.self) else { return nil }
        return { expression, compiler in
            guard variable(expression.root) == compiler.variable,
                  let read = PropertyProbe.property(read: expression.keyPath, entity: compiler.entity) else { return nil }
            return .property(index: read.index, null: read.null)
        }
    }
}

extension PredicateExpressions.KeyPath: TestTranslatable {
    /// A Bool attribute used as a condition (`$0.vegetarian && …`).
    static func makeTestTranslation() -> ExpressionTranslations.Test<Self>? {
        guard Output.self == Bool.self, let operand = makeOperandTranslation() else { return nil }
        return { expression, compiler in operand(expression, compiler).map { .compare($0, .equal, .constant(.bool(true))) } }
    }
}

extension PredicateExpressions.Value: OperandTranslatable {
    static func makeOperandTranslation() -> ExpressionTranslations.Operand<Self>? {
        guard let value = ExpressionTranslations.attributeValue(of: Output.self) else { return nil }
        return { expression, _ in .constant(value(expression.value)) }
    }
}

extension PredicateExpressions.Value: TestTranslatable {
    /// `true` or `false` as a condition.
    static func makeTestTranslation() -> ExpressionTranslations.Test<Self>? {
        guard Output.self == Bool.self else { return nil }
        return { expression, _ in .constant(unsafeBitCast(expression.value, to: Bool.self)) }
    }
}

extension PredicateExpressions.NilLiteral: OperandTranslatable {
    static func makeOperandTranslation() -> ExpressionTranslations.Operand<Self>? {
        { _, _ in .constant(.null) }
    }
}
