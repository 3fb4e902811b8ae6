extension ObjectStoreInspector {
    /// How a fetch of entity `name` whose predicate is `condition` reads
    /// this store (see ``QueryPlan``), as ``ManagedObjectContext/explain(_:)-(FetchRequest<Result>)``
    /// says it for a `#Predicate`; with `groupBy`, how a count per group of
    /// those attributes does. The condition is text:
    ///
    /// ```swift
    /// let inspector = try ObjectStoreInspector(directory: path)
    /// try inspector.explain(entity: "Recipe", where: "servings IN (2, 4) AND rating >= 3")
    /// // SEARCH Recipe USING INDEX (servings, rating) (servings IN (2 values) AND rating >= ?)
    /// ```
    public func explain(entity name: String, where condition: String?, groupBy: [String] = []) throws(StrataError) -> String {
        guard let entity = model.entity(named: name) else {
            throw StrataError(.invalidArgument, "the stored model has no entity \(name)")
        }
        let test = try condition.map { (text) throws(StrataError) in try ConditionText.parse(text, entity: entity) }
        guard !groupBy.isEmpty else { return QueryPlanner.plan(test, entity: entity).description }
        var grouping: [Int] = []
        for attribute in groupBy {
            guard let index = entity.propertyIndex[attribute], entity.attributeTypes[index] != nil || !entity.toManyFlags[index] else {
                throw StrataError(.invalidArgument, "\(name) has no attribute or to-one relationship \(attribute) to group by")
            }
            grouping.append(index)
        }
        if let plan = QueryPlanner.groupCountPlan(test, entity: entity, grouping: grouping) { return plan.description }
        return QueryPlanner.plan(test, entity: entity).description + " THEN GROUP BY (reading each record)"
    }
}
