/// One batch of a batch insert's rows as objects: each row's values over
/// the entity's initial values, and rows that share the values of a
/// uniqueness constraint made one object (the later row's properties over
/// the earlier one's).
struct BatchInsertion {
    let entity: EntityDescription
    /// Each object's values.
    private var values: [[PropertyValue]] = []
    /// Each object's properties that its rows gave (only where the entity
    /// has uniqueness constraints: an update of a stored object writes
    /// those and keeps the others).
    private var given: [PropertyIndexSet] = []
    /// The batch's distinct unique keys, in the order first claimed, and
    /// the object claiming each.
    private var claimedKeys: [UniqueKey] = []
    private var claimants: [Int] = []
    /// Each key's position in `claimedKeys`.
    private var claims: [UniqueKey: Int] = [:]
    /// Each object's key in each unique index, by its position in
    /// `claimedKeys` (nil: a value of it is null), `uniqueIndexCount` per
    /// object.
    private var keys: [Int?] = []
    /// `claimedKeys`, ascending: what the batch looks up.
    private(set) var sortedKeys: [UniqueKey] = []
    /// Where each of `keys` is among `sortedKeys` (nil: no key).
    private var positions: [Int?] = []
    /// One object's keys while ``add(_:giving:)`` adds it.
    private var objectKeys: [UniqueKey?] = []
    /// The stored holders of `sortedKeys` looked up before the write, off
    /// the save lock (``lookUpHoldersAhead(at:)``).
    private var holdersAhead: HoldersReadAhead?
    private let uniqueIndexCount: Int

    init(entity: EntityDescription, rows: ArraySlice<[String: PropertyValue]>) {
        self.init(entity: entity, reserving: rows.count)
        for row in rows { add(row) }
        sortKeys()
    }

    /// Rows that are each object's values whole (``BatchInsertRequest/init(_:count:fill:)``):
    /// a stored object one meets takes every attribute from it.
    init(entity: EntityDescription, filledRows rows: [[PropertyValue]]) {
        self.init(entity: entity, reserving: rows.count)
        var everyAttribute = PropertyIndexSet()
        for index in entity.properties.indices where entity.destinations[index] == nil { everyAttribute.insert(index) }
        for row in rows { add(row, giving: everyAttribute) }
        sortKeys()
    }

    private init(entity: EntityDescription, reserving count: Int) {
        self.entity = entity
        uniqueIndexCount = entity.uniqueIndexNumbers.count
        values.reserveCapacity(count)
        if uniqueIndexCount > 0 {
            given.reserveCapacity(count)
            keys.reserveCapacity(count * uniqueIndexCount)
            claims.reserveCapacity(count * uniqueIndexCount)
            claimedKeys.reserveCapacity(count * uniqueIndexCount)
            claimants.reserveCapacity(count * uniqueIndexCount)
        }
    }

    /// Sets `sortedKeys` and `positions`, once every row is in: each key's
    /// position follows from the order that sorts them, not from a search.
    private mutating func sortKeys() {
        guard !claimedKeys.isEmpty else { return }
        let order = UniqueKey.order(of: claimedKeys)
        sortedKeys = order.map { claimedKeys[$0] }
        var rank = [Int](repeating: 0, count: order.count)
        for (position, claimed) in order.enumerated() { rank[claimed] = position }
        positions = keys.map { $0.map { rank[$0] } }
    }

    /// A row checked by ``BatchValues/checkInsert(_:of:)``.
    private mutating func add(_ row: [String: PropertyValue]) {
        var objectValues = entity.initialValues
        var rowGives = PropertyIndexSet()
        for (name, value) in row {
            let index = entity.indexOfProperty(name)!
            objectValues[index] = value
            rowGives.insert(index)
        }
        add(objectValues, giving: rowGives)
    }

    /// An object's values, of which the row gave the properties `rowGives` holds.
    private mutating func add(_ objectValues: [PropertyValue], giving rowGives: PropertyIndexSet) {
        guard uniqueIndexCount > 0 else {
            values.append(objectValues)
            return
        }
        objectKeys.removeAll(keepingCapacity: true)
        var earlier: Int?
        for index in entity.uniqueIndexNumbers {
            let key = IndexKeyCoding.uniqueKey(objectValues, of: entity, index: index).map(UniqueKey.init)
            if earlier == nil, let key, let claimed = claims[key] { earlier = claimants[claimed] }
            objectKeys.append(key)
        }
        if let earlier {
            rowGives.forEach { values[earlier][$0] = objectValues[$0] }
            given[earlier].formUnion(rowGives)
            for i in 0..<uniqueIndexCount {
                let key = IndexKeyCoding.uniqueKey(values[earlier], of: entity, index: entity.uniqueIndexNumbers[i]).map(UniqueKey.init)
                var claimed: Int?
                if let key { claimed = claims[key] ?? claim(key, by: earlier) }
                keys[earlier * uniqueIndexCount + i] = claimed
            }
        } else {
            // No key of the object was claimed: it claims them all.
            for key in objectKeys {
                var claimed: Int?
                if let key { claimed = claim(key, by: values.count) }
                keys.append(claimed)
            }
            values.append(objectValues)
            given.append(rowGives)
        }
    }

