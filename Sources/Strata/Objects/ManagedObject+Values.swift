import Foundation

extension ManagedObject {
    // MARK: By name

    /// The value of the property named `key`, as a Swift value: `String`,
    /// `Int` (for every integer type), `Double`, `Bool`, `Date`, `Data`,
    /// `UUID`, a `ManagedObject` (to-one), `Set<ManagedObject>` (to-many), or nil.
    ///
    /// ```swift
    /// let name = recipe.value(forKey: "name") as? String
    /// ```
    ///
    /// An unknown key is a programming error and traps, as in Core Data.
    public final func value(forKey key: String) -> Any? {
        let index = propertyIndex(forKey: key)
        let value = storedValue(at: index)
        switch value {
        case .null: return nil
        case .string(let s): return s
        case .integer(let i): return Int(i)
        case .double(let d): return d
        case .bool(let b): return b
        case .date(let d): return d
        case .data(let d): return d
        case .uuid(let u): return u
        case .object(let id): return context?.registeredOrFault(for: id)
        case .objects(let ids):
            guard let context else { return Set<ManagedObject>() }
            return Set(ids.map { context.registeredOrFault(for: $0) })
        }
    }

    /// Sets the property named `key` from a Swift value of the kinds
    /// ``value(forKey:)`` returns (any fixed-width integer for integers, a
    /// set or array of objects for to-many). An unknown key or a value of the
    /// wrong type is a programming error and traps; ``setPropertyValue(_:forKey:)``
    /// throws instead.
    public final func setValue(_ value: Any?, forKey key: String) {
        do {
            try setPropertyValue(Self.propertyValue(from: value), forKey: key)
        } catch {
            preconditionFailure("Strata: setValue(_:forKey: \(key)) on \(entity.name): \(error.message)")
        }
    }

    /// The value of the property named `key`; nil if the entity has no such property.
    public final func propertyValue(forKey key: String) -> PropertyValue? {
        entity.propertyIndex[key].map { storedValue(at: $0) }
    }

    /// Sets the property named `key`, checking the key and the value's type.
    /// Setting a relationship keeps its inverse in step on the other objects.
    public final func setPropertyValue(_ value: PropertyValue, forKey key: String) throws(StrataError) {
        guard let index = entity.indexOfProperty(key) else {
            throw StrataError(.invalidArgument, "\(entity.name) has no property \(key)")
        }
        try setPropertyValue(value, at: index)
    }

    /// Sets property `index`, checking the value's type.
    @usableFromInline
    final func setPropertyValue(_ value: PropertyValue, at index: Int) throws(StrataError) {
        guard entity.accepts(value, at: index) else {
            let key = entity.properties[index].name
            let expected: String
            switch entity.properties[index] {
            case .attribute(let a): expected = "\(a.type)"
            case .relationship(let r): expected = r.isToMany ? "a set of \(r.destinationEntityName)" : "a \(r.destinationEntityName) or nil"
            }
            throw StrataError(.invalidArgument, "\(entity.name).\(key) holds \(expected); \(value) does not fit")
        }
        setStoredValue(value, at: index)
    }

    /// Adds `object` to the to-many relationship `key` (and sets the inverse),
    /// without building the whole set.
    public final func add(_ object: ManagedObject, to key: String) {
        changeMembership(of: object, in: key, adding: true)
    }

    /// Removes `object` from the to-many relationship `key` (and clears the inverse).
    public final func remove(_ object: ManagedObject, from key: String) {
        changeMembership(of: object, in: key, adding: false)
    }

    private final func changeMembership(of object: ManagedObject, in key: String, adding: Bool) {
        let index = propertyIndex(forKey: key)
        checkQueue()
        fulfill()
        let id = object.objectID
        // Asked of the value without keeping its set: the edit below then
        // holds the set's only reference and changes it in place.
        let holds: Bool
        switch values[index] {
        case .objects(let ids): holds = ids.contains(id)
        default: preconditionFailure("Strata: \(entity.name).\(key) is not to-many")
        }
        guard !adding || id.entity === entity.destinations[index] else {
            preconditionFailure("Strata: \(entity.name).\(key) cannot hold a \(id.entity.name)")
        }
        guard holds != adding else { return }
        if let context, !flags.contains(.invalidated) {
            context.changeMembership(of: self, at: index, id: id, adding: adding)
        } else {
            editMembers(at: index) { ids in
                if adding { ids.insert(id) } else { ids.remove(id) }
            }
        }
    }

