import Dispatch
import Foundation
import SharedTestSupport
import Strata
import StrataStore
import Testing

// Concurrency stress (hardening issue, part 4): four private contexts — two
// children of the view context (the recommended stack), two children of the writer
// (block-save layout) — and the main-queue view context itself insert,
// update, delete, move relationships, fetch, save, push to disk and reset at
// random for a bounded time. Every worker owns its items, and owns one
// counter attribute on each of a few shared counter objects, so under
// `.mergeByPropertyObjectTrump` no save may fail and no update may be lost.
// Checked while it runs (each worker's fetches see exactly its own model) and
// at the end on a reopened store (items, parts, inverses, counters). Every
// worker runs under a watchdog: a deadlock fails the test.
//
// STRATA_STRESS_SECONDS sets the duration (default 4).

final class StressItem: ManagedObject {
    @Attribute("owner") var owner: Int64
    @Attribute("serial") var serial: Int64
    @Relationship("parts") var parts: Set<StressPart>
}

final class StressPart: ManagedObject {
    @Attribute("name") var name: String
    @Relationship("item") var item: StressItem?
}

final class StressCounter: ManagedObject {
    @Attribute("index") var index: Int64
}

private let workerCount = 5  // four background workers and the main queue
private let counterCount = 3

private func makeStressModel() -> ManagedObjectModel {
    try! ManagedObjectModel(entities: [
        EntityDescription(name: "StressItem", managedObjectClass: StressItem.self, properties: [
            .attribute("owner", .integer64),
            .attribute("serial", .integer64),
            .toMany("parts", "StressPart", inverse: "item", deleteRule: .cascade),
        ]),
        EntityDescription(name: "StressPart", managedObjectClass: StressPart.self, properties: [
            .attribute("name", .string),
            .toOne("item", "StressItem", inverse: "parts"),
        ]),
        EntityDescription(name: "StressCounter", managedObjectClass: StressCounter.self, properties:
            [.attribute("index", .integer64)] + (0..<workerCount).map { .attribute("c\($0)", .integer64, defaultValue: .integer(0)) }),
    ])
}

/// What one worker believes: its items (serial → number of parts) and its
/// increments per counter, as saved and as its context sees them now.
private struct WorkerModel {
    var savedItems: [Int64: Int] = [:]
    var items: [Int64: Int] = [:]
    var savedIncrements = [Int](repeating: 0, count: counterCount)
    var increments = [Int](repeating: 0, count: counterCount)
    var nextSerial: Int64 = 1
    var operations = 0
    var failures: [String] = []

    var hasUnsaved: Bool { items != savedItems || increments != savedIncrements }
    mutating func saved() { savedItems = items; savedIncrements = increments }
    mutating func rolledBack() { items = savedItems; increments = savedIncrements }
}

