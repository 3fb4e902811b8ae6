import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxBuilder
import SwiftSyntaxMacros

/// `@Entity`: a managed object class's stored properties as its entity.
///
/// Three roles, each reading the same ``EntityDeclaration``: the member
/// attribute role puts `@Strata.Attribute("name")` or
/// `@Strata.Relationship("name")` on each stored property (the wrappers
/// that read and write the object's values); the member role adds
/// `static var entityDescription`; the extension role conforms the class
/// to `EntityDeclaring`.
struct EntityMacro: MemberAttributeMacro, MemberMacro, ExtensionMacro {
    static func expansion(
        of node: AttributeSyntax, attachedTo declaration: some DeclGroupSyntax,
        providingAttributesFor member: some DeclSyntaxProtocol, in context: some MacroExpansionContext
    ) throws -> [AttributeSyntax] {
        // A property it cannot map is reported once, by the member role.
        guard declaration.is(ClassDeclSyntax.self), let variable = member.as(VariableDeclSyntax.self),
              let property = try? StoredProperty(variable), property.needsWrapper else { return [] }
        // With an initial value, the wrapper's init that takes it: the model holds it as the default.
        let label = property.initialValue == nil ? "" : "modelDefault: "
        switch property.kind {
        case .attribute: return ["@Strata.Attribute(\(raw: label)\(literal: property.key))"]
        case .toOne, .toMany: return ["@Strata.Relationship(\(raw: label)\(literal: property.key))"]
        }
    }

    static func expansion(
        of node: AttributeSyntax, providingMembersOf declaration: some DeclGroupSyntax,
        conformingTo protocols: [TypeSyntax], in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        let entity = try EntityDeclaration(node, declaration) { variable, error in
            context.diagnose(Diagnostic(node: variable, message: error))
        }
        return [entity.descriptionProperty]
    }

    static func expansion(
        of node: AttributeSyntax, attachedTo declaration: some DeclGroupSyntax, providingExtensionsOf type: some TypeSyntaxProtocol,
        conformingTo protocols: [TypeSyntax], in context: some MacroExpansionContext
    ) throws -> [ExtensionDeclSyntax] {
        guard declaration.is(ClassDeclSyntax.self) else { return [] }
        return [try ExtensionDeclSyntax("extension \(type.trimmed): Strata.EntityDeclaring {}")]
    }
}

/// `@Related`, `@Renamed`, `@Unique`, `@Indexed` and `@Transient`: read by `@Entity`, expanding to nothing.
struct MarkerMacro: PeerMacro {
    static func expansion(
        of node: AttributeSyntax, providingPeersOf declaration: some DeclSyntaxProtocol, in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        guard declaration.is(VariableDeclSyntax.self) else {
            throw EntityMacroError("@\(node.attributeName.trimmedDescription) belongs on a stored property of an @Entity class")
        }
        return []
    }
}

/// `#Unique` and `#Index` in an `@Entity` class's body: read by `@Entity`, expanding to nothing.
struct EntityMemberMacro: DeclarationMacro {
    static func expansion(of node: some FreestandingMacroExpansionSyntax, in context: some MacroExpansionContext) throws -> [DeclSyntax] {
        guard context.lexicalContext.first?.is(ClassDeclSyntax.self) == true else {
            throw EntityMacroError("#\(node.macroName.text) belongs in the body of an @Entity class")
        }
        return []
    }
}

/// A mistake in an `@Entity` class, reported where it is: what is wrong and what to write.
struct EntityMacroError: Error, CustomStringConvertible, DiagnosticMessage {
    let description: String
    let severity: DiagnosticSeverity
    init(_ description: String, severity: DiagnosticSeverity = .error) {
        self.description = description
        self.severity = severity
    }

    var message: String { description }
    var diagnosticID: MessageID { MessageID(domain: "StrataMacros", id: "Entity") }
}

/// The class `@Entity` is attached to, as an entity.
struct EntityDeclaration {
    let className: String
    /// `public ` or `package ` (with the space) when the class is, else empty.
    let access: String
    let name: ExprSyntax
    let indexes: ExprSyntax?
    let uniquenessConstraints: ExprSyntax?
    let renamedFrom: ExprSyntax?
    let properties: [StoredProperty]
    /// `#Unique` and `#Index` in the body: each a list of model keys.
    let memberConstraints: [[String]]
    let memberIndexes: [[String]]

