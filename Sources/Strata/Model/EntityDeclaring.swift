/// A ``ManagedObject`` subclass that describes its own entity: what the
/// `@Entity` macro (the `StrataMacros` product) derives from the class's
/// stored properties, so that each property is written once.
///
/// ```swift
/// import StrataMacros
///
/// @Entity(uniquenessConstraints: [["url"]])
/// final class Bookmark: ManagedObject {
///     var url: String
///     var visits: Int = 0
///     @Related(inverse: "bookmarks") var tags: Set<Tag>
/// }
///
/// let model = try ManagedObjectModel(Bookmark.self, Tag.self)
/// ```
public protocol EntityDeclaring: ManagedObject {
    /// The entity this class is the class of; a new description on every
    /// call (a model takes its entities for its own).
    static var entityDescription: EntityDescription { get }
}

extension ManagedObjectModel {
    /// The model of the entities `types` describe (``EntityDeclaring``),
    /// checked as ``init(entities:)`` checks any model.
    public convenience init(declaring types: [any EntityDeclaring.Type]) throws(StrataError) {
        try self.init(entities: types.map { $0.entityDescription })
    }

    /// ``init(declaring:)`` for a list written out: `ManagedObjectModel(Bookmark.self, Tag.self)`.
    public convenience init(_ types: any EntityDeclaring.Type...) throws(StrataError) {
        try self.init(declaring: types)
    }
}
