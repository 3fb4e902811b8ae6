import Foundation

extension ManagedObjectContext {
    /// The values `request` asks for, computed over the objects a fetch
    /// with its predicate would return here (pending changes of this
    /// context and its ancestors included, contract C13); no object
    /// is registered or materialized to answer.
    ///
    /// ```swift
    /// let perAuthor = try context.fetch(DictionaryFetchRequest<Recipe>(
    ///     propertiesToFetch: ["author", .count(), .max("servings")],
    ///     groupBy: ["author"]))
    /// ```
    ///
    /// A count per group whose grouped attributes lead an index, with no
    /// predicate or one that index's ranges express exactly, reads the
    /// index's entries and no record (``explain(_:)-(DictionaryFetchRequest<Root>)``
    /// says so). Any other request reads each match's record where it lies,
    /// decoding only the properties it asks for; an index the predicate can
    /// use narrows which records are read, as for an object fetch.
    public func fetch<Root: ManagedObject>(_ request: DictionaryFetchRequest<Root>) throws(StrataError) -> [DictionaryResult] {
        beginRead()
        let matches = request.matchRequest
        let plan = try DictionaryPlan(request, entity: try matches.entity(in: model))
        let builder = DictionaryResultBuilder(plan)
        if let indexPlan = groupCountPlan(plan, matches) {
            try countGroups(matches, plan, indexPlan, into: builder)
            return builder.results(request)
        }
        if try aggregateInStore(matches, plan, into: builder) { return builder.results(request) }
        var fields = RecordCoding.FieldOffsets(count: (plan.propertiesRead.last ?? -1) + 1)
        try forEachMatch(of: matches, rows: .lent) { match, row throws(StrataError) in
            // Not a switch over the pair: a tuple's metadata is looked up at
            // run time, once per match.
            if let row {
                switch row {
                case .stored(let record):
                    guard fields.locate(in: record.bytes, entity: plan.entity) else {
                        throw RecordCoding.undecodable(record.id, format: record.bytes.first)
                    }
                    try builder.add(EncodedValues(raw: record.bytes, fields: fields, id: record.id))
                case .pending(let snapshot), .fetched(let snapshot), .cached(let snapshot):
                    try builder.add(DecodedValues(id: match.objectID, values: snapshot.values))
                case .indexed:
                    preconditionFailure("Strata: a dictionary fetch reads every record")
                }
            } else if case .registered(let object) = match {
                try builder.add(DecodedValues(id: object.objectID, values: object.values))
            } else {
                preconditionFailure("Strata: a dictionary fetch is lent every row it reads")
            }
        }
        return builder.results(request)
    }

    /// How a dictionary fetch reads the store (see ``QueryPlan``): an index's
    /// entries alone for a count per group (`… FOR GROUP BY`), else as an
    /// object fetch with its predicate would.
    ///
    /// ```swift
    /// print(try context.explain(request))
    /// // SCAN Recipe USING INDEX (servings) FOR GROUP BY
    /// ```
    public func explain<Root: ManagedObject>(_ request: DictionaryFetchRequest<Root>) throws(StrataError) -> QueryPlan {
        let matches = request.matchRequest
        let plan = try DictionaryPlan(request, entity: try matches.entity(in: model))
        if let indexPlan = groupCountPlan(plan, matches) { return indexPlan }
        return try explain(matches)
    }

    // MARK: Counting groups from an index

    /// The plan of an index whose leading attributes are the grouped ones,
    /// whose ranges express the whole predicate (or there is none), when
    /// the request asks only for the grouped values and counts. Nil otherwise.
    private func groupCountPlan<Root>(_ plan: DictionaryPlan, _ request: FetchRequest<Root>) -> QueryPlan? {
        guard plan.countsGroupsOnly else { return nil }
        let entity = plan.entity
        var test: ValueTest?
        if let predicate = request.predicate {
            guard let compiled = ValueTest.compile(predicate, entity: entity) else { return nil }
            test = compiled
        }
        guard persistentStoreCoordinator.storeReadsIndexes else { return nil }
        return QueryPlanner.groupCountPlan(test, entity: entity, grouping: plan.groupProperties)
    }

