import SwiftCompilerPlugin
import SwiftSyntaxMacros

/// The compiler plugin behind `StrataMacros`.
@main
struct StrataMacrosPlugin: CompilerPlugin {
    let providingMacros: [any Macro.Type] = [EntityMacro.self, MarkerMacro.self, EntityMemberMacro.self]
}
