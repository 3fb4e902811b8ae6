import Foundation

/// The main-queue stall over time as a self-contained SVG: one line per
/// layout, time on x, lateness on y, with the 8.3 and 16.7 ms frame budgets.
enum StallPlot {
    static func svg(_ report: StallReport) -> String {
        let width = 900.0, height = 420.0, left = 60.0, right = 220.0, top = 30.0, bottom = 50.0
        // Of each layout, the round whose longest stall is the median one.
        let runs = ImportLayout.stallLayouts.compactMap { report.medianRun($0) }
        let maxX = max(1, runs.map { $0.seconds * 1000 }.max() ?? 1)
        let maxY = max(20, (runs.map { $0.stall.max }.max() ?? 20) * 1.1)
        let colors = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd"]
        func x(_ ms: Double) -> Double { left + ms / maxX * (width - left - right) }
        func y(_ late: Double) -> Double { height - bottom - late / maxY * (height - top - bottom) }
        var svg = """
        <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" font-family="sans-serif" font-size="12">
        <rect width="100%" height="100%" fill="white"/>
        <text x="\(left)" y="18" font-size="14">Main-queue stall during an import of \(report.objects) objects (save every \(report.saveEvery)), median round of \(report.repeats), \(report.date)</text>
        <line x1="\(left)" y1="\(y(0))" x2="\(width - right)" y2="\(y(0))" stroke="black"/>
        <line x1="\(left)" y1="\(y(0))" x2="\(left)" y2="\(top)" stroke="black"/>
        <text x="\((left + width - right) / 2)" y="\(height - 12)" text-anchor="middle">time (ms)</text>
        <text x="14" y="\((top + height - bottom) / 2)" transform="rotate(-90 14 \((top + height - bottom) / 2))" text-anchor="middle">lateness of a 1 ms tick (ms)</text>

        """
        for budget in [8.333, 16.667] where budget < maxY {
            svg += "<line x1=\"\(left)\" y1=\"\(y(budget))\" x2=\"\(width - right)\" y2=\"\(y(budget))\" stroke=\"#999\" stroke-dasharray=\"4 4\"/>\n"
            svg += "<text x=\"\(width - right + 4)\" y=\"\(y(budget) + 4)\" fill=\"#666\">\(budget < 10 ? "8.3" : "16.7") ms</text>\n"
        }
        for tick in stride(from: 0.0, through: maxX, by: niceStep(maxX)) {
            svg += "<text x=\"\(x(tick))\" y=\"\(y(0) + 16)\" text-anchor=\"middle\">\(Int(tick))</text>\n"
        }
        for tick in stride(from: 0.0, through: maxY, by: niceStep(maxY)) {
            svg += "<text x=\"\(left - 6)\" y=\"\(y(tick) + 4)\" text-anchor=\"end\">\(Int(tick))</text>\n"
        }
        for (i, run) in runs.enumerated() {
            // One point per 10 ms bucket (its worst tick) keeps the file small.
            var buckets: [Int: Double] = [:]
            for point in run.stall.timeline { buckets[Int(point.ms / 10), default: 0] = max(buckets[Int(point.ms / 10)] ?? 0, point.latenessMs) }
            let points = buckets.keys.sorted().map { "\(fmt(x(Double($0) * 10))),\(fmt(y(buckets[$0]!)))" }.joined(separator: " ")
            let color = colors[i % colors.count]
            svg += "<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"1.2\" points=\"\(points)\"/>\n"
            let title = ImportLayout(rawValue: run.layout)?.title ?? run.layout
            svg += "<text x=\"\(width - right + 4)\" y=\"\(top + 20 + Double(i) * 34)\" fill=\"\(color)\">\(escape(String(title.prefix(30))))</text>\n"
            svg += "<text x=\"\(width - right + 4)\" y=\"\(top + 34 + Double(i) * 34)\" fill=\"\(color)\">max \(fixed(run.stall.max, 1)) ms</text>\n"
        }
        return svg + "</svg>\n"
    }

    private static func niceStep(_ range: Double) -> Double {
        let raw = range / 6
        let magnitude = pow(10, floor(log10(raw)))
        for factor in [1.0, 2.0, 5.0, 10.0] where raw <= factor * magnitude { return factor * magnitude }
        return 10 * magnitude
    }

    private static func fmt(_ v: Double) -> String { String(Int(v.rounded())) }

    private static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}