    /// Counts the matches per group from the entries of `indexPlan`'s
    /// index, in which a group's entries are one run: each run is counted
    /// and its values decoded once.
    ///
    /// An object whose values here or above the store may differ from the
    /// store's (see ``possiblyStaleObjects(of:source:updatedAmong:)``) is set aside from
    /// the entries and judged on its own values, as a sorted page does
    /// (``firstInOrder``); so are this context's inserts.
    private func countGroups<Root>(
        _ request: FetchRequest<Root>, _ plan: DictionaryPlan, _ indexPlan: QueryPlan, into builder: DictionaryResultBuilder
    ) throws(StrataError) {
        let entity = plan.entity
        let source = try SourceView(of: self)
        let aside = objectsSetAside(of: entity, source: source)
        let number = indexPlan.indexNumber!
        let leading = Array(entity.indexedProperties[number].prefix(plan.groupProperties.count))
        let types = leading.map { entity.attributeTypes[$0]! }
        let positions = leading.map { plan.groupProperties.firstIndex(of: $0)! }
        let prefixLength = IndexKeyCoding.prefix(of: entity, index: number).count
        func malformed() -> StrataError {
            StrataError(.corruptRecord, "an entry of \(entity.name)'s index \(indexPlan.index!) is malformed")
        }
        // Each run of entries sharing their grouped values: the bytes of
        // those values, and how many entries. Decoded once per group, after.
        var runs: [(values: [UInt8], count: Int)] = []
        try persistentStoreCoordinator.forEachEntry(of: entity, in: indexPlan) { entry, primaryKey throws(StrataError) in
            if !aside.isEmpty && aside.contains(ObjectID(entity: entity, primaryKey: primaryKey, isTemporary: false)) { return }
            var end = prefixLength
            for type in types {
                guard let next = IndexKeyCoding.end(ofValueAt: end, in: entry, type: type) else { throw malformed() }
                end = next
            }
            let values = UnsafeRawBufferPointer(rebasing: entry[prefixLength..<end])
            if let last = runs.indices.last, runs[last].values.withUnsafeBytes({ equalBytes($0, values) }) {
                runs[last].count += 1
            } else {
                runs.append((Array(values), 1))
            }
        }
        var key = [PropertyValue](repeating: .null, count: leading.count)
        for run in runs {
            try run.values.withBytes { (raw) throws(StrataError) in
                var offset = 0
                for (i, type) in types.enumerated() {
                    guard let (value, end) = IndexKeyCoding.value(at: offset, in: raw, type: type) else { throw malformed() }
                    key[positions[i]] = value
                    offset = end
                }
            }
            builder.add(count: run.count, toGroup: key)
        }

        try addMatches(setAside: aside, of: request, source: source, test: nil, into: builder)
    }

    /// Adds the objects of `aside` that match `request` as this context
    /// sees them (and, where it includes pending changes, its inserts)
    /// to `builder`: what a count of a store's entries left out.
    private func addMatches<Root>(
        setAside aside: Set<ObjectID>, of request: FetchRequest<Root>, source: SourceView, test: ValueTest?, into builder: DictionaryResultBuilder
    ) throws(StrataError) {
        var evaluation = try PredicateEvaluation(request.predicate, entity: builder.plan.entity, context: self, test: test)
        try forEachMatchSetAside(aside, of: builder.plan.entity, source: source, evaluation: &evaluation,
                                 includesPending: request.includesPendingChanges) { match throws(StrataError) in
            switch match {
            case .registered(let object): try builder.add(DecodedValues(id: object.objectID, values: object.values))
            case .unregistered(let id, let row): try builder.add(DecodedValues(id: id, values: try row!.snapshot().values))
            }
        }
    }

    // MARK: Aggregates in another store

    /// Computes the request's groups and aggregates as a store other than
    /// the log store computes them (``PersistentStore/aggregates(of:matching:groupedBy:computing:excluding:)``:
    /// a `GROUP BY` on PostgreSQL), when its predicate translates and it
    /// groups by attributes: over the stored objects but those this context
    /// and the levels above changed (or hold stale), which are judged and
    /// added as they see them. False, having added nothing, where the store
    /// cannot.
    private func aggregateInStore<Root>(
        _ request: FetchRequest<Root>, _ plan: DictionaryPlan, into builder: DictionaryResultBuilder
    ) throws(StrataError) -> Bool {
        let coordinator = persistentStoreCoordinator
        guard plan.isGrouped, !coordinator.storeReadsIndexes,
              plan.groupProperties.allSatisfy({ plan.entity.attributeTypes[$0] != nil }) else { return false }
        guard let (test, narrowing) = storeTranslation(of: request.predicate, entity: plan.entity) else { return false }
        let source = try SourceView(of: self)
        let aside = objectsSetAside(of: plan.entity, source: source)
        guard let groups = try coordinator.storedAggregates(
            of: plan.entity, matching: narrowing, groupedBy: plan.groupProperties, computing: builder.storeColumns, excluding: Array(aside)
        ) else { return false }
        for group in groups { try builder.add(group.results, toGroup: group.values) }
        try addMatches(setAside: aside, of: request, source: source, test: test, into: builder)
        return true
    }
}

/// Whether two byte runs are equal.
@inline(__always)
private func equalBytes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    a.count == b.count && (a.count == 0 || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0)
}
