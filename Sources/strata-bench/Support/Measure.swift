import Dispatch
import Foundation

/// Seconds taken by `body`, on the monotonic clock.
func seconds(_ body: () throws -> Void) rethrows -> Double {
    let start = DispatchTime.now().uptimeNanoseconds
    try body()
    return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
}

/// The median of some measurements (these machines are shared and noisy).
func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

/// `1234567.8` → `"1,234,568"`.
func thousands(_ value: Double) -> String {
    guard value.isFinite else { return "-" }
    let digits = String(Int(value.rounded()))
    var out = ""
    for (i, c) in digits.reversed().enumerated() {
        if i > 0 && i % 3 == 0 && c != "-" { out.append(",") }
        out.append(c)
    }
    return String(out.reversed())
}

func fixed(_ value: Double, _ places: Int) -> String {
    guard value.isFinite else { return "-" }
    if places == 0 { return String(Int(value.rounded())) }
    var scale = 1.0
    for _ in 0..<places { scale *= 10 }
    let r = (value * scale).rounded() / scale
    var s = String(r)
    if let dot = s.firstIndex(of: ".") {
        let decimals = s.distance(from: dot, to: s.endIndex) - 1
        if decimals < places { s += String(repeating: "0", count: places - decimals) }
    } else if places > 0 {
        s += "." + String(repeating: "0", count: places)
    }
    return s
}

/// A median of counts: `3`, or `2.5` between two.
func count(_ value: Double) -> String {
    value.rounded() == value ? fixed(value, 0) : fixed(value, 1)
}

/// Progress for long runs, on stderr so the table on stdout stays clean.
func progress(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