    /// `report` hears each stored property that cannot be mapped, which is left out.
    init(_ node: AttributeSyntax, _ declaration: some DeclGroupSyntax, report: (Syntax, EntityMacroError) -> Void) throws {
        guard let classDecl = declaration.as(ClassDeclSyntax.self) else {
            throw EntityMacroError("@Entity applies to a class that inherits from ManagedObject")
        }
        className = classDecl.name.identifier?.name ?? classDecl.name.text
        let modifiers = classDecl.modifiers.map(\.name.tokenKind)
        access = modifiers.contains(.keyword(.public)) || modifiers.contains(.keyword(.open)) ? "public "
            : modifiers.contains(.keyword(.package)) ? "package " : ""
        let arguments = node.arguments?.as(LabeledExprListSyntax.self).map(Array.init) ?? []
        // An argument written as `nil` is the default, as if absent.
        func argument(_ label: String) -> ExprSyntax? {
            arguments.first { $0.label?.text == label && !$0.expression.is(NilLiteralExprSyntax.self) }?.expression
        }
        name = argument("name") ?? "\(literal: className)"
        indexes = argument("indexes")
        uniquenessConstraints = argument("uniquenessConstraints")
        renamedFrom = argument("renamedFrom")
        var properties: [StoredProperty] = []
        var keys: Set<String> = []
        for member in classDecl.memberBlock.members {
            if let conditional = member.decl.as(IfConfigDeclSyntax.self) {
                // The member attribute role would wrap what is inside; the model cannot follow a condition.
                for clause in conditional.clauses {
                    guard case .decls(let members)? = clause.elements else { continue }
                    for inner in members {
                        if let variable = inner.decl.as(VariableDeclSyntax.self), (try? StoredProperty(variable)) != nil {
                            report(Syntax(variable), EntityMacroError("@Entity cannot store a property declared inside #if: move it out, or mark it @Transient"))
                        }
                    }
                }
                continue
            }
            guard let variable = member.decl.as(VariableDeclSyntax.self) else { continue }
            do {
                guard let property = try StoredProperty(variable) else { continue }
                if let warning = property.defaultWarning { report(Syntax(variable), warning) }
                guard keys.insert(property.key).inserted else { throw EntityMacroError("two properties of \(className) are stored as \(property.key)") }
                properties.append(property)
            } catch let error as EntityMacroError {
                report(Syntax(variable), error)
            }
        }
        self.properties = properties
        var memberConstraints: [[String]] = [], memberIndexes: [[String]] = []
        for member in classDecl.memberBlock.members {
            guard let expansion = member.decl.as(MacroExpansionDeclSyntax.self),
                  ["Unique", "Index"].contains(expansion.macroName.text) else { continue }
            for argument in expansion.arguments {
                guard let list = argument.expression.as(ArrayExprSyntax.self) else {
                    report(Syntax(argument), EntityMacroError("#\(expansion.macroName.text) takes arrays of key paths: [\\.name], [\\.a, \\.b]"))
                    continue
                }
                var keys: [String] = []
                for element in list.elements {
                    // `\.name` or `\Class.name`: the property the one component names.
                    guard let keyPath = element.expression.as(KeyPathExprSyntax.self), keyPath.components.count == 1,
                          let component = keyPath.components.first?.component.as(KeyPathPropertyComponentSyntax.self) else {
                        report(Syntax(element), EntityMacroError("#\(expansion.macroName.text) names each attribute with a key path of one property, \\.name"))
                        continue
                    }
                    let name = component.declName.baseName.identifier?.name ?? component.declName.baseName.text
                    guard let property = properties.first(where: { $0.name == name }) else {
                        report(Syntax(element), EntityMacroError("#\(expansion.macroName.text) names \(name), which is not a stored property of \(className)"))
                        continue
                    }
                    keys.append(property.key)
                }
                guard !keys.isEmpty else { continue }
                if expansion.macroName.text == "Unique" { memberConstraints.append(keys) } else { memberIndexes.append(keys) }
            }
        }
        self.memberConstraints = memberConstraints
        self.memberIndexes = memberIndexes
    }

