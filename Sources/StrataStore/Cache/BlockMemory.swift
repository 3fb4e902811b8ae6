#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// The memory decoded blocks live in: frames of one size, carved from one
/// region the size of the block cache that the kernel is asked to back with
/// 2 MiB pages (`MADV_HUGEPAGE`).
///
/// Why: a warm get touches two or three cache lines of a block chosen at
/// random among all cached ones. Spread over 4 KiB pages of the malloc heap,
/// a 64 MiB cache is 16,384 pages, far more than a TLB maps; in huge pages
/// it is 32. (RocksDB does the same for its memtable arenas,
/// `memtable_huge_page_size`.) Warm gets are faster for it: fewer TLB
/// misses on a random walk over the cache.
///
/// A frame is handed to one ``DecodedBlock`` and comes back when that block
/// is freed — evicted from the cache and let go by every reader — so the
/// cache's CLOCK stays the only policy. When no frame is free (readers hold
/// evicted blocks, or the region could not be mapped) and for blocks of
/// another size than the frames, ``allocate(_:)`` returns nil and the block
/// takes ordinary heap memory: never an error, only a slower page.
///
/// ```swift
/// let memory = BlockMemory(capacity: 64 << 20, frameSize: 32 << 10)
/// if let frame = memory.allocate(30_000) { …; memory.release(frame) }
/// ```
package final class BlockMemory: @unchecked Sendable {
    // Sendable because: `freeFrames` and `carved` are guarded by `lock`; the
    // region's bounds never change; a frame's bytes belong to the one block
    // that was handed the frame, until it gives it back.

    /// A frame: its index and where its bytes start.
    package struct Frame {
        package var index: Int32
        package var base: UnsafeMutableRawPointer
    }

    package let frameSize: Int
    /// Frames in the region (0 when it could not be mapped).
    package let frameCount: Int
    /// The region's first frame, aligned to 2 MiB.
    private let region: UnsafeMutableRawPointer?
    /// The whole mapping, for `munmap` (the alignment slack around `region`).
    private let mapping: UnsafeMutableRawPointer?
    private let mappingLength: Int

    private let lock = Lock()
    /// Frames given back, reused first (the most recent first: its pages are
    /// the likeliest to be in the CPU's caches). Guarded by `lock`.
    @exclusivity(unchecked) private var freeFrames: [Int32] = []
    /// Frames handed out at least once; the region past them was never
    /// touched, so a small store never faults in its whole cache. Guarded by `lock`.
    @exclusivity(unchecked) private var carved = 0

    private static let hugePage = 2 << 20

    /// A region for `capacity` bytes of frames of `frameSize` bytes. Below
    /// one huge page of capacity there is no region: every block uses the heap.
    package init(capacity: Int, frameSize: Int) {
        self.frameSize = frameSize
        let length = (capacity + Self.hugePage - 1) / Self.hugePage * Self.hugePage
        guard frameSize > 0, capacity >= Self.hugePage, length / frameSize <= Int(Int32.max) else {
            (region, mapping, mappingLength, frameCount) = (nil, nil, 0, 0)
            return
        }
        // Reserved, not committed: pages are faulted in as frames are carved.
        let mappingLength = length + Self.hugePage
        var flags = MAP_PRIVATE | MAP_ANONYMOUS
        #if os(Linux)
        flags |= MAP_NORESERVE
        #endif
        let mapped = mmap(nil, mappingLength, PROT_READ | PROT_WRITE, flags, -1, 0)
        guard let mapped, mapped != MAP_FAILED else {
            (region, mapping, self.mappingLength, frameCount) = (nil, nil, 0, 0)
            return
        }
        let misalignment = Int(bitPattern: mapped) % Self.hugePage
        let aligned = mapped + (misalignment == 0 ? 0 : Self.hugePage - misalignment)
        #if os(Linux)
        // Advice only: where THP is off ("never"), frames are ordinary pages.
        _ = madvise(aligned, length, MADV_HUGEPAGE)
        #endif
        (region, mapping, self.mappingLength) = (aligned, mapped, mappingLength)
        frameCount = length / frameSize
    }

    deinit {
        // Every frame has come back: each block holding one keeps this object alive.
        if let mapping { munmap(mapping, mappingLength) }
    }

    /// A frame for a block of `byteCount` bytes, or nil: when the block is
    /// larger than a frame or smaller than half of one (it would waste the
    /// rest, and the cache budgets a whole frame), or when no frame is free.
    @inline(__always)
    package func allocate(_ byteCount: Int) -> Frame? {
        guard let region, byteCount <= frameSize, byteCount >= frameSize / 2 else { return nil }
        let index: Int32? = lock.withLock {
            if let reused = freeFrames.popLast() { return reused }
            guard carved < frameCount else { return nil }
            carved += 1
            return Int32(carved - 1)
        }
        guard let index else { return nil }
        return Frame(index: index, base: region + Int(index) * frameSize)
    }

    /// Gives a frame back; its bytes may be handed out again at once.
    package func release(_ frame: Frame) {
        lock.withLock { freeFrames.append(frame.index) }
    }

    /// Frames handed out and not given back (for tests and statistics).
    package var framesInUse: Int {
        lock.withLock { carved - freeFrames.count }
    }
}