    /// Claims `key`, which no object of the batch claimed, for `object`;
    /// returns its position in `claimedKeys`.
    private mutating func claim(_ key: UniqueKey, by object: Int) -> Int {
        claims[key] = claimedKeys.count
        claimedKeys.append(key)
        claimants.append(object)
        return claimedKeys.count - 1
    }

    /// Looks the batch's unique keys up now, before its write and off the
    /// save lock (a batch built ahead while the one before it is written).
    /// Its write takes the answer only where no write since can have
    /// changed it (``storedHolders(at:now:after:)``); it looks up again
    /// whatever it cannot tell. Nothing is kept for another store than the
    /// log store (other processes write it unseen), or when the store
    /// moved on during the lookup or it failed (the write's lookup then
    /// reports the failure).
    mutating func lookUpHoldersAhead(at coordinator: PersistentStoreCoordinator) {
        guard !sortedKeys.isEmpty, coordinator.externalStore == nil else { return }
        guard let before = try? coordinator.storeReadVersion(),
              let holders = try? coordinator.firstStoredUniqueHolders(ofSorted: sortedKeys),
              let after = try? coordinator.storeReadVersion(), after == before
        else { return }
        holdersAhead = HoldersReadAhead(version: before, holders: holders)
    }

    /// The stored holder of each of `sortedKeys` at `now`, the store's
    /// version under the save lock: the answer looked up ahead when the
    /// store is still at its version; when the one write since was the
    /// request's batch before this one, and the entity has one uniqueness
    /// constraint (then a batch changes the holders of the keys it claims
    /// and of no other key: an object it updates was found by its key and
    /// keeps it), that answer with those keys looked up again; else looked
    /// up whole.
    private func storedHolders(at coordinator: PersistentStoreCoordinator, now: StoreReadVersion, after previous: WrittenUniqueKeys?) throws(StrataError) -> [ObjectID?] {
        guard let ahead = holdersAhead else { return try coordinator.firstStoredUniqueHolders(ofSorted: sortedKeys) }
        if ahead.version == now { return ahead.holders }
        guard uniqueIndexCount == 1, let previous, previous.before == ahead.version, previous.after == now else {
            return try coordinator.firstStoredUniqueHolders(ofSorted: sortedKeys)
        }
        let rewritten = UniqueKey.positions(ofCommon: sortedKeys, previous.sortedKeys)
        guard !rewritten.isEmpty else { return ahead.holders }
        var holders = ahead.holders
        let found = try coordinator.firstStoredUniqueHolders(ofSorted: rewritten.map { sortedKeys[$0] })
        for (position, holder) in zip(rewritten, found) { holders[position] = holder }
        return holders
    }

