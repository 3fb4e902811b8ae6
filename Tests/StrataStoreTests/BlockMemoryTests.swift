import Foundation
import SharedTestSupport
import Testing

@testable import StrataStore

/// `BlockMemory`, the frames decoded blocks live in: each frame is handed to
/// one block at a time and comes back when the block is freed, whatever path
/// the block took (cached, evicted, refused at decode).
@Suite struct BlockMemoryTests {
    /// A raw block of records whose size is close to `size`.
    static func rawBlock(about size: Int, tag: Int = 0) -> [UInt8] {
        var builder = BlockBuilder()
        var i = 0
        while builder.size + BlockBuilder.recordSize(key: 12, value: 100, sequence: 1) <= size {
            let key = Array(String(format: "key:%08d", i).utf8)
            let value = [UInt8](repeating: UInt8(truncatingIfNeeded: i &+ tag), count: 100)
            key.withUnsafeBytes { k in value.withUnsafeBytes { v in builder.add(key: k, sequence: 1, kind: .put, value: v) } }
            i += 1
        }
        return builder.finish()
    }

    /// The raw block stored as a segment writes it (header, checksum, LZ4).
    static func stored(_ raw: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        _ = raw.withUnsafeBytes { SegmentFormat.appendBlock(raw: $0, to: &out) }
        return out
    }

    @Test func framesAreDistinctAlignedAndComeBack() throws {
        let memory = BlockMemory(capacity: 4 << 20, frameSize: 32 << 10)
        #expect(memory.frameCount == 128)
        var frames: [BlockMemory.Frame] = []
        while let frame = memory.allocate(32 << 10) {
            memset(frame.base, 0xA5, 32 << 10)  // every byte of every frame is writable
            frames.append(frame)
        }
        #expect(frames.count == 128)
        #expect(Set(frames.map(\.index)).count == 128)
        let bases = frames.map { Int(bitPattern: $0.base) }.sorted()
        #expect(bases.first! % (2 << 20) == 0, "the region starts on a huge-page boundary")
        #expect(zip(bases, bases.dropFirst()).allSatisfy { $1 - $0 == 32 << 10 }, "frames tile the region")
        #expect(memory.framesInUse == 128)

        let given = frames.removeLast()
        memory.release(given)
        #expect(memory.framesInUse == 127)
        let again = try #require(memory.allocate(20 << 10))
        #expect(again.index == given.index && again.base == given.base)
        for frame in frames + [again] { memory.release(frame) }
        #expect(memory.framesInUse == 0)
    }

    @Test func blocksOfAnotherSizeAndSmallCachesUseTheHeap() {
        let memory = BlockMemory(capacity: 2 << 20, frameSize: 8 << 10)
        #expect(memory.allocate((8 << 10) + 1) == nil, "larger than a frame")
        #expect(memory.allocate((4 << 10) - 1) == nil, "under half a frame")
        let half = memory.allocate(4 << 10)
        #expect(half != nil)
        half.map(memory.release)

        let small = BlockMemory(capacity: 1 << 20, frameSize: 8 << 10)
        #expect(small.frameCount == 0)
        #expect(small.allocate(8 << 10) == nil)
    }

    @Test func decodedBlocksGiveTheirFramesBack() throws {
        let memory = BlockMemory(capacity: 2 << 20, frameSize: 32 << 10)
        let raw = Self.rawBlock(about: 30 << 10)
        let stored = Self.stored(raw)
        do {
            let block = try stored.withUnsafeBytes { try SegmentFormat.decodeBlock($0, expectedRecords: nil, memory: memory).get() }
            #expect(memory.framesInUse == 1)
            #expect(block.memoryCost == (32 << 10) + 64)
            let heap = try #require(DecodedBlock.copying(raw))
            #expect(heap.count == block.count && heap.byteCount == block.byteCount)
            for i in [0, block.count / 2, block.count - 1] {
                let fromFrame = block.withRecord(i) { (Array($0.key), Array($0.value)) }
                let fromHeap = heap.withRecord(i) { (Array($0.key), Array($0.value)) }
                #expect(fromFrame.0 == fromHeap.0 && fromFrame.1 == fromHeap.1)
            }
        }
        #expect(memory.framesInUse == 0, "a freed block gives its frame back")

        // Refused after the frame was taken: bad compression, then a bad layout.
        #expect(DecodedBlock.make(byteCount: 30 << 10, memory: memory, fill: { _ in false }) == nil)
        #expect(DecodedBlock.make(byteCount: 30 << 10, memory: memory, fill: { $0.initializeMemory(as: UInt8.self, repeating: 0xFF); return true }) == nil)
        #expect(memory.framesInUse == 0, "a refused block gives its frame back")
        var damaged = raw
        damaged[damaged.count - 1] ^= 0x40  // the record count
        let refused = Self.stored(damaged).withUnsafeBytes { SegmentFormat.decodeBlock($0, expectedRecords: nil, memory: memory) }
        guard case .failure(.badLayout) = refused else {
            Issue.record("expected a bad layout, got \(refused)")
            return
        }
        #expect(memory.framesInUse == 0)
    }