    // MARK: Changes

    /// The properties changed since the object was last saved or refreshed,
    /// with their new values (every non-empty property of an inserted object).
    public final func changedValues() -> [String: PropertyValue] {
        checkQueue()
        guard !flags.contains(.fault) else { return [:] }
        var changes: [String: PropertyValue] = [:]
        for (i, property) in entity.properties.enumerated() {
            let base = committed?[i] ?? entity.initialValues[i]
            if values[i] != base || (committed == nil && values[i] != .null && values[i] != .objects([])) {
                changes[property.name] = values[i]
            }
        }
        return changes
    }

    /// The values of `keys` (every property when nil) as last saved or
    /// fetched, before this context's changes; empty for an inserted object.
    public final func committedValues(forKeys keys: [String]?) -> [String: PropertyValue] {
        checkQueue()
        fulfill()
        guard let committed else { return [:] }
        var result: [String: PropertyValue] = [:]
        for (i, property) in entity.properties.enumerated() where keys?.contains(property.name) ?? true {
            result[property.name] = committed[i]
        }
        return result
    }

    // MARK: Internal

    @usableFromInline
    final func propertyIndex(forKey key: String) -> Int {
        guard let index = entity.indexOfProperty(key) else {
            preconditionFailure("Strata: entity \(entity.name) has no property named \(key)")
        }
        return index
    }

    /// The position of the property a typed wrapper stands for, by the
    /// wrapper's key path (``WrapperIndexes``); `key` reads the property's
    /// name from the wrapper, the first time only.
    @usableFromInline
    final func propertyIndex(forWrapper storageKeyPath: AnyKeyPath, key: () -> String) -> Int {
        entity.wrapperIndexes.position(of: storageKeyPath) { propertyIndex(forKey: key()) }
    }

    /// Every public read goes through here, and registers with Observation
    /// where the context tracks it.
    @usableFromInline
    final func storedValue(at index: Int) -> PropertyValue {
        checkQueue()
        if isObservationTracked { observeAccess(at: index) }
        fulfill()
        return values[index]
    }

    /// Every write goes through here: change tracking, and inverse upkeep for relationships.
    final func setStoredValue(_ value: PropertyValue, at index: Int) {
        checkQueue()
        fulfill()
        guard values[index] != value else { return }
        // No context, or one the object left (found deleted at the source,
        // ``ManagedObjectContext/invalidate(_:)``): a value of its own, which
        // no context tracks or saves.
        guard let unmanaged = link?.unmanaged, !flags.contains(.invalidated) else {
            values[index] = value
            return
        }
        write(value, at: index, in: unmanaged)
    }

    @inline(__always)
    private final func write(_ value: PropertyValue, at index: Int, in unmanaged: Unmanaged<ManagedObjectContext>) {
        // At +0: a retain and release of the context per write showed up in
        // every import profile.
        unmanaged._withUnsafeGuaranteedRef { context in
            if entity.destinations[index] != nil {
                context.setRelationship(of: self, at: index, to: value)
            } else {
                context.objectWillChange(self, at: index)
                changingValue(at: index) { values[index] = value }
            }
        }
    }

    static func propertyValue(from value: Any?) throws(StrataError) -> PropertyValue {
        switch value {
        case nil: return .null
        case let v as PropertyValue: return v
        case let v as String: return .string(v)
        case let v as Bool: return .bool(v)
        case let v as any BinaryInteger:
            guard let i = Int64(exactly: v) else { throw StrataError(.invalidArgument, "\(v) does not fit in 64 bits") }
            return .integer(i)
        case let v as Double: return .double(v)
        case let v as Float: return .double(Double(v))
        case let v as Date: return .date(v)
        case let v as Data: return .data(v)
        case let v as UUID: return .uuid(v)
        case let v as ManagedObject: return .object(v.objectID)
        case let v as ObjectID: return .object(v)
        case let v as any Sequence<ManagedObject>: return .objects(Set(v.map(\.objectID)))
        case let v as any Sequence<ObjectID>: return .objects(Set(v))
        default: throw StrataError(.invalidArgument, "\(type(of: value!)) is not a property value type")
        }
    }
}

extension ManagedObject {
    /// Edits the set of the to-many relationship at `index` where it lies
    /// (``PropertyValue/editMembers(_:)``).
    @inline(__always)
    final func editMembers(at index: Int, _ edit: (inout Set<ObjectID>) -> Void) {
        values[index].editMembers(edit)
    }
}