@Suite struct StressTests {
    @Test func contextsInsertUpdateDeleteSaveAndMergeConcurrentlyWithoutLosingAnything() async throws {
        let seconds = Double(ProcessInfo.processInfo.environment["STRATA_STRESS_SECONDS"] ?? "") ?? 4
        let seed = testSeed()
        let directory = TemporaryDirectory()
        let store = directory.path + "/store"
        let container = try PersistentContainer(name: "Stress", model: makeStressModel(), directory: store, options: testStoreOptions())
        container.writerContext.mergePolicy = .mergeByPropertyObjectTrump
        await MainActor.run { container.viewContext.mergePolicy = .mergeByPropertyObjectTrump }
        try container.saveAndWait { context in
            for index in 0..<counterCount { StressCounter(context: context).index = Int64(index) }
        }

        let models = await withTaskGroup(of: (Int, WorkerModel?).self) { group in
            for worker in 0..<workerCount {
                group.addTask {
                    let model = await runOnDedicatedThread(timeout: seconds + 90) {
                        // Timed from the worker's own start: on a loaded machine
                        // (the whole suite at once on two cores) a task may start
                        // seconds late, and a deadline set before it left no time.
                        runWorker(worker, container: container, until: Date().addingTimeInterval(seconds), seed: seed &+ UInt64(worker))
                    }
                    return (worker, model)
                }
            }
            var models = [WorkerModel?](repeating: nil, count: workerCount)
            for await (worker, model) in group { models[worker] = model }
            return models
        }
        for (worker, model) in models.enumerated() {
            guard let model else {
                Issue.record("worker \(worker) did not finish: a deadlock or a hang (seed \(seed))")
                continue
            }
            for failure in model.failures { Issue.record("worker \(worker): \(failure) (seed \(seed))") }
        }
        let finished = models.compactMap { $0 }
        guard finished.count == workerCount else { return }

        // Everything to disk, then a fresh container over the store.
        let flushed = await runOnDedicatedThread(timeout: 60) { () -> String? in
            do { try container.saveAndWait(); try container.coordinator.close(); return nil } catch { return "\(error)" }
        }
        #expect(flushed == .some(nil), "the final save failed")
        let reopened = try PersistentContainer(name: "Stress", model: makeStressModel(), directory: store, options: testStoreOptions())
        defer { try? reopened.coordinator.close() }
        let context = reopened.writerContext
        try context.performAndWait { () throws in
            for (worker, model) in finished.enumerated() {
                let owner = Int64(worker)
                let items = try context.fetch(FetchRequest<StressItem>(predicate: #Predicate { $0.owner == owner }))
                #expect(items.count == Set(items.map(\.serial)).count, "worker \(worker)'s items are on disk twice")
                let found = Dictionary(items.map { ($0.serial, $0.parts.count) }, uniquingKeysWith: { a, _ in a })
                #expect(found == model.savedItems, "worker \(worker)'s items on disk differ from what it saved (seed \(seed))")
                for item in items {
                    for part in item.parts where part.item !== item {
                        Issue.record("item \(worker)/\(item.serial) lists part \(part.name), whose item is another")
                    }
                }
            }
            for part in try context.fetch(FetchRequest<StressPart>()) {
                guard let item = part.item, item.parts.contains(part) else {
                    Issue.record("part \(part.name) has no item, or its item does not list it (seed \(seed))")
                    continue
                }
            }
            for counter in try context.fetch(FetchRequest<StressCounter>()) {
                let index = Int(counter.index)
                for (worker, model) in finished.enumerated() {
                    let value = counter.propertyValue(forKey: "c\(worker)")
                    #expect(value == .integer(Int64(model.savedIncrements[index])),
                            "counter \(index): worker \(worker)'s increments were lost or doubled (seed \(seed))")
                }
            }
        }
        let operations = finished.map(\.operations).reduce(0, +)
        print("stress: \(operations) operations by \(workerCount) contexts in \(seconds) s, \(finished.map(\.savedItems.count).reduce(0, +)) items in the end (seed \(seed))")
        #expect(operations > 100)
    }
}

/// A worker's model, touched by the worker's thread and by the main-queue
/// blocks that thread waits for synchronously (`@unchecked Sendable`: never
/// by two at once — the thread is blocked while its main-queue block runs).
private final class WorkerState: @unchecked Sendable {
    var model = WorkerModel()
}

/// One worker's loop. Workers 0–3 own a private context (even: a child of
/// the view context; odd: a child of the writer); worker 4 is the main queue
/// using the view context.
private func runWorker(_ worker: Int, container: PersistentContainer, until deadline: Date, seed: UInt64) -> WorkerModel {
    var random = SeededGenerator(seed: seed)
    let state = WorkerState()
    let onMain = worker == workerCount - 1
    let context = onMain ? container.viewContext : container.newBackgroundContext(childOfWriter: worker % 2 == 1)
    if !onMain { context.mergePolicy = .mergeByPropertyObjectTrump }
    let owner = Int64(worker)

    /// One operation, as one block of the worker's context.
    func step() {
        let choice = Int.random(in: 0..<100, using: &random)
        let pick = Int.random(in: 0..<1000, using: &random)
        if choice >= 90 && !onMain {
            // Push what the parent holds towards the disk.
            if worker % 2 == 0 {
                container.save(wait: pick % 2 == 0)
            } else {
                let writer = container.writerContext
                do { try writer.performAndWait { () throws(StrataError) in try writer.save() } } catch { state.model.failures.append("writer save: \(error)") }
            }
            return
        }
        let body = {
            do {
                switch choice {
                case 0..<30: try insert(pick)
                case 30..<42: try delete(pick)
                case 42..<54: try move(pick)
                case 54..<72: try increment(pick)
                case 72..<82: try check(pick)
                case 82..<88: save()
                default:
                    if onMain {
                        container.save(wait: false)
                        state.model.saved()
                    } else if !state.model.hasUnsaved {
                        context.reset()
                    }
                }
            } catch {
                state.model.failures.append("operation \(choice): \(error)")
            }
        }
        if onMain { DispatchQueue.main.sync(execute: body) } else { context.performAndWait(body) }
        state.model.operations += 1
    }

    func fetchItem(_ serial: Int64) throws -> StressItem? {
        try context.fetch(FetchRequest<StressItem>(predicate: #Predicate { $0.owner == owner && $0.serial == serial })).first
    }

    func insert(_ pick: Int) throws {
        let item = StressItem(context: context)
        item.owner = owner
        item.serial = state.model.nextSerial
        for j in 0..<(pick % 4) {
            let part = StressPart(context: context)
            part.name = "\(worker).\(state.model.nextSerial).\(j)"
            part.item = item
        }
        state.model.items[state.model.nextSerial] = pick % 4
        state.model.nextSerial += 1
    }

    func delete(_ pick: Int) throws {
        guard !state.model.items.isEmpty else { return }
        let serial = state.model.items.keys.sorted()[pick % state.model.items.count]
        guard let item = try fetchItem(serial) else { return state.model.failures.append("item \(serial) is missing") }
        context.delete(item)
        state.model.items[serial] = nil
    }

    func move(_ pick: Int) throws {
        let withParts = state.model.items.filter { $0.value > 0 }.keys.sorted()
        guard !withParts.isEmpty, state.model.items.count > 1 else { return }
        let from = withParts[pick % withParts.count]
        let others = state.model.items.keys.sorted().filter { $0 != from }
        let to = others[pick % others.count]
        guard let source = try fetchItem(from), let target = try fetchItem(to), let part = source.parts.first else {
            return state.model.failures.append("items \(from) → \(to) or a part to move is missing")
        }
        part.item = target
        state.model.items[from]! -= 1
        state.model.items[to]! += 1
    }

    func increment(_ pick: Int) throws {
        let index = Int64(pick % counterCount)
        guard let counter = try context.fetch(FetchRequest<StressCounter>(predicate: #Predicate { $0.index == index })).first else {
            return state.model.failures.append("counter \(index) is missing")
        }
        let key = "c\(worker)"
        guard case .integer(let value) = counter.propertyValue(forKey: key) else { return state.model.failures.append("counter \(index) has no \(key)") }
        if value != Int64(state.model.increments[Int(index)]) {
            // Where the stale value comes from: each level's view of the counter.
            var levels: [String] = []
            var level = context.parent
            while let current = level {
                let seen = current.performAndWait { () -> String in
                    let found = try? current.fetch(FetchRequest<StressCounter>(predicate: #Predicate { $0.index == index })).first
                    return "\(current.name): \(found.map { String(describing: $0.propertyValue(forKey: key)) } ?? "none")"
                }
                levels.append(seen)
                level = current.parent
            }
            state.model.failures.append("counter \(index).\(key) reads \(value), expected \(state.model.increments[Int(index)]): an update was lost; \(levels.joined(separator: ", "))")
            state.model.increments[Int(index)] = Int(value)
        }
        try counter.setPropertyValue(.integer(value + 1), forKey: key)
        state.model.increments[Int(index)] += 1
    }

    func check(_ pick: Int) throws {
        let items = try context.fetch(FetchRequest<StressItem>(predicate: #Predicate { $0.owner == owner }))
        let bySerial = Dictionary(grouping: items, by: \.serial)
        for (serial, group) in bySerial where group.count > 1 {
            let same = group.dropFirst().allSatisfy { $0 === group[0] }
            state.model.failures.append("a fetch returns item \(serial) \(group.count) times (\(same ? "the same object" : "distinct objects: \(group.map(\.objectID))"); inserted: \(group.map(\.isInserted)), context: \(context.name)")
        }
        let found = bySerial.mapValues { $0[0].parts.count }
        if found != state.model.items {
            let extra = found.keys.filter { state.model.items[$0] == nil }.sorted()
            let missing = state.model.items.keys.filter { found[$0] == nil }.sorted()
            let differing = found.filter { serial, parts in state.model.items[serial].map { $0 != parts } ?? false }.keys.sorted()
            // Where an extra item comes from: each level's view of it.
            var levels: [String] = []
            for serial in extra {
                var level = context.parent
                while let current = level {
                    let seen = current.performAndWait { () -> String in
                        let found = try? current.fetch(FetchRequest<StressItem>(predicate: #Predicate { $0.owner == owner && $0.serial == serial })).first
                        return "\(current.name): \(found.map { "\($0.objectID) inserted \($0.isInserted) deleted \($0.isDeleted)" } ?? "none")"
                    }
                    levels.append(seen)
                    level = current.parent
                }
            }
            state.model.failures.append("a fetch sees \(found.count) items, the worker has \(state.model.items.count): extra \(extra), missing \(missing), other part counts \(differing) (saved: \(extra.map { state.model.savedItems[$0] != nil })); \(levels.joined(separator: ", "))")
            state.model.items = found
        }
    }

    func save() {
        do {
            try context.save()
            state.model.saved()
        } catch {
            state.model.failures.append("save: \(error)")
            context.rollback()
            state.model.rolledBack()
        }
    }

    while Date() < deadline && state.model.failures.count < 5 { step() }
    // Save what is left; the test then saves everything to disk.
    if onMain {
        DispatchQueue.main.sync { save() }
    } else {
        context.performAndWait { save() }
    }
    return state.model
}
