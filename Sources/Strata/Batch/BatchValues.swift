import Foundation
internal import StrataStore

/// The checks of the values a batch request writes against the model.
enum BatchValues {
    /// The position of attribute `name` of `entity`, after checking that it
    /// takes `value`; `request` names the request in the error.
    static func attribute(_ name: String, _ value: PropertyValue, of entity: EntityDescription, request: String) throws(StrataError) -> Int {
        guard let index = entity.indexOfProperty(name), case .attribute = entity.properties[index] else {
            throw StrataError(.invalidArgument, "\(entity.name) has no attribute \(name) (\(request) sets attributes, not relationships)")
        }
        guard entity.accepts(value, at: index) else {
            throw StrataError(.invalidArgument, "\(entity.name).\(name) does not take \(value)")
        }
        return index
    }

    /// Checks one row a batch insert's closure filled (``BatchInsertRequest/init(_:count:fill:)``):
    /// its relationships as they started (a batch insert sets attributes
    /// only), each attribute a value its type takes, and none required nil.
    static func checkFilled(_ values: [PropertyValue], row: Int, of entity: EntityDescription) throws(StrataError) {
        let initial = entity.initialValues
        for index in values.indices {
            let value = values[index]
            if entity.destinations[index] != nil {
                if entity.requiredIndices.contains(index) { throw requiredRelationship(index, of: entity) }
                guard value == initial[index] else {
                    throw StrataError(.invalidArgument, """
                        row \(row) sets the relationship \(entity.name).\(entity.properties[index].name): a batch insert sets attributes only
                        """)
                }
                continue
            }
            if case .null = value {
                guard !entity.requiredIndices.contains(index) else {
                    throw StrataError(.validationFailed, "row \(row) leaves \(entity.name).\(entity.properties[index].name) nil, and it is required")
                }
            } else if !entity.accepts(value, at: index) {
                throw StrataError(.invalidArgument, "row \(row): \(entity.name).\(entity.properties[index].name) does not take \(value)")
            }
        }
    }

    private static func requiredRelationship(_ index: Int, of entity: EntityDescription) -> StrataError {
        StrataError(.validationFailed, """
            \(entity.name).\(entity.properties[index].name) is a required relationship: a batch insert sets attributes only; \
            insert these objects in a context, or make the relationship optional
            """)
    }

    /// Checks every row of a batch insert before any is written: each name
    /// an attribute that takes its value, and every required attribute
    /// given a value or holding a default. A required to-one relationship
    /// fails it whole: a batch insert sets attributes only. Many rows are
    /// checked in parts on as many threads as there are cores; the error
    /// is the first row's that fails, whichever part finds it first.
    static func checkInsert(_ rows: [[String: PropertyValue]], of entity: EntityDescription) throws(StrataError) {
        guard !rows.isEmpty else { return }
        // Per property: required, and required without a default (which
        // every row must give).
        var required = Array(repeating: false, count: entity.properties.count)
        var mustGive = required
        for index in entity.requiredIndices {
            guard case .attribute = entity.properties[index] else { throw requiredRelationship(index, of: entity) }
            required[index] = true
            if case .null = entity.initialValues[index] { mustGive[index] = true }
        }
        let parts = min(ProcessInfo.processInfo.activeProcessorCount, rows.count / rowsPerPart)
        guard parts > 1 else { return try checkInsert(rows[...], of: entity, required: required, mustGive: mustGive) }
        let lock = Lock()
        nonisolated(unsafe) var failures: [Int: StrataError] = [:]  // guarded by `lock`
        let (requiredOnes, mustGiveOnes) = (required, mustGive)
        DispatchQueue.concurrentPerform(iterations: parts) { part in
            let range = rows.count * part / parts..<rows.count * (part + 1) / parts
            do throws(StrataError) {
                try checkInsert(rows[range], of: entity, required: requiredOnes, mustGive: mustGiveOnes)
            } catch {
                lock.withLock { failures[part] = error }
            }
        }
        if let first = lock.withLock({ failures.min { $0.key < $1.key }?.value }) { throw first }
    }

    /// Rows a thread of ``checkInsert(_:of:)`` takes at least.
    private static let rowsPerPart = 10_000

    /// ``checkInsert(_:of:)`` of `rows`, given which properties are
    /// required and which every row must give.
    private static func checkInsert(_ rows: ArraySlice<[String: PropertyValue]>, of entity: EntityDescription,
                                    required: [Bool], mustGive: [Bool]) throws(StrataError) {
        let mustGiveCount = mustGive.lazy.filter { $0 }.count
        for (position, row) in zip(rows.indices, rows) {
            var given = 0
            for (name, value) in row {
                let index = try attribute(name, value, of: entity, request: "a batch insert")
                if case .null = value, required[index] {
                    throw StrataError(.validationFailed, "row \(position) sets \(entity.name).\(name) to nil, and it is required; nothing was inserted")
                }
                if mustGive[index] { given += 1 }
            }
            if given < mustGiveCount, let missing = mustGive.indices.first(where: { mustGive[$0] && row[entity.properties[$0].name] == nil }) {
                throw StrataError(.validationFailed, """
                    row \(position) gives no \(entity.name).\(entity.properties[missing].name), which is required and has no default; \
                    nothing was inserted
                    """)
            }
        }
    }
}
