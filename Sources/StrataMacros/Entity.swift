@_exported public import Strata

/// Declares a ``ManagedObject`` subclass's entity from its stored
/// properties, so that each is written once: every stored `var` becomes a
/// property of the entity under its own name, and the class gets
/// `entityDescription` (``EntityDeclaring``) for
/// ``ManagedObjectModel/init(declaring:)``.
///
/// ```swift
/// @Entity(indexes: [["visits"]], uniquenessConstraints: [["url"]])
/// final class Bookmark: ManagedObject {
///     var url: String                        // a required string attribute
///     var title: String?                     // an optional one
///     var visits: Int = 0                    // a default: what a new object starts with
///     @Related(inverse: "bookmarks") var tags: Set<Tag>   // to-many
///     @Related(inverse: "bookmarks") var folder: Folder?  // to-one (always optional)
///     @Transient var selected = false        // not stored
/// }
/// ```
///
/// What a property's declared type makes it:
///
/// | Swift type | property |
/// |---|---|
/// | `String`, `Bool`, `Double`, `Date`, `Data`, `UUID` | the attribute of that type |
/// | `Int`, `Int64` / `Int32` / `Int16` | `integer64` / `integer32` / `integer16` |
/// | any of those, optional (`T?`) | the same, optional |
/// | `Set<T>`, `T` a `ManagedObject` subclass | a to-many relationship to entity `T` |
/// | `T?`, `T` a `ManagedObject` subclass | a to-one relationship to entity `T` |
///
/// `@Related` gives a relationship its inverse and delete rule (and the
/// destination entity's name, when it is not the destination class's);
/// `@Unique` and `@Indexed` give an attribute a uniqueness constraint or an
/// index of its own, and `#Unique` and `#Index` in the class body declare
/// constraints and indexes over several attributes, as SwiftData spells them; `@Renamed(from:)` the name a property had in an earlier model version
/// (a migration carries its values over); `@Transient` leaves a property out
/// of the model. A property that already has `@Attribute("key")` or
/// `@Relationship("key")` keeps that key (with an initial value, write
/// `@Attribute(modelDefault: "key")`). An initial value is the
/// attribute's default in the model, evaluated once when the model is
/// built: a constant, as Core Data's defaults are. A relationship starts
/// empty: its initial value, if any, is `[]` or `nil`.
///
/// An `@Entity` class inherits from `ManagedObject` directly (Strata has no
/// entity inheritance), is declared at file or type scope (a local class
/// cannot take the extension), and keeps its `let`s and `@Transient` vars
/// to itself. An initial value that is not a constant (`Date()`, `UUID()`)
/// draws a warning: every new object would start with the one value.
///
/// - Parameters:
///   - name: The entity's name; the class's name when nil.
///   - indexes: The attributes of each index, in order.
///   - uniquenessConstraints: Sets of attributes no two objects may share.
///   - renamedFrom: The entity's name in an earlier model version.
@attached(memberAttribute)
@attached(member, names: named(entityDescription))
@attached(extension, conformances: EntityDeclaring)
public macro Entity(
    name: String? = nil, indexes: [[String]] = [], uniquenessConstraints: [[String]] = [], renamedFrom: String? = nil
) = #externalMacro(module: "StrataMacrosPlugin", type: "EntityMacro")

/// A relationship's inverse (the relationship of the destination entity
/// that points back, kept in step by Strata) and delete rule, for `@Entity`;
/// and its destination entity's name when that is not the destination
/// class's name (an `@Entity(name:)` of its own).
///
/// ```swift
/// @Related(inverse: "recipe", deleteRule: .cascade) var ingredients: Set<Ingredient>
/// @Related(inverse: "notes", destination: "Folder") var folder: FolderV2?
/// ```
@attached(peer)
public macro Related(inverse: String? = nil, deleteRule: DeleteRule = .nullify, destination: String? = nil) =
    #externalMacro(module: "StrataMacrosPlugin", type: "MarkerMacro")

/// `@Related` with the inverse as a key path of the destination class
/// (`\Tag.bookmarks`), which the compiler checks: a misspelt inverse does
/// not build. Write it on one side of a pair only (the other names its
/// inverse with a string): two key paths at each other are a circular
/// reference the compiler refuses. The key path names the Swift property,
/// which is the model's name unless that property has a key of its own.
///
/// ```swift
/// @Related(inverse: \Tag.bookmarks) var tags: Set<Tag>
/// ```
@attached(peer)
public macro Related<Destination: ManagedObject, Value>(
    inverse: KeyPath<Destination, Value>, deleteRule: DeleteRule = .nullify, destination: String? = nil
) = #externalMacro(module: "StrataMacrosPlugin", type: "MarkerMacro")

/// An attribute no two objects may hold the same value of, for `@Entity`:
/// a uniqueness constraint on it alone (SwiftData's `@Attribute(.unique)`).
@attached(peer)
public macro Unique() = #externalMacro(module: "StrataMacrosPlugin", type: "MarkerMacro")

/// An attribute with an index of its own, for `@Entity`.
@attached(peer)
public macro Indexed() = #externalMacro(module: "StrataMacrosPlugin", type: "MarkerMacro")

/// The name a property had in an earlier model version, for `@Entity`: a
/// migration carries the stored values over from the property of that name.
@attached(peer)
public macro Renamed(from previousName: String) = #externalMacro(module: "StrataMacrosPlugin", type: "MarkerMacro")

/// A stored property `@Entity` leaves out of the model: it lives in the
/// object only, and starts from its initial value in every object.
@attached(peer)
public macro Transient() = #externalMacro(module: "StrataMacrosPlugin", type: "MarkerMacro")

/// Uniqueness constraints of an `@Entity` class, written in its body as
/// SwiftData writes them: each array of key paths is one constraint (no two
/// objects may hold the same values in all of its attributes).
///
/// ```swift
/// @Entity
/// final class Visit: ManagedObject {
///     #Unique<Visit>([\.bookmark, \.day], [\.token])
///     var day: Date
///     var token: String
///     @Related(inverse: "visits") var bookmark: Bookmark?
/// }
/// ```
@freestanding(declaration)
public macro Unique<Root>(_ constraints: [PartialKeyPath<Root>]...) =
    #externalMacro(module: "StrataMacrosPlugin", type: "EntityMemberMacro")

/// Indexes of an `@Entity` class, written in its body as SwiftData writes
/// them: each array of key paths is one index, its attributes in order.
///
/// ```swift
/// @Entity
/// final class Person: ManagedObject {
///     #Index<Person>([\.lastName, \.firstName], [\.born])
///     var firstName: String
///     var lastName: String
///     var born: Date
/// }
/// ```
@freestanding(declaration)
public macro Index<Root>(_ indexes: [PartialKeyPath<Root>]...) =
    #externalMacro(module: "StrataMacrosPlugin", type: "EntityMemberMacro")
