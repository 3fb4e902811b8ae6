extension SourceView {
    /// The objects holding each of `keys` (unique-index entries without
    /// their primary key, distinct and ascending) in this source: an
    /// object's key is taken from the nearest level that changed it, else
    /// from the store's index; objects a level deleted hold none.
    ///
    /// O(the ancestors' pending changes + keys × an index read), never
    /// O(the entity).
    func uniqueHolders(_ keys: [UniqueKey]) throws(StrataError) -> [UniqueKey: [ObjectID]] {
        guard !keys.isEmpty else { return [:] }
        let overlay = overlay { !$0.uniqueIndexNumbers.isEmpty }
        var holders: [UniqueKey: [ObjectID]] = [:]
        if !overlay.isEmpty {
            let wanted = Set(keys)
            for (id, above) in overlay where above.exists != false {
                guard let values = above.values?.values else { continue }
                for index in id.entity.uniqueIndexNumbers {
                    guard let bytes = IndexKeyCoding.uniqueKey(values, of: id.entity, index: index), case let key = UniqueKey(bytes: bytes), wanted.contains(key) else { continue }
                    // Only updated above: it holds the key if it still exists below.
                    if above.exists == nil, try coordinator.snapshot(for: id) == nil { break }
                    holders[key, default: []].append(id)
                }
            }
        }
        for (key, ids) in try coordinator.storedUniqueHolders(keys) {
            // What a level above changed holds what that level says.
            for id in ids where overlay[id] == nil { holders[key, default: []].append(id) }
        }
        return holders
    }
}
