/// An inferred migration as a store that keeps objects its own way (behind
/// the store seam, such as PostgreSQL's tables) needs it: for each entity
/// and property of the model a store is opened with, the entity and
/// property of the stored model it comes from, by Core Data's rules for a
/// lightweight migration (the same inference the log store migrates by),
/// and what stored objects are given where the stored model had nothing.
///
/// The store keeps the stored model as ``ManagedObjectModel/encodedSchema``
/// and rebuilds it with ``ManagedObjectModel/decoding(encodedSchema:)``.
@_spi(StoreImplementation)
public struct InferredMigration {
    /// The model the store was written with, decoded from its schema: no
    /// entity of it names a class.
    public var storedModel: ManagedObjectModel { mapping.old }
    /// The model the store is opened with.
    public var model: ManagedObjectModel { mapping.new }
    /// Everything that changed, inferable or not.
    public var differences: [ModelDifference] { mapping.differences }
    /// The changes inference cannot carry over: a store refuses to open
    /// while there is one (``StrataError/Code/modelMismatch``, with
    /// ``differences`` in ``StrataError/modelDifferences``).
    public var unresolved: [ModelDifference] { mapping.unresolved }

    private let mapping: SchemaMapping

    init(_ mapping: SchemaMapping) { self.mapping = mapping }

    /// The stored entity `entity` (of ``model``) comes from; nil for one the stored model lacks.
    public func storedEntity(for entity: EntityDescription) -> EntityDescription? {
        source(entity)?.old
    }

    /// The stored property that property `j` of `entity` comes from (the
    /// same or renamed); nil for one the stored entity lacks.
    public func storedProperty(_ j: Int, of entity: EntityDescription) -> PropertyDescription? {
        guard let source = source(entity), let old = source.old, let i = source.sources[j].old else { return nil }
        return old.properties[i]
    }

    /// What a stored object gets for property `j` of `entity` when the
    /// stored entity lacked the property: its initial value (the
    /// attribute's default, or null).
    public func initialValue(_ j: Int, of entity: EntityDescription) -> PropertyValue {
        source(entity)?.sources[j].initial ?? entity.initialValues[j]
    }

    /// What a stored object that holds no value of attribute `j` gets: the
    /// default of an attribute that became required; nil when it keeps its null.
    public func valueForStoredNulls(_ j: Int, of entity: EntityDescription) -> PropertyValue? {
        source(entity)?.sources[j].fill
    }

    /// Whether property `j` of `entity` is a to-many relationship that was
    /// to-one: a stored object's target becomes the set's one member.
    public func becomesSet(_ j: Int, of entity: EntityDescription) -> Bool {
        source(entity)?.sources[j].wrapsInSet ?? false
    }

    /// Whether property `j` of `entity` became required with no default,
    /// which inference allows only if every stored object holds a value
    /// (Core Data's rule): the store checks it as it migrates.
    public func mustHoldValue(_ j: Int, of entity: EntityDescription) -> Bool {
        mapping.mustHoldValues.contains { $0.entity == Int(entity.index) && $0.property == j }
    }

    private func source(_ entity: EntityDescription) -> SchemaMapping.EntityMapping? {
        guard model.entities.indices.contains(Int(entity.index)), model.entities[Int(entity.index)] === entity else { return nil }
        return mapping.entities[Int(entity.index)]
    }
}

extension ManagedObjectModel {
    /// The whole schema of the model (every name, kind, type, optionality,
    /// inverse, delete rule, index and default), encoded: what a store keeps
    /// so that it can infer a migration when it is opened with a later model.
    @_spi(StoreImplementation)
    public var encodedSchema: [UInt8] { schema }

    /// The model ``encodedSchema`` describes, with no classes (every entity's
    /// objects are `ManagedObject`s). Throws
    /// ``StrataError/Code/corruptRecord`` for bytes that are not a schema,
    /// ``StrataError/Code/unsupportedFormat`` for one a newer Strata wrote.
    @_spi(StoreImplementation)
    public static func decoding(encodedSchema bytes: [UInt8]) throws(StrataError) -> ManagedObjectModel {
        try ModelSchema.decodeCached(bytes)
    }

    /// How a store written with `storedModel` reads as this model.
    @_spi(StoreImplementation)
    public func inferredMigration(from storedModel: ManagedObjectModel) -> InferredMigration {
        InferredMigration(SchemaMapping.infer(from: storedModel, to: self))
    }
}