    /// The batch as changes for the coordinator, under its save lock, with
    /// the store at version `now`: an object whose key a stored object
    /// holds updates it (the first such holder, by the order of the unique
    /// indexes); the others are inserted with primary keys reserved now.
    /// `previous`: what the request's batch before this one wrote, if it
    /// wrote the store's last version.
    func changes(
        at coordinator: PersistentStoreCoordinator, authors: TransactionAuthors, now: StoreReadVersion, after previous: WrittenUniqueKeys?
    ) throws(StrataError) -> ChangeSet {
        var changes = ChangeSet()
        changes.authors = authors
        // Each object's holder: that of the first of its keys, by the order
        // of the unique indexes, that a stored object holds.
        var holder: [ObjectID?] = Array(repeating: nil, count: values.count)
        // The stored holder of each of `sortedKeys`.
        var holders: [ObjectID?] = []
        if !claims.isEmpty {
            // Found by each key an object holds now, not by whom `claims`
            // names: a row merged into an earlier object can move it off a
            // key it claimed, or give it one another object claimed.
            holders = try storedHolders(at: coordinator, now: now, after: previous)
            for j in values.indices {
                for case let position? in positions[j * uniqueIndexCount..<(j + 1) * uniqueIndexCount] {
                    if let id = holders[position] {
                        holder[j] = id
                        break
                    }
                }
            }
        }
        // With one unique index the lookup settles every question the
        // coordinator's save would ask: every new object's key was found
        // unheld, no two objects of the batch share one, and an update keeps
        // the key its stored object was found by. With more, a row can meet
        // one stored object on one index and another on the next; the
        // batch's own check (``keysAreClear(holder:holders:)``)
        // settles the common case.
        changes.uniquenessChecked = uniqueIndexCount <= 1
        let newCount = holder.lazy.filter { $0 == nil }.count
        var nextKey = coordinator.reservePrimaryKeys(for: entity, count: UInt64(newCount)).lowerBound
        changes.inserted.reserveCapacity(newCount)
        changes.insertedValues.reserveCapacity(newCount)
        // Stored objects met, in the order first met, and the values the
        // batch gives them over their stored ones.
        var updates: [ObjectID: Int] = [:]
        var updatedIDs: [ObjectID] = []
        var objectOf: [Int] = []  // per object of the batch holding a stored one: its position in `updatedIDs`
        for j in values.indices {
            guard let id = holder[j] else {
                changes.inserted.append(ObjectID(entity: entity, primaryKey: nextKey, isTemporary: false))
                changes.insertedValues.append(values[j])
                nextKey += 1
                continue
            }
            if let known = updates[id] {
                objectOf.append(known)
            } else {
                updates[id] = updatedIDs.count
                objectOf.append(updatedIDs.count)
                updatedIDs.append(id)
            }
        }
        if !changes.uniquenessChecked {
            // Two objects of the batch meeting one stored object merge their
            // values there: the key that merge makes is not known here.
            changes.uniquenessChecked = updatedIDs.count == values.count - newCount
                && keysAreClear(holder: holder, holders: holders)
        }
        guard !updatedIDs.isEmpty else { return changes }
        // Each stored object's new values: the properties its rows give,
        // later rows' over earlier ones'.
        var newValues = Array(repeating: [(index: Int, value: PropertyValue)](), count: updatedIDs.count)
        var next = 0
        for j in values.indices where holder[j] != nil {
            let u = objectOf[next]
            next += 1
            // Room made once: most stored objects meet one row.
            if newValues[u].isEmpty { newValues[u].reserveCapacity(given[j].count) }
            given[j].forEach { index in
                if let k = newValues[u].firstIndex(where: { $0.index == index }) {
                    newValues[u][k].value = values[j][index]
                } else {
                    newValues[u].append((index, values[j][index]))
                }
            }
        }
        // In key order: the save's records then go to the engine as one
        // ascending run.
        let order = updatedIDs.indices.sorted { updatedIDs[$0].primaryKey < updatedIDs[$1].primaryKey }
        guard changes.uniquenessChecked else {
            // A row may claim another unique index's key that a third
            // object holds: the coordinator's save checks the updates, so
            // it needs them whole.
            for (u, stored) in zip(order, try coordinator.storedSnapshots(order.map { updatedIDs[$0] })) {
                guard let stored else { throw StrataError(.corruptRecord, "\(entity.name)'s unique index names \(updatedIDs[u]), which is not stored") }
                // Changed as a patch judges it: stored otherwise than the
                // new value would be (another normalization, -0.0 for 0.0).
                guard newValues[u].contains(where: { !RecordCoding.encodesAlike(stored.values[$0.index], $0.value) }) else { continue }
                var values = stored.values
                for (index, value) in newValues[u] { values[index] = value }
                changes.update(updatedIDs[u], from: stored, to: values)
            }
            changes.basesAreStored = true
            return changes
        }
        // The store patches each record where it lies, unless the patch
        // changes a value an index holds (a unique one included: checked).
        changes.partialUpdates = PartialUpdates(order.map { updatedIDs[$0] }, .each(order.map { newValues[$0] }), requiresStored: true)
        changes.basesAreStored = true
        return changes
    }

    /// With two or more unique indexes, whether the keys the batch's objects
    /// end with leave the coordinator's check nothing to find, by what the
    /// store holds under the save lock (`holders`, by `positions`): each
    /// key an object claims is held by no stored object or by the one it
    /// updates (`holder`), no two objects of the batch claim one key, and
    /// each update gives all or none of a constraint's attributes (a key
    /// of stored and given values mixed is not known here). False, and the
    /// coordinator checks, whenever that cannot be told.
    private func keysAreClear(holder: [ObjectID?], holders: [ObjectID?]) -> Bool {
        // By a key's position: the object of the batch claiming it, or -1.
        var claimant = [Int](repeating: -1, count: holders.count)
        for j in values.indices {
            for i in 0..<uniqueIndexCount {
                if holder[j] != nil {
                    let attributes = entity.indexedProperties[entity.uniqueIndexNumbers[i]]
                    let given = attributes.count { self.given[j].contains($0) }
                    // None given: the stored object keeps the key it holds.
                    if given == 0 { continue }
                    if given < attributes.count { return false }
                }
                // A null value: no key, nothing claimed.
                guard keys[j * uniqueIndexCount + i] != nil else { continue }
                guard let position = positions[j * uniqueIndexCount + i] else { return false }
                if let stored = holders[position], stored != holder[j] { return false }
                if claimant[position] != -1 && claimant[position] != j { return false }
                claimant[position] = j
            }
        }
        return true
    }
}

/// A batch's unique keys' stored holders, looked up before its write at
/// the store's version `version`.
struct HoldersReadAhead {
    let version: StoreReadVersion
    let holders: [ObjectID?]
}

/// The unique keys a batch of a request claimed, and the store's versions
/// before and after its write (both read under the save lock).
struct WrittenUniqueKeys {
    let sortedKeys: [UniqueKey]
    let before: StoreReadVersion
    let after: StoreReadVersion
}