    /// `static var entityDescription`: a new `EntityDescription` per call.
    var descriptionProperty: DeclSyntax {
        let list = properties.map { "            \($0.descriptionExpression)," }.joined(separator: "\n")
        var extra = ""
        func literal(_ keys: [String]) -> String { "[" + keys.map { StringLiteralExprSyntax(content: $0).description }.joined(separator: ", ") + "]" }
        let ownIndexes = memberIndexes.map(literal) + properties.filter(\.isIndexed).map { "[\($0.keyLiteral)]" }
        let ownConstraints = memberConstraints.map(literal) + properties.filter(\.isUnique).map { "[\($0.keyLiteral)]" }
        if indexes != nil || !ownIndexes.isEmpty {
            let declared = ownIndexes.isEmpty ? "" : " + [\(ownIndexes.joined(separator: ", "))]"
            extra += ",\n        indexes: (\(indexes?.trimmedDescription ?? "[]") as [[String]]\(declared)).map { Strata.IndexDescription($0) }"
        }
        if uniquenessConstraints != nil || !ownConstraints.isEmpty {
            let declared = ownConstraints.isEmpty ? "" : " + [\(ownConstraints.joined(separator: ", "))]"
            extra += ",\n        uniquenessConstraints: \(uniquenessConstraints?.trimmedDescription ?? "[]") as [[String]]\(declared)"
        }
        if let renamedFrom { extra += ",\n        renamedFrom: \(renamedFrom.trimmed)" }
        return """
            \(raw: access)static var entityDescription: Strata.EntityDescription {
                Strata.EntityDescription(
                    name: \(name.trimmed), managedObjectClass: \(raw: className).self,
                    properties: [
            \(raw: list)
                    ]\(raw: extra))
            }
            """
    }
}

/// A stored property of an `@Entity` class, as a property of its entity.
struct StoredProperty {
    enum Kind {
        case attribute(type: String, optional: Bool)
        /// The destination entity's name: the class's, or `@Related(destination:)`.
        case toOne(destination: ExprSyntax)
        case toMany(destination: ExprSyntax)
    }

    /// The Swift property's name (what a key path names).
    let name: String
    let key: String
    let kind: Kind
    /// False when the property already carries `@Attribute` or `@Relationship`.
    let needsWrapper: Bool
    let swiftType: TypeSyntax
    let initialValue: ExprSyntax?
    let renamedFrom: ExprSyntax?
    let inverse: ExprSyntax?
    let deleteRule: ExprSyntax?
    /// `@Unique`, `@Indexed`: a constraint or an index on this attribute alone.
    let isUnique: Bool
    let isIndexed: Bool
    /// A warning for an initial value that is not a constant (see ``isConstant(_:)``).
    var defaultWarning: EntityMacroError? {
        guard case .attribute = kind, let initialValue, !Self.isConstant(initialValue) else { return nil }
        return EntityMacroError("""
            the initial value of \(key) is the model's default, evaluated once when the model is built: \
            every new object starts with that same value (set a per-object value after creating the object)
            """, severity: .warning)
    }

    /// The key as a string literal in generated code, escaped.
    var keyLiteral: String { StringLiteralExprSyntax(content: key).description }

