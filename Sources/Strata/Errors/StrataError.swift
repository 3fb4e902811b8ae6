public import StrataStore

/// The one error type of the object-graph layer: a code to switch on, a
/// message for people, the objects and properties involved, the storage error
/// underneath (if any) and where in Strata it was raised.
///
/// ```swift
/// do {
///     try context.save()
/// } catch let error as StrataError where error.code == .validationFailed {
///     for failure in error.validationFailures { print(failure) }
/// }
/// ```
public struct StrataError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, in a form to switch on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Value: String, Sendable {
            case invalidModel, modelMismatch, noPersistentStore, storeAlreadyAdded
            case storage, corruptRecord, objectNotFound, validationFailed, mergeConflict, constraintConflict
            case invalidArgument, contextMisuse, unsupportedFormat, historyExpired
        }
        let value: Value
        /// The model given to ``ManagedObjectModel/init(entities:)`` is inconsistent.
        public static let invalidModel = Code(value: .invalidModel)
        /// The store was written with a model this one cannot be migrated from
        /// by inference (``StrataError/modelDifferences`` lists what changed),
        /// by a newer version of the app, or it holds no Strata model.
        public static let modelMismatch = Code(value: .modelMismatch)
        /// The coordinator has no store, or a context has neither a parent nor a coordinator.
        public static let noPersistentStore = Code(value: .noPersistentStore)
        /// A coordinator holds one store; a second was added.
        public static let storeAlreadyAdded = Code(value: .storeAlreadyAdded)
        /// The storage engine failed; ``StrataError/cause`` holds its `StoreError`.
        public static let storage = Code(value: .storage)
        /// A record in the store does not decode under the model.
        public static let corruptRecord = Code(value: .corruptRecord)
        /// No object with that ID exists (``ManagedObjectContext/existingObject(with:)``).
        public static let objectNotFound = Code(value: .objectNotFound)
        /// A save was refused; ``StrataError/validationFailures`` lists every reason.
        public static let validationFailed = Code(value: .validationFailed)
        /// A save met newer changes to the same objects under ``MergePolicy/error``;
        /// ``StrataError/conflicts`` lists them.
        public static let mergeConflict = Code(value: .mergeConflict)
        /// A save would leave two objects sharing the values of a uniqueness
        /// constraint, and the merge policy (``MergePolicy/error``) or the
        /// kind of conflict does not resolve it; ``StrataError/constraintConflicts``
        /// lists them. Nothing was saved; the context keeps its changes.
        public static let constraintConflict = Code(value: .constraintConflict)
        /// An argument was out of range, of the wrong entity, or otherwise invalid.
        public static let invalidArgument = Code(value: .invalidArgument)
        /// A context was used in a way its type does not allow.
        public static let contextMisuse = Code(value: .contextMisuse)
        /// The store was written by a newer Strata, in a format this build
        /// does not read (its model schema or its records).
        public static let unsupportedFormat = Code(value: .unsupportedFormat)
        /// Transactions after the history token given were pruned: fetch
        /// history from the start and rebuild what was derived from it
        /// (see ``PersistentHistory``).
        public static let historyExpired = Code(value: .historyExpired)
        public var description: String { value.rawValue }
    }

    /// What went wrong, in a form to switch on.
    public var code: Code
    /// A sentence saying what went wrong, for people.
    public var message: String
    /// For ``Code/validationFailed``: every invalid object and why.
    public var validationFailures: [ValidationFailure] = []
    /// For ``Code/mergeConflict``: every conflicting object and property.
    public var conflicts: [MergeConflict] = []
    /// For ``Code/constraintConflict``: every object whose constrained values another holds.
    public var constraintConflicts: [ConstraintConflict] = []
    /// For ``Code/modelMismatch``: what changed between the store's model
    /// and this one, the changes that are not inferable marked so.
    public var modelDifferences: [ModelDifference] = []
    /// The error underneath this one (a `StoreError` for ``Code/storage``).
    public var cause: (any Error & Sendable)?
    /// Where in Strata's source the error was raised.
    public var location: StoreError.SourceLocation

    init(
        _ code: Code,
        _ message: String,
        cause: (any Error & Sendable)? = nil,
        file: String = #fileID,
        line: Int = #line
    ) {
        self.code = code
        self.message = message
        self.cause = cause
        self.location = StoreError.SourceLocation(file: file, line: line)
    }

    /// An error of `code` raised by a store outside this module (the
    /// PostgreSQL store): `message` says what went wrong and what to do,
    /// and never carries a credential; `cause` is the error underneath.
    @_spi(StoreImplementation)
    public init(
        code: Code,
        message: String,
        cause: (any Error & Sendable)? = nil,
        file: String = #fileID,
        line: Int = #line
    ) {
        self.init(code, message, cause: cause, file: file, line: line)
    }

    static func storage(_ error: StoreError, file: String = #fileID, line: Int = #line) -> StrataError {
        StrataError(.storage, error.message, cause: error, file: file, line: line)
    }

    public var description: String {
        var text = "StrataError.\(code): \(message)"
        for failure in validationFailures { text += "\n  - \(failure)" }
        for conflict in conflicts { text += "\n  - \(conflict)" }
        for conflict in constraintConflicts { text += "\n  - \(conflict)" }
        for difference in modelDifferences { text += "\n  - \(difference)" }
        if let store = cause as? StoreError, store.message == message {
            // Raised by the engine and passed on as it was: its message once.
            text += " [StoreError.\(store.code)]" + store.details
        } else if let cause {
            text += " [cause: \(cause)]"
        }
        return text
    }
}

/// Why one object failed validation during a save.
public struct ValidationFailure: Sendable, Hashable, CustomStringConvertible {
    /// Why an object failed validation.
    public enum Reason: String, Sendable, Hashable {
        /// A non-optional attribute or to-one relationship holds no value.
        case missingValue
        /// A relationship holds an object of the wrong entity.
        case wrongEntity
        /// A relationship points at an object deleted in the saving context.
        case targetDeleted
        /// The object is deleted but a `.deny` relationship still holds objects.
        case deleteDenied
        /// A string, data or to-many value is larger than the store accepts.
        case valueTooLarge
    }
    /// The object that failed.
    public var objectID: ObjectID
    /// The property at fault: the one without a value, the relationship holding the wrong or
    /// deleted object, or the `.deny` relationship that still holds objects.
    public var property: String
    /// What is wrong with it.
    public var reason: Reason
    public var description: String { "\(objectID): \(property): \(reason.rawValue)" }
}

/// One object that two saves changed concurrently.
public struct MergeConflict: Sendable, Hashable, CustomStringConvertible {
    /// The object both sides changed.
    public var objectID: ObjectID
    /// The properties whose values changed at the destination since the saving
    /// context read the object (empty when the destination deleted it).
    public var properties: [String]
    /// True when the destination deleted the object since the saving context read it.
    public var deletedAtDestination: Bool
    public var description: String {
        deletedAtDestination ? "\(objectID): deleted at the destination"
            : "\(objectID): changed at the destination: \(properties.joined(separator: ", "))"
    }
}
