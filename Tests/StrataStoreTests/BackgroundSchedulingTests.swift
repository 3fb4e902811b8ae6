import CStrataScheduling
import Foundation
import Synchronization
import Testing
@testable import StrataStore

/// `BackgroundScheduling` lengthens the slice of the thread doing background
/// work and gives it back. Serialized: one test switches it off, which the
/// others would see.
@Suite(.serialized, .enabled(if: BackgroundScheduling.honoursThreadSlices, "this kernel ignores a thread's own slice (Linux before 6.12, or not Linux)"))
struct BackgroundSchedulingTests {
    @Test func runLengthensTheSliceAndRestoresItAfter() {
        let (before, inside, after) = onThreadOfItsOwn {
            let before = BackgroundScheduling.currentSlice()
            return (before, BackgroundScheduling.run { BackgroundScheduling.currentSlice() }, BackgroundScheduling.currentSlice())
        }
        #expect(before.map { $0 < BackgroundScheduling.slice } == true, "the thread started with \(String(describing: before))")
        #expect(inside == BackgroundScheduling.slice)
        #expect(after == before)
    }

    @Test func aNestedRunLeavesTheOuterOneItsSlice() {
        let (before, inner, afterInner, after) = onThreadOfItsOwn {
            let before = BackgroundScheduling.currentSlice()
            let (inner, afterInner) = BackgroundScheduling.run {
                (BackgroundScheduling.run { BackgroundScheduling.currentSlice() }, BackgroundScheduling.currentSlice())
            }
            return (before, inner, afterInner, BackgroundScheduling.currentSlice())
        }
        #expect(inner == BackgroundScheduling.slice)
        #expect(afterInner == BackgroundScheduling.slice)
        #expect(after == before)
    }

    /// A thread inherits its creator's slice: one started inside background
    /// work (as Dispatch starts workers) must start from the default, not
    /// keep the long slice for whatever it runs later.
    @Test func aThreadStartedInsideStartsFromTheDefault() {
        let (creator, inside, child) = onThreadOfItsOwn {
            let creator = BackgroundScheduling.currentSlice()
            let (inside, child) = BackgroundScheduling.run {
                (BackgroundScheduling.currentSlice(), onThreadOfItsOwn { BackgroundScheduling.currentSlice() })
            }
            return (creator, inside, child)
        }
        #expect(inside == BackgroundScheduling.slice)
        #expect(child != nil)
        #expect(child == creator)
    }

    @Test func aThreadWithItsOwnLongerSliceKeepsIt() {
        let own = BackgroundScheduling.slice * 2
        let (set, inside, after) = onThreadOfItsOwn {
            let set = strata_set_thread_slice(own, 0) == 0
            return (set, BackgroundScheduling.run { BackgroundScheduling.currentSlice() }, BackgroundScheduling.currentSlice())
        }
        #expect(set)
        #expect(inside == own)
        #expect(after == own)
    }

    @Test func switchedOffItChangesNothing() {
        BackgroundScheduling.isEnabled = false
        defer { BackgroundScheduling.isEnabled = true }
        let (before, inside) = onThreadOfItsOwn {
            (BackgroundScheduling.currentSlice(), BackgroundScheduling.run { BackgroundScheduling.currentSlice() })
        }
        #expect(before != nil)
        #expect(inside == before)
    }