    /// Nil for what is not stored in the model: a computed, static, lazy
    /// or `@Transient` property. Throws for a stored one `@Entity` cannot
    /// map, saying what to write instead.
    init?(_ variable: VariableDeclSyntax) throws {
        let modifiers = variable.modifiers.map(\.name.tokenKind)
        if modifiers.contains(.keyword(.static)) || modifiers.contains(.keyword(.class)) || modifiers.contains(.keyword(.lazy)) { return nil }
        let attributes = variable.attributes.compactMap { $0.as(AttributeSyntax.self) }
        func attribute(_ name: String) -> AttributeSyntax? {
            attributes.first { $0.attributeName.trimmedDescription == name || $0.attributeName.trimmedDescription == "Strata.\(name)" || $0.attributeName.trimmedDescription == "StrataMacros.\(name)" }
        }
        if attribute("Transient") != nil { return nil }
        // A let is the object's own, never the model's.
        if variable.bindingSpecifier.tokenKind == .keyword(.let) { return nil }
        guard variable.bindings.count == 1, let binding = variable.bindings.first else {
            throw EntityMacroError("declare one property per var in an @Entity class")
        }
        if let accessors = binding.accessorBlock {
            // Computed (`get`/`set` or a getter body): not stored.
            if case .getter = accessors.accessors { return nil }
            if case .accessors(let list) = accessors.accessors,
               list.contains(where: { [.keyword(.get), .keyword(.set), .keyword(._read), .keyword(._modify)].contains($0.accessorSpecifier.tokenKind) }) {
                return nil
            }
        }
        guard let token = binding.pattern.as(IdentifierPatternSyntax.self)?.identifier, case let name = token.identifier?.name ?? token.text else {
            throw EntityMacroError("@Entity stores properties with a plain name, not \(binding.pattern.trimmedDescription)")
        }
        if Self.reservedNames.contains(name) {
            throw EntityMacroError("""
                \(name) is a member of ManagedObject: name the Swift property otherwise and keep \(name) as the model's name, \
                @Attribute("\(name)") var \(name)Value: …
                """)
        }
        if modifiers.contains(.keyword(.weak)) || modifiers.contains(.keyword(.unowned)) {
            throw EntityMacroError("\(name) is weak or unowned: a relationship is held by the context, not by the object; drop the modifier")
        }
        guard let type = binding.typeAnnotation?.type else {
            throw EntityMacroError("\(name) needs a type annotation (var \(name): String) for @Entity to map it")
        }
        swiftType = type.trimmed
        initialValue = binding.initializer?.value.trimmed

        var key = name
        var explicit = false
        for wrapper in ["Attribute", "Relationship"] {
            if let existing = attribute(wrapper) {
                guard let first = existing.arguments?.as(LabeledExprListSyntax.self)?.first,
                      let literal = first.expression.as(StringLiteralExprSyntax.self),
                      let text = literal.representedLiteralValue else {
                    throw EntityMacroError("@\(wrapper) on \(name) needs its key as a string literal")
                }
                key = text
                explicit = true
                if initialValue != nil && first.label?.text != "modelDefault" {
                    throw EntityMacroError("""
                        \(name) has an initial value, which is the model's default: write @\(wrapper)(modelDefault: "\(text)"), \
                        or leave the wrapper to @Entity
                        """)
                }
            }
        }
        self.name = name
        self.key = key
        needsWrapper = !explicit
        renamedFrom = attribute("Renamed")?.arguments?.as(LabeledExprListSyntax.self)?.first?.expression
        isUnique = attribute("Unique") != nil
        isIndexed = attribute("Indexed") != nil
        let related = attribute("Related")?.arguments?.as(LabeledExprListSyntax.self).map(Array.init) ?? []
        inverse = try (related.first { $0.label?.text == "inverse" }?.expression).map { (expression) throws(EntityMacroError) -> ExprSyntax in
            // `\Tag.bookmarks` names the inverse `bookmarks`.
            guard let keyPath = expression.as(KeyPathExprSyntax.self) else { return expression }
            guard keyPath.components.count == 1, let component = keyPath.components.first?.component.as(KeyPathPropertyComponentSyntax.self) else {
                throw EntityMacroError("the inverse of \(name) is one property of the destination (\\Tag.bookmarks), not \(keyPath.trimmedDescription)")
            }
            let token = component.declName.baseName
            return "\(literal: token.identifier?.name ?? token.text)"
        }
        deleteRule = related.first { $0.label?.text == "deleteRule" }?.expression
        let destinationName = related.first { $0.label?.text == "destination" }?.expression

        let (base, optional) = Self.unwrapped(type)
        if let attributeType = Self.attributeTypes[Self.lastName(of: base) ?? ""] {
            if attribute("Related") != nil { throw EntityMacroError("\(name) is an attribute: @Related is for relationships") }
            kind = .attribute(type: attributeType, optional: optional)
            return
        }
        if isUnique || isIndexed { throw EntityMacroError("\(name) is not an attribute: @Unique and @Indexed are for attributes") }
        if base.is(ArrayTypeSyntax.self) || base.is(DictionaryTypeSyntax.self) || Self.valueTypes.contains(Self.lastName(of: base) ?? "") {
            throw Self.cannotStore(name, type)
        }
        // A relationship starts empty: an initial value can only say so.
        if let initialValue, initialValue.as(NilLiteralExprSyntax.self) == nil,
           initialValue.as(ArrayExprSyntax.self).map({ !$0.elements.isEmpty }) ?? true {
            throw EntityMacroError("\(name) is a relationship, which starts empty in every new object: remove = \(initialValue.trimmedDescription)")
        }
        if !optional, let identifier = base.as(IdentifierTypeSyntax.self), identifier.name.text == "Set",
                  let element = Self.typeArgument(of: identifier), let destination = Self.lastName(of: element) {
            kind = .toMany(destination: destinationName ?? "\(literal: destination)")
        } else if optional, let destination = Self.lastName(of: base) {
            kind = .toOne(destination: destinationName ?? "\(literal: destination)")
        } else {
            throw Self.cannotStore(name, type)
        }
    }