    /// Four threads take frames, fill them with a pattern of their own, check
    /// it and give them back: a frame handed to two holders at once shows as
    /// a pattern overwritten. (ThreadSanitizer's runs check the locking.)
    @Test func concurrentHoldersNeverShareAFrame() {
        let memory = BlockMemory(capacity: 2 << 20, frameSize: 32 << 10)
        let overwritten = LockedBox(0)
        onThreads(4) { thread in
            var held: [BlockMemory.Frame] = []
            for round in 0..<4_000 {
                let pattern = UInt8(truncatingIfNeeded: thread &* 64 &+ round)
                if let frame = memory.allocate(32 << 10) {
                    memset(frame.base, Int32(pattern), 32 << 10)
                    held.append(frame)
                }
                if held.count > 8 || round % 3 == 0, !held.isEmpty {
                    let frame = held.removeFirst()
                    let first = frame.base.load(as: UInt8.self)
                    let last = frame.base.load(fromByteOffset: (32 << 10) - 1, as: UInt8.self)
                    if first != last { overwritten.update { $0 += 1 } }
                    memory.release(frame)
                }
            }
            held.forEach(memory.release)
        }
        #expect(overwritten.value == 0)
        #expect(memory.framesInUse == 0)
    }

    static func value(_ i: Int) -> [UInt8] { Array("value-\(i)-".utf8) + [UInt8](repeating: UInt8(i & 0xFF), count: 100) }

    /// A store whose cache has frames: gets from four threads and a scan read
    /// the right values through cache hits, misses and evictions, and no
    /// more frames are held than the region has.
    @Test func aStoreReadsThroughFrames() throws {
        let dir = ScratchDirectory()
        var options = StoreOptions()
        options.syncMode = .none
        options.blockSize = 8 << 10
        options.blockCacheCapacity = 2 << 20  // 256 frames; the data is about 3 MiB
        let store = try StrataStore(directory: dir.store, options: options)
        let count = 25_000
        for start in stride(from: 0, to: count, by: 1_000) {
            var batch = WriteBatch()
            for i in start..<start + 1_000 { batch.put(Array(String(format: "k%08d", i).utf8), Self.value(i)) }
            try store.write(batch)
        }
        try store.flush()
        // Four readers at once: blocks are evicted while other readers still
        // hold them, and their frames pass from thread to thread.
        let wrong = LockedBox(0)
        let seed = testSeed()
        onThreads(4) { thread in
            var generator = SeededGenerator(seed: seed &+ UInt64(thread))
            for _ in 0..<5_000 {
                let i = Int.random(in: 0..<count, using: &generator)
                if (try? store.get(Array(String(format: "k%08d", i).utf8))) != Self.value(i) { wrong.update { $0 += 1 } }
            }
        }
        #expect(wrong.value == 0)
        let memory = store.cache.memory
        #expect(memory.frameCount == 256)
        #expect(memory.framesInUse > 0, "the store's blocks were decoded into frames")
        #expect(memory.framesInUse <= memory.frameCount)
        let scanned = try store.scan(prefix: Array("k".utf8))
        #expect(scanned.count == count)
        #expect(scanned.enumerated().allSatisfy { $0.element.value == Self.value($0.offset) })
        try store.close()
    }
}