    /// Yield points yield inside background work only, at most once per
    /// ``BackgroundScheduling/yieldInterval``; a nested run leaves them on
    /// for the outer one, and `withoutYielding` turns them off for its body.
    @Test func yieldPointsYieldInsideBackgroundWorkOnly() {
        let seen = onThreadOfItsOwn { () -> [String: Int] in
            /// The yields of a loop of passes lasting `nanoseconds`.
            func passes(for nanoseconds: UInt64) -> Int {
                let before = BackgroundScheduling.yieldsOnThisThread
                var yields = YieldPoints()
                let start = DispatchTime.now().uptimeNanoseconds
                while DispatchTime.now().uptimeNanoseconds - start < nanoseconds { yields.pass() }
                return BackgroundScheduling.yieldsOnThisThread - before
            }
            /// Passes until the second yield (or 10 s): the yields and how
            /// many half milliseconds passed since `start`. A thread that
            /// yields its core on a loaded machine may get it back only many
            /// milliseconds later, so a loop of fixed length (5 ms, once) saw
            /// one yield. `start` is read before the background work begins:
            /// a clock started inside it may start late (the thread preempted
            /// in between), and then two yields fit in less than 1 ms of it.
            func passesUntilTwoYields(since start: UInt64) -> (yields: Int, intervals: Int) {
                let before = BackgroundScheduling.yieldsOnThisThread
                var yields = YieldPoints()
                var elapsed: UInt64 = 0
                while BackgroundScheduling.yieldsOnThisThread - before < 2 && elapsed < 10_000_000_000 {
                    yields.pass()
                    elapsed = DispatchTime.now().uptimeNanoseconds - start
                }
                return (BackgroundScheduling.yieldsOnThisThread - before, Int(elapsed / BackgroundScheduling.yieldInterval))
            }
            let outside = passes(for: 5_000_000)
            let start = DispatchTime.now().uptimeNanoseconds
            let (inside, afterNested, withoutYielding, afterWithout) = BackgroundScheduling.run { () -> ((yields: Int, intervals: Int), Bool, Int, Bool) in
                let inside = passesUntilTwoYields(since: start)
                BackgroundScheduling.run { _ = passes(for: 1_000) }
                let afterNested = BackgroundScheduling.yieldPointsAreActive
                let withoutYielding = BackgroundScheduling.withoutYielding { passes(for: 2_000_000) }
                return (inside, afterNested, withoutYielding, BackgroundScheduling.yieldPointsAreActive)
            }
            let after = passes(for: 5_000_000)
            return ["outside": outside, "inside": inside.yields, "inside, half milliseconds": inside.intervals, "active after a nested run": afterNested ? 1 : 0,
                    "without yielding": withoutYielding, "active after without yielding": afterWithout ? 1 : 0,
                    "after": after, "active after": BackgroundScheduling.yieldPointsAreActive ? 1 : 0]
        }
        #expect(seen["outside"] == 0)
        #expect(seen["after"] == 0)
        #expect(seen["active after a nested run"] == 1)
        #expect(seen["without yielding"] == 0)
        #expect(seen["active after without yielding"] == 1)
        #expect(seen["active after"] == 0)
        // Two yields inside, each one interval or more after the work began
        // or the yield before: the second no sooner than 1 ms in.
        let inside = seen["inside"] ?? -1, intervals = seen["inside, half milliseconds"] ?? -1
        #expect(inside == 2 && intervals >= 2, "\(inside) yields in \(intervals) half milliseconds of background work")
    }

    /// The store's flush writes its segment with the long slice; the writer
    /// that triggered it, on its own thread, keeps its own.
    @Test func theStoreFlushesWithTheLongSlice() throws {
        let dir = ScratchDirectory()
        let recorder = SliceRecordingFileSystem()
        var options = smallOptions()
        options.fileSystem = recorder
        let store = try StrataStore(directory: dir.store, options: options)
        let (own, after) = try onThreadOfItsOwn { () throws(any Error) -> (UInt64?, UInt64?) in
            let own = BackgroundScheduling.currentSlice()
            for i in 0..<2_000 { try store.put("key \(i)", String(repeating: "v", count: 100)) }
            try store.flush()
            return (own, BackgroundScheduling.currentSlice())
        }
        try store.close()
        #expect(after == own)
        let slices = recorder.segmentWriteSlices
        try #require(!slices.isEmpty, "no segment was written")
        #expect(slices.allSatisfy { $0 == BackgroundScheduling.slice }, "segment writes ran with slices \(Set(slices)) ns")
        #expect(!recorder.logWriteSlices.isEmpty)
        #expect(recorder.logWriteSlices.allSatisfy { $0 == own }, "log writes ran with slices \(Set(recorder.logWriteSlices)) ns")
    }
}

/// Runs `body` on a thread of its own and waits for its value: the slice
/// checks then see that thread alone, not a shared worker another test may
/// also be using.
func onThreadOfItsOwn<T: Sendable, E: Error>(_ body: @escaping @Sendable () throws(E) -> T) throws(E) -> T {
    let result = Mutex<Result<T, E>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Thread {
        let outcome = Result { () throws(E) in try body() }
        result.withLock { $0 = outcome }
        done.signal()
    }.start()
    done.wait()
    return try result.withLock { $0! }.get()
}

/// POSIX, recording the calling thread's slice at every write to a segment
/// file and to a log file.
final class SliceRecordingFileSystem: ForwardingFileSystem, @unchecked Sendable {
    // `@unchecked Sendable`: `state` is guarded by `lock`.
    let base: any FileSystem = POSIXFileSystem()
    private let lock = NSLock()
    private var state: (kinds: [FileDescriptor: String], segment: [UInt64], log: [UInt64]) = ([:], [], [])

    var segmentWriteSlices: [UInt64] { lock.withLock { state.segment } }
    var logWriteSlices: [UInt64] { lock.withLock { state.log } }

    func open(_ path: String, _ mode: FileOpenMode) throws(SystemCallError) -> FileDescriptor {
        let fd = try base.open(path, mode)
        lock.withLock { state.kinds[fd] = path.hasSuffix(".seg") ? "segment" : path.hasSuffix(".wal") ? "log" : nil }
        return fd
    }

    func close(_ fd: FileDescriptor) throws(SystemCallError) {
        lock.withLock { state.kinds[fd] = nil }
        try base.close(fd)
    }

    func write(_ fd: FileDescriptor, _ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(SystemCallError) -> Int {
        let slice = BackgroundScheduling.currentSlice() ?? 0
        lock.withLock {
            switch state.kinds[fd] {
            case "segment": state.segment.append(slice)
            case "log": state.log.append(slice)
            default: break
            }
        }
        return try base.write(fd, bytes, at: offset)
    }
}