    /// The property's `PropertyDescription` expression.
    var descriptionExpression: String {
        var renamed = ""
        if let renamedFrom { renamed = ", renamedFrom: \(renamedFrom.trimmedDescription)" }
        let inverseText = inverse?.trimmedDescription ?? "nil"
        let rule = deleteRule.map { ", deleteRule: \($0.trimmedDescription)" } ?? ""
        switch kind {
        case .attribute(let type, let optional):
            var text = ".attribute(\(keyLiteral), .\(type)"
            if optional { text += ", optional: true" }
            if let initialValue, initialValue.as(NilLiteralExprSyntax.self) == nil {
                text += ", defaultValue: (\(initialValue.trimmedDescription) as \(swiftType.trimmedDescription)).propertyValue"
            }
            return text + renamed + ")"
        case .toOne(let destination):
            return ".toOne(\(keyLiteral), \(destination.trimmedDescription), inverse: \(inverseText)\(rule)\(renamed))"
        case .toMany(let destination):
            return ".toMany(\(keyLiteral), \(destination.trimmedDescription), inverse: \(inverseText)\(rule)\(renamed))"
        }
    }

    static func cannotStore(_ name: String, _ type: TypeSyntax) -> EntityMacroError {
        EntityMacroError("""
            @Entity cannot store \(name): \(type.trimmedDescription) is neither an attribute type \
            (String, Int, Int16, Int32, Int64, Double, Bool, Date, Data, UUID, or one of those optional) \
            nor a relationship (Set<T> or T? of a ManagedObject subclass T); mark it @Transient to keep it out of the model
            """)
    }

    /// Value types that are no attribute type: optional, they would otherwise read as a to-one relationship.
    static let valueTypes: Set<String> = [
        "Float", "Float16", "Float80", "CGFloat", "Decimal", "Int8", "UInt", "UInt8", "UInt16", "UInt32", "UInt64",
        "Character", "Substring", "URL", "Array", "Dictionary", "Set", "Optional",
    ]

    /// Whether an initial value is a constant: a literal, a member such as
    /// `.zero` or `Int.max`, a negated literal, or an array of those — what
    /// reads the same whenever it is evaluated.
    static func isConstant(_ expression: ExprSyntax) -> Bool {
        if expression.is(IntegerLiteralExprSyntax.self) || expression.is(FloatLiteralExprSyntax.self) || expression.is(BooleanLiteralExprSyntax.self)
            || expression.is(NilLiteralExprSyntax.self) || expression.is(MemberAccessExprSyntax.self) {
            return true
        }
        if let string = expression.as(StringLiteralExprSyntax.self) {
            return string.segments.allSatisfy { $0.is(StringSegmentSyntax.self) }
        }
        if let prefix = expression.as(PrefixOperatorExprSyntax.self) { return isConstant(prefix.expression) }
        if let array = expression.as(ArrayExprSyntax.self) { return array.elements.allSatisfy { isConstant($0.expression) } }
        return false
    }

    /// ManagedObject's own public members, which a subclass cannot declare again.
    static let reservedNames: Set<String> = [
        "entity", "objectID", "managedObjectContext", "description", "hashValue",
        "hasChanges", "isDeleted", "isFault", "isInserted", "isUpdated",
    ]

    static let attributeTypes: [String: String] = [
        "String": "string", "Int": "integer64", "Int64": "integer64", "Int32": "integer32", "Int16": "integer16",
        "Double": "double", "Bool": "bool", "Date": "date", "Data": "binaryData", "UUID": "uuid",
    ]

    /// The type without one level of optionality (`T?`, `Optional<T>`), and whether it had one.
    static func unwrapped(_ type: TypeSyntax) -> (TypeSyntax, Bool) {
        if let optional = type.as(OptionalTypeSyntax.self) { return (optional.wrappedType, true) }
        if let identifier = type.as(IdentifierTypeSyntax.self), identifier.name.text == "Optional", let wrapped = typeArgument(of: identifier) {
            return (wrapped, true)
        }
        return (type, false)
    }

    /// The first generic argument of `identifier` (`T` of `Set<T>`), when it is a type.
    static func typeArgument(of identifier: IdentifierTypeSyntax) -> TypeSyntax? {
        guard let argument = identifier.genericArgumentClause?.arguments.first?.argument, case .type(let type) = argument else { return nil }
        return type
    }

    /// `Date` of `Date` or `Foundation.Date`; nil for other kinds of type.
    static func lastName(of type: TypeSyntax) -> String? {
        if let identifier = type.as(IdentifierTypeSyntax.self), identifier.genericArgumentClause == nil {
            return identifier.name.identifier?.name ?? identifier.name.text
        }
        if let member = type.as(MemberTypeSyntax.self), member.genericArgumentClause == nil { return member.name.identifier?.name ?? member.name.text }
        return nil
    }
}
