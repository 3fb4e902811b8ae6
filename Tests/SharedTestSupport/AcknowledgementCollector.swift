public import Foundation

/// Collects a crash child's `ack N` lines from its stdout as they arrive (on
/// the pipe's reader thread), keeping the highest N and every other line.
///
/// ```swift
/// let acks = AcknowledgementCollector()
/// while let data = try pipe.fileHandleForReading.read(upToCount: 1 << 16) { acks.consume(data) }
/// ```
///
/// `@unchecked Sendable`: every stored property is guarded by `lock`.
public final class AcknowledgementCollector: @unchecked Sendable {
    private let lock = NSLock()
    private var highest = 0
    private var buffer = Data()
    private var others: [String] = []

    public init() {}

    public func consume(_ data: Data) {
        lock.lock()
        defer { lock.unlock() }
        buffer.append(data)
        while let newline = buffer.firstIndex(of: 0x0A) {
            let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
            buffer.removeSubrange(buffer.startIndex...newline)
            if line.hasPrefix("ack "), let n = Int(line.dropFirst(4)) { highest = max(highest, n) } else { others.append(line) }
        }
    }

    /// The highest acknowledgement so far, and every line that was not one.
    public var snapshot: (highest: Int, errors: [String]) {
        lock.lock()
        defer { lock.unlock() }
        return (highest, others)
    }
}
