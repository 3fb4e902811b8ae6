import Foundation
import SharedTestSupport
import Testing

@testable import StrataStore

/// Random puts, deletes, batches, reopens, flushes and compactions, checked
/// step by step against a dictionary (the model). Reproduce a failure with
/// STRATA_TEST_SEED=<the seed it prints>.
///
/// With `checkpoints`, every close may save an index checkpoint (half of
/// them flush first, so that one is saved; the others leave writes in the
/// log, to be replayed on top of it or to make it stale), and reopens load it.
@Suite struct ModelTests {
    @Test(arguments: [false, true])
    func randomOperationsMatchADictionary(checkpoints: Bool) throws {
        let seed = testSeed()
        var g = SeededGenerator(seed: seed)
        let dir = ScratchDirectory()
        var options = smallOptions()
        options.compactionDeadRatio = 0.3
        if checkpoints { options.indexCheckpointMinimumKeys = 1 }
        var store = try StrataStore(directory: dir.store, options: options)
        var model: [[UInt8]: [UInt8]] = [:]
        var pinned: (view: ReadView, model: [[UInt8]: [UInt8]])? = nil
        let operations = Int(ProcessInfo.processInfo.environment["STRATA_MODEL_OPERATIONS"] ?? "") ?? (checkpoints ? 30_000 : 100_000)
        var counts = [String: Int]()

        func randomKey() -> [UInt8] {
            let n = Int.random(in: 0..<3000, using: &g)
            var key = Array("k\(n)".utf8)
            if n % 5 == 0 { key += Array(repeating: UInt8(n % 256), count: n % 40) }  // varied lengths and bytes
            return key
        }
        func randomValue() -> [UInt8] {
            let length = Int.random(in: 0...(Int.random(in: 0..<20, using: &g) == 0 ? 3000 : 120), using: &g)
            let fill = UInt8.random(in: 0...255, using: &g)
            return (0..<length).map { fill &+ UInt8(truncatingIfNeeded: $0) }
        }
        func fail(_ message: String) {
            Issue.record("\(message) (seed \(seed))")
        }
        func checkAll(_ step: Int) throws {
            let all = try store.scan(prefix: [])
            let expected = model.keys.sorted { compareArrays($0, $1) < 0 }
            if all.map(\.key) != expected { fail("step \(step): scan keys differ from the model: \(all.count) vs \(expected.count)"); return }
            for kv in all where model[kv.key] != kv.value { fail("step \(step): scan value differs for \(kv.key)"); return }
            if store.statistics.keys != model.count { fail("step \(step): key count \(store.statistics.keys) != \(model.count)") }
        }

        for step in 0..<operations {
            let roll = Int.random(in: 0..<1000, using: &g)
            switch roll {
            case 0..<550:  // a put
                let key = randomKey(), value = randomValue()
                var batch = WriteBatch()
                batch.put(key, value)
                try store.write(batch)
                model[key] = value
                if try store.get(key) != value { fail("step \(step): put then get differs") }
                counts["put", default: 0] += 1
            case 550..<700:  // a delete
                let key = randomKey()
                var batch = WriteBatch()
                batch.delete(key)
                try store.write(batch)
                model[key] = nil
                if try store.get(key) != nil { fail("step \(step): deleted key still present") }
                counts["delete", default: 0] += 1
            case 700..<850:  // a batch mixing both, possibly touching a key twice
                var batch = WriteBatch()
                var touched: [[UInt8]] = []
                for _ in 0..<Int.random(in: 1...25, using: &g) {
                    let key = randomKey()
                    touched.append(key)
                    if Bool.random(using: &g) {
                        let value = randomValue()
                        batch.put(key, value)
                        model[key] = value
                    } else {
                        batch.delete(key)
                        model[key] = nil
                    }
                }
                try store.write(batch)
                for key in touched where try store.get(key) != model[key] { fail("step \(step): batch result differs"); break }
                counts["batch", default: 0] += 1
            case 850..<990:  // a read of a random key
                let key = randomKey()
                if try store.get(key) != model[key] { fail("step \(step): get differs from the model") }
                counts["get", default: 0] += 1
            case 990..<992:  // reopen
                try store.close()
                if checkpoints {
                    if store.recoveryReport.indexCheckpoint != .absent { counts["checkpoint \(store.recoveryReport.indexCheckpoint == .loaded ? "loaded" : "refused")", default: 0] += 1 }
                    options.flushOnCloseThreshold = Bool.random(using: &g) ? 1 : Int.max
                }
                store = try StrataStore(directory: dir.store, options: options)
                pinned = nil
                try checkAll(step)
                counts["reopen", default: 0] += 1
            case 992..<995:
                try store.flush()
                counts["flush", default: 0] += 1
            case 995..<997:
                try store.compact()
                counts["compact", default: 0] += 1
            default:  // pin a view, or check the pinned one
                if let p = pinned {
                    let seen = try p.view.scan(prefix: [])
                    if seen.count != p.model.count || seen.contains(where: { p.model[$0.key] != $0.value }) {
                        fail("step \(step): a pinned view changed")
                    }
                    pinned = nil
                } else {
                    pinned = (store.readView(), model)
                }
                counts["view", default: 0] += 1
            }
            if step % 5000 == 4999 { try checkAll(step) }
        }
        try checkAll(operations)
        try store.close()
        let reopened = try StrataStore(directory: dir.store, options: options)
        #expect(reopened.statistics.keys == model.count, "seed \(seed)")
        print("model test\(checkpoints ? " with index checkpoints" : ""): seed \(seed), \(operations) operations: \(counts.sorted { $0.key < $1.key })")
    }
}
